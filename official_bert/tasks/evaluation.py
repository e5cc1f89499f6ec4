"""Evaluation in a run: while training (the best model kept, early stopping)
and at the end (eval_results.txt and the eval/ summaries).

`tasks.runner` calls `BestCheckpoint` with --eval_every_steps and
`final_evaluation` with --do_eval; a task only computes its metrics
(`Task.evaluate`). Where the files go is `run_directory.RunDirectory`'s.
"""

from __future__ import annotations

import json
import time

import tensorflow as tf
from absl import logging

from official_bert import io
from official_bert.errors import RunDirectoryError, UserError
from official_bert.run_directory.checkpoints import keep_only_best


def evaluation(task, trainer) -> dict:
    """`task.evaluate` with the keys every eval_results.txt has."""
    results = task.evaluate(trainer) or {}
    if results:
        results["global_step"] = int(trainer.global_step.numpy())
        if "eval_loss" in results:
            results.setdefault("loss", results["eval_loss"])  # google's key too
    return results


def final_evaluation(task, trainer, best: "BestCheckpoint | None") -> dict:
    """The run's last evaluation (--do_eval), of the model it ends with; the
    chief writes eval_results.txt and the eval/ summaries."""
    start = time.time()
    results = evaluation(task, trainer)
    if results and best is not None and best.state["step"] is not None:
        results["best_step"] = best.state["step"]
    if results and trainer.is_chief:
        write_results(task.run_directory.eval_results, results)
        write_summaries(task.run_directory.eval_summaries, results)
    if results:
        logging.info("Eval results (%.1f s): %s", time.time() - start, describe(results))
    return results


def describe(results: dict) -> str:
    """`name = value` of each result, sorted, for the log."""
    return ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in sorted(results.items()))


def write_results(path: str, results: dict) -> None:
    """`key = value` lines, sorted (google-research/bert's eval_results.txt)."""
    io.atomic_write(path, "".join(f"{key} = {results[key]}\n" for key in sorted(results)))


def write_summaries(directory: str, results: dict) -> None:
    """The float results as TensorBoard scalars at their global_step."""
    writer = tf.summary.create_file_writer(directory)
    with writer.as_default(step=int(results.get("global_step", 0))):
        for name, value in results.items():
            if isinstance(value, float) and name != "global_step":
                tf.summary.scalar(name, value)
    writer.flush()


