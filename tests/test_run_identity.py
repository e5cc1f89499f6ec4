"""A run directory knows what it is (run.json): a rerun that would make it another
run is refused before anything is written, one that changes its training settings
needs --allow_changed_settings (and is recorded), a checkpoint no run wrote is never
resumed nor deleted, a step a killed run did not evaluate is evaluated on resume, and
what killed runs leave is cleaned.

Runs are the library's run flow (`runner.run_task`) in this process, on the fault
kit's tiny world: a classifier trained once (4 steps, checkpoints 2 and 4) and
copied for each test.
"""

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from support import fault_kit as kit
from official_bert import io
from official_bert.errors import RunDirectoryError, UserError
from official_bert.run_directory import RunDirectory
from official_bert.tasks import base, evaluation, families
from official_bert.tasks.classification import ClassificationTask
from official_bert.configs import (ClassificationConfig, MultipleChoiceConfig, NerConfig,
                                         RunConfig, SquadConfig, SquadRunConfig, SwagRunConfig)
from official_bert.tasks.multiple_choice import MultipleChoiceTask
from official_bert.tasks.ner import NerTask
from official_bert.tasks.runner import run_task
from official_bert.tasks.squad import SpanLabelingTask
from official_bert.training import trainer as base_trainer
from official_bert.run_directory.checkpoints import RunCheckpoints


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return kit.World(tmp_path_factory.mktemp("world")).build(pretraining_data=False)


def run_settings(world, out, **settings):
    values = dict(output_dir=str(out), init_checkpoint=str(world.ckpt), max_seq_length=16,
                  train_batch_size=4, eval_batch_size=4, learning_rate=1e-3, num_train_epochs=2,
                  save_checkpoints_steps=2, keep_checkpoint_max=2, log_steps=2)
    values.update(settings)
    return values


def classify(world, out, task="sst-2", **settings):
    """run_classifier.py's run flow on the world's SST-2 files."""
    config = ClassificationConfig(task_name=task, data_dir=str(world.path("glue")))
    return run_task(ClassificationTask, config, RunConfig(**run_settings(world, out, **settings)))


@pytest.fixture(scope="module")
def trained(world, tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "run"
    classify(world, out, do_train=True)
    return out


@pytest.fixture
def run_dir(trained, tmp_path):
    """A copy of the trained classifier's run directory."""
    return pathlib_copy(trained, tmp_path / "run")


def pathlib_copy(source, destination):
    shutil.copytree(source, destination, symlinks=True)
    return destination


def record(run_dir) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def test_the_record_says_what_the_run_is(world, trained):
    written = record(trained)
    identity, settings = written["identity"], written["settings"]
    assert identity["task"] == "classification" and identity["task_name"] == "sst-2"
    assert identity["labels"] == ["0", "1"] and identity["regression"] is False
    assert identity["max_seq_length"] == 16 and identity["do_lower_case"] is True
    assert identity["bert_config"]["hidden_size"] == kit.TINY_CONFIG["hidden_size"]
    vocab = (world.ckpt / "vocab.txt").read_bytes()
    assert identity["vocab_sha256"] == hashlib.sha256(vocab).hexdigest()
    assert settings["learning_rate"] == 1e-3 and settings["num_train_epochs"] == 2
    assert settings["train_batch_size"] == 4 and settings["optimizer"] == "adamw"
    train_file = world.path("glue", "train.tsv")
    assert settings["training_data"] == {str(train_file): train_file.stat().st_size}
    assert settings["training_data_content"] == {
        str(train_file): "sha256:" + hashlib.sha256(train_file.read_bytes()).hexdigest()}
    # 8 examples, batch 4, 2 epochs: steps 2 and 4 saved, both the run's own.
    assert written["checkpoints"] == ["ckpt-2", "ckpt-4"]
    assert sorted(p.name for p in trained.glob("ckpt-*.index")) == ["ckpt-2.index",
                                                                    "ckpt-4.index"]
    assert written["project_version"] and "history" not in written


@pytest.mark.parametrize("change, words", [
    (dict(max_seq_length=24), "--max_seq_length was 16, now 24"),
    (dict(do_lower_case=False), "--do_lower_case was true, now false"),
])
def test_a_resume_that_makes_it_another_run_is_refused_before_any_write(world, run_dir,
                                                                        change, words):
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError) as refused:
        classify(world, run_dir, do_train=True, allow_changed_settings=True, **change)
    message = str(refused.value)
    assert f"--output_dir {run_dir} holds a classification (--task_name=sst-2) run" in message
    assert words in message and "nothing was changed" in message
    assert kit.snapshot(run_dir) == before


