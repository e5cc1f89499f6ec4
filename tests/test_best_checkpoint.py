"""Evaluation while training: the best model kept, early stopping, resume.

`BestCheckpoint`'s logic against scripted evaluations (including what a kill
between its writes leaves: best.json is the commit record), then the flags end
to end: run_classifier on a tiny encoder (early stopping; the final evaluation,
the predictions and the export are the best step's, not the last one's) and
run_swag (every task keeps its best model the same way)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from official_bert.errors import UserError
from official_bert.run_directory import RunDirectory
from official_bert.tasks import base, evaluation, families
from official_bert.configs import RunConfig
from test_run_classifier import (DEV, DEV_LABELS, TRAIN, TRAIN_LABELS, make_checkpoint, run,
                                 write_sst2)


class _Model(tf.Module):
    def __init__(self):
        super().__init__()
        self.weight = tf.Variable(0.0)


class _ScriptedTask(base.Task):
    """evaluate() returns the next scripted value and sets the model's weight to it."""

    spec = families.TaskSpec("scripted", f"{__name__}:_ScriptedTask", RunConfig)

    def __init__(self, run_config, values, model):
        super().__init__(run_config, run_config,
                         run_directory=RunDirectory(run_config.output_dir))
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
    config = RunConfig(output_dir=str(tmp_path), eval_every_steps=10,
                            keep_best_metric=metric, early_stopping_patience=patience)
    trainer = _Trainer(model)
    return evaluation.BestCheckpoint(_ScriptedTask(config, values, model), trainer), trainer


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
        RunConfig(output_dir="/x", init_checkpoint="/c",
                       keep_best_metric="eval_accuracy").validate()
    with pytest.raises(UserError, match="needs --keep_best_metric"):
        RunConfig(output_dir="/x", init_checkpoint="/c", eval_every_steps=5,
                       early_stopping_patience=2).validate()


@pytest.mark.slow  # 10 s or more here
def test_early_stopping_end_to_end(tmp_path):
    ckpt = make_checkpoint(str(tmp_path / "ckpt"))
    data = write_sst2(tmp_path / "sst", (TRAIN * 4, TRAIN_LABELS * 4), (DEV, DEV_LABELS))
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


# === best.json is the commit record ===


def test_a_kill_between_the_writes_keeps_the_named_pair(tmp_path):
    """A new best model is written as best-<step> first, best.json names it
    next, the old files go last. Killed between the first two (best-30 on disk,
    best.json still naming 20; a half-written best-31_temp; the `checkpoint`
    state file already pointing at best-30), the next run removes what best.json
    does not name and restores step 20's weights."""
    best, trainer = _best(tmp_path, [0.5, 0.7])
    for step in (10, 20):
        trainer.global_step.assign(step)
        best.evaluate(step)
    directory = tmp_path / "best"
    assert sorted(os.listdir(directory)) == ["best-20.data-00000-of-00001", "best-20.index",
                                             "best.json", "checkpoint"]
    # What a run killed after writing the next best model leaves.
    trainer.model.weight.assign(0.9)
    best.checkpoint.write(str(directory / "best-30"))
    (directory / "best-31_temp").mkdir()
    (directory / "best-31_temp" / "part-00000-of-00001.index").write_bytes(b"half")
    tf.compat.v1.train.update_checkpoint_state(str(directory), str(directory / "best-30"))

    again, trainer = _best(tmp_path, [])
    assert sorted(os.listdir(directory)) == ["best-20.data-00000-of-00001", "best-20.index",
                                             "best.json", "checkpoint"]
    assert tf.train.latest_checkpoint(str(directory)) == str(directory / "best-20")
    assert again.state["step"] == 20 and again.state["value"] == pytest.approx(0.7)
    again.restore()
    assert float(trainer.model.weight.numpy()) == pytest.approx(0.7)


def test_a_best_json_naming_a_missing_checkpoint_is_one_line(tmp_path):
    from official_bert.commands import app
    from official_bert.errors import RunDirectoryError

    best, trainer = _best(tmp_path, [0.5])
    trainer.global_step.assign(10)
    best.evaluate(10)
    for name in os.listdir(tmp_path / "best"):
        if name.startswith("best-10."):
            os.remove(tmp_path / "best" / name)
    again, _ = _best(tmp_path, [])
    with pytest.raises(RunDirectoryError) as error:
        again.restore()
    assert app.one_line_error(error.value) == (
        f"error: {tmp_path / 'best' / 'best.json'} names the best model of step 10, but "
        f"{tmp_path / 'best' / 'best-10'}.index is missing; delete the best/ directory to "
        "start keeping it anew")


# === The best model is the one evaluated, predicted and exported ===


def _results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


