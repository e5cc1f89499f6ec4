"""The one output policy (`official_bert.outputs`, issue 44): checked before any
work, streams written through, never over what the project did not write, names
that fit, published atomically, racing writers end with one output and one
refusal. Hand cases in a temporary directory, then three commands end to end."""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import pathlib
import stat
import sys
import threading
import types

import pytest

from official_bert import file_sets, io, outputs
from official_bert.errors import DiskFullError, UserError
from support import processes

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data_prep" / "sample_corpus" / "1861-Lincoln.txt"


@pytest.fixture(autouse=True)
def next_job():
    """Each case runs as one job, with an output plan of its own in force;
    `next_job()` starts the next run of the command (a fresh plan: the claims
    are one job's)."""
    with contextlib.ExitStack() as stack:
        def start():
            stack.enter_context(io.OutputPlan().in_force())
        start()
        yield start


def publish(path, data: str, kind=outputs.FILE, overwrite=False):
    """What a command does: the policy's check, then its writer."""
    outputs.check_output(str(path), "--output_file", kind, overwrite)
    io.atomic_write(str(path), data)


def hidden_leftovers(directory) -> list:
    return [n for n in os.listdir(directory) if ".tmp-" in n]


# === Never over what the project did not write ===


def test_a_file_the_project_did_not_write_is_refused_and_kept(tmp_path):
    out = tmp_path / "vocab.txt"
    out.write_text("mine\n")
    with pytest.raises(UserError, match=r"--output_file .*vocab.txt exists .*--overwrite"):
        publish(out, "new\n")
    assert out.read_text() == "mine\n"


def test_the_projects_own_earlier_output_is_replaced(tmp_path, next_job):
    out = tmp_path / "vocab.txt"
    publish(out, "first\n")
    next_job()  # a second run of the command
    publish(out, "second\n")
    assert out.read_text() == "second\n"
    assert (tmp_path / io.OUTPUT_LEDGER).exists() and not hidden_leftovers(tmp_path)


def test_an_output_edited_since_is_no_longer_the_projects(tmp_path, next_job):
    out = tmp_path / "vocab.txt"
    publish(out, "first\n")
    next_job()
    with open(out, "a") as f:
        f.write("an edit\n")
    with pytest.raises(UserError, match="exists"):
        publish(out, "second\n")
    assert out.read_text() == "first\nan edit\n"


def test_overwrite_replaces_a_foreign_file(tmp_path):
    out = tmp_path / "vocab.txt"
    out.write_text("mine\n")
    publish(out, "new\n", overwrite=True)
    assert out.read_text() == "new\n"


def test_a_set_published_before_the_ledger_is_recognised_by_its_manifest(tmp_path, next_job):
    """create_pretraining_data's outputs made by earlier versions: its manifest vouches."""
    out = tmp_path / "train.tfrecord"
    staged = tmp_path / ".staged"
    staged.write_bytes(b"records")
    file_sets.publish_together({str(out): str(staged)},
                               file_sets.sidecar_path(str(out)), {"instances": 1})
    outputs.check_output(str(out), "--output_file", outputs.FILE_PREFIX)  # ours: no error
    next_job()
    out.write_bytes(b"cut")  # another size: no longer what the manifest lists
    with pytest.raises(UserError, match="exists"):
        outputs.check_output(str(out), "--output_file", outputs.FILE_PREFIX)


def test_a_non_empty_directory_is_refused_an_empty_one_and_our_own_are_not(tmp_path, next_job):
    target = tmp_path / "export"
    target.mkdir()
    outputs.check_output(str(target), "--output_dir", outputs.DIRECTORY)  # empty: fine
    (target / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="--output_dir .*not empty.*--overwrite"):
        outputs.check_output(str(target), "--output_dir", outputs.DIRECTORY)
    ours = tmp_path / "ours"
    staging = io.make_temporary_dir(str(tmp_path), "ours")
    pathlib.Path(staging, "config.json").write_text("{}")
    io.publish_directory(staging, str(ours))
    outputs.check_output(str(ours), "--output_dir", outputs.DIRECTORY)  # ours: replaced
    staging = io.make_temporary_dir(str(tmp_path), "ours")
    pathlib.Path(staging, "config.json").write_text('{"new": 1}')
    io.publish_directory(staging, str(ours))
    assert (ours / "config.json").read_text() == '{"new": 1}'
    assert not hidden_leftovers(tmp_path)
    (ours / "added.txt").write_text("the user's")
    next_job()
    with pytest.raises(UserError, match="exists"):
        outputs.check_output(str(ours), "--output_dir", outputs.DIRECTORY)


# === The right kind of path, a name that fits, writable ===


def test_a_directory_where_a_file_goes_and_a_file_where_a_directory_goes(tmp_path):
    with pytest.raises(UserError, match="--output_file .* is a directory; name a file"):
        outputs.check_output(str(tmp_path), "--output_file", outputs.FILE)
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="--output_dir .* is a file, not a directory"):
        outputs.check_output(str(tmp_path / "f"), "--output_dir", outputs.DIRECTORY, True)
    with pytest.raises(UserError, match="--output_file .* is a file, not a directory"):
        outputs.check_output(str(tmp_path / "f" / "out.txt"), "--output_file", outputs.FILE)