def test_another_classification_task_is_refused(world, run_dir):
    """An SST-2 run continued as another task with the same labels."""
    before = kit.snapshot(run_dir)
    config = ClassificationConfig(task_name="custom", text_a_column="sentence", labels=["0", "1"],
                                  data_dir=str(world.path("glue")))
    with pytest.raises(RunDirectoryError, match="--task_name was sst-2, now custom"):
        run_task(ClassificationTask, config, RunConfig(**run_settings(world, run_dir,
                                                    do_train=True)))
    assert kit.snapshot(run_dir) == before


@pytest.mark.slow  # (minutes of CI: its runs; `pytest -m slow`)
def test_other_settings_need_the_flag_and_are_recorded(world, run_dir, caplog):
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError) as refused:
        classify(world, run_dir, do_train=True, learning_rate=2e-3, num_train_epochs=3)
    message = str(refused.value)
    assert "--learning_rate was 0.001, now 0.002" in message
    assert "--num_train_epochs was 2, now 3" in message
    assert "--allow_changed_settings" in message and "nothing was changed" in message
    assert kit.snapshot(run_dir) == before

    with caplog.at_level(logging.INFO, logger="absl"):
        classify(world, run_dir, do_train=True, learning_rate=2e-3, num_train_epochs=3,
                 allow_changed_settings=True)
    assert ("Resuming with changed settings (--allow_changed_settings): --learning_rate was "
            "0.001, now 0.002; --num_train_epochs was 2, now 3") in caplog.text
    written = record(run_dir)
    assert written["settings"]["learning_rate"] == 2e-3
    [change] = written["history"]
    assert change["changed"] == {"learning_rate": [1e-3, 2e-3], "num_train_epochs": [2, 3]}
    assert change["resumed_from"] == "ckpt-4"
    # 3 epochs: steps 6 saved; the oldest of the run's own checkpoints rotated out.
    assert written["checkpoints"] == ["ckpt-4", "ckpt-6"]
    # The same settings again resume without the flag.
    classify(world, run_dir, do_train=True, learning_rate=2e-3, num_train_epochs=3)


def test_other_training_data_needs_the_flag(world, run_dir, tmp_path):
    glue = pathlib_copy(world.path("glue"), tmp_path / "glue")
    with open(glue / "train.tsv", "a") as f:
        f.write("a good film\t1\n")
    config = ClassificationConfig(task_name="sst-2", data_dir=str(glue))
    with pytest.raises(RunDirectoryError) as refused:
        run_task(ClassificationTask, config, RunConfig(**run_settings(world, run_dir,
                                                    do_train=True)))
    assert "the training data: " in str(refused.value)
    assert f"{glue / 'train.tsv'} was (none), now" in str(refused.value)


@pytest.mark.slow  # (minutes of CI: its runs; `pytest -m slow`)
def test_training_data_is_known_by_content_not_size(world, tmp_path, caplog):
    """Issue 56: a train.tsv with every label flipped keeps its byte size; the record's
    fingerprint of it tells. A record of an earlier version (sizes alone) still resumes,
    compared by size, and says so once."""
    glue = pathlib_copy(world.path("glue"), tmp_path / "glue")
    train = glue / "train.tsv"
    config = ClassificationConfig(task_name="sst-2", data_dir=str(glue))
    out = tmp_path / "run"

    def train_on(**settings):
        return run_task(ClassificationTask, config, RunConfig(**run_settings(
            world, out, do_train=True, **settings)))

    train_on(num_train_epochs=1)
    assert record(out)["settings"]["training_data_content"] == {
        str(train): "sha256:" + hashlib.sha256(train.read_bytes()).hexdigest()}
    header, *rows = train.read_text().splitlines()
    flipped = [row[:-1] + {"0": "1", "1": "0"}[row[-1]] for row in rows]
    train.write_text("\n".join([header, *flipped]) + "\n")
    with pytest.raises(RunDirectoryError) as refused:
        train_on(num_train_epochs=1)
    message = str(refused.value)
    assert f"the training data's content: {train} was sha256 " in message, message
    assert "--allow_changed_settings" in message and "\n" not in message
    assert "the training data: " not in message  # (same size)

    written = record(out)
    del written["settings"]["training_data_content"]  # as an earlier version wrote it
    (out / "run.json").write_text(json.dumps(written))
    with caplog.at_level(logging.INFO, logger="absl"):
        train_on(num_train_epochs=2, allow_changed_settings=True)
    assert record(out)["checkpoints"][-1] == "ckpt-4"
    assert caplog.text.count("knows the training data by its size alone: compared by size "
                             "this time") == 1
    assert "changed settings (--allow_changed_settings): --num_train_epochs was 1, now 2\n" \
        in caplog.text
    assert record(out)["settings"]["training_data_content"][str(train)].startswith("sha256:")


