"""The sweep as a matrix: cases generated from the command registry, not written by hand.

Every registered command (`official_bert.commands.registry`: its declared outputs, each a
flag and a kind, and the phases a signal can interrupt) x every fault of a class:

    output faults, for each declared output (file, file_prefix, dir, run_dir, export_dir):
      foreign     the output exists and this project did not write it: a file must be
                  refused and left byte-identical; a directory's files are kept
      device      a character device (null, full) as the output: written through or
                  refused, and still a character device after
      wrong-kind  a directory where a file goes, a file where a directory goes: refused,
                  the thing there kept
      too-long    a 300-character name (ENAMETOOLONG): one line
      long-name   a legal 249-character name: it works (temporaries must fit too)
      read-only   the output's parent directory is read-only: one line, nothing written
      disk-full   a file-size limit (RLIMIT_FSIZE): one line, nothing partial left
      race        the same command twice at once: one output and one clean refusal, or
                  both succeed with one intact output
    signals, for each phase the command declares (read, data, train, eval, predict,
    export, write):
      sigint      SIGINT to the process group (Ctrl-C) while the phase is under way:
                  exit 130, one line, no traceback, no temporaries left; a rerun finishes
                  (resuming from the checkpoint the line names)
      sigquit     SIGQUIT to the group (Ctrl-\\), likewise with exit 131
      sigterm     SIGTERM to the process (a preempted VM), likewise with exit 75
      sighup      SIGHUP to the group (the terminal closed), likewise with exit 75
      sigusr1, sigusr2, sigalrm, sigxcpu
                  to the process (a scheduler's warning, a timer, the CPU-time limit),
                  likewise with exit 75
                  (one class per signal of the policy, `interruption.STOP_SIGNALS`, with
                  its exit status, `errors.stop_exit_code`)
    input faults, for each declared input (`registry.Command.inputs`) its control gives:
      fifo        the input as a FIFO whose writer comes a moment after the command opens
                  it: it works (read in full: spooled, or read as it comes)
      stdin       the input as `-`, its content on standard input: it works
      empty       an empty file: refused in one line naming the flag
      empty-stdin `-` with nothing on standard input: refused with the same line
      fifo-no-writer  a FIFO nobody ever writes: one line once the input policy's
                  wait ends (OFFICIAL_BERT_INPUT_WAIT, 15 s here), never a hang
      nul-bytes   a run of 4096 NUL bytes after the first line (a crash's hole in a
                  file): it works, or one line naming the input; never a hang
      loop        a symbolic link to itself: one line ("a loop of symbolic links")
      unreadable  a file without read permission: one line
      vanishing   the input (a copy of the control's) deleted once the phase after
                  reading begins: it works on what it read, or one line naming the
                  input (training saves its steps first); put back, the same command
                  finishes (resuming from the checkpoint the line names)
      changing    likewise, the input rewritten in place at its size (its lines after
                  the first rotated by one: a vocabulary's ids shift, rows trade
                  places): it works, and no file it wrote holds the changed version
                  (two versions in one run, silently), or one line
      (fifo, stdin, empty, empty-stdin, fifo-no-writer and nul-bytes for the inputs
      read as a file or a stream; loop, unreadable, vanishing and changing for every
      input)
    readers of a live run, for each flag a command declares in `registry.Command.
    reads_runs` (--model, --init_checkpoint, --teacher):
      live-run    the flag names a classify run that trains meanwhile, saving every
                  step and keeping one checkpoint (each save rotates the last away): it
                  works, names the checkpoint and its step, says that the run is still
                  training, never calls a rotated checkpoint damaged; a reader that
                  trains keeps the run and the step in its record (started_from)
    resource limits and the standard output, for every command:
      rlimit-as, rlimit-nproc, rlimit-nofile
                  a 2 GiB address space (ulimit -v), 16 threads and processes (ulimit
                  -u; as root, under another real user id without CAP_SYS_RESOURCE),
                  8 open files (ulimit -n): it works, or one line naming the limit (or
                  memory), no dump of threads; then, without the limit, the same
                  command finishes
      closed-stdout  stdout a pipe whose reader is gone (`| head -c0`): it works, or
                  ends quietly (exit 141, no line) or in one line; nothing left
                  half-written, and the same command then finishes
      no-stdout   descriptor 1 not open at all (`>&-`): likewise
    run-record faults, for a command that trains into a run_dir, on a run it trained:
      record      run.json missing (correct handling), with fields of the wrong type or
                  "format": 99 (refused, run.json kept), read-only (an evaluation works)

A command is run as the sweep's hand-written control case for it runs it (its "good
input", `tools/sweep/cases/`); the matrix only puts the fault's path in place of the
output flag's value, or adds the fault. A registered command without a control case still
gets its cases, which report "setup failed" until one is written: coverage follows the
registry. How a signal finds its phase: the command runs under a small driver that, at
the phase's first log line or progress (`PHASES`), notes it in a file and pauses there, so
that the signal lands inside the phase, not after it.

Each case's outcome is one cell: clean (a right refusal, or a stop as the policy says),
ok (the command worked and its result is right), traceback, vague (not one line, or the
wrong exit status), silent (exit 0 where it should have refused or stopped), lost (a file
replaced or deleted, something half-written or temporary left, or the rerun failed),
refused (a clean error where the command should have worked), unreached (the command
ended before the phase began: the matrix's fault, not the command's) and setup failed.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import json
import os
import pathlib
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from typing import Callable

from official_bert import errors, interruption
from official_bert.run_directory.layout import RUN_RECORD
from tools.kit import fault_kit as kit
from tools.kit import processes

from . import argv as argvs
from . import cases as hand_written
from . import run as sweep_run
from .case import Case, Ctx, at

# === The registry ===

FILE_KINDS = ("file", "file_prefix")  # registry.OUTPUT_KINDS' kinds that name files


@dataclasses.dataclass(frozen=True)
class Command:
    """What the matrix needs of a registered command (a test can make one up)."""

    name: str
    outputs: dict  # output flag (without --) -> kind
    phases: tuple
    inputs: dict = dataclasses.field(default_factory=dict)  # input flag -> how it is read
    reads_runs: tuple = ()  # flags that may name a run directory still training


def registered_commands() -> list:
    """Every registered command, in the registry's order."""
    from official_bert.commands import registry

    return [Command(c.name, dict(c.outputs), tuple(c.phases), dict(c.inputs),
                    tuple(c.reads_runs)) for c in registry.COMMANDS]


# === Each command's good run: the hand-written control case, with every phase in it ===

EXPORT_DIR = f"--export_dir={at('gen', 'export')}"
# Flags that make a command's good run go through all its declared phases, where its
# control case leaves one out (the control trains only; a signal needs the others too).
PHASE_FLAGS = {
    "classify": ("--do_eval", "--do_predict", EXPORT_DIR),
    "pretrain": ("--do_eval", EXPORT_DIR),
    "distill": ("--do_eval", EXPORT_DIR),
    "squad": ("--do_predict", f"--predict_file={at('squad', 'dev.json')}", EXPORT_DIR),
    "swag": ("--do_eval", f"--eval_file={at('swag', 'val.csv')}", "--do_predict",
             f"--predict_file={at('swag', 'val.csv')}", EXPORT_DIR),
    "ner": ("--do_eval", f"--eval_file={at('conll', 'dev.txt')}", "--do_predict",
            f"--predict_file={at('conll', 'dev.txt')}", EXPORT_DIR),
    "embed": (EXPORT_DIR,),
}
# quickstart has no control case (it trains for minutes): its smallest full run.
EXTRA_CONTROLS = {"quickstart": Case("good input", argvs.quickstart("--fast"), control=True,
                                     timeout=1200)}


@functools.lru_cache(maxsize=None)
def _hand_written() -> dict:
    return hand_written.by_command()


def control_case(name: str) -> Case | None:
    """The command's good run: its first hand-written control, with PHASE_FLAGS added."""
    case = next((c for c in _hand_written().get(name, ()) if c.control),
                EXTRA_CONTROLS.get(name))
    if case is None:
        return None
    return dataclasses.replace(case, argv=[*case.argv, *PHASE_FLAGS.get(name, ())],
                               after=None, command=name)


def flag_value(argv: list, flag: str) -> str | None:
    prefix = f"--{flag}="
    return next((a[len(prefix):] for a in argv if str(a).startswith(prefix)), None)


