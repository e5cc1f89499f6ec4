"""The one training / evaluation / prediction loop every runner uses.

A runner supplies a `Task` (how to build the model and compute its loss), a
`dataset_fn` (a `tf.data` pipeline per input pipeline), and a `TrainingConfig`;
`Trainer` does the rest under any `tf.distribute` strategy:

* exact global-batch losses and gradient accumulation: one update over 2
  replicas, or over 4 accumulated micro-batches, is the same update as over
  one device with the whole batch (the replica's update: `train_step.ReplicaStep`);
* `steps_per_loop` updates per `tf.function` call, so the host does not wait
  on every step;
* checkpoints (model, encoder, optimizer slots, global step, dropout RNG
  state: the `train_state.TrainState`, built, then restored, apart from the
  loop) every `save_checkpoints_steps` and at the end, through
  `run_directory.checkpoints.RunCheckpoints`, which rotates only the checkpoints the run
  directory's record says its runs wrote; a restart resumes from the latest one
  and re-creates the input pipeline at the same position, so a resumed run
  equals an uninterrupted one. A checkpoint's files are written before the
  `checkpoint` index file names it (atomically), so a run killed at any moment
  restarts from the last complete checkpoint;
* a progress line every `log_steps` (loss, metrics, learning rate, examples/s,
  tokens/s, then the time elapsed and an estimate of the time left, measured
  after the first step, which compiles: `progress.Progress`) and the same
  values as TensorBoard summaries in `output_dir/train`; evaluation and
  prediction log how far they are every 10 s or more (`progress`);
* a stop signal (SIGINT, or SIGTERM: a preempted cloud VM or TPU host, which
  gets ~30 s of notice) ends the `tf.function` call at the next step boundary,
  saves a checkpoint and raises `errors.Interrupted` / `errors.Preempted`
  (`TerminationSignal`, `official_bert.interruption`);
* with a time budget (`training.budget`, --max_train_minutes), a clock of the
  training steps inside the `tf.function` (`time_fn`), checkpointed: the step
  that crosses the budget is the last, and is saved.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time
from typing import Callable, Protocol

import numpy as np
import keras
import tensorflow as tf
from absl import logging

from official_bert import interruption, io
from official_bert.configs import DistributionSettings, RunConfig, TrainingSettings
from official_bert.errors import BadFileError, UserError
from official_bert.progress import Progress
from official_bert.settings import default_of
from official_bert.run_directory import TRAIN_SUMMARIES, RunDirectory
from official_bert.training import distribution
from official_bert.training.budget import TimeBudget
from official_bert.training.termination import TerminationSignal
from official_bert.training.train_state import CheckpointSaves, TrainState
from official_bert.training.train_step import ReplicaStep

# What a task's loss step returns besides the loss: metric name → (numerator,
# denominator) sums, reported as numerator / denominator over a window.
Metrics = dict


class Task(Protocol):
    """What a runner plugs into the `Trainer`."""

    def build_model(self) -> keras.Model:
        """The model (with an `encoder` attribute); called in strategy scope."""

    def loss_normalizers(self, features) -> dict:
        """Local sums that normalize the loss, e.g. {"examples": batch size}."""

    def loss_and_metrics(self, model, features, normalizers, training):
        """(loss, metrics) for a (micro-)batch.

        `normalizers` are the task's `loss_normalizers` summed over the whole
        global batch (all replicas, all accumulated micro-batches): dividing by
        them makes the sum of the returned losses the global-batch loss.
        """


@dataclasses.dataclass
class TrainingConfig:
    """How long to train, and how often to log and save.

    The fields that are flags default to their flags' defaults
    (`configs.TrainingSettings`, `DistributionSettings`); `training_config`
    takes them from a run's `RunConfig`.

    Args:
        output_dir: str. Checkpoints, summaries and results go here.
        num_train_steps: int. Optimizer updates in the whole run.
        save_checkpoints_steps: int. Updates between checkpoints.
        keep_checkpoint_max: int. Checkpoints kept on disk.
        log_steps: int. Updates between progress lines and summaries.
        steps_per_loop: int. Updates per host call (None: --iterations_per_loop,
            at most `log_steps`).
        gradient_accumulation_steps: int. Micro-batches per update.
        jit_compile: bool. Compile the forward and backward pass with XLA.
        tokens_per_example: int. For the tokens/s figure (the sequence length).
        clip_norm: float or None. Clip the global-batch gradient to this
            global norm (1.0 in BERT).
    """

    output_dir: str
    num_train_steps: int
    save_checkpoints_steps: int = default_of(TrainingSettings, "save_checkpoints_steps")
    keep_checkpoint_max: int = default_of(TrainingSettings, "keep_checkpoint_max")
    log_steps: int = default_of(TrainingSettings, "log_steps")
    steps_per_loop: int | None = None
    gradient_accumulation_steps: int = default_of(TrainingSettings, "gradient_accumulation_steps")
    jit_compile: bool = default_of(DistributionSettings, "jit_compile")
    tokens_per_example: int = 0
    clip_norm: float | None = 1.0

    def __post_init__(self):
        if self.steps_per_loop is None:
            self.steps_per_loop = min(
                default_of(TrainingSettings, "iterations_per_loop"), self.log_steps)
        for key in ("num_train_steps", "save_checkpoints_steps", "log_steps",
                    "steps_per_loop", "gradient_accumulation_steps",
                    "keep_checkpoint_max"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be positive, got {getattr(self, key)}")


# The fields a run's `TrainingConfig` takes from its `RunConfig` as they are (the
# run derives its steps, and the task its XLA choice).
_RUN_SETTINGS = sorted(({f.name for f in dataclasses.fields(TrainingConfig)}
                        & {f.name for f in dataclasses.fields(RunConfig)})
                       - {"num_train_steps", "jit_compile"})


def training_config(run_config: RunConfig, num_train_steps: int,
                    jit_compile: bool) -> TrainingConfig:
    """The `TrainingConfig` of a run: the settings it shares with `run_config`,
    --iterations_per_loop capped at --log_steps, and what the run derives."""
    return TrainingConfig(
        num_train_steps=num_train_steps, jit_compile=jit_compile,
        steps_per_loop=min(run_config.iterations_per_loop, run_config.log_steps),
        tokens_per_example=run_config.max_seq_length,
        **{name: getattr(run_config, name) for name in _RUN_SETTINGS})


class Trainer:
    """Trains, evaluates and predicts a `Task` under a distribution strategy.

    Args:
        task: the `Task`.
        strategy: a `tf.distribute.Strategy`.
        config: a `TrainingConfig`.
        optimizer_fn: builds the optimizer (called in the strategy's scope).
        init_fn: called with the model when the run does not resume from a
            checkpoint in `output_dir` (e.g. to load `--init_checkpoint`).
        loss_scale: wrap the optimizer in a `LossScaleOptimizer` (float16).
        time_budget: a `TimeBudget` (the optimizer's schedule reads it): training
            stops when it is spent, at `num_train_steps` at the latest.
        run_directory: the run's `RunDirectory` (over `output_dir`), handed by
            the run flow: its record lists the checkpoints the run wrote, the
            only ones rotation deletes. None (a test's or a benchmark's trainer):
            checkpoints are written and resumed from, but none is recorded or
            rotated.
    """

    # The time budget's clock, read inside the training tf.function: seconds, a
    # float64 scalar tensor. Tests replace it with a fake one, not to sleep.
    time_fn = staticmethod(tf.timestamp)
    # The progress lines' clock (seconds), and how long one host call of several
    # updates should take (`_steps_per_call`). Tests replace the clock too.
    clock = staticmethod(time.monotonic)
    CALL_SECONDS = 5.0

    def __init__(
        self,
        task: Task,
        strategy: tf.distribute.Strategy,
        config: TrainingConfig,
        optimizer_fn: Callable[[], keras.optimizers.Optimizer] | None = None,
        init_fn: Callable[[keras.Model], None] | None = None,
        loss_scale: bool = False,
        time_budget: TimeBudget | None = None,
        run_directory: RunDirectory | None = None,
    ):
        self.task = task
        self.budget = time_budget
        self.strategy = strategy
        self.config = config
        self.is_chief = distribution.is_chief(strategy)
        self._host_only = _on_the_host_alone(strategy)
        self.state = TrainState.build(task, strategy, optimizer_fn, loss_scale, time_budget)
        self._stop_in_loop, self._stop = self._stop_flag()
        self._saves = CheckpointSaves(self.checkpoint, config.output_dir,
                                      config.keep_checkpoint_max, run_directory, self.is_chief)
        self.resumed_from = self.state.restore(config.output_dir, init_fn)
        self._replica_step = ReplicaStep(task, self.model, self.optimizer, config)
        self._train_loop = None
        self._progress = None  # the training's (`_train`)

    # The state's parts, as the runs, the tasks and the tests read them.
    model = property(lambda self: self.state.model)
    optimizer = property(lambda self: self.state.optimizer)
    global_step = property(lambda self: self.state.global_step)
    checkpoint = property(lambda self: self.state.checkpoint)
    run_directory = property(lambda self: self._saves.run_directory)

    def _stop_flag(self):
        """(whether the train loop reads the flag, the flag). Read by the train
        loop before every update after the first: SIGTERM sets it (from a
        thread: see TerminationSignal) so that a host call of `steps_per_loop`
        updates ends at the next step. A plain host variable, outside the
        strategy's scope; not checkpointed. Several workers must stop at the
        same step, which only a collective after the call can agree on, so
        there the loop does not read it."""
        in_loop = not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        with tf.device("CPU:0"):
            return in_loop, tf.Variable(False, trainable=False, name="stop_requested")

    def save(self) -> str:
        """Saves a checkpoint of the current step (every worker takes part)."""
        return self._saves.save(int(self.global_step.numpy()))

    # --- the host call of several updates -------------------------------------

    def _build_train_loop(self):
        strategy = self.strategy

        # The budget's clock runs in the call, read after every step, and a spent
        # budget stops the call before the next step (as SIGTERM's flag), except on
        # several workers: their clocks differ, and their learning rates must not
        # (`_call_train_loop` times the call instead).
        budget = self.budget if self._stop_in_loop else None

        def reduce(x):
            return strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None)

        @tf.function
        def train_loop(iterator, num_steps):
            if budget is not None:
                base, started = budget.elapsed.read_value(), self.time_fn()
            loss, metrics = strategy.run(self._replica_step, args=(next(iterator),))
            loss = reduce(loss)
            metrics = tf.nest.map_structure(reduce, metrics)
            self.global_step.assign_add(1)
            if budget is not None:
                budget.advance_in_graph(base, started, self.time_fn, after=loss)
            for _ in tf.range(num_steps - 1):
                if self._stop_in_loop and self._stop:
                    break
                if budget is not None and budget.spent_in_graph():
                    break
                l, m = strategy.run(self._replica_step, args=(next(iterator),))
                loss += reduce(l)
                metrics = tf.nest.map_structure(lambda a, b: a + reduce(b), metrics, m)
                self.global_step.assign_add(1)
                if budget is not None:
                    budget.advance_in_graph(base, started, self.time_fn, after=loss)
            return loss, metrics

        return train_loop

    # --- public API -----------------------------------------------------------

    def _distribute(self, dataset_fn, skip_batches=0, batch_micro=1):
        def per_pipeline(context):
            ds = dataset_fn(context)
            if batch_micro > 1:
                ds = ds.batch(batch_micro, drop_remainder=True)
            if skip_batches:
                ds = ds.skip(skip_batches)
            return ds.prefetch(tf.data.AUTOTUNE)

        if self._host_only:
            # One replica on the host's CPU: the dataset itself. The strategy's
            # input (a multi-device iterator) would copy each batch to the device
            # it is already on, and deleting its iterator waits out tf.data's
            # autotuning period (up to a minute, TF 2.21): at the end of every
            # training run, evaluation and prediction.
            return per_pipeline(tf.distribute.InputContext())
        return self.strategy.distribute_datasets_from_function(per_pipeline)

    def train_iterator(self, dataset_fn):
        """A distributed iterator over `dataset_fn` for `run_train_steps`."""
        return iter(self._distribute(
            dataset_fn, batch_micro=self.config.gradient_accumulation_steps))

    def run_train_steps(self, iterator, num_steps: int) -> float:
        """Runs `num_steps` updates in one `tf.function` call, with no logging,
        summaries or checkpoints (benchmarks; `train` is the loop for runs).
        Returns the summed loss (a host sync, so the steps are finished)."""
        if self._train_loop is None:
            self._train_loop = self._build_train_loop()
        loss, _ = self._train_loop(iterator, tf.constant(num_steps))
        return float(loss)

    def _data_loss(self, error):
        """The error to raise for a truncated or corrupt input record: the
        task's `find_bad_input()` names the file (a `BadFileError`); this adds
        what the run kept. Without such a method, `error` itself."""
        find = getattr(self.task, "find_bad_input", None)
        bad = find() if find is not None else None
        if bad is None:
            return error
        latest = self._saves.last_saved
        fix = ("fix or replace the file (or leave it out) and run the same command again"
               if latest is None else
               f"the run's checkpoints up to {os.path.basename(latest)} are kept in "
               f"{self.config.output_dir}: fix or replace the file (or leave it out) and run "
               "the same command to resume")
        return BadFileError(bad.path, bad.problem, record=bad.record, fix=fix)

    def _lost_input(self, error) -> str | None:
        """The input that vanished (or became unreadable) under `error`: the task's
        `find_lost_input()`, else the path in TensorFlow's message; None when no input
        is gone (then `error` is something else). A text corpus is read by a Python
        generator, whose FileNotFoundError reaches here as another TensorFlow error."""
        find = getattr(self.task, "find_lost_input", None)
        lost = find() if find is not None else None
        if lost is None and isinstance(error, (tf.errors.NotFoundError,
                                               tf.errors.PermissionDeniedError)):
            lost = _path_in_message(str(error))
        return lost

    def _input_lost(self, error):
        """The error to raise when an input vanished (or became unreadable)
        while training read it: the steps trained since the last checkpoint
        are saved first (the failed call's finished steps are in the
        variables), and the line names the input (the task's
        `find_lost_input()`, else the path in TensorFlow's message) and that
        checkpoint. Without an input to name, `error` itself."""
        lost = self._lost_input(error)
        if lost is None:
            return error
        what = ("no such file or directory" if not io.exists(lost) else "permission denied")
        try:
            saved = self.save()
        except Exception as e:  # noqa: BLE001 - the input's line matters more; say both
            logging.warning("Could not save a checkpoint after the input was lost: %s",
                            str(e).strip().splitlines()[0][:300])
            saved = self._saves.last_saved
        step = int(self.global_step.numpy())
        kept = (f"the run saved {os.path.basename(saved)} (step {step}) in "
                f"{self.config.output_dir}" if saved else "no checkpoint was saved")
        return BadFileError(lost, f"went away while training read it ({what}) at step {step}",
                            fix=f"{kept}: put the file back (or leave it out) and run the same "
                                "command to resume")

    def current_learning_rate(self):
        optimizer = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        return float(optimizer.learning_rate)

    def train(self, dataset_fn, global_batch_size: int, hooks: list | None = None,
              evaluate_every: int = 0, on_evaluate: Callable[[int], bool] | None = None) -> dict:
        """Trains until `num_train_steps`; returns the last window's metrics.

        Args:
            dataset_fn: `tf.distribute.InputContext` → dataset of per-replica
                micro-batches (repeated; drop_remainder batching).
            global_batch_size: examples per update (for examples/s).
            hooks: callables `(step, metrics_dict)` run after each log line.
            evaluate_every: call `on_evaluate(step)` every this many steps and
                at the last one (0: never); it returns True to stop training
                there (early stopping).
        """
        self._stop.assign(False)
        with TerminationSignal(self._stop if self._stop_in_loop else None) as termination:
            return self._train(dataset_fn, global_batch_size, hooks, termination,
                               evaluate_every, on_evaluate)

    def _train(self, dataset_fn, global_batch_size, hooks, termination, evaluate_every,
               on_evaluate) -> dict:
        config = self.config
        start_step = int(self.global_step.numpy())
        if self.resumed_from is not None and start_step:
            logging.info("Resumed from %s at step %d", self.resumed_from, start_step)
        if self._nothing_to_train(start_step):
            return {}
        iterator = iter(self._distribute(
            dataset_fn, skip_batches=start_step,
            batch_micro=config.gradient_accumulation_steps))
        if self._train_loop is None:
            self._train_loop = self._build_train_loop()
        summaries = io.join(config.output_dir, TRAIN_SUMMARIES)  # (with a run directory or not)
        writer = (tf.summary.create_file_writer(summaries)
                  if self.is_chief else tf.summary.create_noop_writer())
        results = {}
        step = start_step
        window_start, window_steps = self.clock(), 0
        window_loss, window_metrics = 0.0, None
        # The time left is measured from the end of the first host call, which
        # holds one step only: tracing and compiling are not in the rate.
        self._progress = Progress(config.num_train_steps, "steps", done=start_step,
                                  clock=self.clock)
        logging.info("Training from step %d of %d (the first step traces and compiles "
                     "the model)", start_step, config.num_train_steps)
        while step < config.num_train_steps:
            boundary = min(
                config.num_train_steps,
                (step // config.log_steps + 1) * config.log_steps,
                (step // config.save_checkpoints_steps + 1) * config.save_checkpoints_steps,
                step + self._steps_per_call(step, start_step),
                (step // evaluate_every + 1) * evaluate_every if evaluate_every else step + 10**9,
            )
            try:
                loss, metrics = self._call_train_loop(iterator, boundary - step)
            except tf.errors.DataLossError as e:
                raise self._data_loss(e) from None
            except tf.errors.OpError as e:  # (a text corpus read in Python: another kind)
                stop = self._input_lost(e)
                if stop is e:  # no input is gone: the error is something else
                    raise
                raise stop from None
            # Fewer than asked when SIGTERM, or the budget, ended the call early.
            step, done = int(self.global_step.numpy()), int(self.global_step.numpy()) - step
            due = self._progress.update(step)
            window_steps += done
            window_loss += float(loss)
            metrics = tf.nest.map_structure(lambda t: float(t), metrics)
            window_metrics = metrics if window_metrics is None else tf.nest.map_structure(
                lambda a, b: a + b, window_metrics, metrics)
            if not np.isfinite(float(loss)):
                raise UserError(
                    f"the loss is {float(loss)} at step {step}: training diverged; lower "
                    "--learning_rate or use --dtype=float32 (checkpoints saved before are "
                    "kept, and the same command resumes from the latest)")
            last = step == config.num_train_steps or (
                self.budget is not None and self.budget.spent)
            if step % config.log_steps == 0 or last:
                elapsed = max(self.clock() - window_start, 1e-9)
                results = self._window_results(window_loss, window_metrics, window_steps,
                                               window_steps * global_batch_size / elapsed)
                self._report(step, results, writer, hooks)
                window_start, window_steps = self.clock(), 0
                window_loss, window_metrics = 0.0, None
            elif due:  # between two --log_steps lines, one every 10 s to 2 min
                logging.info("step %d/%d%s", step, config.num_train_steps, self._timing())
            stop = self._stop_requested(termination)
            if step % config.save_checkpoints_steps == 0 or last or stop:
                path = self.save()
                logging.info("Saved checkpoint %s", path)
            if stop and not last:
                raise interruption.stopped(step, path)
            if evaluate_every and on_evaluate is not None and (
                    step % evaluate_every == 0 or last):
                if on_evaluate(step) and not last:
                    logging.info("Stopped early at step %d of %d; saved %s", step,
                                 config.num_train_steps, self.save())
                    break
            if last:  # (the budget is spent before the last step)
                break
        if self.budget is not None:
            self.budget.log_end(step, config.num_train_steps, self.current_learning_rate())
        return results

    def _window_results(self, loss, metrics, steps, examples_per_second) -> dict:
        """The progress figures of a window of `steps` updates."""
        results = {"loss": loss / steps}
        results.update({name: num / max(den, 1e-12) for name, (num, den) in metrics.items()})
        results["learning_rate"] = self.current_learning_rate()
        results["examples_per_second"] = examples_per_second
        if self.config.tokens_per_example:
            results["tokens_per_second"] = examples_per_second * self.config.tokens_per_example
        return results

    def _report(self, step, results, writer, hooks) -> None:
        """The progress line, its summaries, and the hooks. The line ends with
        the time this session has trained and an estimate of the time left
        (the steps left at the rate since the first step; with a time budget,
        the budget's time left when it ends first)."""
        logging.info("step %d/%d: %s%s", step, self.config.num_train_steps,
                     ", ".join(f"{k} = {_fmt(v)}" for k, v in results.items()), self._timing())
        with writer.as_default(step=step):
            for name, value in results.items():
                tf.summary.scalar(name, value)
        writer.flush()
        for hook in hooks or ():
            hook(step, results)

    def _timing(self) -> str:
        """'; <the budget's progress>; 14 s elapsed, about 2 min left': the end of
        a progress line (the time left is the budget's when it ends first)."""
        budget, limit = "", None
        if self.budget is not None:
            budget = f"; {self.budget.progress()}"
            limit = self.budget.seconds - self.budget.seconds_spent
        timing = f"; {self._progress.timing(limit)}" if self._progress is not None else ""
        return budget + timing

    def _steps_per_call(self, step: int, start_step: int) -> int:
        """The updates of the next host call: one (it traces and compiles, so the
        rate leaves it out), one more to time a step, then as many as take
        about `CALL_SECONDS`, at most `steps_per_loop`. So the host sees the time
        every few seconds, and a progress line comes within seconds of training's
        start whatever --log_steps is (pre-training's 100 steps can take
        minutes). Several workers must make the same calls, which a measured
        rate would not give: there, one update, then `steps_per_loop`."""
        if step == start_step:
            return 1
        if not self._stop_in_loop:
            return self.config.steps_per_loop
        rate = self._progress.rate()
        if rate is None:
            return 1
        return max(1, min(self.config.steps_per_loop, int(rate * self.CALL_SECONDS)))

    def _nothing_to_train(self, step) -> bool:
        """Whether the run is over already: at the last step, or (resumed)
        past its time budget; says so."""
        if step >= self.config.num_train_steps:
            logging.info("Already at step %d of %d: nothing to train.",
                         step, self.config.num_train_steps)
            return True
        return self.budget is not None and self.budget.resume(step)

    def _call_train_loop(self, iterator, num_steps):
        """One host call of `num_steps` updates (fewer when SIGTERM or the
        budget ends it); then the host reads the budget's clock. On several
        workers, the call is timed on `time_fn` from here."""
        timed_here = self.budget is not None and not self._stop_in_loop
        started = float(self.time_fn()) if timed_here else None
        loss, metrics = self._train_loop(iterator, tf.constant(num_steps))
        if self.budget is not None:
            seconds = None
            if timed_here:
                float(loss)  # waits for the steps to finish
                seconds = float(self.time_fn()) - started
            self.budget.read(self.strategy, seconds)
        return loss, metrics

    def _stop_requested(self, termination) -> bool:
        """Whether a worker received SIGTERM; on several workers all agree (a
        collective), so that they stop, and save, at the same step."""
        local = termination.requested
        if isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            flag = self.strategy.run(lambda: tf.constant(1 if local else 0, tf.int32))
            return int(self.strategy.reduce(tf.distribute.ReduceOp.SUM, flag, axis=None)) > 0
        return local

    def evaluate(self, dataset_fn, steps: int | None = None) -> dict:
        """Loss (mean over batches) and metrics (sum ratios) over a dataset.

        The dataset should be finite (no repeat); every example counts once.
        Logs the batches done every 10 s or more (of `steps`, with the time
        left, when given).
        """
        strategy = self.strategy

        def replica_step(features):
            normalizers = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM,
                tf.nest.map_structure(lambda t: tf.cast(t, tf.float32),
                                      self.task.loss_normalizers(features)))
            return self.task.loss_and_metrics(self.model, features, normalizers, training=False)

        dataset = self._distribute(dataset_fn)

        @functools.partial(tf.function, input_signature=[dataset.element_spec])
        def eval_step(features):
            loss, metrics = strategy.run(replica_step, args=(features,))
            reduce = lambda x: strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None)
            return reduce(loss), tf.nest.map_structure(reduce, metrics)

        total_loss, total_metrics, batches = 0.0, None, 0
        progress = Progress(steps, "batches", clock=self.clock)
        batches_iterator = iter(dataset)
        while steps is None or batches < steps:
            try:
                features = next(batches_iterator)
            except StopIteration:
                break
            except tf.errors.DataLossError as e:
                raise self._data_loss(e) from None
            loss, metrics = eval_step(features)
            metrics = tf.nest.map_structure(float, metrics)
            total_loss += float(loss)
            total_metrics = metrics if total_metrics is None else tf.nest.map_structure(
                lambda a, b: a + b, total_metrics, metrics)
            batches += 1
            if progress.update(batches):
                logging.info("evaluated %s", progress.line())
        if batches == 0:
            raise UserError("the evaluation data made no batch: it holds fewer examples than "
                            "the replicas need (lower --eval_batch_size, or add data)")
        results = {"loss": total_loss / batches}
        results.update({name: num / max(den, 1e-12) for name, (num, den) in total_metrics.items()})
        results["global_step"] = int(self.global_step.numpy())
        return results

    def predict(self, dataset_fn, output_fn: Callable, total: int | None = None,
                unit: str = "examples") -> dict:
        """Runs `output_fn(model, features)` (a dict of tensors) over a finite
        dataset; returns the outputs concatenated in input order as numpy.
        Logs the rows done every 10 s or more (`progress.Progress`), named
        `unit` ("windows" where long inputs are split): of `total` (the
        dataset's rows, when the caller knows them) with the time elapsed and
        left, else the time elapsed and the rate."""
        strategy = self.strategy

        def forward(features):
            return output_fn(self.model, features)

        if self.config.jit_compile:  # as the train step (one compile per batch shape)
            forward = tf.function(forward, jit_compile=True)

        dataset = self._distribute(dataset_fn)

        # One trace for every batch: the last, smaller one (and, with
        # --dynamic_padding, each length) would trace again, tens of seconds
        # that no estimate of the time left foresees.
        @functools.partial(tf.function, input_signature=[dataset.element_spec])
        def predict_step(features):
            return strategy.run(forward, args=(features,))

        collected = {}
        start = time.time()
        progress = Progress(total, unit, clock=self.clock)
        examples = 0
        for features in dataset:
            outputs = predict_step(features)
            for name, value in outputs.items():
                parts = [np.asarray(p) for p in strategy.experimental_local_results(value)]
                collected.setdefault(name, []).extend(parts)
            examples += sum(len(p) for p in parts)  # every output has one row per example
            if progress.update(examples):
                logging.info("predicted %s", progress.line())
        elapsed = max(time.time() - start, 1e-9)
        logging.info("predicted %d %s in %.1f s, %.2f %s/s", examples, unit, elapsed,
                     examples / elapsed, unit)
        return {name: np.concatenate(parts) for name, parts in collected.items()}


# A file TensorFlow's reader could not open, in its message ("<path>; No such file ...").
_LOST_FILE = re.compile(r"([^\s;]+); (?:No such file or directory|Permission denied)")


def _path_in_message(text: str) -> str | None:
    found = _LOST_FILE.search(text)
    return found.group(1) if found else None


def _on_the_host_alone(strategy) -> bool:
    """Whether `strategy` has one replica, on the host's CPU (where the input is)."""
    if strategy.num_replicas_in_sync != 1:
        return False
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:  # the default strategy: its input is the dataset itself
        return True
    return all(tf.DeviceSpec.from_string(d).device_type == "CPU" for d in devices)


def _fmt(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)