def test_a_large_files_fingerprint_reads_blocks_of_it(tmp_path, monkeypatch):
    """Above io.WHOLE_FINGERPRINT a file is known by its size and 32 blocks of 1 MiB,
    the first and the last included (the threshold lowered here)."""
    monkeypatch.setattr(io.reading, "WHOLE_FINGERPRINT", 1 << 20)
    path = tmp_path / "shard.tfrecord"
    data = bytearray(os.urandom(40 << 20))
    path.write_bytes(data)
    fingerprint = io.content_fingerprint(str(path))
    assert fingerprint.startswith("sha256-32x1MiB:")
    for offset in (0, len(data) - 1, (len(data) - (1 << 20)) // 31 * 5 + 7):
        changed = bytearray(data)
        changed[offset] ^= 1
        path.write_bytes(changed)
        assert io.content_fingerprint(str(path)) != fingerprint, offset
    monkeypatch.setattr(io.reading, "WHOLE_FINGERPRINT", 128 << 20)
    path.write_bytes(data)
    assert io.content_fingerprint(str(path)) == "sha256:" + hashlib.sha256(data).hexdigest()


def test_evaluating_a_run_with_fewer_flags_works_as_before(world, run_dir):
    """No --do_train: the training settings and --max_seq_length are not compared,
    and the record keeps what the run was trained as."""
    results = classify(world, run_dir, do_eval=True, max_seq_length=24, learning_rate=5e-5)
    assert results["global_step"] == 4
    assert record(run_dir)["identity"]["max_seq_length"] == 16
    assert record(run_dir)["settings"]["learning_rate"] == 1e-3


def test_evaluating_without_the_length_reads_at_the_trained_one(world, run_dir, caplog,
                                                                 monkeypatch):
    """A run trained at 16 tokens, evaluated with --max_seq_length left at its
    default (128), reads at 16 and says so; given, another length is used, with
    a warning naming both."""
    import logging

    from official_bert.tasks import classification

    lengths = []
    featurize = classification.ClassificationTask._features

    def spy(self, *args, **kwargs):
        lengths.append(self.run_config.max_seq_length)
        return featurize(self, *args, **kwargs)

    monkeypatch.setattr(classification.ClassificationTask, "_features", spy)
    with caplog.at_level(logging.INFO, logger="absl"):
        classify(world, run_dir, do_eval=True, max_seq_length=128)
    assert set(lengths) == {16}
    assert "--max_seq_length=16: the length this run was trained with (run.json" in caplog.text
    caplog.clear()
    lengths.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
        classify(world, run_dir, do_eval=True, max_seq_length=24,
                 given=frozenset({"max_seq_length"}))
    assert set(lengths) == {24}
    assert "--max_seq_length=24: this run was trained at 16 tokens" in caplog.text


# Each maker gives `run_task`'s arguments: the task's class, its config, the run's.
def _ner(world, out, **modes):
    return (NerTask, NerConfig(train_file=str(world.path("conll", "train.txt")),
                               predict_file=str(world.path("conll", "dev.txt"))),
            RunConfig(**run_settings(world, out, **modes)))


def _swag(world, out, **modes):
    return (MultipleChoiceTask,
            MultipleChoiceConfig(train_file=str(world.path("swag", "train.csv")),
                                 predict_file=str(world.path("swag", "val.csv"))),
            SwagRunConfig(**run_settings(world, out, **modes)))


def _squad(world, out, **modes):
    return (SpanLabelingTask,
            SquadConfig(train_file=str(world.path("squad", "train.json")),
                        predict_file=str(world.path("squad", "dev.json")), max_query_length=8,
                        doc_stride=8),
            SquadRunConfig(**run_settings(world, out, **modes, max_seq_length=32)))


@pytest.mark.parametrize("make, family, modes", [
    (_ner, "ner", dict(do_train=True)),
    (_swag, "multiple choice", dict(do_train=True)),
    (_swag, "multiple choice", dict(do_predict=True)),
    (_squad, "squad", dict(do_train=True)),
    (_squad, "squad", dict(do_predict=True)),
])
def test_another_tasks_run_directory_is_refused_before_any_write(world, run_dir, make, family,
                                                                 modes):
    """Today's shape ValueError (and NER's label_list.txt written into the
    classifier's directory first) is one line, and nothing is written."""
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError) as refused:
        run_task(*make(world, run_dir, **modes))
    assert str(refused.value).startswith(
        f"--output_dir {run_dir} holds a classification (--task_name=sst-2) run, not a "
        f"{family} one")
    assert kit.snapshot(run_dir) == before


