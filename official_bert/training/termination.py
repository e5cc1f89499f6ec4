"""SIGTERM during training: a checkpoint after the step in flight, then
`errors.Preempted` (a preempted cloud VM or TPU host gets ~30 s of notice)."""

from __future__ import annotations

import os
import signal
import threading

import tensorflow as tf
from absl import logging


class TerminationSignal:
    """Records SIGTERM during training instead of dying at once: the loop saves a
    checkpoint after the step in flight and raises `errors.Preempted`.

    Python runs a signal handler only in the main thread, between bytecodes, and
    the main thread spends up to `steps_per_loop` updates inside one `tf.function`
    call. So the handler is also reached another way: the C-level handler writes
    the signal's number to `signal.set_wakeup_fd`'s pipe, a watcher thread reads
    it and sets `stop` (a `tf.Variable` the train loop reads before each update)
    while the call runs. Without `stop` (several workers, which must agree on the
    step) the call ends at its own boundary. Outside the main thread (where
    Python cannot take signals) it does nothing."""

    def __init__(self, stop: tf.Variable | None = None):
        self.requested = False
        self._stop = stop
        self._previous = None
        self._previous_fd = None
        self._pipe = None
        self._watcher = None

    def _handler(self, signum, frame):
        del signum, frame
        self._request()

    def _request(self):
        if not self.requested:
            logging.warning("SIGTERM: saving a checkpoint after the step in flight, then "
                            "stopping")
        self.requested = True
        if self._stop is not None:
            self._stop.assign(True)

    def _watch(self, read_fd):
        while True:
            data = os.read(read_fd, 64)  # one byte per signal (SIGINT's too)
            if signal.SIGTERM in data:
                self._request()
            if not data or 0 in data:  # __exit__'s byte: training is over
                return

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self
        self._previous = signal.signal(signal.SIGTERM, self._handler)
        if self._stop is not None:
            read_fd, write_fd = os.pipe()
            os.set_blocking(write_fd, False)  # the C handler must never block
            self._pipe = (read_fd, write_fd)
            self._previous_fd = signal.set_wakeup_fd(write_fd)
            self._watcher = threading.Thread(target=self._watch, args=(read_fd,),
                                             name="sigterm-watcher", daemon=True)
            self._watcher.start()
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
        if self._pipe is not None:
            signal.set_wakeup_fd(self._previous_fd)
            read_fd, write_fd = self._pipe
            os.write(write_fd, b"\0")
            os.close(write_fd)
            self._watcher.join()
            os.close(read_fd)