def with_flag(argv: list, flag: str, value: str) -> list:
    """`argv` with --flag=value in place of the flag's value (added if it has none)."""
    prefix = f"--{flag}="
    if flag_value(argv, flag) is None:
        return [*argv, prefix + value]
    return [prefix + value if str(a).startswith(prefix) else a for a in argv]


def output_name(control: Case | None, flag: str) -> str:
    """The name the control gives the output (vocab.txt, out): the faults keep it."""
    value = flag_value(control.argv, flag) if control else None
    return os.path.basename(value.rstrip("/")) if value else flag


# === A generated case ===

REFUSE, WORK, EITHER, STOP, RACE = "refuse", "work", "either", "stop", "race"
LIVE, QUIET = "live", "quiet"  # a live run's reader; a closed stdout


@dataclasses.dataclass(frozen=True)
class Generated:
    """One cell's case: the command's control with one fault.

    klass, target: the fault class and what it hits (an output flag, a phase, a record
        fault), the table's column and the case's name.
    case: the command line, its setup and follow-up (`Case`: the sweep's own).
    expect: REFUSE (one clean line), WORK (exit 0), EITHER, STOP (a signal's exit status
        and line), RACE (two writers), LIVE (exit 0, naming the live run's step and that it
        still trains) or QUIET (exit 0, or the closed stdout's quiet 141, or one line).
    check: (ctx, result) -> a problem, or None: what must hold after the run (the foreign
        file kept, the device still a device, no temporaries).
    launch: (ctx, case) -> kit.Result: how the command runs (once, under a signal, twice).
    """

    klass: str
    target: str
    case: Case
    expect: str
    check: Callable | None = None
    launch: Callable | None = None
    exit_code: int = 0  # STOP: the status the signal's policy gives

    @property
    def command(self) -> str:
        return self.case.command


# === Checks after a run ===

TEMPORARY = re.compile(r"^\..*\.tmp-|_temp$|\.tmp-")


def temporaries(root) -> list:
    """Temporary files and staging directories left anywhere under `root`."""
    return sorted(str(p.relative_to(root)) for p in pathlib.Path(root).rglob("*")
                  if TEMPORARY.search(p.name))


def no_temporaries(ctx, result):
    left = temporaries(ctx.root)
    return f"temporaries left: {', '.join(left[:3])}" if left else None


def keeps(path: str, content: bytes):
    """A check: the world's `path` still holds `content` (a file the project did not write)."""
    def check(ctx, result):
        target = pathlib.Path(ctx.p(path))
        if not target.is_file() or target.read_bytes() != content:
            return f"{path}: the user's file was replaced or removed"
        return no_temporaries(ctx, result)
    return check


def still_device(path: str):
    def check(ctx, result):
        try:
            mode = os.lstat(ctx.p(path)).st_mode
        except FileNotFoundError:
            return f"{path}: the device node was removed"
        if not stat.S_ISCHR(mode):
            return f"{path}: the device node was replaced by a file"
        return no_temporaries(ctx, result)
    return check


def exists(path: str):
    def check(ctx, result):
        if not os.path.exists(ctx.p(path)):
            return f"{path} was not written"
        return no_temporaries(ctx, result)
    return check


def absent(path: str):
    """A check after a refusal: nothing (not even a part) was left at `path`."""
    def check(ctx, result):
        if os.path.exists(ctx.p(path)):
            return f"{path}: a partial output was left"
        return no_temporaries(ctx, result)
    return check


def nothing_partial(path: str, kind: str):
    """A check after a refusal: no part of a file output at `path`; in a directory output
    no file that says a step finished (`run.COMPLETE_MARKERS`: eval_results.txt, a
    SavedModel) and no temporaries (a run directory may keep its record)."""
    if kind in FILE_KINDS:
        return absent(path)

    def check(ctx, result):
        finished = [p.name for p in pathlib.Path(ctx.p(path)).rglob("*")
                    if p.name in sweep_run.COMPLETE_MARKERS]
        if finished:
            return f"{path}: a partial output was left ({', '.join(finished[:3])})"
        return no_temporaries(ctx, result)
    return check


# === Output faults ===

FOREIGN = b"notes the user wrote; no command of this project made this file\n"
LONG, LEGAL = 300, 249  # a name over the file system's 255 bytes, and one that fits


def _mkdir(path):
    return lambda c: os.makedirs(c.p(path), exist_ok=True)


def _write(path, content):
    return lambda c: kit.write(c.p(path), content)


def _fault(command, flag, klass, path, expect, setup=(), check=None, target=None, **case):
    """A Generated output fault: the control with --flag=<world>/path."""
    control = control_case(command.name)
    argv = with_flag(control.argv if control else [], flag, at(*path.split("/")))
    name = f"--{flag}: {target or klass}"
    names = (f"--{flag}", os.path.basename(path)[:40])
    base = dataclasses.replace(control, name=name, argv=argv, names=names,
                               setup=(control.setup, setup), **case) if control else (
        Case(name, argv, names=names, command=command.name))
    return Generated(klass, f"--{flag}", base, expect, check or no_temporaries)


def foreign(command, flag, kind, name):
    path = f"mx/{name}"
    if kind in FILE_KINDS:
        return [_fault(command, flag, "foreign", path, REFUSE, _write(path, FOREIGN),
                       keeps(path, FOREIGN), "a file the project did not write")]
    notes = f"{path}/notes.txt"
    return [_fault(command, flag, "foreign", path, EITHER, _write(notes, FOREIGN),
                   keeps(notes, FOREIGN), "a directory holding the user's file")]


def _device_node(path, major_minor):
    """A character device at the world's `path`: its own node where this user can make
    one (the real /dev/null must never be at risk), else a link to the real one."""
    def setup(c):
        os.makedirs(os.path.dirname(c.p(path)), exist_ok=True)
        try:
            os.mknod(c.p(path), 0o666 | stat.S_IFCHR, os.makedev(*major_minor))
        except PermissionError:
            os.symlink("/dev/" + os.path.basename(path), c.p(path))
    return setup


DEVICES = {"null": (1, 3), "full": (1, 7)}


def device(command, flag, kind, name):
    return [_fault(command, flag, "device", f"mx/{dev}", EITHER,
                   _device_node(f"mx/{dev}", numbers), still_device(f"mx/{dev}"),
                   f"a character device ({dev})")
            for dev, numbers in DEVICES.items()]


def wrong_kind(command, flag, kind, name):
    path = f"mx/{name}"
    if kind in FILE_KINDS:
        notes = f"{path}/notes.txt"
        return [_fault(command, flag, "wrong-kind", path, REFUSE, _write(notes, FOREIGN),
                       keeps(notes, FOREIGN), "a directory where a file goes")]
    return [_fault(command, flag, "wrong-kind", path, REFUSE, _write(path, FOREIGN),
                   keeps(path, FOREIGN), "a file where a directory goes")]


def _named(name, length):
    """`name` stretched to `length` characters, its extension kept."""
    stem, ext = os.path.splitext(name)
    return (stem + "n" * length)[:length - len(ext)] + ext


def too_long(command, flag, kind, name):
    return [_fault(command, flag, "too-long", f"mx/{_named(name, LONG)}", REFUSE, _mkdir("mx"),
                   target=f"a {LONG}-character name")]


def long_name(command, flag, kind, name):
    path = f"mx/{_named(name, LEGAL)}"
    return [_fault(command, flag, "long-name", path, WORK, _mkdir("mx"), exists(path),
                   f"a legal {LEGAL}-character name")]


def _read_only_directory(path):
    return lambda c: (os.makedirs(c.p(path), exist_ok=True), os.chmod(c.p(path), 0o555))


def read_only(command, flag, kind, name):
    path = f"ro/{name}"
    return [_fault(command, flag, "read-only", path, REFUSE, _read_only_directory("ro"),
                   nothing_partial(path, kind),
                   "a read-only parent directory")]


DISK_LIMIT = 16  # bytes: below every output's size (a tiny corpus is 60), so it is reached


def naming_any_output(command, made: Generated) -> Generated:
    """`made`, whose error line may name any output of the command: a fault of them all
    (a full disk, a second writer) shows at whichever the command writes first."""
    every = [n for flag in command.outputs
             for n in (f"--{flag}", os.path.basename(str(flag_value(made.case.argv, flag))))]
    return dataclasses.replace(made, case=dataclasses.replace(made.case, names=tuple(every)))


