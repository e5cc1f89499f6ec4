"""The resource policy: the limits of the process, checked before any work.

A command that runs a TensorFlow model starts TensorFlow's thread pools (about
as many threads as the machine has CPUs, several times over) and maps a few GB
of address space. When a limit of the process leaves less than that, TensorFlow
does not raise an error that a command could turn into a line: a thread that
cannot start is a CHECK failure or an LLVM fatal error in C++, and the process
aborts with a dump of its threads ("Fatal Python error: Aborted"), whatever it
was doing. So the boundary (`commands.registry.job`) checks, before any work,
that the process's limits leave what TensorFlow needs on this machine, and
refuses in one line naming the limit and what to raise otherwise (`check`):

    ulimit -u   RLIMIT_NPROC: the threads and processes of the user (counted
                across all of the user's processes; root is not held to it)
    ulimit -v   RLIMIT_AS: the address space (each thread reserves its stack)
    ulimit -n   RLIMIT_NOFILE: open files (a checkpoint's, the data's, TensorFlow's)

What is needed is an estimate (`needs`), on the safe side of what a tiny run
measures (2 CPUs: 17 threads, 3.0 GB of address space); a large model needs
more memory still, and TensorFlow's allocator says so itself (the boundary's
"out of memory" line). Commands that run no model (preparing text, a
vocabulary, splitting files) are not held to it: what they run out of is a
Python error, which the boundary words as one line.
"""

from __future__ import annotations

import dataclasses
import os
import resource

from official_bert.errors import UserError

MiB = 1 << 20
# The address space a process maps once TensorFlow is loaded (TensorFlow 2.21 on Linux:
# 1.5 GB), whether or not it is loaded yet when the limits are checked.
TENSORFLOW_MAPS = 1536 * MiB
# The phases that run a TensorFlow model (registry.Command.phases).
MODEL_PHASES = ("train", "eval", "predict", "export")


@dataclasses.dataclass(frozen=True)
class Needs:
    """What a command that runs a model needs on this machine."""

    cpus: int
    threads: int  # threads TensorFlow may start (its pools, tf.data, XLA's compiler)
    address_space: int  # bytes beyond what the process maps with TensorFlow loaded
    open_files: int


def needs(cpus: int | None = None) -> Needs:
    """The estimate for a machine of `cpus` CPUs (default: those this process may use)."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
    threads = 16 + 8 * cpus
    return Needs(cpus, threads, 1536 * MiB + threads * _stack_size(), 64)


def runs_a_model(command) -> bool:
    """Whether `command` (a registry.Command) runs TensorFlow's runtime: a model's
    phases, or a checkpoint it reads (`reads_runs`)."""
    return bool(set(command.phases) & set(MODEL_PHASES)) or bool(
        getattr(command, "reads_runs", ()))


def check(command) -> None:
    """`UserError` naming the limit when one of the process's limits leaves less
    than a command that runs a model needs (`needs`); nothing for other commands."""
    if not runs_a_model(command):
        return
    need = needs()
    problem = (_threads_problem(need) or _address_space_problem(need)
               or _open_files_problem(need))
    if problem:
        raise UserError(problem)


def _soft(which) -> int | None:
    soft, _ = resource.getrlimit(which)
    return None if soft == resource.RLIM_INFINITY else soft


def _stack_size() -> int:
    """The stack a new thread reserves (glibc: the stack limit, 8 MiB by default)."""
    soft = _soft(resource.RLIMIT_STACK)
    return soft if soft and soft < 1 << 30 else 8 * MiB


def _threads_problem(need: Needs) -> str | None:
    limit = _soft(resource.RLIMIT_NPROC)
    if limit is None or limit >= 1 << 20 or os.getuid() == 0:  # (root is not held to it)
        return None
    used = threads_of_user(os.getuid())
    if limit - used >= need.threads:
        return None
    return (f"the limit on threads and processes (ulimit -u {limit}, {used} in use by this "
            f"user) leaves {max(limit - used, 0)}; TensorFlow starts up to about "
            f"{need.threads} on {need.cpus} CPUs: raise it (ulimit -u), or run fewer jobs "
            "at once")


def threads_of_user(uid: int) -> int:
    """The threads of every process whose real user is `uid` (what RLIMIT_NPROC counts)."""
    total = 0
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:  # (ended meanwhile)
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            total += int(fields.get("Threads", "1"))
    return total


def _mapped() -> int:
    """The address space this process maps now (bytes)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _address_space_problem(need: Needs) -> str | None:
    limit = _soft(resource.RLIMIT_AS)
    if limit is None:
        return None
    mapped = max(_mapped(), TENSORFLOW_MAPS)  # (checked before TensorFlow may be loaded)
    if limit - mapped >= need.address_space:
        return None
    return (f"the address-space limit (ulimit -v {limit // 1024}, {limit // MiB} MB) leaves "
            f"{max(limit - mapped, 0) // MiB} MB beyond the {mapped // MiB} MB a process maps "
            f"with TensorFlow loaded; its threads and buffers need about "
            f"{need.address_space // MiB} MB more on {need.cpus} CPUs: raise it (ulimit -v "
            "unlimited)")


def _open_files_problem(need: Needs) -> str | None:
    limit = _soft(resource.RLIMIT_NOFILE)
    if limit is None or limit >= need.open_files:
        return None
    return (f"the limit on open files (ulimit -n {limit}) is below the {need.open_files} "
            "that a model's files and TensorFlow need: raise it (ulimit -n 1024)")
