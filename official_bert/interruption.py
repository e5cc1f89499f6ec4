"""A stop asked for by a signal: the one signal policy's state.

The signals that stop a job (`STOP_SIGNALS`; `errors.INTERRUPT_SIGNALS` and
`errors.PREEMPT_SIGNALS` say why each, and its exit status):

    signal    who sends it                                    stop, exit status
    SIGINT    Ctrl-C                                          interrupted, 130
    SIGQUIT   Ctrl-\\                                          interrupted, 131
    SIGTERM   a preempted VM or TPU host, a supervisor, kill  preempted, 75
    SIGHUP    the terminal or the ssh session closed          preempted, 75
    SIGUSR1   a scheduler's warning before its time limit     preempted, 75
    SIGUSR2   (SLURM's --signal), likewise                    preempted, 75
    SIGALRM   a timer ran out (`timeout -s ALRM`)             preempted, 75
    SIGXCPU   the CPU-time limit (`ulimit -t`)                preempted, 75

A closed stdout (SIGPIPE, which Python ignores: an EPIPE error) ends the command
quietly with exit 141, and a file-size limit (SIGXFSZ, ignored too: EFBIG) is the
disk-full line, both at the command boundary. A signal that was ignored when the
process started (`nohup` ignores SIGHUP; a shell's background job, SIGINT and
SIGQUIT) stays ignored, as POSIX asks of every program.

One policy for all, wherever a job is: the command boundary
(`official_bert.commands.app.signal_policy`) is the one place that installs
signal handlers, and its handler calls `request`. Here is the state it leaves
("a stop was requested, by which signal") and what the library does with it:

* outside training, `request` raises `errors.Stopped` (`stopped_by` the
  signal: `Interrupted` or `Preempted`) at once in the main thread: the stack
  unwinds, and every writer removes its temporary (`io.atomic_output`, data
  generation's shards), so nothing half-written is kept;
* during training (`while_training`), it only records the request and calls
  the training loop's listener, so that the loop stops at the next step
  boundary, saves a checkpoint and raises `stopped(step, checkpoint)`
  (`training.termination` also ends a compiled call early, from a thread).

Idempotent: only the first signal raises and sets the exit status. A later one
(the same or another) while the first's stop is under way (removing
temporaries, saving a checkpoint) is noted in the log, one line each, and
ignored, so cleaning up is never cut short. Imports nothing above `errors`.
"""

from __future__ import annotations

import contextlib
import multiprocessing.resource_tracker
import signal
import threading

from absl import logging

from official_bert.errors import INTERRUPT_SIGNALS, PREEMPT_SIGNALS, Stopped, stopped_by

# The signals that stop a job (those this platform has: SIGXCPU, SIGUSR1, ... are POSIX's).
STOP_SIGNALS = tuple(getattr(signal, name) for name in (*INTERRUPT_SIGNALS, *PREEMPT_SIGNALS)
                     if hasattr(signal, name))

_lock = threading.Lock()
_requested: list[str] = []  # the names of the signals received, first first
_listeners: list = []  # the running training loops' listeners


def reset() -> None:
    """Forgets earlier requests (a new job in the same process starts afresh)."""
    with _lock:
        _requested.clear()


def requested() -> str | None:
    """The name of the first signal that asked this job to stop ("SIGINT",
    "SIGHUP", ...), None when none did."""
    with _lock:
        return _requested[0] if _requested else None


def request(signum: int) -> None:
    """A stop asked for by the signal `signum` (the boundary's handler, or
    training's watcher thread). Raises `Stopped` when no training loop listens,
    in the main thread, for the first signal only."""
    name = signal.Signals(signum).name
    with _lock:
        first = not _requested
        _requested.append(name)
        listeners = list(_listeners)
    if not first:
        _note_later(name)
    for listener in listeners:
        listener(name, first)
    if first and not listeners and threading.current_thread() is threading.main_thread():
        raise stopped_by(name)


def _note_later(name: str) -> None:
    """The one line for a signal that came while the first one's stop is under way."""
    first = requested()
    logging.warning("%s while stopping for %s: noted; the stop goes on (exit %d)", name,
                    first, stopped_by(first).exit_code)


def stopped(step: int | None = None, checkpoint: str | None = None) -> Stopped:
    """The `Stopped` that ends a job stopped at `step` after saving `checkpoint`."""
    return stopped_by(requested() or "SIGTERM", step, checkpoint)


@contextlib.contextmanager
def while_training(listener=None):
    """Training runs in this block: a signal becomes a request the loop reads
    (`requested`) at its step boundaries, and `listener(name, first)` is called
    on each. A request the loop did not act on (it came after the last step)
    stops the job when the block ends."""
    listener = listener or (lambda name, first: None)
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)
    if requested() is not None:
        raise stopped()


def as_worker_process() -> None:
    """A job's worker process (data generation's pool) leaves stopping to its
    parent, which unwinds, terminates its workers and removes their temporaries:
    it ignores every stop signal (Ctrl-C, Ctrl-\\ and a closed terminal's SIGHUP
    reach the whole process group, and a worker's own stop would print a
    traceback, or die and leave the pool waiting) but SIGTERM, which takes its
    default action (`Pool.terminate` sends it; a forked worker would otherwise
    inherit the boundary's handler). The one place outside the boundary that
    sets a handler: a worker is not where the job's policy runs."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL if signum == signal.SIGTERM else signal.SIG_IGN)


def start_resource_tracker() -> None:
    """Starts multiprocessing's resource tracker (the process that unlinks a
    spawned pool's semaphores) deaf to every stop signal, before a pool that
    needs one. It shares the job's process group, so a closed terminal's SIGHUP
    and Ctrl-\\ reach it too, and it ignores only SIGINT and SIGTERM itself:
    killed, it would be relaunched when the pool ends and print a warning and a
    KeyError traceback for each semaphore after the job's stop line. The signals
    are blocked while it starts (a blocked mask survives exec, and the tracker
    never unblocks them); this process's own arrive when they are unblocked."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        multiprocessing.resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
