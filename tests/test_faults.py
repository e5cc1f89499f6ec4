"""Fault injection: every bad file, bad flag and fault ends in one clear line.

Each test runs the real command in a subprocess on tiny inputs
(`tools/kit/fault_kit.py`) with one thing broken, and checks what a user sees:

* a non-zero exit status;
* exactly one `error: ...` line (absl's own line for a flag it cannot parse),
  with no traceback, naming the file (and line or record) or the flag;
* no output that a later step would take as complete.

Classes covered: truncated or corrupt files of every kind the project reads
(checkpoint .index/.data, model.safetensors, TFRecord with and without GZIP, a
SavedModel, vocabularies, configs, TSV/JSON/CSV/CoNLL text), a full disk (a
file-size limit: EFBIG), SIGKILL while a multi-file output is being published,
the validations of flags and model files, text that is not UTF-8 (file and
line), duplicate SQuAD ids, sidecar files inside data globs, and two scale
traps (SQuAD windowing is linear; `bert predict` answers a pipe as it goes).
Most training-based ones (a full disk while saving a checkpoint, a TFRecord
truncated in the middle, resuming after a damaged checkpoint) are `slow`; a
truncated checkpoint in a run directory runs by default.

The other classes are tested beside the code they concern: the serving
signature's input shapes (a 2x2 string input refused, not flattened) and its
batch limit in tests/test_serving.py; the catch-all (a bug is not passed off as
a user error: it surfaces as a traceback with where to report it) in
tests/test_app.py.

`tools/bad_input_sweep.py` runs the same kinds of fault against every command
and prints the table in docs/troubleshoot.md ("Bad input and faults: the sweep").
"""

import gzip
import json
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import sys
import time

import pytest