@pytest.mark.parametrize("through", ["path", "symlink"])
def test_the_pretrained_checkpoints_directory_is_not_a_run_directory(world, tmp_path, through):
    """--output_dir is --init_checkpoint's directory: once, it "resumed at step 0"
    from it and rotation deleted it. Now one line, and nothing is written there."""
    ckpt = pathlib_copy(world.ckpt, tmp_path / "ckpt")
    out = ckpt if through == "path" else tmp_path / "link"
    if through == "symlink":
        out.symlink_to(ckpt)
    before = kit.snapshot(ckpt)
    for modes in (dict(do_train=True), dict(do_eval=True)):
        with pytest.raises(RunDirectoryError) as refused:
            classify(world, out, init_checkpoint=str(ckpt), **modes)
        assert (f"--output_dir {out} holds a checkpoint that no run of this project wrote"
                in str(refused.value))
        assert "Use another --output_dir" in str(refused.value)
    assert kit.snapshot(ckpt) == before
    assert sorted(os.listdir(ckpt)) == sorted(os.listdir(world.ckpt))  # not even a lock file


@pytest.mark.slow  # (minutes of CI: its runs; `pytest -m slow`)
def test_a_run_made_before_records_resumes_and_starts_its_record(world, run_dir, caplog):
    (run_dir / "run.json").unlink()  # as a run directory of an earlier version
    with caplog.at_level(logging.INFO, logger="absl"):
        classify(world, run_dir, do_train=True, num_train_epochs=3)
    # Said truthfully (nothing tells an older run from a deleted record), and what is unchecked.
    assert (f"--output_dir {run_dir} holds checkpoints a run wrote but no run.json (it was "
            "deleted, or the run is older than run records): its files agree with this run, but "
            "the settings it trained with (--max_seq_length, the learning rate, the data) cannot "
            "be checked") in caplog.text
    # Reading its checkpoint to check the model leaves no flood of TensorFlow's warnings
    # about the optimizer's values it did not restore (53 lines once).
    import gc
    gc.collect()  # (TensorFlow warns when the read's status is collected)
    assert "could not be found in the restored object" not in caplog.text
    assert "Resumed from" in caplog.text
    written = record(run_dir)
    assert written["identity"]["task_name"] == "sst-2"
    assert [h.get("note") for h in written["history"]] == [
        "the record starts here; earlier settings are unknown"]
    # Its checkpoints (the Trainer's) were adopted, so rotation kept its own newest two.
    assert written["checkpoints"] == ["ckpt-4", "ckpt-6"]
    assert sorted(p.name for p in run_dir.glob("ckpt-*.index")) == ["ckpt-4.index",
                                                                    "ckpt-6.index"]


