"""Evaluation while training: the best model kept, early stopping, resume.

`BestCheckpoint`'s logic against scripted evaluations, then the flags end to end
through run_classifier on a tiny encoder."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from official_bert.errors import UserError
from official_bert.tasks import base
from test_run_classifier import DEV, DEV_LABELS, TRAIN, TRAIN_LABELS, make_checkpoint, run


class _Model(tf.Module):
    def __init__(self):
        super().__init__()
        self.weight = tf.Variable(0.0)


class _ScriptedTask(base.Task):
    """evaluate() returns the next scripted value and sets the model's weight to it."""

    def __init__(self, run_config, values, model):
        super().__init__(run_config)
        self.values, self.model = list(values), model

    def evaluate(self, trainer):
        value = self.values.pop(0)
        self.model.weight.assign(value)
        return {"eval_accuracy": value, "eval_loss": 1 - value}


class _Trainer:
    is_chief = True

    def __init__(self, model):
        self.model = model
        self.global_step = tf.Variable(0, dtype=tf.int64)


def _best(tmp_path, values, patience=None, metric="eval_accuracy"):
    model = _Model()
    config = base.RunConfig(output_dir=str(tmp_path), eval_every_steps=10,
                            keep_best_metric=metric, early_stopping_patience=patience)
    trainer = _Trainer(model)
    return base.BestCheckpoint(_ScriptedTask(config, values, model), trainer), trainer


def test_keeps_the_best_and_stops_after_patience(tmp_path):
    best, trainer = _best(tmp_path, [0.5, 0.7, 0.6, 0.65, 0.9], patience=2)
    stops = []
    for step in (10, 20, 30, 40):
        trainer.global_step.assign(step)
        stops.append(best.evaluate(step))
    assert stops == [False, False, False, True]  # 2 evaluations without beating 0.7
    state = json.loads((tmp_path / "best" / "best.json").read_text())
    assert (state["step"], state["value"], state["stopped_at"]) == (20, 0.7, 40)
    history = [json.loads(line) for line in (tmp_path / "eval_history.jsonl").read_text().splitlines()]
    assert [h["eval_accuracy"] for h in history] == [0.5, 0.7, 0.6, 0.65]
    assert [h["global_step"] for h in history] == [10, 20, 30, 40]
    # The best model's weights come back for the final evaluation and export.
    best.restore()
    assert float(trainer.model.weight.numpy()) == pytest.approx(0.7)


def test_loss_metrics_are_better_lower_and_state_survives_a_restart(tmp_path):
    best, trainer = _best(tmp_path, [0.5, 0.6], patience=3, metric="eval_loss")
    best.evaluate(10)  # loss 0.5: the first is the best
    best.evaluate(20)  # loss 0.4: better (lower)
    assert json.loads((tmp_path / "best" / "best.json").read_text())["step"] == 20
    # A restarted run goes on counting from the saved state.
    again, _ = _best(tmp_path, [0.1], patience=3, metric="eval_loss")
    assert again.state["step"] == 20 and again.state["value"] == pytest.approx(0.4)
    again.evaluate(30)  # loss 0.9: not better
    assert again.state["evaluations_since_best"] == 1
    # Another metric for the same directory is refused.
    with pytest.raises(UserError, match="kept its best model by eval_loss"):
        _best(tmp_path, [0.1], metric="eval_accuracy")


def test_flags_need_each_other():
    with pytest.raises(UserError, match="need --eval_every_steps"):
        base.RunConfig(output_dir="/x", init_checkpoint="/c",
                       keep_best_metric="eval_accuracy").validate()
    with pytest.raises(UserError, match="needs --keep_best_metric"):
        base.RunConfig(output_dir="/x", init_checkpoint="/c", eval_every_steps=5,
                       early_stopping_patience=2).validate()


def test_early_stopping_end_to_end(tmp_path):
    ckpt = make_checkpoint(str(tmp_path / "ckpt"))
    data = tmp_path / "sst"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{s}\t{y}\n" for s, y in zip(TRAIN * 4, TRAIN_LABELS * 4)))
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{s}\t{y}\n" for s, y in zip(DEV, DEV_LABELS)))
    out = tmp_path / "out"
    # A learning rate too small to change a prediction: accuracy never improves after
    # the first evaluation, so with patience 2 the run stops at the third (step 6 of 16).
    command = ["run_classifier.py", "--task_name=sst-2", f"--data_dir={data}",
               f"--init_checkpoint={ckpt}", "--do_train", "--do_eval", "--max_seq_length=16",
               "--train_batch_size=4", "--num_train_epochs=2", "--learning_rate=1e-9",
               "--eval_every_steps=2", "--keep_best_metric=eval_accuracy",
               "--early_stopping_patience=2", "--log_steps=2", f"--output_dir={out}"]
    result = run(*command)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Stopped early at step 6 of 16" in result.stderr
    history = (out / "eval_history.jsonl").read_text().splitlines()
    assert len(history) == 3
    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    assert results["best_step"] == "2" and results["global_step"] == "6"
    assert sorted(os.listdir(out / "best")) == ["best-2.data-00000-of-00001", "best-2.index",
                                                 "best.json", "checkpoint"]
    # The same command again trains nothing more: the run has stopped.
    again = run(*command)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "stopped early at step 6" in again.stderr
    assert len((out / "eval_history.jsonl").read_text().splitlines()) == 3