from support import fault_kit as kit

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Vocabulary, config, an official_bert checkpoint, pre-training TFRecords
    and the data of every task, tiny (built once, copied per test)."""
    return kit.World(tmp_path_factory.mktemp("world")).build()


@pytest.fixture
def w(world, tmp_path):
    """A fresh copy of the world for one test."""
    shutil.copytree(world.root, tmp_path / "w")
    return kit.World(tmp_path / "w")


def one_line_error(result, *names, absent=()):
    """Asserts what a user must see for a bad input; returns the error line."""
    assert result.returncode != 0, result.stderr[-3000:]
    assert not result.traceback, result.stderr[-3000:]
    lines = result.error_lines
    assert len(lines) == 1, result.stderr[-3000:]
    assert any(str(name) in lines[0] for name in names), (names, lines[0])
    for path in absent:
        assert not os.path.exists(path), f"{path} was left behind"
    return lines[0]


def run(script, *args, **kwargs):
    return kit.run(kit.command(script, *args), **kwargs)


def user_env():
    """The environment of a user's shell: without the settings the tests use to
    quieten TensorFlow and hide the GPU (kit.ENV, conftest), so that what a
    command prints is what a user would see."""
    hidden = ("TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES")
    return {k: v for k, v in {**os.environ, **kit.ENV}.items() if k not in hidden}


def assert_quiet(output):
    """None of what a user should not see in a command's output: TensorFlow's
    failed CUDA probe on a machine without a GPU ("failed call to cuInit: ...
    CUDA error"), or a line too long to read (a dumped config or array)."""
    lines = output.splitlines()
    assert not [line for line in lines if "cuInit" in line or "CUDA error" in line], output[-3000:]
    assert max(map(len, lines), default=0) <= 500, max(lines, key=len)[:600]


def classify_args(w, *extra, data=None, ckpt=None, out=None):
    return ["--task_name=sst-2", f"--data_dir={data or w.path('glue')}",
            f"--init_checkpoint={ckpt or w.ckpt}", "--do_train", "--max_seq_length=16",
            "--train_batch_size=4", "--num_train_epochs=1", f"--output_dir={out or w.path('out')}",
            *extra]


def cpd_args(w, output, *extra, inputs=None, vocab=None):
    return [f"--input_file={inputs or w.path('corpus.txt')}", f"--output_file={output}",
            f"--vocab_file={vocab or w.vocab}", "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--dupe_factor=1", "--progress_seconds=0", *extra]


def pretrain_args(w, *extra, inputs=None, steps=2, out=None):
    return [f"--input_file={inputs or w.path('pretrain.tfrecord')}",
            f"--bert_config_file={w.config}", f"--vocab_file={w.vocab}", "--do_train",
            f"--num_train_steps={steps}", "--num_warmup_steps=0", "--save_checkpoints_steps=2",
            "--train_batch_size=4", "--max_seq_length=32", "--max_predictions_per_seq=5",
            "--log_steps=2", f"--output_dir={out or w.path('run')}", *extra]


def completes_something(directory) -> list:
    """The files in a run directory that say a step finished."""
    markers = {"checkpoint", "eval_results.txt", "test_results.tsv", "predictions.json"}
    return [p for p in pathlib.Path(directory).rglob("*") if p.name in markers]


# === A multi-file output killed while it is published; sidecars and globs ===


KILL_AFTER_FIRST_RENAME = """
import os, signal, sys
from official_bert.io import staging  # every publication renames through it
original, renamed = staging.rename, []
def rename(source, destination, overwrite=False):
    original(source, destination, overwrite)
    if not str(destination).endswith(".json"):
        renamed.append(destination)
        if len(renamed) == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # one of the 3 outputs is in place
staging.rename = rename
from official_bert.commands import registry
registry.run_command("create-pretraining-data", sys.argv)
"""


def test_sigkill_while_publishing_a_set_leaves_nothing_a_reader_takes_as_complete(w):
    (w.path("gen")).mkdir()
    outputs = ",".join(str(w.path("gen", f"k-{i}.tfrecord")) for i in range(3))
    killed = kit.run([sys.executable, "-c", KILL_AFTER_FIRST_RENAME,
                      *cpd_args(w, outputs, "--num_workers=3")])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    present = sorted(p.name for p in w.path("gen").iterdir())
    # One output is in place, the other two are hidden temporaries; the manifest says
    # the set is unfinished.
    assert [p for p in present if not p.startswith(".")] == ["k-0.tfrecord"], present
    manifest = json.loads(w.path("gen", ".k-0_tfrecord.summary.json").read_text())
    assert manifest["complete"] is False and len(manifest["files"]) == 3
    # The trainer's reader refuses the set, before anything is written.
    result = run("run_pretraining.py", *pretrain_args(w, inputs=w.path("gen", "k-*.tfrecord")))
    line = one_line_error(result, "k-0.tfrecord")
    assert "unfinished output" in line and "run that command again" in line
    assert not w.path("run").exists() or not completes_something(w.path("run"))
    # The same command again replaces the whole set, and then it reads.
    again = run("-m official_bert.commands.create_pretraining_data",
                *cpd_args(w, outputs, "--num_workers=3"))
    assert again.returncode == 0, again.stderr[-2000:]
    from official_bert import file_sets
    from official_bert.errors import BadFileError

    assert len(file_sets.expand_paths(str(w.path("gen", "k-*.tfrecord")), "input_file")) == 3
    assert json.loads(w.path("gen", ".k-0_tfrecord.summary.json").read_text())["complete"]
    # A file of a complete set that goes missing is refused too (a third of the data
    # would train silently otherwise); a held-out subset of an intact set reads.
    assert len(file_sets.expand_paths(str(w.path("gen", "k-2.tfrecord")), "input_file")) == 1
    # A file of the set cut by a copy, even at a record boundary, is named.
    record = w.path("gen", "k-2.tfrecord")
    kit.truncate(record, record.stat().st_size - 1)
    with pytest.raises(BadFileError, match="k-2.tfrecord is .* bytes, but .* recorded"):
        file_sets.expand_paths(str(w.path("gen", "k-*.tfrecord")), "input_file")
    w.path("gen", "k-1.tfrecord").unlink()
    with pytest.raises(BadFileError, match="1 of them are gone"):
        file_sets.expand_paths(str(w.path("gen", "k-*.tfrecord")), "input_file")


def test_sidecars_never_match_the_data_pattern_of_a_plain_reader(w):
    """A reader that knows nothing of sidecars (google-research/bert's and
    official/nlp's: tf.io.gfile.glob + TFRecordDataset) reads the outputs
    through the usual patterns without meeting the summary."""
    import tensorflow as tf

    w.path("sets").mkdir()
    outputs = [w.path("sets", f"data-{i}.tfrecord") for i in range(2)]
    result = run("-m official_bert.commands.create_pretraining_data",
                 *cpd_args(w, ",".join(map(str, outputs)), "--gzip"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert w.path("sets", ".data-0_tfrecord.summary.json").exists()
    for pattern in ("data-*", "data-0.tfrecord*", "*.tfrecord", "*.tfrecord*", "data*"):
        files = tf.io.gfile.glob(str(w.path("sets", pattern)))
        assert not any(f.endswith(".json") for f in files), (pattern, files)
        records = sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))
        assert records > 0
    # The prepare-corpus stats are a hidden sidecar too.
    (w.path("docs")).mkdir()
    w.path("docs", "a.txt").write_text("One sentence here. And another.\n")
    result = run("-m official_bert.commands.prepare_corpus", f"--input={w.path('docs')}",
                 f"--output_file={w.path('corpus2.txt')}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert tf.io.gfile.glob(str(w.path("corpus2.txt*"))) == [str(w.path("corpus2.txt"))]
    assert w.path(".corpus2_txt.stats.json").exists()


# === A full disk ===


def test_a_full_disk_is_reported_as_such_and_the_same_command_then_succeeds(w):
    (w.path("gen")).mkdir()
    output = w.path("gen", "out.tfrecord")
    args = cpd_args(w, output, "--num_workers=1")
    full = run("-m official_bert.commands.create_pretraining_data", *args, file_size_limit=4096)
    line = one_line_error(full, "out.tfrecord", absent=[output])
    assert line.startswith("error: the disk is full (writing ") and "memory" not in line
    assert not os.listdir(w.path("gen"))  # no temporary, no summary
    again = run("-m official_bert.commands.create_pretraining_data", *args)
    assert again.returncode == 0 and output.exists(), again.stderr[-2000:]


@pytest.mark.slow
def test_a_full_disk_while_saving_a_checkpoint_then_the_run_resumes(w):
    first = run("run_pretraining.py", *pretrain_args(w, steps=4))
    assert first.returncode == 0, first.stderr[-3000:]
    args = pretrain_args(w, "--allow_changed_settings", steps=6)  # 2 steps more
    full = run("run_pretraining.py", *args, file_size_limit=40_000)  # a checkpoint is ~110 KB
    line = one_line_error(full, str(w.path("run")))
    assert line.startswith("error: the disk is full (writing ") and "memory" not in line
    run_dir = w.path("run")
    assert not [p for p in run_dir.iterdir() if "_temp" in p.name]  # no half checkpoint
    assert "ckpt-6" not in (run_dir / "checkpoint").read_text()
    again = run("run_pretraining.py", *args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Resumed from" in again.stderr and "ckpt-4" in again.stderr


# === Damaged files of every kind ===


@pytest.mark.parametrize("damage, name", [
    ("index", "ckpt-1.index"),
    ("data", "ckpt-1.data-00000-of-00001"),
])
def test_a_damaged_init_checkpoint_is_named(w, damage, name):
    kit.truncate(w.ckpt / name)
    result = run("run_classifier.py", *classify_args(w))
    line = one_line_error(result, name)
    assert "is damaged" in line and "copy or download the checkpoint again" in line
    assert not w.path("out").exists() or not completes_something(w.path("out"))


def test_a_truncated_safetensors_file_is_named(w):
    hf = w.path("hf")
    kit.make_huggingface(hf, w.ckpt)
    shutil.copy(w.vocab, hf / "vocab.txt")
    kit.truncate(hf / "model.safetensors")
    before = kit.snapshot(hf)
    result = run("run_classifier.py", *classify_args(w, ckpt=hf))
    line = one_line_error(result, "model.safetensors", absent=[
        w.path("out", "checkpoint"), w.path("out", "eval_results.txt")])
    assert "not a readable safetensors file" in line
    assert not w.path("out").exists() or not completes_something(w.path("out"))
    assert not kit.changed(before, kit.snapshot(hf))  # the input is left as it was


# Each follows the advice and resumes (two tiny runs each: the slow set; a damaged
# checkpoint's line itself runs by default: test_a_damaged_init_checkpoint_is_named).
@pytest.mark.slow
@pytest.mark.parametrize("damage", ["index", "data", "corrupt"])
def test_a_damaged_checkpoint_in_a_run_directory_says_how_to_resume(w, damage):
    first = run("run_pretraining.py", *pretrain_args(w, steps=4))
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = w.path("run")
    if damage == "index":
        kit.truncate(run_dir / "ckpt-4.index")
    elif damage == "data":
        kit.truncate(run_dir / "ckpt-4.data-00000-of-00001")
    else:
        kit.corrupt(run_dir / "ckpt-4.data-00000-of-00001", 0.3, 64)
    before = kit.snapshot(run_dir)
    args = pretrain_args(w, "--allow_changed_settings", steps=6)  # 2 steps more
    result = run("run_pretraining.py", *args)
    line = one_line_error(result, "ckpt-4.index" if damage == "index" else "ckpt-4.data",
                          absent=[run_dir / "ckpt-6.index"])
    assert "the previous checkpoint ckpt-2" in line and "is intact" in line
    assert not kit.changed(before, kit.snapshot(run_dir))  # nothing removed or rewritten
    if damage == "index":
        return
    # Doing what it says resumes from the previous checkpoint.
    for path in run_dir.glob("ckpt-4.*"):
        path.unlink()
    again = run("run_pretraining.py", *args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Resumed from {run_dir / 'ckpt-2'}" in again.stderr


def _damaged_tfrecord(w, compress, damage):
    data = w.path("pretrain.tfrecord").read_bytes()
    path = kit.write(w.path("bad.tfrecord"), gzip.compress(data) if compress else data)
    # (0.55: not at a record boundary; a TFRecord cut at one reads as a valid, shorter
    # file, which only a set's manifest notices: see the test above.)
    (kit.truncate if damage == "truncate" else kit.corrupt)(path, 0.55)
    return path


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("damage", ["truncate", "corrupt"])
def test_the_reader_names_a_truncated_or_corrupt_tfrecord_and_its_record(w, compress, damage):
    from official_bert.training import input_pipeline

    path = _damaged_tfrecord(w, compress, damage)
    bad = input_pipeline.find_bad_file([str(w.path("pretrain.tfrecord")), str(path)])
    assert bad is not None and bad.path == str(path) and bad.record is not None
    assert f"bad.tfrecord record {bad.record} is truncated or corrupt" in str(bad)
    assert input_pipeline.find_bad_file([str(w.path("pretrain.tfrecord"))]) is None


def test_a_corrupt_gzip_tfrecord_stops_pretraining_before_it_starts(w):
    path = _damaged_tfrecord(w, True, "corrupt")
    result = run("run_pretraining.py", *pretrain_args(w, inputs=path))
    line = one_line_error(result, "bad.tfrecord")
    assert "is not a readable TFRecord file" in line


@pytest.mark.slow
@pytest.mark.parametrize("compress", [False, True])
def test_a_tfrecord_truncated_in_the_middle_stops_training_with_its_name(w, compress):
    path = _damaged_tfrecord(w, compress, "truncate")
    result = run("run_pretraining.py", *pretrain_args(w, inputs=path, steps=40))
    line = one_line_error(result, "bad.tfrecord record")
    assert "is truncated or corrupt" in line and "run the same command" in line


def _tiny_saved_model(directory):
    import tensorflow as tf

    module = tf.Module()
    module.v = tf.Variable([1.0, 2.0])
    module.f = tf.function(lambda x: x * module.v, input_signature=[
        tf.TensorSpec([2], tf.float32)])
    tf.saved_model.save(module, str(directory))
    return directory


@pytest.mark.parametrize("damage", ["saved_model.pb", "variables", "not a classifier"])
def test_a_damaged_saved_model_given_to_predict_is_named(w, damage):
    version = _tiny_saved_model(w.path("export", "1"))
    if damage == "saved_model.pb":
        kit.truncate(version / "saved_model.pb")
    elif damage == "variables":
        kit.truncate(version / "variables" / "variables.data-00000-of-00001")
    before = kit.snapshot(w.path("export"))
    result = run("bert predict", f"--model={w.path('export')}", stdin=b"a good movie\n")
    one_line_error(result, "export")
    # predict answers on stdout: not a line there (no header a pipeline would take as the
    # start of an answer), and the export is left as it was.
    assert result.stdout == ""
    assert not kit.changed(before, kit.snapshot(w.path("export")))


# === Validation of model files and flags ===


@pytest.mark.parametrize("setup, args, name", [
    ("vocab_too_big", [], "vocab.txt"),
    ("vocab_without_cls_sep", [], "vocab.txt"),
    ("config_without_layers", [], "bert_config.json"),
    (None, ["--train_batch_size=0"], "--train_batch_size"),
    (None, ["--num_train_epochs=0"], "--num_train_epochs"),
    (None, ["--num_gpus=2"], "--num_gpus"),
])
def test_run_classifier_validates_before_it_writes(w, setup, args, name):
    if setup == "vocab_too_big":
        kit.write(w.ckpt / "vocab.txt", "\n".join(kit.VOCAB + ["extra1", "extra2"]) + "\n")
    elif setup == "vocab_without_cls_sep":
        kit.write(w.ckpt / "vocab.txt", "\n".join(
            t for t in kit.VOCAB if t not in ("[CLS]", "[SEP]")) + "\n")
    elif setup == "config_without_layers":
        values = dict(kit.TINY_CONFIG)
        del values["num_hidden_layers"]
        kit.write(w.ckpt / "bert_config.json", json.dumps(values))
    env = {"CUDA_VISIBLE_DEVICES": ""}  # no GPU, whatever the machine has
    result = run("run_classifier.py", *classify_args(w, *args), env=env)
    line = one_line_error(result, name)
    if setup == "config_without_layers":
        assert "has no 'num_hidden_layers'" in line
    if "--num_gpus=2" in args:
        assert "sees 0 GPU(s)" in line and "--num_gpus=0" in line
    assert not w.path("out").exists() or not completes_something(w.path("out"))


def test_run_squad_refuses_zero_epochs_and_duplicate_question_ids(w):
    common = [f"--init_checkpoint={w.ckpt}", "--max_seq_length=32", "--doc_stride=8",
              "--max_query_length=8", f"--output_dir={w.path('out')}"]
    zero = run("run_squad.py", "--do_train", f"--train_file={w.path('squad', 'train.json')}",
               "--num_train_epochs=0", *common)
    one_line_error(zero, "--num_train_epochs")
    kit.write(w.path("dup.json"), json.dumps(kit.squad_json(
        [("q7", "where is the cat", "mat"), ("q7", "who sat on the cat", "the dog")])))
    dup = run("run_squad.py", "--do_predict", f"--predict_file={w.path('dup.json')}", *common)
    line = one_line_error(dup, "dup.json", absent=[w.path("out", "predictions.json")])
    assert ("question id 'q7' twice: at data[0].paragraphs[0].qas[0] and at "
            "data[0].paragraphs[0].qas[1]") in line


def test_data_prep_checks_the_vocabulary_too(w):
    kit.write(w.path("novocab.txt"), "\n".join(
        t for t in kit.VOCAB if t not in ("[CLS]", "[SEP]")) + "\n")
    output = w.path("out.tfrecord")
    result = run("-m official_bert.commands.create_pretraining_data",
                 *cpd_args(w, output, vocab=w.path("novocab.txt")))
    line = one_line_error(result, "novocab.txt", absent=[output])
    assert "[CLS], [SEP]" in line


# === Text that is not UTF-8: the file and the line ===


def test_a_tsv_that_is_not_utf8_names_its_file_and_line(w):
    kit.write(w.path("glue", "train.tsv"),
              "sentence\tlabel\nthe movie\t1\nbad\t0\ncafé\t1\n".encode("latin-1"))
    result = run("run_classifier.py", *classify_args(w))
    line = one_line_error(result, "train.tsv line 4 is not UTF-8")
    assert "convert the file to UTF-8" in line


def test_a_corpus_line_that_is_not_utf8_names_its_file_and_line(w):
    text = kit.corpus_text().encode().split(b"\n")
    text[4] = b"w1 caf\xe9 w2 ."
    kit.write(w.path("bad.txt"), b"\n".join(text))
    output = w.path("out.tfrecord")
    result = run("-m official_bert.commands.create_pretraining_data",
                 *cpd_args(w, output, inputs=w.path("bad.txt")))
    one_line_error(result, "bad.txt line 5 is not UTF-8", absent=[output])


# === bert predict: input errors and answering a pipe as it goes ===


@pytest.fixture(scope="module")
def classifier_run(world, tmp_path_factory):
    """A run_classifier.py --output_dir with a (random) trained head, written
    as the task writes one, for `bert predict --model` (no training)."""
    import tensorflow as tf

    from official_bert.modeling.configs import BertConfig
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from official_bert.modeling.heads import BertClassifier

    run_dir = tmp_path_factory.mktemp("classifier_run")
    config = BertConfig(**kit.TINY_CONFIG)
    model = BertClassifier(BertEncoder.from_bert_config(config), 2)
    model(dummy_inputs())
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(run_dir),
                               max_to_keep=1, checkpoint_name="ckpt").save(checkpoint_number=1)
    (run_dir / "bert_config.json").write_text(config.to_json_string())
    shutil.copy(world.vocab, run_dir / "vocab.txt")
    (run_dir / "classifier_config.json").write_text(json.dumps({
        "task_name": "sst-2", "labels": ["0", "1"], "regression": False, "pair": False,
        "metric_kind": "binary", "max_seq_length": 16, "do_lower_case": True}))
    return run_dir


def test_predict_names_the_line_that_is_not_utf8(classifier_run, tmp_path):
    result = run("bert predict", f"--model={classifier_run}",
                 stdin=b"a good movie\nfun\nbad \xc3\x28 film\n")
    one_line_error(result, "standard input line 3 is not UTF-8")
    bad = kit.write(tmp_path / "in.txt", b"a good movie\n\xff\n")
    result = run("bert predict", f"--model={classifier_run}", f"--input_file={bad}")
    one_line_error(result, f"{bad} line 2 is not UTF-8")


@pytest.mark.slow  # 10 s or more here
def test_predict_answers_each_batch_while_the_pipe_stays_open(classifier_run):
    """`bert predict` as a filter: the answers to the lines sent so far come
    back while stdin is still open (it does not wait for the end of input).
    Run as a user runs it, it logs nothing a user should not see."""
    env = user_env()
    process = subprocess.Popen(
        [sys.executable, "-m", "official_bert.commands.cli", "predict", f"--model={classifier_run}",
         "--batch_size=2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env, cwd=str(REPO))
    try:
        def read_lines(n, timeout=120):
            lines, deadline, buffer = [], time.time() + timeout, b""
            while len(lines) < n and time.time() < deadline:
                ready, _, _ = select.select([process.stdout], [], [], 1)
                if ready:
                    chunk = os.read(process.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    buffer += chunk
                    *complete, buffer = buffer.split(b"\n")
                    lines += complete
            return [line.decode() for line in lines]

        process.stdin.write(b"a good movie\nthe film is awful\n")  # one full batch
        process.stdin.flush()
        first = read_lines(3)  # the header and both answers, stdin still open
        assert len(first) == 3 and first[0].startswith("label\t"), first
        assert first[1].endswith("\ta good movie") and first[2].endswith("\tthe film is awful")
        process.stdin.write(b"great fun\n")  # half a batch: answered when the input pauses
        process.stdin.flush()
        second = read_lines(1)
        assert len(second) == 1 and second[0].endswith("\tgreat fun"), second
        process.stdin.close()
        assert process.wait(timeout=60) == 0, process.stderr.read().decode()[-2000:]
        assert_quiet(process.stderr.read().decode())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# === Scale: SQuAD windowing is linear in the context ===


def test_squad_windows_are_the_same_and_a_long_context_is_fast(tmp_path):
    from data_prep import squad
    from official_bert.text import tokenization

    vocab = kit.write(tmp_path / "vocab.txt", "\n".join(kit.VOCAB) + "\n")
    tokenizer = tokenization.FullTokenizer(str(vocab))

    def example(words):
        context = " ".join(words)
        tokens, _, spans = squad.split_doc_tokens(context)
        return squad.SquadExample("q", "where is the cat", context, tokens, spans)

    # Normal data: every window and max-context mark as google's quadratic check gives.
    words = [kit.WORDS[i % 17] + ("p1" if i % 5 == 0 else "") for i in range(300)]
    features = squad.convert_examples_to_features([example(words)], tokenizer, 32, 7, 8, False)
    spans = squad.doc_spans_for(sum(len(tokenizer.tokenize(x)) for x in words),
                                32 - len(tokenizer.tokenize("where is the cat")) - 3, 7)
    assert len(features) == len(spans) > 10
    for f in features:
        for position, is_max in f.token_is_max_context.items():
            doc_position = spans[f.doc_span_index].start + position - (len(f.tokens) - 1
                                                                       - spans[f.doc_span_index].length)
            assert is_max == squad.check_is_max_context(spans, f.doc_span_index, doc_position)
    # A 100,000-character context (it took minutes when windowing was quadratic).
    long_words = [kit.WORDS[i % 23] for i in range(33_000)]
    assert len(" ".join(long_words)) > 100_000
    start = time.time()
    features = squad.convert_examples_to_features([example(long_words)], tokenizer, 384, 128,
                                                  64, False)
    assert time.time() - start < 20 and len(features) > 100
    # A single 100,000-character "word" splits in linear time as well.
    start = time.time()
    tokens, offsets, _ = squad.split_doc_tokens("x" * 100_000 + " y")
    assert tokens == ["x" * 100_000, "y"] and offsets[-1] == 1 and time.time() - start < 5


# === Inputs and outputs that change under a training run ===


def _pretrain_until(w, step: int, *extra, wrap=()):
    """A pre-training run started in the background, returned once its log
    shows `step` (its stderr read as it comes)."""
    argv = [*wrap, sys.executable, str(REPO / "run_pretraining.py"),
            *pretrain_args(w, "--num_train_steps=100000", "--log_steps=50", *extra)]
    process = subprocess.Popen(argv, cwd=REPO, env={**os.environ, **kit.ENV},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = b""
    deadline = time.monotonic() + 240
    while f"step {step}/".encode() not in seen:
        assert time.monotonic() < deadline and process.poll() is None, seen.decode()[-3000:]
        ready, _, _ = select.select([process.stderr], [], [], 1.0)
        if ready:
            seen += os.read(process.stderr.fileno(), 1 << 16)
    return process, seen


def _finish(process, seen: bytes) -> kit.Result:
    rest = process.stderr.read()
    process.wait(timeout=120)
    return kit.Result([], process.returncode, "", (seen + rest).decode(), 0.0)


@pytest.mark.slow
def test_a_tfrecord_deleted_while_training_is_named_and_the_steps_are_saved(w):
    """Once: "`.../bin/bert`: no such file or directory" (a path in TensorFlow's
    trace of the op), and every step since the last checkpoint lost."""
    data = w.path("gone.tfrecord")
    shutil.copy(w.path("pretrain.tfrecord"), data)
    process, seen = _pretrain_until(w, 100, f"--input_file={data}",
                                    "--save_checkpoints_steps=100000")
    os.remove(data)  # read again at its next epoch
    result = _finish(process, seen)
    line = one_line_error(result, str(data))
    step = int(re.search(r"at step (\d+);", line).group(1))
    assert line == (f"error: {data} went away while training read it (no such file or "
                    f"directory) at step {step}; the run saved ckpt-{step} (step {step}) in "
                    f"{w.path('run')}: put the file back (or leave it out) and run the same "
                    "command to resume")
    assert step >= 100 and w.path("run", f"ckpt-{step}.index").exists()


@pytest.mark.slow
def test_a_text_corpus_deleted_while_training_is_named_and_the_steps_are_saved(w):
    """--input_format=text reads its corpus in a Python generator, again at every pass:
    deleted mid-run, its FileNotFoundError reached the trainer as another TensorFlow
    error, and the line came without a checkpoint (every step since the last lost)."""
    data = w.path("gone.txt")
    shutil.copy(w.path("corpus.txt"), data)
    process, seen = _pretrain_until(w, 50, "--input_format=text", f"--input_file={data}",
                                    "--save_checkpoints_steps=100000")
    os.remove(data)  # read again at its next pass
    result = _finish(process, seen)
    line = one_line_error(result, str(data))
    step = int(re.search(r"at step (\d+);", line).group(1))
    assert "went away while training read it (no such file or directory)" in line
    assert step >= 50 and w.path("run", f"ckpt-{step}.index").exists()


@pytest.mark.slow
def test_an_output_dir_made_unwritable_while_training_names_the_checkpoint(w):
    """Once the line named the lock file (or run.json's temporary), not the checkpoint."""
    if shutil.which("capsh") is None and os.geteuid() == 0:
        pytest.skip("root writes anywhere, and capsh is not here to drop that")
    wrap = (["capsh", "--drop=cap_dac_override,cap_dac_read_search", "--", "-c",
             '"$0" "$@"'] if os.geteuid() == 0 else [])
    process, seen = _pretrain_until(w, 50, "--save_checkpoints_steps=200", wrap=wrap)
    run_dir = w.path("run")
    os.chmod(run_dir, 0o555)
    try:
        result = _finish(process, seen)
    finally:
        os.chmod(run_dir, 0o755)
    line = one_line_error(result, str(run_dir))
    assert re.fullmatch(rf"error: {re.escape(str(run_dir))}/ckpt-200: permission denied — .*",
                        line), line