def test_rotation_deletes_only_checkpoints_the_run_wrote(world, tmp_path):
    """A pre-trained checkpoint listed in the state file of the directory a run
    writes in is never deleted by keep_checkpoint_max."""
    directory = pathlib_copy(world.ckpt, tmp_path / "dir")  # holds ckpt-1, listed
    weight = tf.Variable(0.0)
    saver = RunCheckpoints(tf.train.Checkpoint(weight=weight), str(directory), 2,
                           RunDirectory(str(directory)))
    for step in (2, 3, 4, 5):
        weight.assign(float(step))
        saver.save(step)
    assert sorted(p.name for p in directory.glob("ckpt-*.index")) == [
        "ckpt-1.index", "ckpt-4.index", "ckpt-5.index"]
    state = tf.train.get_checkpoint_state(str(directory))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        "ckpt-1", "ckpt-4", "ckpt-5"]
    assert os.path.basename(state.model_checkpoint_path) == "ckpt-5"
    assert record(directory)["checkpoints"] == ["ckpt-4", "ckpt-5"]
    assert (directory / "checkpoint").read_text().startswith('model_checkpoint_path: "ckpt-5"')
    restored = tf.Variable(0.0)
    tf.train.Checkpoint(weight=restored).read(str(directory / "ckpt-5")).expect_partial()
    assert float(restored) == 5.0


@pytest.mark.slow  # 20 s or more here
def test_a_resume_evaluates_the_step_a_kill_left_unevaluated(world, tmp_path, monkeypatch,
                                                             caplog):
    out = tmp_path / "run"
    evaluate = evaluation.BestCheckpoint.evaluate

    class Killed(BaseException):
        pass

    def killed_at_step_4(self, step):
        if step == 4:
            raise Killed()  # the process dies while it evaluates step 4 (saved)
        return evaluate(self, step)

    flags = dict(do_train=True, do_eval=True, eval_every_steps=2, keep_best_metric="eval_loss",
                 num_train_epochs=3)
    monkeypatch.setattr(evaluation.BestCheckpoint, "evaluate", killed_at_step_4)
    with pytest.raises(Killed):
        classify(world, out, **flags)
    monkeypatch.setattr(evaluation.BestCheckpoint, "evaluate", evaluate)

    def evaluated():
        return [json.loads(line)["global_step"]
                for line in (out / "eval_history.jsonl").read_text().splitlines()]

    assert evaluated() == [2]
    with caplog.at_level(logging.INFO, logger="absl"):
        classify(world, out, **flags)
    assert "Evaluating step 4, which the run was to evaluate when it stopped" in caplog.text
    assert evaluated() == [2, 4, 6]