def test_a_249_character_name_publishes_and_its_temporaries_fit(tmp_path):
    out = tmp_path / ("n" * 245 + ".txt")
    assert len(io.temporary_name(str(out)).rsplit("/", 1)[1]) <= io.NAME_MAX
    assert len(os.path.basename(file_sets.sidecar_path(str(out)))) <= io.NAME_MAX
    publish(out, "fits\n")
    assert out.read_text() == "fits\n" and not hidden_leftovers(tmp_path)


def test_a_249_character_name_gets_its_sidecar_too(tmp_path):
    """prepare-corpus removes an older version's `<output>.stats.json`: too long a name to
    exist, so nothing to remove (it was an ENAMETOOLONG error)."""
    from data_prep import prepare_corpus

    out = tmp_path / ("c" * 245 + ".txt")
    prepare_corpus.prepare_corpus([str(SAMPLE)], str(out))
    assert out.exists() and os.path.exists(file_sets.sidecar_path(str(out), "stats"))


def test_a_shortened_temporary_is_still_recognised_as_one(tmp_path):
    name = io.temporary_name(str(tmp_path / ("x" * 250))).rsplit("/", 1)[1]
    pid = str(os.getpid())
    gone = next(str(n) for n in range(10 ** (len(pid) - 1), 10 ** len(pid))
                if not io.process_alive(n))  # as many digits: the name keeps its length
    dead = name.replace(f"-{pid}-", f"-{gone}-")
    (tmp_path / dead).write_text("left by a killed writer")
    assert io.remove_stale_temporaries(str(tmp_path)) == [str(tmp_path / dead)]


def test_a_name_too_long_is_one_line_naming_the_flag(tmp_path):
    with pytest.raises(UserError, match="--output_file: the name n+... is 300 bytes"):
        outputs.check_output(str(tmp_path / ("n" * 300)), "--output_file", outputs.FILE)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_refused(tmp_path):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(UserError, match="--output_file .* cannot be written"):
            outputs.check_output(str(tmp_path / "v.txt"), "--output_file", outputs.FILE)
    finally:
        tmp_path.chmod(0o700)