def disk_full(command, flag, kind, name):
    path = f"mx/{name}"
    return [naming_any_output(command, _fault(
        command, flag, "disk-full", path, REFUSE, _mkdir("mx"), nothing_partial(path, kind),
        f"disk full ({DISK_LIMIT}-byte file-size limit)", file_size_limit=DISK_LIMIT))]


def race(command, flag, kind, name):
    path = f"mx/{name}"
    made = _fault(command, flag, "race", path, RACE, _mkdir("mx"), exists(path),
                  "the same command twice at once")
    return [dataclasses.replace(naming_any_output(command, made), launch=run_twice)]


OUTPUT_FAULTS = {"foreign": foreign, "device": device, "wrong-kind": wrong_kind,
                 "too-long": too_long, "long-name": long_name, "read-only": read_only,
                 "disk-full": disk_full, "race": race}


# === Input faults ===

# The ways of reading that take a file's content (a FIFO, stdin, an empty file make sense).
CONTENT_WAYS = ("file", "stream")
FIFO_WAIT = 300  # seconds a FIFO's writer waits for its reader


def input_flags(command) -> dict:
    """The command's declared inputs (flag -> way) that its control case gives a
    value (single paths: a list or a glob is the hand-written sweep's)."""
    control = control_case(command.name)
    found = {}
    for flag, way in command.inputs.items():
        value = flag_value(control.argv, flag) if control else None
        if value and "," not in value and "*" not in value:
            found[flag] = way
    return found


def _input_fault(command, flag, klass, path, expect, setup=(), target=None, launch=None):
    made = _fault(command, flag, klass, path, expect, (_mkdir("mx"), setup), target=target)
    if path == "-":  # standard input: the flag's value as written, not a path in the world
        made = dataclasses.replace(made, case=dataclasses.replace(
            made.case, argv=with_flag(made.case.argv, flag, "-")))
    return dataclasses.replace(made, launch=launch)


def _original(command, flag) -> str:
    return flag_value(control_case(command.name).argv, flag)


def _fifo_fed(path, original):
    """A setup: a FIFO at `path` that a thread fills with the control's input
    `original` once the command opens it (a writer that never finds a reader gives
    up after FIFO_WAIT s, so no case leaves a thread behind for long)."""
    def setup(c):
        fifo, source = c.p(path), c.resolve([original])[0]
        os.mkfifo(fifo)
        data = pathlib.Path(source).read_bytes()

        def write():
            deadline = time.monotonic() + FIFO_WAIT
            while time.monotonic() < deadline:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:  # ENXIO: no reader yet
                    time.sleep(0.1)
                    continue
                os.set_blocking(fd, True)
                with contextlib.suppress(OSError):
                    os.write(fd, data)
                os.close(fd)
                return
        threading.Thread(target=write, name="fifo-writer", daemon=True).start()
    return setup


def _with_stdin(original: str | None):
    """A launch: the command with the control's input `original` on standard input
    (None: nothing)."""
    def launch(ctx, case) -> kit.Result:
        data = pathlib.Path(ctx.resolve([original])[0]).read_bytes() if original else b""
        argv = kit.command(*ctx.resolve(case.argv))
        return kit.run(argv, stdin=data, timeout=case.timeout)
    return launch


def _unreadable(path):
    """A setup: a file without read permission under the world's ro/ (which makes the
    case run without root's override of permissions, `run_once`)."""
    def setup(c):
        kit.write(c.p(path), "text nobody may read\n")
        os.chmod(c.p(path), 0)
        os.chmod(c.p("ro"), 0o555)
    return setup


def _loop(path):
    return lambda c: os.symlink(c.p(path), c.p(path))


def _fifo_without_writer(path):
    """A setup: a FIFO at `path` that nobody ever opens to write."""
    def setup(c):
        os.mkfifo(c.p(path))
    return setup


NUL_RUN = 4096  # bytes of NUL: a file system's hole after a crash, a block of zeros


def _with_nuls(path, original):
    """A setup: the control's input with a run of NUL bytes after its first line (what a
    crash leaves in a file whose end was not written back)."""
    def setup(c):
        data = pathlib.Path(c.resolve([original])[0]).read_bytes()
        cut = data.find(b"\n") + 1 or len(data) // 2
        kit.write(c.p(path), data[:cut] + b"\0" * NUL_RUN + data[cut:])
    return setup


def _copied_input(path, original):
    """A setup: the control's input `original` (a file or a directory) copied to `path`,
    which the command reads in its place (the world's stays, to restore it from)."""
    def setup(c):
        source, target = c.resolve([original])[0], c.p(path)
        if os.path.isdir(source):
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target)
    return setup


def changed_bytes(data: bytes) -> bytes:
    """`data` changed, its size kept (an edit that a size check cannot see): its lines
    after the first rotated by one (the last one moved up to second: a header stays
    first, rows trade places, every id of a vocabulary after it shifts); the bytes
    reversed when there are fewer than three whole lines."""
    lines = data.splitlines(keepends=True)
    if len(lines) >= 3 and lines[-1].endswith(b"\n"):
        changed = lines[0] + lines[-1] + b"".join(lines[1:-1])
        if changed != data:
            return changed
    return data[::-1] if data[::-1] != data else bytes(b ^ 1 for b in data)


def _files_of(path) -> list:
    path = pathlib.Path(path)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return [path]


def _vanish(path):
    """An act: the input at `path` is deleted (a directory with all it holds)."""
    def act(ctx, process):
        target = ctx.p(path)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)
    return act


def _change(path):
    """An act: each file of the input at `path` is rewritten in place with
    `changed_bytes` (same size, same inode: a reader holding it open sees the change)."""
    def act(ctx, process):
        for f in _files_of(ctx.p(path)):
            data = f.read_bytes()
            with open(f, "r+b") as out:
                out.write(changed_bytes(data))
    return act


def during_phase(command) -> str:
    """The phase in which an input vanishes or changes: the first the command declares
    after "read" (the input has been opened by then: training, generating, writing)."""
    later = [p for p in command.phases if p != "read"]
    return later[0] if later else "read"


def _restored_rerun(path, original):
    """A follow-up: after a refusal, the input is put back as it was and the same
    command is run again: it must finish (resuming from the checkpoint the line
    names). After a run that worked, nothing."""
    def after(ctx, case):
        if not getattr(ctx, "stop_line", ""):
            return True, ""
        target, source = ctx.p(path), ctx.resolve([original])[0]
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        elif os.path.lexists(target):
            os.unlink(target)
        _copied_input(path, original)(ctx)
        ok, note = rerun_finishes(ctx, case)
        return ok, f"input put back, {note}" if ok else note
    return after


def no_changed_copy(path, original):
    """A check after a run that began on the input and saw it change: no file it wrote
    holds the changed version (a vocabulary copied into an export after the change,
    while the model was trained on the original's ids: two versions, silently)."""
    def check(ctx, result):
        if result.returncode == 0:
            before = {f.read_bytes() for f in _files_of(ctx.resolve([original])[0])}
            changed = {changed_bytes(b) for b in before} - before
            sizes = {len(b) for b in changed}
            inside = pathlib.Path(ctx.p(path))
            for f in sorted(pathlib.Path(ctx.root).rglob("*")):
                if (f.is_file() and not f.is_symlink() and f != inside
                        and inside not in f.parents and f.stat().st_size in sizes
                        and f.read_bytes() in changed):
                    return SILENT, (f"{f.relative_to(ctx.root)} holds the changed input, in a "
                                    "run that began on the original")
        return no_temporaries(ctx, result)
    return check


def _during(command, flag, klass, name, act, check, target):
    """A Generated input fault during the run: the control's input copied to mx/<name>,
    and `act` done to it once `during_phase` has begun."""
    original = _original(command, flag)
    phase = during_phase(command)
    made = _input_fault(command, flag, klass, f"mx/{name}", EITHER,
                        _copied_input(f"mx/{name}", original), f"{target} during {phase}",
                        launch=_under_driver(phase, act))
    case = dataclasses.replace(made.case, after=_restored_rerun(f"mx/{name}", original))
    return dataclasses.replace(made, case=case, check=check)


