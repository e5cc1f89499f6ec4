"""A stop signal during training (any of `interruption.STOP_SIGNALS`: SIGINT,
Ctrl-C; SIGTERM, a preempted cloud VM or TPU host with ~30 s of notice; SIGHUP, a
closed terminal; ...): a checkpoint after the step in flight, then
`errors.Stopped` (`official_bert.interruption` holds the request; the command
boundary installs the handlers)."""

from __future__ import annotations

import os
import signal
import threading

import tensorflow as tf
from absl import logging

from official_bert import interruption


class TerminationSignal:
    """Training's side of `interruption`: while the loop runs, a stop signal is
    a request that the loop reads (`requested`) at each step boundary, where it
    saves a checkpoint and raises `interruption.stopped(step, checkpoint)`.

    Python runs a signal handler only in the main thread, between bytecodes, and
    the main thread spends up to `steps_per_loop` updates inside one `tf.function`
    call. So the call is also stopped another way: the C-level handler writes
    the signal's number to `signal.set_wakeup_fd`'s pipe, a watcher thread reads
    it and sets `stop` (a `tf.Variable` the train loop reads before each update)
    while the call runs. The watcher only stops the call: the request itself is
    made once, by the boundary's handler as the call returns, so that a signal
    is never counted twice (a second count would be noted as a second signal). Without `stop` (several workers, which must agree on the
    step) the call ends at its own boundary. The pipe is only fed for signals
    with a Python handler (the boundary's); outside the main thread (where
    Python cannot take signals) there is no watcher."""

    def __init__(self, stop: tf.Variable | None = None):
        self._stop = stop
        self._training = interruption.while_training(self._on_request)
        self._previous_fd = None
        self._pipe = None
        self._watcher = None

    @property
    def requested(self) -> bool:
        return interruption.requested() is not None

    def _on_request(self, name: str, first: bool):
        if first:
            logging.warning("%s: saving a checkpoint after the step in flight, then stopping",
                            name)
        if self._stop is not None:
            self._stop.assign(True)

    def _watch(self, read_fd):
        stops = {int(s) for s in interruption.STOP_SIGNALS}
        while True:
            data = os.read(read_fd, 64)  # one byte per signal
            if stops.intersection(data):
                self._stop.assign(True)
            if not data or 0 in data:  # __exit__'s byte: training is over
                return

    def __enter__(self):
        self._training.__enter__()
        if self._stop is not None and threading.current_thread() is threading.main_thread():
            read_fd, write_fd = os.pipe()
            os.set_blocking(write_fd, False)  # the C handler must never block
            self._pipe = (read_fd, write_fd)
            self._previous_fd = signal.set_wakeup_fd(write_fd)
            self._watcher = threading.Thread(target=self._watch, args=(read_fd,),
                                             name="stop-signal-watcher", daemon=True)
            self._watcher.start()
        return self

    def __exit__(self, *exc):
        if self._pipe is not None:
            signal.set_wakeup_fd(self._previous_fd)
            read_fd, write_fd = self._pipe
            os.write(write_fd, b"\0")
            os.close(write_fd)
            self._watcher.join()
            os.close(read_fd)
            self._pipe = None
        return self._training.__exit__(*exc)