def _eval_loss(probabilities, labels):
    return float(-np.mean(np.log(np.asarray(probabilities)[np.arange(len(labels)), labels])))


@pytest.mark.slow  # 10 s or more here
def test_the_final_evaluation_predictions_and_export_are_the_best_steps(tmp_path):
    """The dev set is the training sentences with the opposite labels, so the
    dev loss grows as the model learns: the best model (lowest eval_loss) is an
    early one, not the last. The final eval_results.txt, test_results.tsv (the
    dev sentences) and the export's probabilities all give the best step's
    eval_loss, which the last evaluation's is not."""
    import keras

    from support import tiny_config
    from official_bert import checkpoints
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from test_run_classifier import VOCAB

    # Without dropout the tiny model learns the 8 sentences within 24 steps from any
    # initialization (with it, some never leave 0.69): here seed 1.
    keras.utils.set_random_seed(1)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    encoder = BertEncoder.from_bert_config(tiny_config(
        vocab_size=len(VOCAB), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    encoder(dummy_inputs())
    checkpoints.save_checkpoint(encoder, str(ckpt), vocab_file=str(ckpt / "vocab.txt"))
    data = write_sst2(tmp_path / "sst", (TRAIN * 2, TRAIN_LABELS * 2),
                      (TRAIN, [1 - y for y in TRAIN_LABELS]), TRAIN)
    out, export = tmp_path / "out", tmp_path / "export"
    result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={data}",
                 f"--init_checkpoint={ckpt}", "--do_train", "--do_eval", "--do_predict",
                 "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=6",
                 "--learning_rate=3e-2", "--eval_every_steps=4", "--keep_best_metric=eval_loss",
                 "--log_steps=4", f"--output_dir={out}", f"--export_dir={export}",
                 "--export_version=1")
    assert result.returncode == 0, result.stderr[-3000:]
    best = json.loads((out / "best" / "best.json").read_text())
    history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
    assert [h["global_step"] for h in history] == [4, 8, 12, 16, 20, 24]
    assert best["value"] == min(h["eval_loss"] for h in history)
    # (here 0.71 at step 12, then 0.95, 1.45, 1.78 as it learns the training labels)
    assert best["step"] < 24 and history[-1]["eval_loss"] > best["value"] + 0.1
    results = _results(out / "eval_results.txt")
    assert results["best_step"] == str(best["step"]) and results["global_step"] == "24"
    for key in ("eval_loss", "eval_accuracy", "eval_f1"):
        assert float(results[key]) == pytest.approx(best["results"][key], abs=1e-6), key
    labels = 1 - np.array(TRAIN_LABELS)
    predicted = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert _eval_loss(predicted, labels) == pytest.approx(best["value"], abs=1e-5)
    served = tf.saved_model.load(str(export / "1")).signatures["serving_default"](
        text_a=tf.constant(TRAIN))["probabilities"].numpy()
    assert _eval_loss(served, labels) == pytest.approx(best["value"], abs=1e-5)
    assert f"Exported step {best['step']} to {export / '1'}" in result.stderr


@pytest.mark.slow  # 10 s or more here
def test_another_task_keeps_its_best_model(tmp_path):
    """run_swag with --keep_best_metric: the same best/ directory, best_step and
    the final evaluation of the best model."""
    from test_run_ner import make_checkpoint as tiny_checkpoint
    from test_run_swag import DATA

    ckpt = tiny_checkpoint(str(tmp_path / "ckpt"))
    data = tmp_path / "swag.csv"
    data.write_text(DATA)
    out = tmp_path / "out"
    result = run("run_swag.py", "--do_train", "--do_eval", f"--train_file={data}",
                 f"--eval_file={data}", f"--init_checkpoint={ckpt}", "--max_seq_length=16",
                 "--train_batch_size=2", "--num_train_epochs=3", "--learning_rate=1e-3",
                 "--eval_every_steps=2", "--keep_best_metric=eval_loss", "--log_steps=2",
                 f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    best = json.loads((out / "best" / "best.json").read_text())
    history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
    assert [h["global_step"] for h in history] == [2, 4, 6]
    assert best["metric"] == "eval_loss"
    assert best["value"] == min(h["eval_loss"] for h in history)
    assert sorted(os.listdir(out / "best")) == [f"best-{best['step']}.data-00000-of-00001",
                                                 f"best-{best['step']}.index", "best.json",
                                                 "checkpoint"]
    results = _results(out / "eval_results.txt")
    assert results["best_step"] == str(best["step"]) and results["global_step"] == "6"
    for key in ("eval_loss", "eval_accuracy"):
        assert float(results[key]) == pytest.approx(best["results"][key], abs=1e-6), key