def input_faults(command, flag, way) -> list:
    name = os.path.basename(_original(command, flag).rstrip("/")) or flag
    original = _original(command, flag)
    made = []
    if way in CONTENT_WAYS:
        made += [
            _input_fault(command, flag, "fifo", f"mx/{name}", WORK,
                         _fifo_fed(f"mx/{name}", original), "a FIFO its writer fills"),
            _input_fault(command, flag, "stdin", "-", WORK, target="- (standard input)",
                         launch=_with_stdin(original)),
            _input_fault(command, flag, "empty", f"mx/{name}", REFUSE,
                         _write(f"mx/{name}", ""), "an empty file"),
            _input_fault(command, flag, "empty-stdin", "-", REFUSE,
                         target="- with nothing on standard input", launch=_with_stdin(None)),
            _input_fault(command, flag, "fifo-no-writer", f"mx/{name}", REFUSE,
                         _fifo_without_writer(f"mx/{name}"),
                         f"a FIFO nobody writes ({INPUT_WAIT} s wait)",
                         launch=_waiting(INPUT_WAIT)),
            _input_fault(command, flag, "nul-bytes", f"mx/{name}", EITHER,
                         _with_nuls(f"mx/{name}", original),
                         f"{NUL_RUN} NUL bytes after the first line"),
        ]
    made += [
        _input_fault(command, flag, "loop", f"mx/{name}", REFUSE, _loop(f"mx/{name}"),
                     "a symbolic link to itself"),
        _input_fault(command, flag, "unreadable", f"ro/{name}", REFUSE,
                     (_mkdir("ro"), _unreadable(f"ro/{name}")), "no read permission"),
        _during(command, flag, "vanishing", name, _vanish(f"mx/{name}"), no_temporaries,
                "deleted"),
        _during(command, flag, "changing", name, _change(f"mx/{name}"),
                no_changed_copy(f"mx/{name}", original), "rewritten, same size,"),
    ]
    return made


# How long the input policy waits for a silent stream in the matrix (OFFICIAL_BERT_INPUT_WAIT).
INPUT_WAIT = 15


def _waiting(seconds):
    """A launch: the command with OFFICIAL_BERT_INPUT_WAIT=`seconds`."""
    def launch(ctx, case) -> kit.Result:
        return kit.run(kit.command(*ctx.resolve(case.argv)), timeout=case.timeout,
                       env={"OFFICIAL_BERT_INPUT_WAIT": str(seconds)})
    return launch


# Content inputs (CONTENT_WAYS) get them all; the others (a directory) from "loop" on.
INPUT_FAULTS = ("fifo", "stdin", "empty", "empty-stdin", "fifo-no-writer", "nul-bytes", "loop",
                "unreadable", "vanishing", "changing")
ANY_INPUT_FAULTS = ("loop", "unreadable", "vanishing", "changing")


# === Signals ===

# Where each phase begins, as the commands show it (the driver pauses there): its first
# log, stderr or stdout line (`line`; the quickstart condenses its stages' lines on stdout,
# indented), the stage's `progress.Progress` being made (`unit`: the trainer's "steps",
# evaluation's "batches", data generation's "documents"), or the first file of the case's
# world opened to read / created to write (`opens`).
PHASES = {
    "read": dict(opens="r"),
    "data": dict(line=r"^\s*progress:|features of|[Ii]nstances", unit="documents|files"),
    "train": dict(line=r"^\s*step \d+", unit="steps"),
    "eval": dict(line=r"dev features|^\s*[Ee]valuat", unit="batches"),
    "predict": dict(line=r"test features|^[Pp]redict|^Extracting|^Embedding|^Scoring"),
    "export": dict(line=r"^\s*Export|Assets written to"),  # (TensorFlow's, inside a save)
    "write": dict(opens="w"),
}
# Every stop signal of the policy (`interruption.STOP_SIGNALS`), each with the exit status
# the policy gives it (`errors.stop_exit_code`): a class per signal, "sigint", "sighup", ...
SIGNALS = {signal.Signals(s).name.lower(): (s, errors.stop_exit_code(signal.Signals(s).name))
           for s in interruption.STOP_SIGNALS}

# Run as `python -c DRIVER -m module | script path, args...`: the command, paused for
# MATRIX_STALL seconds where the phase begins (MATRIX_LINE, MATRIX_UNIT, MATRIX_OPENS: a
# PHASES entry) after noting it in MATRIX_PHASE_FILE; the signal then lands inside that
# phase, whatever the machine's speed (the pause is a sleep, which a signal interrupts as
# it would the phase's own work). "opens" watches files under MATRIX_ROOT (the case's
# world): a phase that logs nothing (a tiny corpus is read and written in a blink); a
# writer's writability probe is not its write.
DRIVER = r"""
import builtins, io, logging, os, re, runpy, sys, time
noted, root = os.environ["MATRIX_PHASE_FILE"], os.path.join(os.environ["MATRIX_ROOT"], "")
stall = float(os.environ.get("MATRIX_STALL", "3"))
def begins(what):
    if os.path.exists(noted):
        return
    with open(noted, "w") as f:
        f.write(what)
    time.sleep(stall)
opens = os.environ.get("MATRIX_OPENS")
if opens:
    writes = opens == "w"
    open_file, os_open = builtins.open, os.open
    def opened(file, mode="r", *args, **kwargs):
        handle = open_file(file, mode, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file).startswith(root):
            if any(m in mode for m in "wxa+") == writes:
                begins(f"open {file} {mode}")
        return handle
    def os_opened(path, flags, *args, **kwargs):  # the project's writers create with O_EXCL
        fd = os_open(path, flags, *args, **kwargs)
        made = bool(flags & os.O_CREAT) and "probe" not in os.path.basename(str(path))
        if writes and made and os.path.abspath(path).startswith(root):
            begins(f"create {path}")
        return fd
    builtins.open = io.open = opened
    os.open = os_opened
wanted_unit = os.environ.get("MATRIX_UNIT")
if wanted_unit:
    from official_bert import progress
    made = progress.Progress.__init__
    def progress_made(self, total=None, unit="examples", *args, **kwargs):
        made(self, total, unit, *args, **kwargs)
        if re.fullmatch(wanted_unit, unit):
            begins(f"Progress of {unit}")
    progress.Progress.__init__ = progress_made
line = re.compile(os.environ.get("MATRIX_LINE") or "(?!)", re.M)
emit = logging.Logger.callHandlers
def call_handlers(self, record):
    emit(self, record)
    try:
        message = record.getMessage()
    except Exception:
        return
    if line.search(message):
        begins(message)
logging.Logger.callHandlers = call_handlers
class Watched:  # (a line is judged when its newline is written: print writes it apart)
    def __init__(self, stream):
        self._stream, self._line = stream, ""
    def write(self, text):
        written = self._stream.write(text)
        self._line += text
        if "\n" in self._line:
            done, self._line = self._line.rsplit("\n", 1)
            if line.search(done):
                self._stream.flush()
                begins(done)
        return written
    def __getattr__(self, name):
        return getattr(self._stream, name)
sys.stderr = Watched(sys.stderr)
sys.stdout = Watched(sys.stdout)  # (the quickstart prints its stages' phases there)
if os.environ.get("MATRIX_IMPORT"):
    __import__(os.environ["MATRIX_IMPORT"])
kind, target, sys.argv = sys.argv[1], sys.argv[2], [sys.argv[2], *sys.argv[3:]]
if kind == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    runpy.run_path(target, run_name="__main__")
"""


# A command with a pool of workers is signalled with two (POOL_FLAGS: and enough work that
# its "data" phase begins at a progress line while they run, not before the pool starts),
# started as from a shell (the workers are forked) and as from a program that loaded
# TensorFlow (a notebook, the library's callers: they are spawned, beside multiprocessing's
# resource tracker): a terminal's signal reaches its whole process group. POOLS: the
# driver's environment for each (MATRIX_IMPORT: a module it imports before the command).
POOL_FLAGS = {"create-pretraining-data": ("--num_workers=2", "--dupe_factor=3000",
                                          "--progress_seconds=0.2")}
POOLS = {"forked": {}, "spawned": {"MATRIX_IMPORT": "tensorflow"}}


