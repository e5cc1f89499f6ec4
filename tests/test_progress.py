"""official_bert.progress: when a long stage says how far it is, and the
words, on a fake clock against answers worked out by hand."""

import doctest

import pytest

from official_bert import progress as progress_module
from official_bert.progress import Progress, duration


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


@pytest.mark.parametrize("seconds, text", [
    (0, "0 s"), (0.4, "0 s"), (44.6, "45 s"), (119, "119 s"), (120, "2 min"),
    (200, "3 min 20 s"), (7199, "119 min 59 s"), (7200, "2 h 00 min"), (9000, "2 h 30 min"),
    (-3, "0 s")])
def test_duration(seconds, text):
    assert duration(seconds) == text


def test_the_estimate_leaves_out_the_first_batch():
    """A first batch of 30 s (tracing, compiling), then 2 s a batch of 100: the
    time left is the batches left at 2 s, not at the mean of 7 s."""
    clock = FakeClock()
    progress = Progress(total=1000, unit="examples", clock=clock)
    clock.advance(30)
    progress.update(100)
    assert progress.seconds_left() is None  # one point: no rate yet
    assert progress.line() == "100 / 1000 examples, 30 s elapsed"
    for done in range(200, 600, 100):
        clock.advance(2)
        progress.update(done)
    assert progress.rate() == pytest.approx(50.0)  # 400 examples in 8 s
    assert progress.seconds_left() == pytest.approx(10.0)  # 500 left at 50/s
    assert progress.line() == "500 / 1000 examples, 38 s elapsed, about 10 s left"
    assert progress.timing() == "38 s elapsed, about 10 s left"


def _due_at_one_per_second(total, unit):
    """The counts at which a line is due when one unit is done each second."""
    clock = FakeClock()
    progress = Progress(total=total, unit=unit, clock=clock)
    due = []
    for done in range(1, total + 1):
        clock.advance(1)
        if progress.update(done):
            due.append(done)
    return due


def test_lines_come_a_tenth_of_the_stage_apart_within_bounds():
    """A 100 s stage: a line every 10 s. A 20 min one: every 2 min (the tenth
    of it, at most 2 min). The first after 10 s whatever the length."""
    assert _due_at_one_per_second(100, "batches") == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]

    due = _due_at_one_per_second(1200, "steps")
    # 1,200 s expected: a line every 120 s once the rate is known (the first at 10 s).
    assert due == [10, *range(130, 1201, 120)]


def test_an_unknown_total_says_elapsed_and_rate():
    clock = FakeClock()
    progress = Progress(total=None, unit="documents", clock=clock)
    clock.advance(5)
    assert not progress.update(10)
    clock.advance(5)
    assert progress.update(60)  # 10 s: due; 50 documents in the last 5 s
    assert progress.seconds_left() is None
    assert progress.line() == "60 documents, 10 s elapsed, 10 documents/s"
    assert progress.interval() == 10.0  # an unknown length: the shortest interval, growing
    clock.advance(590)
    progress.update(3000)
    assert progress.interval() == 60.0  # a tenth of the 600 s so far


def test_a_limit_caps_the_estimate():
    """A time budget ends the stage first: the time left is the budget's."""
    clock = FakeClock()
    progress = Progress(total=100, unit="steps", clock=clock)
    clock.advance(10)
    progress.update(1)
    clock.advance(10)
    progress.update(11)  # 1 step/s: 89 s left by the steps
    assert progress.seconds_left() == pytest.approx(89.0)
    assert progress.seconds_left(limit=30.0) == pytest.approx(30.0)
    assert progress.seconds_left(limit=500.0) == pytest.approx(89.0)
    assert progress.timing(limit=30.0) == "20 s elapsed, about 30 s left"
    fresh = Progress(total=None, clock=clock)
    assert fresh.timing(limit=-5.0) == "0 s elapsed, about 0 s left"


def test_done_is_nothing_left_and_a_resumed_stage_counts_from_where_it_was():
    clock = FakeClock()
    progress = Progress(total=50, unit="steps", done=40, clock=clock)
    clock.advance(4)
    progress.update(42)
    clock.advance(4)
    progress.update(46)  # 4 steps in 4 s: 4 steps left, 4 s
    assert progress.line() == "46 / 50 steps, 8 s elapsed, about 4 s left"
    clock.advance(4)
    progress.update(50)
    assert progress.seconds_left() == 0.0


def test_min_interval_zero_logs_every_update():
    clock = FakeClock()
    progress = Progress(total=3, clock=clock, min_interval=0, max_interval=0)
    assert [progress.update(i) for i in (1, 2, 3)] == [True, True, True]


def test_the_module_example():
    assert doctest.testmod(progress_module).failed == 0