def test_a_missed_step_whose_checkpoint_is_gone_is_said_in_one_line(tmp_path, caplog):
    """Steps 4 and 6 were due; 6 is the step the run resumes at, 4's checkpoint is gone."""
    class Task(base.Task):
        spec = families.TaskSpec("scripted", "", RunConfig)

        def evaluate(self, trainer):
            return {"eval_loss": 1.0 / int(trainer.global_step.numpy())}

    class Trainer:
        is_chief = True
        model = tf.Module()
        global_step = tf.Variable(6, dtype=tf.int64)

    (tmp_path / "eval_history.jsonl").write_text('{"global_step": 2, "eval_loss": 0.5}\n')
    RunDirectory(str(tmp_path)).eval_schedule_start(2, 0, write=True)
    config = RunConfig(output_dir=str(tmp_path), eval_every_steps=2, keep_best_metric="eval_loss")
    best = evaluation.BestCheckpoint(Task(config, config, run_directory=RunDirectory(
        str(tmp_path))), Trainer())
    with caplog.at_level(logging.INFO, logger="absl"):
        best.evaluate_missed(num_train_steps=10)
    lines = [r.getMessage() for r in caplog.records if "were to be evaluated" in r.getMessage()]
    assert lines == ["Step(s) 4 were to be evaluated (--eval_every_steps=2), but the run stopped "
                     "first and their checkpoints are gone: they cannot be evaluated now"]
    history = [json.loads(line) for line in (tmp_path / "eval_history.jsonl").read_text()
               .splitlines()]
    assert [h["global_step"] for h in history] == [2, 6]
    assert best.state["step"] == 6 and best.state["value"] == pytest.approx(1 / 6)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_what_killed_runs_left_is_removed_and_nothing_else(world, run_dir):
    pid = _dead_pid()
    leftovers = [run_dir / "ckpt-6_temp", run_dir / "best" / f".best.json.tmp-{pid}-0a1b2c3d",
                 run_dir / "features" / f".dev.tf_record.tmp-{pid}-0a1b2c3d",
                 run_dir / f".eval_results.txt.tmp-{pid}-0a1b2c3d"]
    (run_dir / "ckpt-6_temp").mkdir()
    (run_dir / "ckpt-6_temp" / "part-00000-of-00001.index").write_text("half")
    for path in leftovers[1:]:
        path.parent.mkdir(exist_ok=True)
        path.write_text("half")
    kept = [run_dir / "ckpt-notes_temp", run_dir / "notes.txt",
            run_dir / "features" / f".x.tmp-{os.getpid()}-0a1b2c3d"]  # a live writer's
    kept[0].mkdir()
    for path in kept[1:]:
        path.write_text("mine")
    classify(world, run_dir, do_eval=True)
    assert [p for p in leftovers if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []


def test_two_writers_of_one_new_file_one_wins(tmp_path):
    """The existence check and the publication of a file that is never
    overwritten are one step: of two writers, the one that publishes second
    fails, and its output is removed."""
    path = tmp_path / "vectors.npy"
    first = io.atomic_output(str(path), "wb", overwrite=False)
    first.__enter__().write(b"first")
    with io.atomic_output(str(path), "wb", overwrite=False) as second:
        second.write(b"second")
    with pytest.raises(UserError, match="exists now \\(another process wrote it"):
        first.__exit__(None, None, None)
    assert path.read_bytes() == b"second"
    assert os.listdir(tmp_path) == ["vectors.npy"]  # no temporary left
    io.atomic_write(str(path), b"replaced")  # writers that may overwrite still do
    assert path.read_bytes() == b"replaced"


# === The record read through a schema (issue 44) ===


def _write_record(run_dir, change) -> bytes:
    written = record(run_dir)
    change(written)
    (run_dir / "run.json").write_text(json.dumps(written))
    return (run_dir / "run.json").read_bytes()


@pytest.mark.parametrize("change, field", [
    (lambda r: r.update(checkpoints="ckpt-4"), "checkpoints"),
    (lambda r: r["identity"].update(labels=5), "identity.labels"),
    (lambda r: r["settings"].update(learning_rate="fast"), "settings.learning_rate"),
    (lambda r: r.update(eval_schedule={"every": "2", "from_step": 0}), "eval_schedule.every"),
    (lambda r: r.update(history={}), "history"),
])
def test_a_field_of_the_wrong_type_is_one_line_naming_it(world, run_dir, change, field):
    """Once an AttributeError traceback; the advice is never to delete the record."""
    text = _write_record(run_dir, change)
    for modes in (dict(do_train=True), dict(do_eval=True)):
        with pytest.raises(RunDirectoryError) as refused:
            classify(world, run_dir, **modes)
        message = str(refused.value)
        assert "\n" not in message and f"its field {field}" in message, message
        assert "is damaged" in message and "delete" not in message
    assert (run_dir / "run.json").read_bytes() == text


def test_an_unknown_format_is_refused_not_rewritten(world, run_dir):
    text = _write_record(run_dir, lambda r: r.update(format=99))
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError, match="has format 99, which this version") as refused:
        classify(world, run_dir, do_train=True)
    assert "\n" not in str(refused.value)
    assert (run_dir / "run.json").read_bytes() == text
    assert kit.snapshot(run_dir) == before


def test_damage_does_not_advise_deleting_the_record(world, run_dir):
    (run_dir / "run.json").write_text("{not json")
    with pytest.raises(RunDirectoryError) as refused:
        classify(world, run_dir, do_eval=True)
    assert "is damaged" in str(refused.value) and "delete" not in str(refused.value)


def test_evaluating_predicting_exporting_never_write_the_record(world, run_dir, monkeypatch,
                                                                tmp_path):
    """A read-only run.json (here: any write of it fails, as for a user without
    the right; the tests run as root) is no obstacle to a run that trains nothing."""
    os.chmod(run_dir / "run.json", 0o444)
    text = (run_dir / "run.json").read_bytes()
    real_write = io.atomic_write

    def refuse_the_record(path, *args, **kwargs):
        if os.path.basename(str(path)) == "run.json":
            raise PermissionError(13, "Permission denied", str(path))
        return real_write(path, *args, **kwargs)

    monkeypatch.setattr(io, "atomic_write", refuse_the_record)
    results = classify(world, run_dir, do_eval=True, do_predict=True,
                       export_dir=str(tmp_path / "export"))
    assert results["global_step"] == 4
    assert (run_dir / "run.json").read_bytes() == text