def pools(command) -> tuple:
    """The ways `command`'s signal cases start it: POOLS' where it has a pool, else one."""
    return tuple(POOLS) if command.name in POOL_FLAGS else (None,)


def signal_cases(command, klass) -> list:
    return [signal_case(command, klass, phase, pool)
            for phase in command.phases for pool in pools(command)]


def signal_case(command, klass, phase, pool=None) -> Generated:
    signum, code = SIGNALS[klass]
    control = control_case(command.name)
    name = f"{signal.Signals(signum).name} during {phase}"
    env = None
    if pool and control:
        argv = control.argv
        for flag in POOL_FLAGS[command.name]:
            argv = with_flag(argv, *flag[2:].split("=", 1))
        control = dataclasses.replace(control, argv=argv)
        name += f", 2 {pool} workers"
        env = dict(POOLS[pool], MATRIX_UNIT="")  # (its phase: a line, once the pool runs)
    case = (dataclasses.replace(control, name=name, after=rerun_finishes) if control
            else Case(name, [], command=command.name))
    return Generated(klass, phase, case, STOP, no_temporaries,
                     launch=signalled(signum, phase, env), exit_code=code)


# === Run-record faults (a run_dir output, on a run the control trained) ===


def wrong_types(value):
    """`value` with each field of another type (a string for a number, and so on)."""
    if isinstance(value, dict):  # its "format" kept: the schema's types are the fault
        return {k: v if k == "format" else wrong_types(v) for k, v in value.items()}
    if isinstance(value, str):
        return 7
    if isinstance(value, bool) or value is None:
        return "yes"
    if isinstance(value, (int, float)):
        return "seven"
    return {"not": "a list"}


def _records(c) -> list:
    """Every run.json of the trained output (a quickstart's holds one per run it made)."""
    found = sorted(pathlib.Path(c.p("mx", "run")).rglob(RUN_RECORD))
    if not found:
        raise RuntimeError("the trained output has no run.json")
    return found


def _edit_record(edit):
    def setup(c):
        for path in _records(c):
            if edit is None:
                path.unlink()
            else:
                path.write_text(json.dumps(edit(json.loads(path.read_text())), indent=1))
    return setup


def _read_only_record(c):
    for path in _records(c):
        os.chmod(path, 0o444)


_TRAINING = collections.defaultdict(threading.Lock)  # cache path -> its maker's lock


def _trained(command_name, flag):
    """A setup: mx/run, the run the control trains (made once per command, then copied;
    cases run at once wait for the one that makes it)."""
    def setup(c):
        cache = pathlib.Path(c.root).parent / f"trained-{command_name}"
        with _TRAINING[str(cache)]:
            if not cache.exists():
                _train_control(c, command_name, flag, cache)
        shutil.rmtree(c.p("mx", "run"), ignore_errors=True)
        shutil.copytree(cache, c.p("mx", "run"), symlinks=True)
    return setup


def _train_control(c, command_name, flag, cache):
    """Trains the control's run into mx/run and keeps a copy at `cache`."""
    control = control_case(command_name)
    argv = with_flag(control.argv, flag, at("mx", "run"))
    for step in control.setup:
        step(c)
    result = kit.run(kit.command(*c.resolve(argv)), timeout=control.timeout)
    if result.returncode:
        raise RuntimeError("the control did not train: "
                           + result.stderr.strip().splitlines()[-1][:200])
    shutil.copytree(c.p("mx", "run"), cache, symlinks=True)


def keeps_run(edit_kept: bool):
    """A check: no file of the trained run was deleted (and, if `edit_kept`, no run.json
    was rewritten)."""
    def check(ctx, result):
        run = pathlib.Path(ctx.p("mx", "run"))
        noted = json.loads(pathlib.Path(ctx.p(".run-before.json")).read_text())
        gone = sorted(n for n in noted if not (run / n).exists())
        if gone:
            return f"files of the run deleted: {', '.join(gone[:4])}"
        rewritten = [n for n, text in noted.items() if text is not None and edit_kept
                     and (run / n).read_text() != text]
        if rewritten:
            return f"the damaged {rewritten[0]} was rewritten"
        return no_temporaries(ctx, result)
    return check


def _note_run(c):
    """Remembers the run's file names (and each run.json's text) for `keeps_run`."""
    run = pathlib.Path(c.p("mx", "run"))
    noted = {str(p.relative_to(run)): p.read_text() if p.name == RUN_RECORD else None
             for p in run.rglob("*") if p.is_file()}
    kit.write(c.p(".run-before.json"), json.dumps(noted))


def eval_only(argv: list) -> list:
    """The control, evaluating its run only (no training, prediction or export, and no
    --teacher, which only a run that trains takes); a command with no evaluation
    (SQuAD) predicts only."""
    dropped = ("--do_train", "--export_dir=", "--teacher=")
    if "--do_eval" in argv:
        dropped += ("--do_predict", "--predict_file=")
    return [a for a in argv if not str(a).startswith(dropped)]


RECORD_FAULTS = {  # name -> (change to run.json, expectation, run.json kept, argv)
    "run.json missing": (_edit_record(None), EITHER, False, None),
    "run.json fields of the wrong type": (_edit_record(wrong_types), REFUSE, True, None),
    'run.json "format": 99': (_edit_record(lambda r: {**r, "format": 99}), REFUSE, True,
                              None),
    "run.json read-only, evaluation only": (_read_only_record, WORK, True, eval_only),
}


def recorded_runs(command) -> list:
    """The output flags that hold a training run and its record (run.json): a run_dir
    of a command that trains (download's run_dir is a locked cache, with no record)."""
    if "train" not in command.phases or command.name == "quickstart":
        # (The quickstart's --output_dir holds runs, pretrain/ and qnli/, with no run.json
        # of its own: their records are pretrain's and classify's cases.)
        return []
    return [flag for flag, kind in command.outputs.items() if kind == "run_dir"]


def record(command, flag, kind, name):
    control = control_case(command.name)
    made = []
    for fault, (change, expect, kept, argv_of) in RECORD_FAULTS.items():
        argv = with_flag(control.argv if control else [], flag, at("mx", "run"))
        argv = argv_of(argv) if argv_of else argv
        case = Case(f"--{flag}: {fault}", argv, command=command.name,
                    setup=(control.setup if control else (), _mkdir("mx"),
                           _trained(command.name, flag), change, _note_run),
                    names=(RUN_RECORD,), timeout=control.timeout if control else 300)
        made.append(Generated("record", f"--{flag}", case, expect, keeps_run(kept)))
    return made


# === Readers of a live run (the flags a command declares in `reads_runs`) ===

LIVE_RUN = ("mx", "live")
# The run that trains while the reader reads it: classify's control, for as long as it is
# needed, saving a checkpoint every step and keeping one (each save rotates the one before
# away: a reader that chose it finds it gone, the race that used to read as "damaged").
LIVE_TRAINER = ("--num_train_epochs=100000", "--save_checkpoints_steps=1",
                "--keep_checkpoint_max=1", "--log_steps=1000")
LIVE_WAIT = 600  # seconds the live run may take to save its first checkpoint
# What a reader of a live run must say: the checkpoint, its step, and that the run trains on.
LIVE_LINE = re.compile(r"Reading (\S+) \(step (\d+)\), the latest checkpoint of (\S+) so far: "
                       r"the run is still training")
DAMAGED = "copy or download the checkpoint again"


def live_flags(command) -> list:
    """The flags of `command` that may name a run still training (`reads_runs`). The
    live run is a classifier, so only a classifier takes it as its --teacher (a teacher
    of another family is refused by design, not a reader's fault)."""
    return [flag for flag in command.reads_runs
            if flag != "teacher" or command.name == "classify"]


def live_trainer_argv() -> list:
    control = next(c for c in _hand_written()["classify"] if c.control)
    argv = with_flag(control.argv, "output_dir", at(*LIVE_RUN))
    for flag in LIVE_TRAINER:
        name, value = flag[2:].split("=", 1)
        argv = with_flag(argv, name, value)
    return argv


def _has_checkpoint(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, "checkpoint")) and any(
        n.endswith(".index") for n in os.listdir(directory))


