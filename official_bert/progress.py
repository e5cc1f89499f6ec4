"""Progress of a long stage: when to say how far it is, and how to say it.

Every stage that can run longer than a few seconds (training, evaluation,
prediction, export, data generation) logs now and then how far it is, the
time elapsed and, when its size is known, an estimate of the time left.
`Progress` decides when (the first line after 10 s, then a tenth of the
stage's expected length apart, 10 s at least and 2 min at most: a one-minute
prediction says so every 10 s, an hour of data generation every 2 min) and
words the line; the caller logs it. The rate is measured from the first
update on, so the first batch or step, which traces and compiles, does not
distort the estimate.

The bottom layer: imports nothing of the project, and no TensorFlow.

Example (a fake clock, 2 s per batch of 32 after a first batch of 10 s):
>>> clock = iter([0.0, 10.0, 12.0, 14.0]).__next__
>>> progress = Progress(total=320, unit="examples", clock=clock)
>>> progress.update(32), progress.update(64), progress.update(96)
(True, False, False)
>>> progress.line()
'96 / 320 examples, 14 s elapsed, about 14 s left'
"""

from __future__ import annotations

import time
from typing import Callable

MIN_INTERVAL = 10.0   # seconds between two lines, at least
MAX_INTERVAL = 120.0  # and at most


def duration(seconds: float) -> str:
    """A span of time as a person reads it: '45 s', '3 min 20 s', '2 h 05 min'."""
    seconds = max(0, int(round(seconds)))
    if seconds < 120:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    if minutes < 120:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    """How far a stage of `total` units (None: not known) is.

    Args:
        total: int or None. The units of the whole stage (examples, batches,
            steps, documents).
        unit: str. Their name in the line ("examples").
        done: int. Units done before this stage started (a resumed run).
        clock: () -> seconds. `time.monotonic`; tests pass a fake one.
        min_interval, max_interval: float. The bounds of the time between
            two lines (`update` says when one is due; 0: every update).
    """

    def __init__(self, total: int | None = None, unit: str = "examples", done: int = 0,
                 clock: Callable[[], float] = time.monotonic,
                 min_interval: float = MIN_INTERVAL, max_interval: float = MAX_INTERVAL):
        self.total, self.unit = total, unit
        self.clock = clock
        self.min_interval, self.max_interval = min_interval, max(min_interval, max_interval)
        self.start = self._last_line = self._now = clock()
        self.done = done
        self._base = None  # (time, done) at the first update: the rate is measured from there
        self._lines = 0

    @property
    def elapsed(self) -> float:
        """Seconds from the start to the latest update."""
        return self._now - self.start

    def update(self, done: int) -> bool:
        """Records that `done` units (a count, not an increment) are done;
        returns whether a progress line is due now (and, if so, counts it as
        written)."""
        self._now = self.clock()
        self.done = done
        if self._base is None:
            self._base = (self._now, done)
        if self._now - self._last_line < self.interval():
            return False
        self._last_line = self._now
        self._lines += 1
        return True

    def interval(self) -> float:
        """The time between two lines: the first after `min_interval`, then a
        tenth of the stage's expected length (elapsed + left; elapsed alone
        while nothing is estimated), within [min_interval, max_interval]."""
        if not self._lines:
            return self.min_interval
        left = self.seconds_left()
        expected = self.elapsed + (left or 0.0)
        return min(max(expected / 10, self.min_interval), self.max_interval)

    def rate(self) -> float | None:
        """Units per second since the first update (None before a second one)."""
        if self._base is None:
            return None
        seconds, units = self._now - self._base[0], self.done - self._base[1]
        if seconds <= 0 or units <= 0:
            return None
        return units / seconds

    def seconds_left(self, limit: float | None = None) -> float | None:
        """The estimated seconds left (the units left at the measured rate), at
        most `limit` (another bound, e.g. a time budget's); None when neither
        is known."""
        left = None
        if self.total is not None:
            if self.done >= self.total:
                left = 0.0
            elif self.rate():
                left = (self.total - self.done) / self.rate()
        if limit is not None:
            left = max(limit, 0.0) if left is None else min(left, max(limit, 0.0))
        return left

    def timing(self, limit: float | None = None) -> str:
        """'14 s elapsed, about 14 s left' ('14 s elapsed' while nothing is
        estimated)."""
        text = f"{duration(self.elapsed)} elapsed"
        left = self.seconds_left(limit)
        return text if left is None else f"{text}, about {duration(left)} left"

    def line(self) -> str:
        """'96 / 320 examples, 14 s elapsed, about 14 s left'; of an unknown
        total, '96 examples, 14 s elapsed, 6.9 examples/s'."""
        if self.total is not None:
            return f"{self.done} / {self.total} {self.unit}, {self.timing()}"
        rate = self.rate()
        per_second = f", {rate:.3g} {self.unit}/s" if rate else ""
        return f"{self.done} {self.unit}, {self.timing()}{per_second}"
