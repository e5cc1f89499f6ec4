"""official_bert.inputs: the one input policy, checked at the command boundary.

Every kind of input (a regular file, a directory, a FIFO, standard input, a
device, missing, a loop of symbolic links, unreadable), each way a command
reads one (`registry.Command.inputs`), and the commands that read an input
more than once fed a stream. No TensorFlow: the data commands start fast.
"""

import os
import subprocess
import sys
import threading
import time

import pytest

from official_bert import errors, inputs
from official_bert.commands import registry
from official_bert.errors import UserError
from support import processes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(REPO, "sample_text.txt")


def _fifo(tmp_path, name="fifo"):
    path = tmp_path / name
    os.mkfifo(path)
    return str(path)


def _write_later(path, data: bytes, delay=0.3):
    """Opens the FIFO `path` for writing after `delay` (its reader opened first), writes, closes."""
    def write():
        time.sleep(delay)
        with open(path, "wb") as f:
            f.write(data)
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


# === Classification ===

def test_every_kind_of_input_is_classified(tmp_path):
    (tmp_path / "f.txt").write_text("x\n")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "locked.txt").write_text("x\n")
    os.chmod(tmp_path / "locked.txt", 0)
    assert inputs.classify(str(tmp_path / "f.txt")) == inputs.REGULAR
    assert inputs.classify(str(tmp_path)) == inputs.FOLDER
    assert inputs.classify(_fifo(tmp_path)) == inputs.PIPE
    assert inputs.classify("/dev/null") == inputs.DEVICE
    assert inputs.classify(str(tmp_path / "none")) == inputs.MISSING
    assert inputs.classify(str(tmp_path / "loop")) == inputs.LOOP
    if os.geteuid() != 0:  # root reads anything
        assert inputs.classify(str(tmp_path / "locked.txt")) == inputs.UNREADABLE
    assert inputs.classify("gs://bucket/x") == inputs.REMOTE


def test_what_cannot_be_read_is_one_line_naming_the_flag(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "f.txt").write_text("x\n")
    cases = {
        (str(tmp_path / "none.txt"), "file"): r"^--input_file .*none.txt does not exist$",
        (str(tmp_path / "loop"), "file"): r"^--input_file .*loop is a loop of symbolic links$",
        (str(tmp_path), "file"): r"^--input_file .* is a directory; name a file in it$",
        (str(tmp_path / "f.txt"), "dir"): r"^--input_file .*f.txt is a file, not a directory$",
        (str(tmp_path / "empty.txt"), "file"): r"^--input_file .*empty.txt is empty: nothing",
    }
    for (path, way), message in cases.items():
        with pytest.raises(UserError, match=message):
            inputs.check_input(path, "--input_file", way)
    assert inputs.check_input(str(tmp_path / "f.txt"), "--input_file", "file") == "file"