def while_training(ctx, case) -> kit.Result:
    """A launch: the command, once the live run (`live_trainer_argv`) has saved a
    checkpoint, while it trains on; the live run is stopped (SIGTERM) after."""
    live = ctx.p(*LIVE_RUN)
    argv = kit.command(*ctx.resolve(live_trainer_argv()))
    trainer = processes.start(argv, env=_env(), cwd=kit.REPO)
    start = time.time()
    try:
        while (time.time() - start < LIVE_WAIT and trainer.poll() is None
               and not (os.path.isdir(live) and _has_checkpoint(live))):
            time.sleep(0.2)
        if trainer.poll() is not None or not _has_checkpoint(live):
            raise RuntimeError("the live run saved no checkpoint")
        result = run_once(ctx, case)
        result.still_training = trainer.poll() is None
        return result
    except Exception as e:  # noqa: BLE001 - reported as the case's setup
        result = kit.Result(argv, -1, "", f"setup failed: {e}", time.time() - start)
        result.setup_failed = str(e)
        return result
    finally:
        trainer.send_signal(signal.SIGTERM)
        _result(trainer, argv, time.time(), 120)


def judge_live(generated, result) -> tuple:
    if getattr(result, "setup_failed", None):
        return SETUP_FAILED, result.setup_failed
    if result.traceback:
        return TRACEBACK, _tail(result)
    if DAMAGED in result.stderr:
        return LOST, "a checkpoint the live run rotated away was called damaged: " + _tail(result)
    if result.returncode != 0:
        outcome, why = kit.classify(result, True, names=_names(generated))
        return (REFUSED, why) if outcome == kit.CLEAN else (_KIT[outcome], why)
    said = LIVE_LINE.search(result.stderr)
    if not said:
        return SILENT, ("exit 0, and no line named the live run's step or said that it still "
                        "trains")
    if not getattr(result, "still_training", True):
        return SETUP_FAILED, "the live run had stopped before the reader ended"
    return OK, f"read {said.group(1)} (step {said.group(2)}) of a run still training"


def _started_from_check(command, flag):
    runs = [f for f, kind in command.outputs.items() if kind == "run_dir"]
    if flag != "init_checkpoint" or not runs or "train" not in command.phases:
        return no_temporaries

    def check(ctx, result):
        out = flag_value(result.command, runs[0])
        record = pathlib.Path(out, RUN_RECORD)
        try:
            started = json.loads(record.read_text()).get("started_from") or {}
        except (OSError, ValueError) as e:
            return f"{RUN_RECORD} of the reader's run cannot be read ({e})"
        said = LIVE_LINE.search(result.stderr)
        if started.get("path") != ctx.p(*LIVE_RUN) or (
                said and started.get("step") != int(said.group(2))):
            return SILENT, (f"the reader's {RUN_RECORD} does not keep the live run and the "
                            f"step it started from: started_from = {started}")
        return no_temporaries(ctx, result)
    return check


def live_run(command, flag) -> Generated:
    control = control_case(command.name)
    name = f"--{flag}: a run still training"
    if control is None:
        return Generated("live-run", f"--{flag}", Case(name, [], command=command.name), LIVE)
    argv = with_flag(control.argv, flag, at(*LIVE_RUN))
    case = dataclasses.replace(control, name=name, argv=argv, setup=(control.setup, _mkdir("mx")),
                               names=(f"--{flag}", "live"), timeout=max(control.timeout, 600))
    return Generated("live-run", f"--{flag}", case, LIVE, _started_from_check(command, flag),
                     launch=while_training)


# === Resource limits and a closed standard output (every command) ===

GiB = 1 << 30
# class -> (resource, the limit, in words): each low enough to be reached by a tiny run.
LIMITS = {
    "rlimit-as": (resource.RLIMIT_AS, 2 * GiB, "a 2 GiB address-space limit (ulimit -v)"),
    "rlimit-nproc": (resource.RLIMIT_NPROC, 16, "16 processes and threads (ulimit -u)"),
    "rlimit-nofile": (resource.RLIMIT_NOFILE, 8, "8 open files (ulimit -n)"),
}
# What the line for a limit names (the limit to raise, or memory).
LIMIT_NAMES = ("ulimit", "out of memory")