class BestCheckpoint:
    """Evaluations while training (--eval_every_steps): each one's metrics in
    `eval_history.jsonl` and TensorBoard; with --keep_best_metric the best model
    so far in `output_dir/best/` (`best.json` says its step and metrics), and
    with --early_stopping_patience training stops after that many evaluations
    without improvement. A metric with "loss" in its name is better lower, any
    other higher. The state lives in `best/best.json`, so a resumed run goes on
    counting, and a stopped run is not trained further.

    `best.json` is the commit record: a new best model is written as
    `best/best-<step>` first, then `best.json` names that step, and only then
    are the previous one's files deleted. A run killed in between leaves the
    previous pair whole (`best.json` and the checkpoint it names); the next run
    deletes the unnamed leftovers.

    A run killed while it evaluated leaves that step unevaluated (it could
    never become the best model): before training on, a resume evaluates the
    steps the schedule named up to the step it resumes from that
    eval_history.jsonl lacks (`evaluate_missed`)."""

    def __init__(self, task, trainer):
        config = task.run_config
        self.task, self.trainer, self.metric = task, trainer, config.keep_best_metric
        self.patience = config.early_stopping_patience
        self.run_directory = task.run_directory
        self.directory = self.run_directory.best
        self.state_path = self.run_directory.best_state
        self.history_path = self.run_directory.eval_history
        self.state = {"metric": self.metric, "value": None, "step": None, "results": None,
                      "evaluations_since_best": 0, "stopped_at": None}
        if io.exists(self.state_path):
            self.state.update(json.loads(io.read_text(self.state_path)))
            if self.state["metric"] != self.metric:
                raise UserError(f"--output_dir {config.output_dir} kept its best model by "
                                f"{self.state['metric']}, not --keep_best_metric={self.metric}; "
                                "use the same metric, or another --output_dir")
        self.checkpoint = tf.train.Checkpoint(model=trainer.model)
        if trainer.is_chief and io.isdir(self.directory):
            keep_only_best(self.run_directory, self.state["step"])

    def evaluate(self, step: int) -> bool:
        """Evaluates now; keeps the model if it is the best; True to stop."""
        results = evaluation(self.task, self.trainer)
        logging.info("Evaluation at step %d: %s", step, describe(results))
        if not self.trainer.is_chief:
            return False
        write_summaries(self.run_directory.eval_summaries, results)
        history = io.read_text(self.history_path) if io.exists(self.history_path) else ""
        io.atomic_write(self.history_path, history + json.dumps(results, sort_keys=True) + "\n")
        if not self.metric:
            return False
        if self.metric not in results:
            raise UserError(f"--keep_best_metric={self.metric} is not one of this task's "
                            f"metrics: {', '.join(sorted(k for k in results if k != 'global_step'))}")
        value, best = results[self.metric], self.state["value"]
        lower = "loss" in self.metric
        improved = best is None or (value < best if lower else value > best)
        if improved:
            self.checkpoint.write(self.run_directory.best_checkpoint(step))
            self.state.update(value=value, step=step, results=results, evaluations_since_best=0)
            logging.info("Best %s so far: %.4g at step %d (kept in %s)", self.metric, value, step,
                         self.directory)
        else:
            self.state["evaluations_since_best"] += 1
        stop = bool(self.patience) and self.state["evaluations_since_best"] >= self.patience
        if stop:
            self.state["stopped_at"] = step
        io.atomic_write(self.state_path, json.dumps(self.state, indent=2, sort_keys=True) + "\n")
        if improved:
            keep_only_best(self.run_directory, self.state["step"])
        return stop

    def evaluate_missed(self, num_train_steps: int) -> None:
        """Before training: evaluates each step that --eval_every_steps (every
        that many steps, and the last) named since the schedule began
        (`RunDirectory.eval_schedule_start`), up to the step the run is at, and
        that eval_history.jsonl lacks: a run was killed while it evaluated.
        Each one's checkpoint is read into the model, evaluated and kept if it
        is the best; then the trainer's state is restored. Steps whose
        checkpoint is gone are said in one line."""
        trainer, every = self.trainer, self.task.run_config.eval_every_steps
        step = int(trainer.global_step.numpy())
        start = self.run_directory.eval_schedule_start(every, step, write=trainer.is_chief)
        if self.state["stopped_at"] is not None:
            return
        evaluated = self._evaluated_steps()
        missed = [k for k in range(start + 1, step + 1)
                  if (k % every == 0 or k == num_train_steps) and k not in evaluated]
        prefixes = {k: self.run_directory.checkpoint(k) for k in missed}
        gone = [k for k in missed if k != step and not io.exists(prefixes[k] + ".index")]
        if gone:
            logging.warning("Step(s) %s were to be evaluated (--eval_every_steps=%d), but the "
                            "run stopped first and their checkpoints are gone: they cannot be "
                            "evaluated now", ", ".join(map(str, gone)), every)
        for k in (k for k in missed if k not in gone):
            logging.info("Evaluating step %d, which the run was to evaluate when it stopped", k)
            if k != step:
                self.checkpoint.read(prefixes[k]).expect_partial()
                trainer.global_step.assign(k)
            if self.evaluate(k):
                break
        if any(k != step for k in missed if k not in gone):
            trainer.checkpoint.restore(trainer.resumed_from).expect_partial()

    def _evaluated_steps(self) -> set:
        """The steps eval_history.jsonl holds an evaluation of."""
        if not io.exists(self.history_path):
            return set()
        lines = io.read_text(self.history_path).splitlines()
        return {json.loads(line).get("global_step") for line in lines if line.strip()}

    def restore(self) -> int | None:
        """Puts the best model's weights into the trainer's model (for the final
        evaluation, the predictions and the export); returns its step (None
        when no best model is kept)."""
        if not self.metric or self.state["step"] is None:
            return None
        prefix = self.run_directory.best_checkpoint(self.state["step"])
        if not io.exists(prefix + ".index"):
            raise RunDirectoryError(f"{self.state_path} names the best model of step "
                                    f"{self.state['step']}, but {prefix}.index is missing; "
                                    "delete the best/ directory to start keeping it anew")
        self.checkpoint.read(prefix).expect_partial()
        logging.info("Using the best model (%s %.4g, step %d) from %s", self.metric,
                     self.state["value"], self.state["step"], prefix)
        return self.state["step"]