def test_an_empty_input_is_refused_alike_whatever_its_kind(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    fifo = _fifo(tmp_path)
    lines = []
    with pytest.raises(UserError) as error:
        inputs.check_input(str(tmp_path / "empty.txt"), "--input_file", "file")
    lines.append(str(error.value))
    _write_later(fifo, b"")
    with pytest.raises(UserError) as error:
        with inputs.spool(fifo, "--input_file"):
            pass
    lines.append(str(error.value))
    with pytest.raises(UserError) as error:
        with inputs.spool("/dev/null", "--input_file", inputs.DEVICE):
            pass
    lines.append(str(error.value))
    assert all(" is empty: nothing to read; give it the data" in line for line in lines), lines
    assert "(a pipe)" in lines[1] and "(a device)" in lines[2]


# === Spooling a stream ===

def test_a_fifo_is_spooled_removed_after_and_named_as_given(tmp_path):
    fifo = _fifo(tmp_path)
    _write_later(fifo, b"one\ntwo\n")
    with inputs.spool(fifo, "--input_file") as copy:
        assert open(copy, "rb").read() == b"one\ntwo\n"
        assert str(errors.BadFileError(copy, "is bad", line=2)).startswith(
            f"{fifo} (read from a pipe) line 2 is bad")
        assert inputs.given_path(copy) == fifo  # what a run record keeps: not a random name
    assert not os.path.exists(copy)
    assert str(errors.BadFileError(copy, "is bad")) == f"{copy} is bad"
    assert inputs.given_path(copy) == copy


def test_a_spool_is_removed_when_the_block_fails(tmp_path):
    fifo = _fifo(tmp_path)
    _write_later(fifo, b"data\n")
    with pytest.raises(KeyboardInterrupt):
        with inputs.spool(fifo, "--input_file") as copy:
            raise KeyboardInterrupt  # what a stop signal raises is a BaseException too
    assert not os.path.exists(copy)


def test_a_fifo_nobody_writes_is_a_line_after_the_wait_not_a_hang(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("OFFICIAL_BERT_INPUT_WAIT", "1.5")
    monkeypatch.setattr(inputs, "WAIT_LOG_SECONDS", 0.5)
    start = time.monotonic()
    with caplog.at_level("INFO", logger="absl"):
        with pytest.raises(UserError, match=r"--input_file .*fifo \(a pipe\) gave nothing for "
                                            r"2 s \(0 bytes read before\)"):
            with inputs.spool(_fifo(tmp_path), "--input_file"):
                pass
    assert time.monotonic() - start < 10
    assert "waiting for --input_file" in caplog.text  # progress while it waited
    assert os.listdir(os.path.join(inputs.tempfile.gettempdir(), inputs.SPOOL_DIRECTORY)) == [] \
        or all(str(os.getpid()) not in n for n in os.listdir(
            os.path.join(inputs.tempfile.gettempdir(), inputs.SPOOL_DIRECTORY)))


def test_a_stream_read_as_it_comes_waits_for_its_fifos_writer_in_a_line_not_forever(
        tmp_path, monkeypatch, caplog):
    """predict's --input_file (a "stream"): a FIFO nobody writes was an open() that waited
    forever. `open_stream` opens it without waiting: lines while nothing comes, one
    line after the wait."""
    monkeypatch.setenv("OFFICIAL_BERT_INPUT_WAIT", "1.5")
    monkeypatch.setattr(inputs, "WAIT_LOG_SECONDS", 0.5)
    start = time.monotonic()
    with caplog.at_level("INFO", logger="absl"):
        with pytest.raises(UserError, match=r"--input_file .*fifo \(a pipe\) gave nothing for "
                                            r"2 s: its writer is gone or stuck"):
            inputs.open_stream(_fifo(tmp_path), "--input_file")
    assert time.monotonic() - start < 10
    assert "waiting for --input_file" in caplog.text


@pytest.mark.parametrize("stays", [True, False])
def test_a_stream_read_as_it_comes_reads_all_its_fifos_writer_wrote(tmp_path, stays):
    """The writer comes later, and stays, or writes and is gone before the first read."""
    fifo = _fifo(tmp_path)
    _write_later(fifo, b"one\ntwo\n")
    with inputs.open_stream(fifo, "--input_file") as stream:
        if not stays:
            time.sleep(1.0)  # (the writer has closed its end by now)
        assert stream.read() == b"one\ntwo\n"


def test_the_boundary_spools_each_stream_of_a_list_and_leaves_globs(tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    fifo = _fifo(tmp_path)
    _write_later(fifo, b"b\n")
    values = {"input_file": f"{tmp_path}/a.txt,{fifo},{tmp_path}/*.md", "predict_file": None}
    with inputs.prepared({"input_file": "file", "predict_file": "file"}, values):
        first, copy, glob = values["input_file"].split(",")
        assert first == f"{tmp_path}/a.txt" and glob == f"{tmp_path}/*.md"
        assert open(copy).read() == "b\n"
    assert not os.path.exists(copy)


def test_a_stream_read_once_is_left_as_it_is(tmp_path):
    fifo = _fifo(tmp_path)
    values = {"input_file": fifo}
    with inputs.prepared({"input_file": "stream"}, values):
        assert values["input_file"] == fifo  # nothing read: predict reads it as it comes


def test_every_declared_input_is_a_flag_of_its_command():
    """The registry's `inputs`, one definition: each names a flag its command has."""
    import dataclasses

    for command in registry.COMMANDS:
        fields = {f.name for c in registry.configs_of(command) for f in dataclasses.fields(c)}
        assert set(command.inputs) <= fields, (command.name, set(command.inputs) - fields)
        assert set(command.inputs.values()) <= set(inputs.WAYS)


# === Commands fed a stream ===

VOCAB_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    """Every word of the sample text (lower-cased, punctuation split) and the special tokens."""
    import re

    words = sorted({w for w in re.findall(r"\w+|[^\w\s]", open(SAMPLE).read().lower())})
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB_WORDS + words) + "\n")
    return str(path)


def _cpd(tmp_path, vocab, input_file, workers=2, **kwargs):
    out = tmp_path / "out.tfrecord"
    argv = [sys.executable, "create_pretraining_data.py", f"--input_file={input_file}",
            f"--output_file={out}", f"--vocab_file={vocab}", f"--num_workers={workers}",
            "--dupe_factor=1", "--max_seq_length=64", "--max_predictions_per_seq=8"]
    return processes.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, **kwargs), out