def _real_process(ctx, case, argv, preexec=None, stdout=subprocess.PIPE, env=None):
    """`argv` as its own process (not the fork server's: its limits and standard output
    are the case's), its stdin the case's; a `kit.Result` (stdout "" when not captured)."""
    start = time.time()
    process = subprocess.Popen(argv, env=env or _env(), cwd=kit.REPO, stdout=stdout,
                               stderr=subprocess.PIPE, preexec_fn=preexec,
                               stdin=subprocess.PIPE if case.stdin is not None
                               else subprocess.DEVNULL)
    try:
        out, err = process.communicate(case.stdin, timeout=case.timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        err = (err or b"") + f"\n[timed out after {case.timeout} s]".encode()
        return kit.Result(argv, -9, "", err.decode("utf-8", "replace"), time.time() - start)
    decode = lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else ""  # noqa
    return kit.Result(argv, process.returncode, decode(out), decode(err), time.time() - start)


def _another_user(ctx) -> int:
    """A user id of its own for the case (RLIMIT_NPROC counts the threads of every
    process of the real user: cases run at once must not share one)."""
    return 61000 + int(ctx.root.name.rsplit("-", 1)[-1]) % 4000


def limited(klass: str):
    """A launch: the command under the limit of `klass` (LIMITS). A limit on threads
    binds only a user that is not root: as root the command runs with another real
    user id, without the capabilities that ignore the limit (its effective id stays
    root, so that it reads the same files)."""
    which, value, _ = LIMITS[klass]

    def launch(ctx, case) -> kit.Result:
        argv = kit.command(*ctx.resolve(case.argv))
        env = _env()
        if which == resource.RLIMIT_NPROC and os.geteuid() == 0:
            if not shutil.which("setpriv"):
                raise RuntimeError("setpriv is needed to limit threads as root")
            uid = _another_user(ctx)
            for path in (ctx.root.parent, ctx.root):  # (the real user id must reach the world)
                os.chmod(path, 0o755)
            # (a real user's own config directory: matplotlib's is root's home)
            env["MPLCONFIGDIR"] = ctx.p(".mpl")
            argv = ["setpriv", f"--ruid={uid}", "--bounding-set=-sys_resource,-sys_admin",
                    "--", *argv]

        def preexec():
            resource.setrlimit(which, (value, value))
        return _real_process(ctx, case, argv, preexec, env=env)
    return launch


def limit_case(command, klass) -> Generated:
    control = control_case(command.name)
    name = LIMITS[klass][2]
    if control is None:
        return Generated(klass, "limit", Case(name, [], command=command.name), EITHER)
    case = dataclasses.replace(control, name=name, names=LIMIT_NAMES, after=_rerun_if_refused)
    return Generated(klass, "limit", case, EITHER, no_temporaries, launch=limited(klass))


def _rerun_if_refused(ctx, case) -> tuple:
    """A follow-up: after a refusal or a stop, the same command without the fault
    finishes (resuming what was saved); after a run that worked, nothing."""
    if not getattr(ctx, "stop_line", ""):
        return True, ""
    return rerun_finishes(ctx, case)


# class -> (the case's name, how stdout is closed)
STDOUT_FAULTS = {
    "closed-stdout": "| head -c0 (the reader gone before the first byte)",
    "no-stdout": ">&- (no standard output at all)",
}


def without_stdout(klass: str):
    """A launch: the command with its standard output a pipe whose reader is gone
    (`| head -c0`, head ended first), or closed (`>&-`: descriptor 1 not open)."""
    def launch(ctx, case) -> kit.Result:
        argv = kit.command(*ctx.resolve(case.argv))
        if klass == "no-stdout":
            return _real_process(ctx, case, argv, lambda: os.close(1), stdout=None)
        read, write = os.pipe()
        subprocess.run(["head", "-c0"], stdin=read, check=False)  # it reads nothing, ends
        os.close(read)
        try:
            return _real_process(ctx, case, argv, stdout=write)
        finally:
            os.close(write)
    return launch


QUIET_STATUS = 141  # the shell's status for SIGPIPE: a closed stdout ends a command quietly


def judge_quiet(generated, result) -> tuple:
    if result.traceback:
        return TRACEBACK, _tail(result)
    if result.returncode == 0:
        return OK, ""
    if result.returncode == QUIET_STATUS and not result.error_lines and "Fatal" not in \
            result.stderr:
        return CLEAN, f"ended quietly (exit {QUIET_STATUS}) when its standard output closed"
    outcome, why = kit.classify(result, True)
    return _KIT[outcome], why


def stdout_case(command, klass) -> Generated:
    control = control_case(command.name)
    name = STDOUT_FAULTS[klass]
    if control is None:
        return Generated(klass, "stdout", Case(name, [], command=command.name), QUIET)
    case = dataclasses.replace(control, name=name, names=(), after=_rerun_after_quiet(command))
    return Generated(klass, "stdout", case, QUIET, no_temporaries, launch=without_stdout(klass))


def _rerun_after_quiet(command):
    """A follow-up: after a quiet end (141) or a line, the same command finishes; or it
    had finished its outputs before its report reached the closed stdout, and the rerun
    refuses to overwrite them (an export is never overwritten): every output is there."""
    def after(ctx, case) -> tuple:
        if not getattr(ctx, "stop_line", ""):
            return True, ""
        ok, note = rerun_finishes(ctx, case)
        if ok or "exists" not in note:
            return ok, note
        argv = ctx.resolve(case.argv)
        given = [flag_value(argv, flag) for flag in command.outputs]
        if all(value and os.path.exists(value) for value in given):
            return True, ("its outputs were written before its report met the closed stdout; "
                          "the rerun refuses to overwrite them")
        return ok, note
    return after


# === The matrix ===

CLASSES = (*OUTPUT_FAULTS, *INPUT_FAULTS, "live-run", *SIGNALS, "record", *LIMITS,
           *STDOUT_FAULTS)


def generate(commands: list | None = None, classes=CLASSES) -> list:
    """Every generated case of `commands` (the registry's by default) in `classes`."""
    made = []
    for command in commands if commands is not None else registered_commands():
        for flag, kind in command.outputs.items():
            name = output_name(control_case(command.name), flag)
            for klass, fault in OUTPUT_FAULTS.items():
                if klass in classes:
                    made += fault(command, flag, kind, name)
            if flag in recorded_runs(command) and "record" in classes:
                made += record(command, flag, kind, name)
        for flag, way in input_flags(command).items():
            made += [g for g in input_faults(command, flag, way) if g.klass in classes]
        if "live-run" in classes:
            made += [live_run(command, flag) for flag in live_flags(command)]
        for klass in SIGNALS:
            if klass in classes:
                made += signal_cases(command, klass)
        made += [limit_case(command, klass) for klass in LIMITS if klass in classes]
        made += [stdout_case(command, klass) for klass in STDOUT_FAULTS if klass in classes]
    return made


def expected_count(command: Command, classes=CLASSES) -> int:
    """How many cases `generate` makes for `command` (the test checks it against the registry)."""
    per_output = {"device": len(DEVICES)}
    n = sum(per_output.get(k, 1) for k in OUTPUT_FAULTS if k in classes) * len(command.outputs)
    n += sum(len(command.phases) * len(pools(command)) for k in SIGNALS if k in classes)
    for way in input_flags(command).values():
        kinds = INPUT_FAULTS if way in CONTENT_WAYS else ANY_INPUT_FAULTS
        n += sum(k in classes for k in kinds)
    n += len(live_flags(command)) if "live-run" in classes else 0
    n += sum(k in classes for k in (*LIMITS, *STDOUT_FAULTS))
    return n + (len(RECORD_FAULTS) * len(recorded_runs(command)) if "record" in classes else 0)


# === Running one case ===

CLEAN, OK, TRACEBACK, VAGUE, SILENT, LOST = "clean", "ok", "traceback", "vague", "silent", "lost"
REFUSED, UNREACHED, SETUP_FAILED = "refused", "unreached", "setup failed"
OUTCOMES = (CLEAN, OK, TRACEBACK, VAGUE, SILENT, LOST, REFUSED, UNREACHED, SETUP_FAILED)
GOOD = (CLEAN, OK)
_KIT = {kit.CLEAN: CLEAN, kit.OK: OK, kit.TRACEBACK: TRACEBACK, kit.VAGUE: VAGUE,
        kit.SILENT: SILENT, kit.LOST: LOST}


def _env(**extra) -> dict:
    return {**os.environ, **kit.ENV, **extra}


def _without_dac(argv: list) -> list:
    """As root, `argv` run without the capabilities that ignore file permissions (so a
    read-only directory refuses root's writes as it refuses a user's)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return argv
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--", *argv]


def run_once(ctx, case) -> kit.Result:
    argv = kit.command(*ctx.resolve(case.argv))
    if any(_read_only(p) for p in _read_only_paths(ctx)):
        argv = _without_dac(argv)
    return kit.run(argv, stdin=case.stdin, timeout=case.timeout,
                   file_size_limit=case.file_size_limit)


def _read_only_paths(ctx) -> list:
    """Where a case makes something read-only (the read-only and record faults)."""
    return [ctx.p("ro"), *map(str, pathlib.Path(ctx.p("mx", "run")).rglob(RUN_RECORD))]


def _read_only(path) -> bool:
    """By its mode bits (`os.access` says yes to root whatever they are)."""
    return os.path.exists(path) and not os.stat(path).st_mode & stat.S_IWUSR


def _result(process, argv, start, timeout) -> kit.Result:
    try:
        out, err = process.communicate(timeout=timeout)
    except Exception:  # noqa: BLE001 - a hung command is reported, not fatal
        process.kill()
        process.wait()
        return kit.Result(argv, -9, "", f"[timed out after {timeout} s]", time.time() - start)
    decode = lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else b  # noqa: E731
    return kit.Result(argv, process.returncode, decode(out), decode(err), time.time() - start)


def run_twice(ctx, case) -> kit.Result:
    """The same command twice at once; the Result holds both (their stderr joined by a
    line RACE_SEPARATOR, the status the worse one's)."""
    argv = kit.command(*ctx.resolve(case.argv))
    start = time.time()
    both = [processes.start(argv, env=_env(), cwd=kit.REPO) for _ in range(2)]
    results = [_result(p, argv, start, case.timeout) for p in both]
    result = kit.Result(argv, max((r.returncode for r in results), key=abs), "",
                        f"\n{RACE_SEPARATOR}\n".join(r.stderr for r in results),
                        time.time() - start)
    result.each = results  # judge_race reads them one by one
    return result


RACE_SEPARATOR = "=== the second writer ==="


def signalled(signum: int, phase: str, env: dict | None = None):
    """A launch: the command under DRIVER (with `env` added to its environment); `signum`
    once `phase` has begun (a terminal's SIGINT, SIGQUIT or SIGHUP to its process group;
    SIGTERM and the others to it alone, as a supervisor or a scheduler sends them:
    `processes.send_as_a_session_does`)."""
    return _under_driver(phase, lambda ctx, process: _send(process, signum), env)


def _under_driver(phase: str, act, extra_env: dict | None = None):
    """A launch: the command under DRIVER; `act(ctx, process)` once `phase` has begun
    (while the driver holds the command there). The result says whether it was reached."""
    def launch(ctx, case) -> kit.Result:
        full = kit.command(*ctx.resolve(case.argv))
        noted = pathlib.Path(str(ctx.root) + ".phase")
        noted.unlink(missing_ok=True)
        where = {f"MATRIX_{k.upper()}": v for k, v in PHASES[phase].items()}
        env = _env(**{"MATRIX_PHASE_FILE": str(noted), "MATRIX_ROOT": str(ctx.root), **where,
                      **(extra_env or {})})
        start = time.time()
        process = processes.start([sys.executable, "-c", DRIVER, *_kind_and_target(full)],
                                  env=env, cwd=kit.REPO)
        while not noted.exists() and process.poll() is None and \
                time.time() - start < case.timeout:
            time.sleep(0.05)
        reached = noted.exists()
        if reached:
            act(ctx, process)
        result = _result(process, full, start, case.timeout)
        result.reached = reached
        return result
    return launch


def _kind_and_target(command: list) -> list:
    """DRIVER's arguments for `command` ([python, -m module | script, args...])."""
    return command[1:] if command[1] == "-m" else ["script", *command[1:]]


def _send(process, signum):
    processes.send_as_a_session_does(process, signum)  # a terminal's: the workers get it too


# A line that says a checkpoint was kept: a stop's, an input lost while training.
SAVED = re.compile(r"is saved|the run saved ckpt-")


def rerun_finishes(ctx, case) -> tuple:
    """After a stop: the same command again finishes the job, and resumes it from the
    checkpoint that the stop's line says was saved."""
    result = kit.run(kit.command(*ctx.resolve(case.argv)), timeout=case.timeout)
    if result.returncode != 0:
        return False, "the rerun failed: " + _last_line(result)
    # (The quickstart says "resumed" in its summary, on stdout.)
    resumed = "Resumed from" in result.stderr or "resumed the " in result.stdout
    if SAVED.search(getattr(ctx, "stop_line", "")) and not resumed:
        return False, "the rerun finished but did not resume from the saved checkpoint"
    return True, "the rerun finished" + (" (resumed)" if resumed else "")


def _last_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    return lines[-1][:200] if lines else f"exit {result.returncode}, nothing said"


# === Judging one case ===

STOP_LINE = re.compile(r"^(interrupted|preempted|stopped|error):")
# A line of Python's warnings module: "file.py:123: UserWarning: ...".
PYTHON_WARNING = re.compile(r"^\S+:\d+: \w*Warning: ", re.M)


def _collapse(text: str) -> str:
    """`text` with each run of 20 or more of one character written as three and "…" (a
    300-character name would fill the table's cell)."""
    return re.sub(r"(.)\1{19,}", r"\1\1\1…", text)


def _readable(result):
    """`result` (and each racing writer's) with its long names collapsed."""
    for one in [result, *getattr(result, "each", [])]:
        one.stderr = _collapse(one.stderr)
    return result


def _names(generated) -> list:
    """What the error line must name, collapsed as the line is."""
    return [_collapse(str(n)) for n in generated.case.names]


def judge_stop(generated, result) -> tuple:
    if not getattr(result, "reached", True):
        return UNREACHED, (f"ended (exit {result.returncode}) before the phase began: "
                           + _last_line(result))
    if result.traceback:
        return TRACEBACK, _tail(result)
    if result.returncode == 0:
        return SILENT, "exit 0: the signal was ignored"
    lines = [l for l in result.stderr.splitlines() if STOP_LINE.match(l)]
    if result.returncode != generated.exit_code or len(lines) != 1:
        return VAGUE, f"exit {result.returncode}, {len(lines)} stop lines: {_tail(result)}"
    after = result.stderr.split(lines[0], 1)[1]
    if PYTHON_WARNING.search(after):  # (a helper process the signal killed says so)
        return VAGUE, "a Python warning after the stop line: " + _tail(result)
    return CLEAN, lines[0][:300]


def judge_race(generated, result) -> tuple:
    each = getattr(result, "each", [result])
    if any(r.traceback for r in each):
        return TRACEBACK, _tail(next(r for r in each if r.traceback))
    failed = [r for r in each if r.returncode != 0]
    if len(failed) == len(each):
        return LOST, "both writers failed: " + _last_line(failed[0])
    for r in failed:
        outcome, why = kit.classify(r, True, names=_names(generated))
        if outcome != kit.CLEAN:
            return _KIT[outcome], why
    return (CLEAN, failed[0].error_lines[0][:300]) if failed else (OK, "both succeeded")


def judge_once(generated, result) -> tuple:
    expect = generated.expect
    if expect == EITHER:
        expect = WORK if result.returncode == 0 else REFUSE
    outcome, why = kit.classify(result, expect == REFUSE, names=_names(generated))
    if expect == WORK and outcome == kit.CLEAN:  # a clean line where it should have worked
        return REFUSED, why
    return _KIT[outcome], why


def judge(generated, result) -> tuple:
    if not getattr(result, "reached", True):
        return UNREACHED, (f"ended (exit {result.returncode}) before the phase began: "
                           + _last_line(result))
    if generated.expect == STOP:
        return judge_stop(generated, result)
    if generated.expect == RACE:
        return judge_race(generated, result)
    if generated.expect == LIVE:
        return judge_live(generated, result)
    if generated.expect == QUIET:
        return judge_quiet(generated, result)
    return judge_once(generated, result)


def _tail(result) -> str:
    return " | ".join(l for l in result.stderr.strip().splitlines()[-3:])[-300:]


def run_generated(world_root: pathlib.Path, scratch: pathlib.Path, index: int,
                  generated: Generated) -> dict:
    """Copies the world, sets the fault up, runs the command, judges it: a row
    {generated, outcome, why, seconds}."""
    root = scratch / f"case-{index:03d}"
    shutil.copytree(world_root, root, symlinks=True)
    ctx, start = Ctx(root), time.time()
    try:
        outcome, why = _outcome(ctx, generated)
    finally:
        _restore_permissions(ctx)
    return dict(generated=generated, outcome=outcome, why=kit.strip_paths(why, root),
                seconds=time.time() - start)


def _outcome(ctx, generated) -> tuple:
    case = generated.case
    if control_case(case.command) is None:
        return SETUP_FAILED, f"no control case for {case.command} in tools/sweep/cases/"
    try:
        for step in case.setup:
            step(ctx)
    except Exception as e:  # noqa: BLE001 - a broken case is reported, not fatal
        return SETUP_FAILED, f"{type(e).__name__}: {e}"[:300]
    result = _readable((generated.launch or run_once)(ctx, case))
    outcome, why = judge(generated, result)
    if outcome not in GOOD:
        return outcome, why
    problem = generated.check(ctx, result) if generated.check else None
    if problem:  # a problem (data lost), or (the outcome, the problem)
        outcome, problem = problem if isinstance(problem, tuple) else (LOST, problem)
        return outcome, f"{problem} ({why})"[:300]
    if not case.after:
        return outcome, why
    ctx.stop_line = why  # (what a stop said it kept: the rerun must resume from it)
    ok, note = case.after(ctx, case)
    return (outcome, f"{why} — {note}") if ok else (LOST, note)


def _restore_permissions(ctx):
    """Makes the read-only parts writable again (so that the case's copy can be removed)."""
    for path in _read_only_paths(ctx):
        if os.path.exists(path):
            os.chmod(path, 0o755)


# === Tables ===


def cell(rows: list) -> str:
    """The outcomes of one command's cases of one class: "3 clean", "2 ok, 1 traceback"."""
    counts = {o: sum(r["outcome"] == o for r in rows) for o in OUTCOMES}
    return ", ".join(f"{n} {o}" for o, n in counts.items() if n) or ""


def grid(rows: list) -> str:
    """One Markdown row per command, one column per fault class, each cell its outcomes."""
    classes = [k for k in CLASSES if any(r["generated"].klass == k for r in rows)]
    lines = ["| command | " + " | ".join(classes) + " |", "|---" * (len(classes) + 1) + "|"]
    for command in dict.fromkeys(r["generated"].command for r in rows):
        mine = [r for r in rows if r["generated"].command == command]
        cells = [cell([r for r in mine if r["generated"].klass == k]) for k in classes]
        lines.append(f"| {command} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def details(rows: list) -> str:
    """One Markdown row per case that is neither clean nor ok."""
    lines = ["| command | class | case | outcome | detail |", "|---|---|---|---|---|"]
    for r in rows:
        if r["outcome"] not in GOOD:
            g, why = r["generated"], r["why"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {g.command} | {g.klass} | {g.case.name} | {r['outcome']} | "
                         f"{why} |")
    return "\n".join(lines)


def as_json(rows: list) -> list:
    return [dict(command=r["generated"].command, klass=r["generated"].klass,
                 target=r["generated"].target, case=r["generated"].case.name,
                 outcome=r["outcome"], why=r["why"], seconds=round(r["seconds"], 1))
            for r in rows]


def select(generated: list, commands: str = "", classes: str = "") -> list:
    """The cases of `commands` and `classes` (comma-separated; all if empty)."""
    wanted = {c.strip() for c in commands.split(",") if c.strip()}
    kinds = {c.strip().lower() for c in classes.split(",") if c.strip()}
    known = {g.command for g in generated}
    unknown = sorted((wanted - known) | (kinds - set(CLASSES)))
    if unknown:
        raise SystemExit(f"error: unknown command or class: {', '.join(unknown)} (commands: "
                         f"{', '.join(sorted(known))}; classes: {', '.join(CLASSES)})")
    return [g for g in generated if (not wanted or g.command in wanted)
            and (not kinds or g.klass in kinds)]
