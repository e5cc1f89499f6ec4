"""What a run trains and checkpoints, built first, then restored, then saved.

The `Trainer` runs the loop; this module holds the state the loop updates and
its life around the loop, each step on its own:

* `TrainState.build`: in the strategy's scope, the task's model, the optimizer
  (None: a trainer that only evaluates or predicts; wrapped for float16's loss
  scaling) built on the model's variables, and the global step; and the
  `tf.train.Checkpoint` of them all, with the encoder (for the readers of
  encoders), the dropout RNG state (which the model alone does not checkpoint)
  and the time budget's clock;
* `TrainState.restore`: resumes from the newest complete checkpoint of
  --output_dir, or, without one, starts the model as the run says
  (`init_fn`: --init_checkpoint);
* `CheckpointSaves`: where this worker writes its checkpoints, through
  `run_directory.checkpoints.RunCheckpoints` (which rotates only those the run
  directory's record says its runs wrote); on several workers every one takes
  part in a save (a collective), and only the chief's files are kept.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Callable

import keras
import tensorflow as tf
from absl import logging

from official_bert import checkpoints, io
from official_bert.run_directory import RunDirectory
from official_bert.run_directory.checkpoints import RunCheckpoints
from official_bert.run_directory.latest import latest_checkpoint
from official_bert.training.budget import TimeBudget


def seed_generator_states(model: keras.Model) -> list:
    """The dropout RNG state variables, which `model` alone does not checkpoint."""
    return [v for v in model.variables if "seed_generator_state" in v.path]


@dataclasses.dataclass
class TrainState:
    """The model, the optimizer and the global step of a run, and the
    checkpoint that holds them (with the budget's clock, when there is one)."""

    model: keras.Model
    optimizer: keras.optimizers.Optimizer | None
    global_step: tf.Variable
    checkpoint: tf.train.Checkpoint

    @classmethod
    def build(cls, task, strategy: tf.distribute.Strategy,
              optimizer_fn: Callable[[], keras.optimizers.Optimizer] | None = None,
              loss_scale: bool = False, budget: TimeBudget | None = None) -> TrainState:
        """Builds the state in `strategy`'s scope; nothing is read from disk."""
        with strategy.scope():
            model = task.build_model()
            optimizer = optimizer_fn() if optimizer_fn else None
            if optimizer is not None and loss_scale:
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            if optimizer is not None:
                optimizer.build(model.trainable_variables)
            global_step = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="global_step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
        checkpoint = tf.train.Checkpoint(**_tracked(model, optimizer, global_step, budget))
        return cls(model, optimizer, global_step, checkpoint)

    @property
    def step(self) -> int:
        return int(self.global_step.numpy())

    def restore(self, output_dir: str,
                init_fn: Callable[[keras.Model], None] | None = None) -> str | None:
        """Resumes from the newest checkpoint of `output_dir` whose files are
        there (after a damaged one was deleted, the one before it) and returns
        it; without one, `init_fn(model)` (e.g. --init_checkpoint) and None."""
        latest = latest_checkpoint(output_dir)
        if not latest:
            if init_fn is not None:
                init_fn(self.model)
            return None
        try:
            self.checkpoint.restore(latest).expect_partial()
        except (tf.errors.OpError, ValueError, IndexError) as e:
            # A truncated .index / .data file: name it, and the one to resume from.
            damaged = checkpoints.damaged_checkpoint_error(latest, e, resuming=True)
            if damaged is None:
                raise
            raise damaged from None
        if self.optimizer is None:  # (a training run says "Resumed from" when it does)
            logging.info("Using %s (step %d): its weights, untrained further", latest, self.step)
        return latest


def _tracked(model, optimizer, global_step, budget) -> dict:
    """What a checkpoint holds: the model (and its encoder, for the readers of
    encoders), the step, the dropout RNG state, the optimizer's slots and the
    time budget's clock."""
    tracked = dict(model=model, global_step=global_step, rng=seed_generator_states(model))
    if hasattr(model, "encoder"):
        tracked["encoder"] = model.encoder
    if optimizer is not None:
        tracked["optimizer"] = optimizer
    if budget is not None:
        tracked["train_seconds"] = budget.elapsed
    return tracked


class CheckpointSaves:
    """Where this worker writes its checkpoints (`manager`), and the run
    directory whose record names them (the chief's alone).

    Args:
        checkpoint: the `TrainState`'s checkpoint.
        output_dir: --output_dir.
        keep_checkpoint_max: checkpoints kept on disk.
        run_directory: the run's `RunDirectory` (over `output_dir`), or None
            (a test's or a benchmark's trainer: nothing recorded or rotated).
        is_chief: whether this worker's files are the run's.
    """

    def __init__(self, checkpoint: tf.train.Checkpoint, output_dir: str,
                 keep_checkpoint_max: int, run_directory: RunDirectory | None,
                 is_chief: bool):
        if run_directory is not None and not io.same_path(run_directory.path, output_dir):
            raise ValueError(f"the run directory {run_directory.path} is not --output_dir "
                             f"{output_dir}")
        self.run_directory = run_directory
        self.is_chief = is_chief
        self._write_dir = output_dir if is_chief else _scratch_dir()
        self.manager = RunCheckpoints(checkpoint, self._write_dir, keep_checkpoint_max,
                                      run_directory if is_chief else None)

    @property
    def last_saved(self) -> str | None:
        """The run's latest checkpoint saved by this session (the chief's; None elsewhere)."""
        return self.manager.last_saved if self.is_chief else None

    def save(self, step: int) -> str:
        # (A failed write removes TensorFlow's staging of it: `RunCheckpoints.save`.)
        path = self.manager.save(step)
        if not self.is_chief:
            shutil.rmtree(self._write_dir, ignore_errors=True)
            os.makedirs(self._write_dir, exist_ok=True)
        return path


def _scratch_dir() -> str:
    """A worker's (not the chief's) checkpoint directory. Every worker must take
    part in saving (it is a collective), but only the chief's files are kept.
    The others write to a private scratch directory on local disk, whatever
    file system --output_dir is on: it must not be shared with the chief (their
    files would clash), it is emptied after every save and deleted with the
    machine, so neither an atomic write nor a gs:// path is wanted here."""
    return tempfile.mkdtemp(prefix="worker-ckpt-")
