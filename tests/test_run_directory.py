"""The run flow owns its --output_dir: one run at a time, nothing written before
everything is checked, no output over an input, the same dtype flag everywhere.

Runs are subprocesses of the real scripts on a tiny random encoder and a tiny
SST-2-layout set (the fixtures of tests/test_run_classifier.py).
"""

import os
import stat
import subprocess
import sys
import time

import pytest

from conftest import tiny_config
from test_run_classifier import DEV, DEV_LABELS, REPO, TRAIN, TRAIN_LABELS, VOCAB, make_checkpoint


def _env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("OFFICIAL_BERT_TRACEBACK", None)
    return env


def start(*args):
    return subprocess.Popen([sys.executable, *args], cwd=REPO, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run(*args):
    return subprocess.run([sys.executable, *args], cwd=REPO, env=_env(), text=True,
                          capture_output=True, timeout=300)


def error_line(result):
    """The one user-facing line of a failed command (and that there is no traceback)."""
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def snapshot(directory):
    """path → (bytes, mode) of every file under `directory`."""
    files = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, directory)] = (f.read(), os.stat(path).st_mode)
    return files


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("rundir")
    ckpt = make_checkpoint(str(root / "ckpt"))
    sst = root / "sst"
    sst.mkdir()
    (sst / "train.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in zip(TRAIN * 8, TRAIN_LABELS * 8)))
    (sst / "dev.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in zip(DEV, DEV_LABELS)))
    (sst / "test.tsv").write_text("index\tsentence\n"
                                  + "".join(f"{i}\t{s}\n" for i, s in enumerate(DEV)))
    return dict(root=root, ckpt=ckpt, sst=sst)


def classify(data, out, *extra):
    return ["run_classifier.py", "--task_name=sst-2", f"--data_dir={data['sst']}",
            f"--init_checkpoint={data['ckpt']}", "--max_seq_length=16", "--train_batch_size=4",
            "--eval_batch_size=2", "--learning_rate=1e-3", "--log_steps=5",
            f"--output_dir={out}", *extra]


def test_two_runs_into_one_directory(data, tmp_path):
    out = tmp_path / "run"
    first = start(*classify(data, out, "--do_train", "--do_eval", "--num_train_epochs=40"))
    lock = out / ".official_bert.lock"
    deadline = time.time() + 120
    while time.time() < deadline and not (lock.exists() and str(first.pid) in lock.read_text()):
        assert first.poll() is None, first.communicate()[1][-3000:]
        time.sleep(0.2)
    assert str(first.pid) in lock.read_text()
    second = run(*classify(data, out, "--do_eval"))
    line = error_line(second)
    assert f"--output_dir {out} is in use by process {first.pid}" in line
    assert first.poll() is None, "the first run should still be training"
    _, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr[-3000:]
    # The first run's directory is complete and loadable: evaluate it again.
    again = run(*classify(data, out, "--do_eval"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Resumed from" in again.stderr and (out / "eval_results.txt").exists()


def test_rerun_with_another_vocabulary_changes_nothing(data, tmp_path):
    out = tmp_path / "run"
    trained = run(*classify(data, out, "--do_train", "--num_train_epochs=1"))
    assert trained.returncode == 0, trained.stderr[-3000:]
    before = snapshot(out)
    other = tmp_path / "other_vocab.txt"
    other.write_text("\n".join(VOCAB[:5] + list(reversed(VOCAB[5:]))) + "\n")
    result = run(*classify(data, out, "--do_eval", "--do_predict", f"--vocab_file={other}"))
    line = error_line(result)
    assert f"--output_dir {out} holds a run trained with another vocab.txt" in line
    assert "nothing was changed" in line
    assert snapshot(out) == before  # every file's bytes (and mode), and no new file

    # The same vocabulary again is fine.
    same = run(*classify(data, out, "--do_eval", f"--vocab_file={data['ckpt']}/vocab.txt"))
    assert same.returncode == 0, same.stderr[-3000:]


def test_files_follow_the_umask(data, tmp_path):
    out = tmp_path / "run"
    old = os.umask(0o022)
    try:
        result = run(*classify(data, out, "--do_train", "--do_eval", "--num_train_epochs=1"))
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("bert_config.json", "vocab.txt", "classifier_config.json", "eval_results.txt"):
        assert stat.S_IMODE(os.stat(out / name).st_mode) == 0o644, name
    # No temporary file survives the run.
    assert not [n for n in os.listdir(out) if ".tmp-" in n]


def test_an_output_that_is_an_input_is_refused(data, tmp_path):
    # --output_dir is the data directory.
    line = error_line(run(*classify(data, data["sst"], "--do_train")))
    assert "--output_dir is --data_dir" in line
    # A prediction file the run would write is the predict file.
    out = tmp_path / "run"
    out.mkdir()
    (out / "test_results.tsv").write_text("index\tsentence\n0\ta good movie\n")
    line = error_line(run(*classify(data, out, "--do_predict", "--do_train",
                                    f"--predict_file={out / 'test_results.tsv'}")))
    assert "the run's test_results.tsv is --predict_file" in line
    assert os.listdir(out) == ["test_results.tsv"]  # refused before anything was written
    # --export_dir is --output_dir.
    line = error_line(run(*classify(data, out, "--do_train", f"--export_dir={out}")))
    assert "--export_dir must not be --output_dir" in line or "--export_dir is" in line
    # extract_features writing over its input.
    text = tmp_path / "sentences.txt"
    text.write_text("a good movie\n")
    line = error_line(run("extract_features.py", f"--input_file={text}", f"--output_file={text}",
                          f"--init_checkpoint={data['ckpt']}", "--max_seq_length=16"))
    assert "--output_file is --input_file" in line or "output_file is --input_file" in line
    assert text.read_text() == "a good movie\n"


@pytest.mark.parametrize("dtype,expected", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                            ("float16", "float16")])
def test_dtype_sets_the_compute_dtype_of_every_task(dtype, expected):
    import keras

    from official_bert.tasks import base, classification, multiple_choice, ner, pretraining
    from official_bert.tasks import squad

    config = tiny_config(vocab_size=len(VOCAB))
    run_config = base.RunConfig(dtype=dtype)
    tasks = [
        classification.ClassificationTask(run=run_config, num_classes=2, bert_config=config),
        squad.SpanLabelingTask(run=run_config, bert_config=config),
        multiple_choice.MultipleChoiceTask(run=run_config, bert_config=config),
        ner.NerTask(ner.NerConfig(labels=["O", "B-X", "I-X"]), run_config, bert_config=config),
        pretraining.PretrainingTask(run=run_config, bert_config=config),
    ]
    for task in tasks:
        model = task.build_model()
        assert model.encoder.embeddings.compute_dtype == expected, type(task).__name__
        assert model.encoder.compute_dtype in (expected, "float32")  # its own policy: see encoder
        dense_heads = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
        assert dense_heads, type(task).__name__
        for layer in dense_heads:  # (LayerNorms compute in float32 by design)
            assert layer.compute_dtype == expected, (type(task).__name__, layer.name)
    feature_task = ner.FeatureBasedNerTask(ner.NerConfig(labels=["O", "B-X"], lstm_units=4,
                                                         task_model="dense"), run_config)
    feature_task.feature_dim = 8
    assert feature_task.build_model().compute_dtype == expected
