"""A stop asked for by a signal: SIGINT (Ctrl-C) or SIGTERM (a preempted VM).

One policy for both, wherever a job is: the command boundary
(`official_bert.commands.app.signal_policy`) is the one place that installs
signal handlers, and its handler calls `request`. Here is the state it leaves
("a stop was requested, by which signal") and what the library does with it:

* outside training, `request` raises `errors.Stopped` (`Interrupted` for
  SIGINT, `Preempted` for SIGTERM) at once in the main thread: the stack
  unwinds, and every writer removes its temporary (`io.atomic_output`, data
  generation's shards), so nothing half-written is kept;
* during training (`while_training`), it only records the request and calls
  the training loop's listener (which may run on another thread: the loop's
  wake-up watcher, `training.termination`), so that the loop stops at the next
  step boundary, saves a checkpoint and raises `stopped(step, checkpoint)`.

Only the first signal raises: a second one while the first unwinds (removing
temporaries, saving a checkpoint) is recorded and ignored, so cleaning up is
never cut short by a traceback. Imports nothing above `errors`.
"""

from __future__ import annotations

import contextlib
import signal
import threading

from official_bert.errors import Stopped, stopped_by

# The signals that stop a job, both alike.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_lock = threading.Lock()
_requested: list[str] = []  # the names of the signals received, first first
_listeners: list = []  # the running training loops' listeners


def reset() -> None:
    """Forgets earlier requests (a new job in the same process starts afresh)."""
    with _lock:
        _requested.clear()


def requested() -> str | None:
    """The name of the first signal that asked this job to stop ("SIGINT",
    "SIGTERM"), None when none did."""
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
    for listener in listeners:
        listener(name, first)
    if first and not listeners and threading.current_thread() is threading.main_thread():
        raise stopped_by(name)


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
    it ignores SIGINT (Ctrl-C reaches the terminal's whole process group, and a
    worker's own `KeyboardInterrupt` would print a traceback) and takes
    SIGTERM's default action (`Pool.terminate` sends it; a forked worker would
    otherwise inherit the boundary's handler). The one place outside the
    boundary that sets a handler: a worker is not where the job's policy runs."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