def test_a_read_only_file_system_is_refused(tmp_path, monkeypatch):
    real_open = os.open

    def read_only(path, flags, *args):
        if ".tmp-" in os.fspath(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(UserError, match="--output_file .* cannot be written.*Read-only"):
        outputs.check_output(str(tmp_path / "v.txt"), "--output_file", outputs.FILE)


# === Devices and pipes: written through, never replaced ===


def test_dev_null_is_written_through_and_stays_a_device():
    publish("/dev/null", "discarded\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_dev_full_is_the_disk_full_line_and_stays_a_device():
    outputs.check_output("/dev/full", "--output_file", outputs.FILE)
    with pytest.raises(DiskFullError):
        io.atomic_write("/dev/full", "x" * 100_000)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_fifo_is_written_through_and_a_file_set_refuses_one(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    publish(fifo, "through the pipe\n")
    reader.join(10)
    assert received == ["through the pipe\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(UserError, match="--output_file .* is a device or a pipe"):
        outputs.check_output(f"{tmp_path}/a.tfrecord,{fifo}", "--output_file",
                             outputs.FILE_PREFIX)


# === Racing writers: one output, one refusal ===


def _race_file(path, barrier, results):
    try:
        outputs.check_output(path, "--output_file", outputs.FILE)
        barrier.wait(10)
        io.atomic_write(path, f"written by {os.getpid()}\n")
        results.put("ok")
    except UserError as e:
        results.put(f"refused: {e}")


def _race_directory(path, barrier, results):
    try:
        outputs.check_output(path, "--output_dir", outputs.DIRECTORY)
        staging = io.make_temporary_dir(os.path.dirname(path), os.path.basename(path))
        pathlib.Path(staging, "config.json").write_text(str(os.getpid()))
        barrier.wait(10)
        try:
            io.publish_directory(staging, path)
        except FileExistsError:
            io.remove_tree(staging)
            raise UserError(f"{path} was written by another process") from None
        results.put("ok")
    except UserError as e:
        results.put(f"refused: {e}")


def race(target, path) -> list:
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(2), context.Queue()
    racers = [context.Process(target=target, args=(path, barrier, results)) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    return sorted(results.get(timeout=5) for _ in racers)


@pytest.mark.parametrize("earlier", ["none", "ours"])
def test_two_writers_of_one_file_end_with_one_output_and_one_refusal(tmp_path, earlier, next_job):
    out = tmp_path / "vocab.txt"
    if earlier == "ours":
        publish(out, "an earlier run's\n")
        next_job()
    ok, refused = race(_race_file, str(out))
    assert ok == "ok" and refused.startswith("refused:") and "another process" in refused
    assert out.read_text().startswith("written by") and not hidden_leftovers(tmp_path)


@pytest.mark.parametrize("earlier", ["none", "empty", "ours"])
def test_two_writers_of_one_directory_end_with_one_output_and_one_refusal(tmp_path, earlier,
                                                                         next_job):
    out = tmp_path / "export"
    if earlier == "empty":
        out.mkdir()
    if earlier == "ours":
        staging = io.make_temporary_dir(str(tmp_path), "export")
        pathlib.Path(staging, "config.json").write_text("earlier")
        io.publish_directory(staging, str(out))
        next_job()
    ok, refused = race(_race_directory, str(out))
    assert ok == "ok" and refused.startswith("refused:")
    assert (out / "config.json").read_text().isdigit() and not hidden_leftovers(tmp_path)


def test_a_set_whose_member_appeared_meanwhile_leaves_the_winners_manifest_alone(tmp_path):
    out, manifest = tmp_path / "a.tfrecord", file_sets.sidecar_path(str(tmp_path / "a.tfrecord"))
    outputs.check_output(str(out), "--output_file", outputs.FILE_PREFIX)
    out.write_bytes(b"the winner's")  # another writer published it after the check
    pathlib.Path(manifest).write_text('{"files": ["a.tfrecord"], "complete": true}')
    staged = tmp_path / ".staged"
    staged.write_bytes(b"the loser's")
    with pytest.raises(UserError, match="another process"):
        file_sets.publish_together({str(out): str(staged)}, manifest, {})
    assert out.read_bytes() == b"the winner's"
    assert '"complete": true' in pathlib.Path(manifest).read_text()


# === The boundary's entry ===


def test_check_command_outputs_takes_the_registry_mapping_and_any_flag_values(tmp_path):
    (tmp_path / "taken.txt").write_text("mine")
    command = types.SimpleNamespace(outputs={"output_file": "file", "output_dir": "run_dir",
                                             "export_dir": "export_dir"})
    values = types.SimpleNamespace(output_file=str(tmp_path / "taken.txt"),
                                   output_dir=str(tmp_path), export_dir=None, overwrite=False)
    with pytest.raises(UserError, match="--output_file .*taken.txt exists"):
        outputs.check_command_outputs(command, values)
    values.overwrite = True  # run_dir and export_dir are not this policy's: no error
    outputs.check_command_outputs(command, values)
    outputs.check_command_outputs({"output_file": "file"}, types.SimpleNamespace())


# === End to end ===


def build_vocab(output: str, *extra):
    return processes.run(
        [sys.executable, "-m", "official_bert.commands.cli", "build-vocab",
         f"--input_file={SAMPLE}", f"--output_file={output}", "--vocab_size=300",
         "--num_unused=10", *extra], cwd=REPO, capture_output=True, text=True, timeout=120)


def one_line_error(result) -> str:
    assert result.returncode == 1, result.stderr[-2000:]
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    return lines[0]


def test_build_vocab_refuses_a_foreign_file_and_reruns_over_its_own(tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("the user's notes\n")
    assert "--overwrite" in one_line_error(build_vocab(foreign))
    assert foreign.read_text() == "the user's notes\n"
    ours = tmp_path / "vocab.txt"
    for _ in range(2):  # google's commands re-run as written
        result = build_vocab(ours)
        assert result.returncode == 0, result.stderr[-2000:]
    assert len(ours.read_text().splitlines()) == 300


def test_build_vocab_to_dev_full_is_one_line_and_dev_full_stays_a_device():
    line = one_line_error(build_vocab("/dev/full"))
    assert "/dev/full" in line and "space" in line
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_prepare_corpus_writes_through_dev_null(tmp_path):
    result = processes.run(
        [sys.executable, "-m", "official_bert.commands.cli", "prepare-corpus",
         f"--input={SAMPLE}", "--output_file=/dev/null"], cwd=REPO, capture_output=True,
        text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not os.path.exists(file_sets.sidecar_path("/dev/null", "stats"))


def test_build_vocab_to_dev_stdout_prints_the_vocabulary():
    result = build_vocab("/dev/stdout")
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(result.stdout.splitlines()) == 300 and result.stdout.startswith("[PAD]\n")


def test_a_full_disk_while_a_model_directory_is_staged_is_the_disk_full_error(
        tmp_path, monkeypatch):
    """extend-vocab's safetensors write raised SafetensorError on ENOSPC: it goes through io now."""
    import numpy as np

    from official_bert import checkpoints
    from official_bert.modeling.configs import BertConfig

    config = BertConfig(vocab_size=8, hidden_size=4, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=8)
    weights = {"bert/embeddings/word_embeddings": np.zeros((8, 4), np.float32)}

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    outputs.check_output(str(tmp_path / "hf"), "--output_dir", outputs.DIRECTORY)
    with pytest.raises(DiskFullError):
        checkpoints.write_huggingface(weights, config, str(tmp_path / "hf"))
    assert os.listdir(tmp_path) == []  # no output, no staging


def test_a_device_passes_the_writable_check_that_every_job_makes():
    """model_files.prepare_job's check (extract-features) called /dev/null "a file, not a
    directory"."""
    io.check_writable("/dev/null", "--output_file")
