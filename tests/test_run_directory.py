"""The run flow owns its --output_dir: one run at a time, nothing written before
everything is checked, no output over an input, the same dtype flag everywhere.

Runs are subprocesses of the real scripts on a tiny random encoder and a tiny
SST-2-layout set (the fixtures of tests/test_run_classifier.py).
"""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from support import processes, tiny_config
from official_bert.configs import RunConfig
from test_run_classifier import (DEV, DEV_LABELS, REPO, TRAIN, TRAIN_LABELS, VOCAB, make_checkpoint,
                                 write_sst2)


def _env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("OFFICIAL_BERT_TRACEBACK", None)
    return env


def start(*args):
    return processes.start([sys.executable, *args], cwd=REPO, env=_env())


def run(*args):
    return processes.run([sys.executable, *args], cwd=REPO, env=_env(), text=True,
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
    sst = write_sst2(root / "sst", (TRAIN * 8, TRAIN_LABELS * 8), (DEV, DEV_LABELS), DEV)
    return dict(root=root, ckpt=ckpt, sst=sst)


def classify(data, out, *extra):
    return ["run_classifier.py", "--task_name=sst-2", f"--data_dir={data['sst']}",
            f"--init_checkpoint={data['ckpt']}", "--max_seq_length=16", "--train_batch_size=4",
            "--eval_batch_size=2", "--learning_rate=1e-3", "--log_steps=5",
            f"--output_dir={out}", *extra]


@pytest.mark.slow  # 10 s or more here
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
    assert "its weights, untrained further" in again.stderr and (out / "eval_results.txt").exists()


@pytest.fixture(scope="module")
def trained_run(data, tmp_path_factory):
    """A run directory trained and evaluated for one epoch under umask 027 (not the
    usual 022, so that following it shows)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    old = os.umask(0o027)
    try:
        result = run(*classify(data, out, "--do_train", "--do_eval", "--num_train_epochs=1"))
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_files_follow_the_umask(trained_run):
    for name in ("bert_config.json", "vocab.txt", "classifier_config.json", "eval_results.txt"):
        assert stat.S_IMODE(os.stat(trained_run / name).st_mode) == 0o640, name
    # No temporary file survives the run, nor the lock file.
    assert not [n for n in os.listdir(trained_run) if ".tmp-" in n]
    assert not (trained_run / ".official_bert.lock").exists()


@pytest.mark.slow  # 7 s or more here
def test_rerun_with_another_vocabulary_changes_nothing(data, trained_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(trained_run, out)
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
    # The run directory as its own --init_checkpoint is not an output over an input.
    own = run(*classify(data, out, "--do_eval", f"--init_checkpoint={out}"))
    assert own.returncode == 0, own.stderr[-3000:]
    # What it restored: the whole model from the run's checkpoint (docs/google_bert.md).
    assert "Using " in own.stderr and "its weights, untrained further" in own.stderr
    assert "The whole model, task head included, comes from " in own.stderr
    assert "Task head: " not in own.stderr


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


# Every other command that writes, with an output pointed at one of its inputs
# (run_classifier, extract_features and embed above and in tests/test_embed.py):
# (command, its flags, the input the output names, a word the error line says).
# `W` is the tiny world of tools/kit/fault_kit.py.
OUTPUT_OVER_INPUT = {
    "pretrain": ("run_pretraining.py", lambda W: [
        "--do_train", f"--input_file={W.path('pretrain.tfrecord')}", f"--vocab_file={W.vocab}",
        f"--bert_config_file={W.config}", "--max_seq_length=32", "--max_predictions_per_seq=5",
        f"--output_dir={W.path('pretrain.tfrecord')}"], "pretrain.tfrecord", "--input_file"),
    "squad": ("run_squad.py", lambda W: [
        "--do_train", f"--train_file={W.path('squad/train.json')}", f"--init_checkpoint={W.ckpt}",
        "--max_seq_length=32", "--max_query_length=8", "--doc_stride=8",
        f"--output_dir={W.path('squad/train.json')}"], "squad/train.json", "--train_file"),
    "swag": ("run_swag.py", lambda W: [
        "--do_train", f"--train_file={W.path('swag/train.csv')}", f"--init_checkpoint={W.ckpt}",
        "--max_seq_length=32", f"--output_dir={W.path('swag/train.csv')}"],
        "swag/train.csv", "--train_file"),
    "ner": ("run_ner.py", lambda W: [
        "--do_train", f"--train_file={W.path('conll/train.txt')}", f"--init_checkpoint={W.ckpt}",
        "--max_seq_length=32", f"--output_dir={W.path('conll/train.txt')}"],
        "conll/train.txt", "--train_file"),
    "glue-submission": ("bert glue-submission", lambda W: [
        f"--runs_dir={W.path('glue')}", f"--output_file={W.path('glue')}"], "glue", "--runs_dir"),
    "export-google": ("bert export-google", lambda W: [
        f"--init_checkpoint={W.ckpt}", f"--output_dir={W.ckpt}"], "ckpt", "--output_dir"),
    "export-encoder": ("bert export-encoder", lambda W: [
        f"--init_checkpoint={W.ckpt}", f"--output_dir={W.ckpt}", "--max_seq_length=32"],
        "ckpt", "--init_checkpoint"),
    "prepare-corpus": ("bert prepare-corpus", lambda W: [
        f"--input={W.path('corpus.txt')}", f"--output_file={W.path('corpus.txt')}"],
        "corpus.txt", "--input"),
    "build-vocab": ("bert build-vocab", lambda W: [
        f"--input_file={W.path('corpus.txt')}", f"--output_file={W.path('corpus.txt')}"],
        "corpus.txt", "--input_file"),
    "create-pretraining-data": ("create_pretraining_data.py", lambda W: [
        f"--input_file={W.path('corpus.txt')}", f"--output_file={W.vocab}", f"--vocab_file={W.vocab}"],
        "vocab.txt", "--vocab_file"),
    "squad-split": ("bert squad-split", lambda W: [
        f"--input_file={W.path('squad/dev.json')}", f"--train_output={W.path('squad/dev.json')}",
        f"--dev_output={W.path('squad/dev_part.json')}", "--num_train_articles=1"],
        "squad/dev.json", "--input_file"),
    # The datasets' <group>/ directories of the sources would pass for unpacked datasets.
    "download": ("bert download", lambda W: [
        "wnut17", f"--output_dir={W.path('conll')}", f"--source_dir={W.path('conll')}"],
        "conll", "--source_dir"),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from support import fault_kit

    return fault_kit, fault_kit.World(tmp_path_factory.mktemp("world")).build()


@pytest.mark.parametrize("name", sorted(OUTPUT_OVER_INPUT))
def test_every_writer_refuses_an_output_that_is_its_input(world, name):
    """One line naming the input, no traceback, and every file of the world as
    it was (nothing changed, nothing added)."""
    kit, w = world
    script, flags, target, word = OUTPUT_OVER_INPUT[name]
    before = kit.snapshot(w.root)
    result = kit.run(kit.command(script, *flags(w)))
    line = error_line(result)
    assert str(w.root / target) in line and word in line, line
    assert kit.snapshot(w.root) == before


# Every writer with its output in a location that refuses writes: (command, its flags
# given the world and that location, the flag named).
UNWRITABLE = {
    "classify --output_dir": ("run_classifier.py", lambda W, ro: [
        "--task_name=sst-2", f"--data_dir={W.path('glue')}", f"--init_checkpoint={W.ckpt}",
        "--do_train", "--max_seq_length=16", f"--output_dir={ro}/run"], "--output_dir"),
    "classify --export_dir": ("run_classifier.py", lambda W, ro: [
        "--task_name=sst-2", f"--data_dir={W.path('glue')}", f"--init_checkpoint={W.ckpt}",
        "--do_train", "--max_seq_length=16", f"--output_dir={W.path('out')}",
        f"--export_dir={ro}/export"], "--export_dir"),
    "export-encoder": ("bert export-encoder", lambda W, ro: [
        f"--init_checkpoint={W.ckpt}", f"--output_dir={ro}/hub", "--max_seq_length=16"],
        "--output_dir"),
    "embed": ("bert embed", lambda W, ro: [
        f"--input_file={W.path('predict.txt')}", f"--output_file={ro}/vectors.npy",
        f"--init_checkpoint={W.ckpt}", "--max_seq_length=16"], "--output_file"),
    "download": ("bert download", lambda W, ro: [
        "wnut17", f"--output_dir={ro}/data", f"--source_dir={W.path('conll')}"], "--output_dir"),
}


def read_only_location(tmp_path):
    """(a command prefix, a directory where no file can be created): a read-only
    bind mount in a private mount namespace (`unshare -m`, as root: EROFS, what
    a read-only volume gives) where that is allowed, else /sys (EACCES even
    for root)."""
    source, target = tmp_path / "ro_source", tmp_path / "ro"
    source.mkdir()
    target.mkdir()
    script = 'mount --bind -o ro "$1" "$2" && shift 2 && exec "$@"'
    prefix = ["unshare", "-m", "sh", "-c", script, "sh", str(source), str(target)]
    probe = subprocess.run([*prefix, "touch", str(target / "x")], capture_output=True, text=True)
    if "Read-only file system" in probe.stderr:
        return prefix, target
    return [], "/sys"


@pytest.mark.parametrize("name", sorted(UNWRITABLE))
def test_an_output_location_that_refuses_writes_is_one_line(world, name, tmp_path):
    """Once `OSError: Read-only file system` tracebacks (at the lock, or at the
    end, after the work); now one line naming the flag, before any work."""
    kit, w = world
    prefix, location = read_only_location(tmp_path)
    script, flags, flag = UNWRITABLE[name]
    before = kit.snapshot(w.root)
    result = kit.run([*prefix, *kit.command(script, *flags(w, location))])
    line = error_line(result)
    assert f"error: {flag} {location}/" in line and "cannot be written" in line, line
    assert ("Read-only file system" if prefix else "Permission denied") in line
    assert kit.snapshot(w.root) == before


def test_a_taken_export_version_is_found_before_any_work(world, tmp_path):
    """--export_version that exists: refused before training, before
    preprocessor/ and encoder/ are written, before any vector is computed."""
    kit, w = world
    export = tmp_path / "export"
    (export / "1").mkdir(parents=True)
    taken = f"{export / '1'} exists: an export never overwrites a version"
    runs = {
        "run_classifier.py": ["--task_name=sst-2", f"--data_dir={w.path('glue')}",
                              f"--init_checkpoint={w.ckpt}", "--do_train", "--max_seq_length=16",
                              f"--output_dir={tmp_path / 'run'}"],
        "bert export-encoder": [f"--init_checkpoint={w.ckpt}", "--max_seq_length=16",
                                f"--output_dir={tmp_path / 'hub'}"],
        "bert embed": [f"--init_checkpoint={w.ckpt}", f"--input_file={w.path('predict.txt')}",
                       f"--output_file={tmp_path / 'vectors.npy'}", "--max_seq_length=16"],
    }
    for script, flags in runs.items():
        result = kit.run(kit.command(script, *flags, f"--export_dir={export}",
                                     "--export_version=1"))
        assert taken in error_line(result), script
    assert sorted(os.listdir(tmp_path)) == ["export"]  # no run, no hub/, no vectors
    assert os.listdir(export) == ["1"]


@pytest.mark.slow  # 8 s or more here
def test_two_embeds_into_one_output_file(world, tmp_path):
    """Both once exited 0 and one output was lost: now exactly one writes the
    file, the other stops with one line, and the file is a whole .npy."""
    import numpy as np

    kit, w = world
    out = tmp_path / "vectors.npy"
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"a good movie number {i}\n" for i in range(2000)))
    argv = kit.command("bert embed", f"--init_checkpoint={w.ckpt}", f"--input_file={texts}",
                       f"--output_file={out}", "--max_seq_length=16")
    env = dict(os.environ, **kit.ENV)
    logs = [tempfile.TemporaryFile() for _ in range(2)]
    processes = [subprocess.Popen(argv, env=env, cwd=str(kit.REPO), stdout=subprocess.DEVNULL,
                                  stderr=log) for log in logs]
    outcomes = []
    for process, log in zip(processes, logs):
        process.wait(timeout=300)
        log.seek(0)
        outcomes.append((process.returncode, log.read().decode("utf-8", "replace")))
    assert sorted(code for code, _ in outcomes) == [0, 1], [err[-2000:] for _, err in outcomes]
    [stderr] = [err for code, err in outcomes if code == 1]
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and str(out) in lines[0] and "Traceback" not in stderr, stderr[-2000:]
    assert np.load(out).shape == (2000, kit.TINY_CONFIG["hidden_size"])
    # No temporary left; the project's record of what it wrote is beside the output.
    from official_bert import io

    assert sorted(os.listdir(tmp_path)) == sorted([io.OUTPUT_LEDGER, "texts.txt", "vectors.npy"])


@pytest.mark.parametrize("dtype,expected", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                            ("float16", "float16")])
def test_dtype_sets_the_compute_dtype_of_every_task(dtype, expected):
    import keras

    from official_bert.tasks import classification, multiple_choice, ner, pretraining
    from official_bert.tasks import squad

    config = tiny_config(vocab_size=len(VOCAB))
    run_config = RunConfig(dtype=dtype)
    tasks = [
        classification.ClassificationTask(run_config=run_config, num_classes=2, bert_config=config),
        squad.SpanLabelingTask(run_config=run_config, bert_config=config),
        multiple_choice.MultipleChoiceTask(run_config=run_config, bert_config=config),
        ner.NerTask(ner.NerConfig(labels=["O", "B-X", "I-X"]), run_config, bert_config=config),
        pretraining.PretrainingTask(run_config=run_config, bert_config=config),
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


@pytest.mark.slow  # 10 s or more here
def test_dtype_flag_through_a_script(data, tmp_path):
    """--dtype read by the run flow of a real script: the model it trains
    computes in bfloat16 (the run's log line), its variables stay float32."""
    result = run(*classify(data, tmp_path / "run", "--do_train", "--num_train_epochs=1",
                           "--max_train_examples=8", "--dtype=bfloat16"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert ("BertClassifier computes in bfloat16, variables in float32 (--dtype=bfloat16)"
            in result.stderr), result.stderr[-3000:]


@pytest.mark.parametrize("command", ["extract_features.py", "embed"])
def test_dtype_of_the_feature_based_commands(data, tmp_path, command):
    """extract_features and bert embed take --dtype (cli_flags' definition): the
    encoder computes in bfloat16 and the vectors are float32 ones within
    bfloat16's precision of the float32 run's."""
    import json

    import numpy as np

    text = tmp_path / "sentences.txt"
    text.write_text("a good movie\nthe film is awful ||| great\n")
    vectors, lines = {}, {}
    for dtype in ("float32", "bfloat16"):
        if command == "embed":
            out = tmp_path / f"{dtype}.npy"
            args = ["-m", "official_bert.commands.cli", "embed", f"--output_file={out}"]
        else:
            out = tmp_path / f"{dtype}.jsonl"
            args = ["extract_features.py", f"--output_file={out}", "--layers=-1",
                    "--pooling=mean"]
        result = run(*args, f"--input_file={text}", f"--init_checkpoint={data['ckpt']}",
                     "--max_seq_length=16", f"--dtype={dtype}")
        assert result.returncode == 0, result.stderr[-3000:]
        lines[dtype] = [line for line in result.stderr.splitlines() if " computes in " in line]
        vectors[dtype] = (np.load(out) if command == "embed" else np.array(
            [json.loads(line)["layers"][0]["values"] for line in out.read_text().splitlines()]))
    assert len(lines["bfloat16"]) == 1
    assert lines["bfloat16"][0].endswith(
        "BertEncoder computes in bfloat16, variables in float32 (--dtype=bfloat16)")
    assert lines["float32"][0].endswith("computes in float32, variables in float32 "
                                        "(--dtype=float32)")
    difference = np.abs(vectors["bfloat16"] - vectors["float32"]).max()
    assert 0 < difference < 0.05 * np.abs(vectors["float32"]).max()


def test_a_resume_says_the_model_comes_from_the_run_not_init_checkpoint(tmp_path, caplog):
    """docs/google_bert.md: predicting with --init_checkpoint=$TRAINED_CLASSIFIER
    inside --output_dir resumes the run's latest checkpoint, head included; an
    older checkpoint of the run named there is not the one used, and a warning says so."""
    import logging
    import types

    from official_bert.tasks import runner

    out = tmp_path / "run"
    trainer = types.SimpleNamespace(resumed_from=str(out / "ckpt-343"))

    def said(init):
        caplog.clear()
        config = types.SimpleNamespace(init_checkpoint=init, output_dir=str(out))
        with caplog.at_level(logging.INFO, logger="absl"):
            runner._say_what_was_restored(config, trainer)
        return [(r.levelname, r.getMessage()) for r in caplog.records]

    latest = [("INFO", f"The whole model, task head included, comes from {out}/ckpt-343 "
                       "(--output_dir's latest checkpoint)")]
    assert said(str(out / "ckpt-343")) == latest
    assert said(str(out)) == latest
    [(level, message)] = said(str(out / "ckpt-200"))
    assert level == "WARNING" and message.startswith(
        f"--init_checkpoint {out}/ckpt-200 is not used: a run resumes from --output_dir's "
        f"latest checkpoint, {out}/ckpt-343")
    [(level, message)] = said("/models/bert_model.ckpt")
    assert level == "INFO" and message.endswith(
        "--init_checkpoint /models/bert_model.ckpt is not read again")
    assert said(None) == []