def _documents(result) -> int:
    line = next(line for line in result.stderr.splitlines() if line.startswith("documents "))
    return int(line.split()[1])


@pytest.mark.slow  # (minutes of CI: its runs; `pytest -m slow`)
def test_create_pretraining_data_reads_all_of_a_fifo_or_stdin(tmp_path, vocab):
    whole, _ = _cpd(tmp_path, vocab, SAMPLE)
    assert whole.returncode == 0, whole.stderr
    fifo = _fifo(tmp_path)
    with open(SAMPLE, "rb") as f:
        data = f.read()
    _write_later(fifo, data, delay=1.0)
    piped, out = _cpd(tmp_path, vocab, fifo, workers=1)
    assert piped.returncode == 0, piped.stderr
    assert _documents(piped) == _documents(whole)  # every document, not the second open's
    for name in ("/dev/stdin", "-"):
        os.remove(out)
        fed, out = _cpd(tmp_path, vocab, name, input=data.decode())
        assert fed.returncode == 0, fed.stderr
        assert _documents(fed) == _documents(whole) and os.path.getsize(out) > 0
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".out.tfrecord.tmp")]


def test_create_pretraining_data_refuses_an_empty_stream_as_an_empty_file(tmp_path, vocab):
    (tmp_path / "empty.txt").write_text("")
    lines = []
    for name, stdin in ((str(tmp_path / "empty.txt"), ""), ("/dev/stdin", ""), ("-", "")):
        result, out = _cpd(tmp_path, vocab, name, input=stdin)
        assert result.returncode == 1 and not out.exists()
        lines.append(result.stderr.strip().splitlines()[-1])
    assert all(line.startswith("error: --input_file ") and line.endswith(
        "is empty: nothing to read; give it the data") for line in lines), lines


def test_create_pretraining_data_on_a_fifo_without_writer_stops_in_one_line(tmp_path, vocab):
    env = dict(os.environ, OFFICIAL_BERT_INPUT_WAIT="2")
    result, out = _cpd(tmp_path, vocab, _fifo(tmp_path), env=env)
    assert result.returncode == 1 and not out.exists()
    assert result.stderr.strip().splitlines()[-1].startswith(
        "error: --input_file ") and "gave nothing for 2 s" in result.stderr


def test_names_with_commas_and_shards_are_read_as_file_sets_reads_them(tmp_path):
    (tmp_path / "a,b.txt").write_text("x\n")
    values = {"input_file": f"{tmp_path}/a,b.txt,{tmp_path}/p.tfrecord@3"}
    with inputs.prepared({"input_file": "file"}, values):  # neither is refused here
        assert values["input_file"] == f"{tmp_path}/a,b.txt,{tmp_path}/p.tfrecord@3"


def test_a_file_read_twice_in_a_job_must_read_the_same(tmp_path):
    """A vocabulary read at the start (the model's files) and again at the end (an
    export's copy): rewritten in between, at its size, the export would hold ids the
    model was not trained with. Within a job the second read is refused, naming it;
    outside a job (a library caller) a file is read as it is."""
    from official_bert.text import tokenization

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\na\nb\n")
    with inputs.prepared({}, {}):
        assert tokenization.load_vocab_list(str(vocab)) == ["[PAD]", "[UNK]", "a", "b"]
        assert tokenization.load_vocab_list(str(vocab))  # the same: read again freely
        vocab.write_text("[PAD]\n[UNK]\nb\na\n")  # same size, the ids of a and b swapped
        with pytest.raises(errors.BadFileError, match=r"vocab.txt changed while the command "
                                                      r"ran"):
            tokenization.load_vocab_list(str(vocab))
    assert tokenization.load_vocab_list(str(vocab)) == ["[PAD]", "[UNK]", "b", "a"]


def test_a_vocabulary_holding_nul_bytes_is_refused_with_its_line(tmp_path):
    from official_bert.text import tokenization

    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"[PAD]\n" + b"\0" * 64 + b"[UNK]\na\n")
    with pytest.raises(tokenization.VocabError, match=r"vocab.txt line 2 holds NUL bytes"):
        tokenization.load_vocab_list(str(vocab))