def test_a_session_that_fails_before_training_leaves_the_record_as_it_was(world, run_dir,
                                                                         monkeypatch):
    """`classify --gradient_accumulation_steps=2` once crashed in its first step
    with the change already in the record: the record is written with the
    session's first checkpoint."""
    text = (run_dir / "run.json").read_bytes()

    def fail(*args, **kwargs):
        raise RuntimeError("the first step failed")

    monkeypatch.setattr(base_trainer.Trainer, "train", fail)
    with pytest.raises(RuntimeError, match="the first step failed"):
        classify(world, run_dir, do_train=True, num_train_epochs=3, learning_rate=2e-3,
                 allow_changed_settings=True)
    assert (run_dir / "run.json").read_bytes() == text


# === Identity without a record ===


def test_a_deleted_record_does_not_let_another_length_through(world, run_dir):
    """classifier_config.json says what the run is when run.json is gone."""
    (run_dir / "run.json").unlink()
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError) as refused:
        classify(world, run_dir, do_train=True, max_seq_length=24)
    message = str(refused.value)
    assert "holds checkpoints a run wrote but no run.json (it was deleted" in message
    assert "--max_seq_length was 16, now 24" in message and "\n" not in message
    assert kit.snapshot(run_dir) == before


@pytest.mark.parametrize("make, family, modes", [
    (_ner, "ner", dict(do_train=True)),
    (_swag, "multiple choice", dict(do_predict=True)),
])
def test_a_pre_record_directory_of_another_task_is_refused_before_any_write(
        world, run_dir, make, family, modes):
    """Once a shape ValueError after NER had written its label_list.txt into the
    classifier's directory."""
    (run_dir / "run.json").unlink()
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError) as refused:
        run_task(*make(world, run_dir, **modes))
    assert str(refused.value).startswith(
        f"--output_dir {run_dir} holds a classification (--task_name=sst-2) run (it holds "
        "checkpoints a run wrote but no run.json (it was deleted, or the run is older than run "
        "records)")
    assert f"not a {family} one" in str(refused.value)
    assert kit.snapshot(run_dir) == before


def test_a_pre_record_checkpoint_of_another_model_is_refused_before_any_write(world, run_dir):
    """No file says what the run is: its checkpoint's variables against the model."""
    (run_dir / "run.json").unlink()
    (run_dir / "classifier_config.json").unlink()
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError) as refused:
        run_task(*_swag(world, run_dir, do_predict=True))
    message = str(refused.value)
    assert "is not this multiple choice task's model" in message and "\n" not in message
    assert kit.snapshot(run_dir) == before


# === The budget and the compute dtype are settings ===


def test_a_dtype_change_on_resume_is_one_line(world, run_dir):
    """Once a RestoreV2 traceback."""
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError) as refused:
        classify(world, run_dir, do_train=True, dtype="float16")
    message = str(refused.value)
    assert "--dtype was float32, now float16" in message and "\n" not in message
    assert kit.snapshot(run_dir) == before


@pytest.mark.slow  # (minutes of CI: its runs; `pytest -m slow`)
def test_a_budget_change_needs_the_flag_and_is_recorded(world, run_dir):
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError, match="--max_train_minutes was null, now 60"):
        classify(world, run_dir, do_train=True, max_train_minutes=60)
    assert kit.snapshot(run_dir) == before
    classify(world, run_dir, do_train=True, num_train_epochs=3, max_train_minutes=60,
             allow_changed_settings=True)
    written = record(run_dir)
    assert written["settings"]["max_train_minutes"] == 60
    [change] = written["history"]
    assert change["changed"]["max_train_minutes"] == [None, 60]


def test_an_allowed_dtype_change_into_float16_is_still_one_line(world, run_dir):
    """float16's loss scaling is in the optimizer: the checkpoint could not be restored."""
    before = kit.snapshot(run_dir)
    with pytest.raises(RunDirectoryError, match="cannot resume into or out of float16"):
        classify(world, run_dir, do_train=True, dtype="float16", allow_changed_settings=True)
    assert kit.snapshot(run_dir) == before
