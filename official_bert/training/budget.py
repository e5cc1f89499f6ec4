"""A budget of training time (--max_train_minutes): the clock that counts it.

Cramming (Geiping & Goldstein 2022) and 24hBERT (Izsak et al. 2021) train to
a wall-clock budget, with a learning rate that warms up over the first part of
it and reaches 0 when it is spent. Here:

* the clock counts training steps only. It runs inside the training
  `tf.function` (`Trainer.time_fn`, `tf.timestamp`): read when a host call of
  steps starts and after each step, once its loss is on the host (on a GPU:
  once the step has run).
  Start-up (reading inputs, building and restoring the model, tracing and
  optimizing the training graph), logging, checkpoint writes and evaluation
  are not counted; XLA's compilation at the first step is;
* the learning rate (`optimization.BudgetLinearDecay`) reads the clock at every
  step;
* the step that crosses the budget is the last one; the `Trainer` saves a
  checkpoint there;
* the clock is a variable saved in every checkpoint, so that a run stopped
  (SIGTERM, SIGKILL, a crash) and run again continues from the checkpoint's
  time: it stops at the same total training time, within a step, with the same
  learning-rate curve;
* on several workers, whose clocks differ, each host call of steps is timed
  by the host (the first one's graph set-up included), and the workers agree
  on their mean (a collective), so that they apply one learning rate (constant
  within a call) and stop at the same step: at the end of a host call of
  --iterations_per_loop steps, not within it.
"""

from __future__ import annotations

import tensorflow as tf
from absl import logging

from official_bert.configs import check_train_minutes
from official_bert.errors import UserError


class TimeBudget:
    """A budget of training seconds and the clock that counts them.

    `elapsed` (training seconds so far) is a variable: the learning-rate
    schedule reads it inside the training step, and the run's checkpoints save
    it. Create the budget under the distribution strategy's scope (as the
    optimizer): the variable is then mirrored, one value read by every
    replica. It is float32, which TPUs take (a day is 86,400 s to 8 ms);
    `seconds_spent` is its value as the host last read it.

    Args:
        seconds: float. The budget; training stops at the step that crosses it.
        warmup_fraction: float in [0, 1]. The part of the budget the learning
            rate warms up over.

    Example:
    >>> budget = TimeBudget(seconds=600, warmup_fraction=0.1)
    >>> budget.advance(150.0)
    >>> round(float(budget.fraction()), 4), budget.spent
    (0.25, False)
    >>> budget.progress()
    'trained 2.50 of 10 min, 7.50 min left'
    """

    def __init__(self, seconds: float, warmup_fraction: float):
        check_train_minutes(seconds / 60)
        if not 0 <= warmup_fraction <= 1:
            raise UserError(f"the warm-up must be a fraction of the budget in [0, 1], got "
                            f"{warmup_fraction}")
        self.seconds = float(seconds)
        self.warmup_fraction = float(warmup_fraction)
        self.elapsed = tf.Variable(0.0, dtype=tf.float32, trainable=False, name="train_seconds",
                                   aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.seconds_spent = 0.0

    @classmethod
    def of_run(cls, strategy: tf.distribute.Strategy, minutes: float, num_train_steps: int,
               num_warmup_steps: int) -> TimeBudget:
        """--max_train_minutes' budget, under `strategy`'s scope. The warm-up
        is the steps' fraction of the run (--num_warmup_steps /
        --num_train_steps, which fine-tuning derives from --warmup_proportion);
        the steps are an upper bound."""
        warmup = num_warmup_steps / max(num_train_steps, 1)
        logging.info("Time budget %g min: the learning rate warms up over the first %.3g min "
                     "(%.3g%%, the steps' warm-up fraction) and reaches 0 at %g min; training "
                     "stops there, or at step %d if it comes first", minutes, minutes * warmup,
                     100 * warmup, minutes, num_train_steps)
        with strategy.scope():  # a mirrored clock: one value for every replica
            return cls(minutes * 60, warmup)

    def fraction(self):
        """The part of the budget spent (a float32 tensor; above 1 past it)."""
        return tf.cast(self.elapsed, tf.float32) / self.seconds

    @property
    def spent(self) -> bool:
        """Whether the clock, as the host last read it, has passed the budget."""
        return self.seconds_spent >= self.seconds

    def progress(self) -> str:
        """E.g. 'trained 2.50 of 10 min, 7.50 min left' (the progress line's end)."""
        spent, total = self.seconds_spent / 60, self.seconds / 60
        return f"trained {spent:.2f} of {total:.4g} min, {max(total - spent, 0.0):.2f} min left"

    def advance(self, seconds: float) -> None:
        """Sets the clock to `seconds` of training."""
        self.seconds_spent = float(seconds)
        self.elapsed.assign(seconds)

    def advance_in_graph(self, base, started, time_fn, after) -> None:
        """Inside a `tf.function` call that began at `time_fn()` `started` with
        the clock at `base`: sets the clock to `time_fn()` once the tensor
        `after` (the step's loss) is on the host: on a GPU, once the step has
        run, not when its kernels were queued."""
        with tf.device("CPU:0"):
            done = tf.identity(after)
        with tf.control_dependencies([done]):
            now = time_fn()
        self.elapsed.assign(base + tf.cast(now - started, tf.float32))

    def spent_in_graph(self):
        """Whether the budget is spent (a bool tensor, inside a `tf.function`)."""
        return self.elapsed >= self.seconds

    def read(self, strategy: tf.distribute.Strategy, call_seconds: float | None = None) -> None:
        """After a host call of steps: takes the clock the call advanced, or
        adds `call_seconds` (the call timed by the host, on several workers)
        and agrees on the workers' mean (a collective)."""
        if call_seconds is None:
            self.seconds_spent = float(self.elapsed.numpy())
            return
        seconds = self.seconds_spent + call_seconds
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            local = strategy.run(lambda: tf.constant(seconds, tf.float32))
            seconds = float(strategy.reduce(tf.distribute.ReduceOp.MEAN, local, axis=None))
        self.advance(seconds)

    def resume(self, step: int) -> bool:
        """Takes the clock from `elapsed` (as a checkpoint restored it) before
        training resumes at `step`; whether the budget is spent already."""
        self.seconds_spent = float(self.elapsed.numpy())
        if self.spent:
            logging.info("Already %s at step %d: nothing to train.", self.progress(), step)
        elif self.seconds_spent:
            logging.info("The budget's clock resumes at step %d: %s", step, self.progress())
        return self.spent

    def log_end(self, step: int, num_train_steps: int, learning_rate: float) -> None:
        """Says how the run ended: at the budget, or at `num_train_steps`
        before it (the learning rate not yet at 0)."""
        if self.spent:
            logging.info("Budget spent at step %d: %s", step, self.progress())
        elif step >= num_train_steps:
            logging.warning("Reached --num_train_steps=%d before the budget (%s): the learning "
                            "rate stopped at %.3g, not 0 (raise --num_train_steps to train to "
                            "the budget)", step, self.progress(), learning_rate)
