"""official_bert.io: atomic writes, sets of files published together, path
patterns, the run lock, and every path through `tf.io.gfile`.

The unit tests use local temporary directories (and TensorFlow's in-memory
`ram://` file system in this process). The end-to-end tests run the real
commands on `ram://` paths: data generation, pre-training (and resuming) and
fine-tuning with a SavedModel export. `ram://` lives inside one process, so
each case is one Python process: a small driver copies the inputs into
`ram://`, runs the command in-process (`registry.run_command`), then reads what it wrote
there and prints it as JSON for the test.
"""

import errno
import json
import logging
import os
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

from official_bert import file_sets, io
from official_bert.run_directory import lock as run_lock
from official_bert.errors import BadFileError, DiskFullError, RunDirectoryError, UserError
from official_bert.configs import RunConfig
from support import processes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hidden(directory):
    return sorted(n for n in os.listdir(directory) if n.startswith("."))


# === Atomic writes ===


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "results.txt"  # the directory is made
    io.atomic_write(path, "first\n")
    io.atomic_write(path, b"second\n")
    assert path.read_bytes() == b"second\n"
    assert hidden(tmp_path / "sub") == []


def test_a_failed_write_keeps_the_old_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "results.txt"
    path.write_text("complete old results\n")
    with pytest.raises(RuntimeError, match="stopped half-way"):
        with io.atomic_output(path) as f:
            f.write("new results, half of th")
            assert hidden(tmp_path) != []  # the data goes to a hidden temporary
            raise RuntimeError("stopped half-way")
    assert path.read_text() == "complete old results\n"
    assert hidden(tmp_path) == []
    with pytest.raises(RuntimeError):
        with io.atomic_output(tmp_path / "new.txt", "wb") as f:
            f.write(b"partial")
            raise RuntimeError
    assert sorted(os.listdir(tmp_path)) == ["results.txt"]  # never a partial new file


def test_a_full_disk_is_reported_and_nothing_is_left(tmp_path, monkeypatch):
    path = tmp_path / "vocab.txt"
    path.write_text("old\n")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFullError, match=r"the disk is full \(writing .*vocab.txt: "):
        io.atomic_write(path, "new\n")
    assert path.read_text() == "old\n" and hidden(tmp_path) == []


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_and_staging_directories_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        io.atomic_write(tmp_path / "a.txt", "x")
        io.atomic_copy(tmp_path / "a.txt", tmp_path / "b.txt")
        staging = io.make_temporary_dir(str(tmp_path), "export")
    finally:
        os.umask(old)
    for name in ("a.txt", "b.txt"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == mode
    assert stat.S_IMODE(os.stat(staging).st_mode) == mode | 0o111 & ~umask
    assert os.path.basename(staging).startswith(".export.tmp-")


def test_a_symlink_at_the_destination_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("must not change\n")
    link = tmp_path / "eval_results.txt"
    link.symlink_to(victim)
    io.atomic_write(link, "results\n")
    assert not link.is_symlink() and link.read_text() == "results\n"
    assert victim.read_text() == "must not change\n"


def test_a_temporary_is_created_exclusively_never_through_a_planted_symlink(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("must not change\n")
    planted = tmp_path / os.path.basename(io.temporary_name(str(tmp_path / "out.txt")))
    planted.symlink_to(victim)
    with pytest.raises(FileExistsError):  # O_EXCL: the name must be new
        io.open_new(str(planted), "wb")
    planted.unlink()
    planted.symlink_to(tmp_path / "nowhere.txt")  # a dangling link: O_EXCL refuses it too
    with pytest.raises(FileExistsError):
        io.open_new(str(planted), "wb")
    assert victim.read_text() == "must not change\n"
    assert not (tmp_path / "nowhere.txt").exists()


def test_temporary_names_are_hidden_unique_and_beside_the_file(tmp_path):
    names = {io.temporary_name(str(tmp_path / "x.tfrecord")) for _ in range(50)}
    assert len(names) == 50
    for name in names:
        assert os.path.dirname(name) == str(tmp_path)
        assert os.path.basename(name).startswith(f".x.tfrecord.tmp-{os.getpid()}-")


def test_atomic_copy(tmp_path):
    source = tmp_path / "vocab.txt"
    source.write_bytes(b"[PAD]\r\n[UNK]\n")
    io.atomic_copy(source, tmp_path / "out" / "vocab.txt")
    assert (tmp_path / "out" / "vocab.txt").read_bytes() == b"[PAD]\r\n[UNK]\n"
    io.atomic_copy(source, source)  # one file: nothing to do
    assert source.read_bytes() == b"[PAD]\r\n[UNK]\n"


# === A set of files ===


def test_publish_together_renames_every_file_then_writes_the_manifest(tmp_path, monkeypatch):
    manifest = tmp_path / ".data.summary.json"
    manifest.write_text('{"files": ["stale"]}')
    staged = {}
    for name in ("data-0.tfrecord", "data-1.tfrecord"):
        final = str(tmp_path / name)
        staged[final] = io.temporary_name(final)
        with io.open_new(staged[final], "wb") as f:
            f.write(name.encode())
    events = []
    rename, atomic_write, remove = io.rename, io.atomic_write, io.remove
    # Publishing renames and removes through `io.staging` (where the fault kit patches too).
    monkeypatch.setattr(io.staging, "rename", lambda s, d, **k: (events.append(("rename", d)),
                                                                 rename(s, d, **k)))
    monkeypatch.setattr(io, "atomic_write", lambda p, d: (events.append(("write", str(p))),
                                                          atomic_write(p, d)))
    monkeypatch.setattr(io.staging, "remove", lambda p: (events.append(("remove", str(p))),
                                                         remove(p)))
    file_sets.publish_together(staged, str(manifest), {"instances": 7})
    # The manifest says "incomplete" first (an old one never vouches for a half-new set),
    # then the files are renamed into place, then it says "complete".
    assert events == [("write", str(manifest)), ("rename", str(manifest)),  # (its temporary)
                      *[("rename", final) for final in staged],
                      ("write", str(manifest)), ("rename", str(manifest))]
    assert json.loads(manifest.read_text()) == {
        "files": ["data-0.tfrecord", "data-1.tfrecord"], "instances": 7, "complete": True,
        "sizes": {"data-0.tfrecord": 15, "data-1.tfrecord": 15}}
    assert (tmp_path / "data-1.tfrecord").read_bytes() == b"data-1.tfrecord"
    assert hidden(tmp_path) == [".data.summary.json"]


def test_readers_refuse_an_unfinished_or_partly_gone_set(tmp_path):
    for name in ("data-0.tfrecord", "data-1.tfrecord", "other.tfrecord"):
        (tmp_path / name).write_bytes(b"x")
    manifest = tmp_path / ".data-0_tfrecord.summary.json"
    manifest.write_text(json.dumps({"files": ["data-0.tfrecord", "data-1.tfrecord"],
                                    "complete": False}))
    with pytest.raises(BadFileError, match=r"data-0.tfrecord is one of the 2 files of an "
                                           r"unfinished output"):
        file_sets.expand_paths(f"{tmp_path}/data-*", "input_file")
    assert file_sets.expand_paths(f"{tmp_path}/other.tfrecord", "input_file")  # not in the set
    manifest.write_text(json.dumps({"files": ["data-0.tfrecord", "data-1.tfrecord"],
                                    "complete": True}))
    assert len(file_sets.expand_paths(f"{tmp_path}/data-*", "input_file")) == 2
    # a subset
    assert len(file_sets.expand_paths(f"{tmp_path}/data-1.tfrecord", "input_file")) == 1
    (tmp_path / "data-0.tfrecord").unlink()
    with pytest.raises(BadFileError, match=r"data-1.tfrecord is one of the 2 files of one "
                                           r"output .* but 1 of them are gone"):
        file_sets.expand_paths(f"{tmp_path}/data-*", "input_file")


def test_a_set_copied_without_its_manifest_gets_one_warning_naming_the_manifest(tmp_path, caplog):
    import shutil

    from data_prep.create_pretraining_data import PretrainingDataConfig, create_pretraining_data
    from official_bert.tasks import pretraining
    from test_pretraining_input import synthetic_corpus, synthetic_vocab

    made, copied = tmp_path / "made", tmp_path / "copied"
    made.mkdir()
    vocab, _ = synthetic_vocab(tmp_path / "vocab.txt")
    corpus = synthetic_corpus(tmp_path / "corpus.txt", n_docs=12)
    outputs = [str(made / f"pretrain-{i:02d}.tfrecord") for i in range(3)]
    create_pretraining_data(str(corpus), outputs, str(vocab), PretrainingDataConfig(
        dupe_factor=1, max_seq_length=32, max_predictions_per_seq=5), num_workers=1,
        progress_seconds=0, log=None)
    # As made, the manifest lists every file: nothing to warn about.
    assert file_sets.unlisted_sets(outputs) == []
    made_files = file_sets.expand_paths(f"{made}/pretrain-*", "input_file")
    assert file_sets.unlisted_set_warning(made_files, "input_file") is None
    # Copied as `cp made/* copied/` copies: the hidden manifest stays behind.
    copied.mkdir()
    for path in made.glob("*"):  # pathlib's glob, unlike the shell's, matches hidden names
        if not path.name.startswith("."):
            shutil.copy(path, copied)
    files = file_sets.expand_paths(f"{copied}/pretrain-*.tfrecord", "input_file")
    assert file_sets.unlisted_sets(files) == [files]
    warning = file_sets.unlisted_set_warning(files, "input_file")
    manifest = os.path.basename(file_sets.sidecar_path(outputs[0]))
    assert manifest == ".pretrain-00_tfrecord.summary.json" and (made / manifest).exists()
    assert warning.startswith("--input_file: 3 file(s) that look like the shards of one set")
    assert "cannot be checked" in warning and f"({manifest} for pretrain-00.tfrecord)" in warning

    def warnings_of_a_run():  # what run_pretraining logs while checking its flags
        caplog.clear()
        config = pretraining.PretrainingConfig(input_file=f"{copied}/pretrain-*.tfrecord",
                                               max_predictions_per_seq=5)
        run = RunConfig(output_dir=str(tmp_path / "run"), max_seq_length=32, do_train=True,
                        num_train_steps=10, num_warmup_steps=1)
        with caplog.at_level("WARNING"):
            pretraining.PretrainingTask.check_flags(config, run)
        return [r.getMessage() for r in caplog.records if "manifest" in r.getMessage()]

    assert warnings_of_a_run() == [warning]
    # Copying the manifest too makes the set checkable again: no warning, and a lost
    # shard is refused.
    shutil.copy(made / manifest, copied)
    assert warnings_of_a_run() == []
    (copied / "pretrain-01.tfrecord").unlink()
    with pytest.raises(BadFileError, match="1 of them are gone"):
        file_sets.expand_paths(f"{copied}/pretrain-*.tfrecord", "input_file")
    # tensorflow/models' shard names say there is a set even one at a time; a lone file
    # with a number in its name, or files alike but for other words, are not a set.
    for name in ("wiki-00000-of-00004.tfrecord", "books-128.tfrecord", "a.tfrecord",
                 "b.tfrecord"):
        (tmp_path / name).write_bytes(b"")
    assert file_sets.unlisted_sets([str(tmp_path / n) for n in (
        "wiki-00000-of-00004.tfrecord", "books-128.tfrecord", "a.tfrecord", "b.tfrecord")]) == [
        [str(tmp_path / "wiki-00000-of-00004.tfrecord")]]


def test_remove_stale_temporaries_removes_a_dead_writers_and_keeps_a_live_ones(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / f".ckpt.index.tmp-{dead.pid}-00ff").write_text("left by a killed run")
        (tmp_path / f".export.tmp-{dead.pid}-0abc").mkdir()
        (tmp_path / f".eval_results.txt.tmp-{live.pid}-1234").write_text("being written")
        (tmp_path / f".mine.tmp-{os.getpid()}-beef").write_text("this process")
        (tmp_path / ".hidden-but-not-a-temporary").write_text("kept")
        removed = io.remove_stale_temporaries(str(tmp_path))
    finally:
        live.kill()
        live.wait()
    assert sorted(os.path.basename(p) for p in removed) == [
        f".ckpt.index.tmp-{dead.pid}-00ff", f".export.tmp-{dead.pid}-0abc"]
    assert hidden(tmp_path) == sorted([f".eval_results.txt.tmp-{live.pid}-1234",
                                       f".mine.tmp-{os.getpid()}-beef",
                                       ".hidden-but-not-a-temporary"])


# === Path patterns ===


@pytest.fixture
def data_files(tmp_path):
    for name in ("a-0.tfrecord", "a-1.tfrecord", "b.tfrecord", "a-0.tfrecord.summary.json",
                 ".a-2.tfrecord.tmp-1-ab", "c.incomplete", "part-00000-of-00002",
                 "part-00001-of-00002"):
        (tmp_path / name).write_text(name)
    (tmp_path / "dir.tfrecord").mkdir()
    return tmp_path


def test_expand_paths(data_files):
    d = str(data_files)
    assert file_sets.expand_paths(f"{d}/a-*", "input_file") == [f"{d}/a-0.tfrecord",
                                                                f"{d}/a-1.tfrecord"]
    # globs and files, comma-separated (spaces and empty items ignored), duplicates once,
    # each pattern's matches sorted, patterns in the order given
    assert file_sets.expand_paths(f" {d}/b.tfrecord, ,{d}/*.tfrecord,{d}/a-0.tfrecord",
                                  "x") == [
        f"{d}/b.tfrecord", f"{d}/a-0.tfrecord", f"{d}/a-1.tfrecord"]
    assert file_sets.expand_paths([f"{d}/b.tfrecord", f"{d}/a-1.tfrecord"], "x") == [
        f"{d}/b.tfrecord", f"{d}/a-1.tfrecord"]
    # directories, hidden temporaries and sidecars (.json, .incomplete) are never data
    assert file_sets.expand_paths(f"{d}/*", "x") == [
        f"{d}/a-0.tfrecord", f"{d}/a-1.tfrecord", f"{d}/b.tfrecord",
        f"{d}/part-00000-of-00002", f"{d}/part-00001-of-00002"]
    # tensorflow/models' sharded form
    assert file_sets.expand_paths(f"{d}/part@2", "x") == [f"{d}/part-00000-of-00002",
                                                          f"{d}/part-00001-of-00002"]


def test_a_files_own_name_comes_before_glob_syntax_and_commas(data_files, caplog):
    d = data_files
    for name in ("data1.tfrecord", "data[1].tfrecord", "x,y.tfrecord"):
        (d / name).write_text(name)
    # `[1]` is part of the name of a file that exists: that file, and a warning that
    # the glob would have read another
    with caplog.at_level(logging.INFO, logger="absl"):
        assert file_sets.expand_paths(f"{d}/data[1].tfrecord", "input_file") == [
            f"{d}/data[1].tfrecord"]
    assert (f"--input_file: {d}/data[1].tfrecord is read as the file of that name; as a glob "
            f"it would match {d}/data1.tfrecord instead") in caplog.text
    assert f"--input_file: 1 file(s): {d}/data[1].tfrecord" in caplog.text
    # without such a file it is a glob, and the log names what it matched
    (d / "data[1].tfrecord").unlink()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
        assert file_sets.expand_paths(f"{d}/data[1].tfrecord", "input_file") == [
            f"{d}/data1.tfrecord"]
    assert f"--input_file: 1 file(s): {d}/data1.tfrecord" in caplog.text
    # a comma in a file's name does not split it (a string, or a list flag's items)
    assert file_sets.expand_paths(f"{d}/x,y.tfrecord,{d}/b.tfrecord", "x") == [
        f"{d}/x,y.tfrecord", f"{d}/b.tfrecord"]
    assert file_sets.expand_paths([f"{d}/b.tfrecord", f"{d}/x", "y.tfrecord"], "x") == [
        f"{d}/b.tfrecord", f"{d}/x,y.tfrecord"]
    # the log names the first few files and counts the rest
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
        file_sets.expand_paths(f"{d}/*.tfrecord", "input_file")
    assert (f"--input_file: 5 file(s): {d}/a-0.tfrecord, {d}/a-1.tfrecord, {d}/b.tfrecord and "
            "2 more") in caplog.text


def test_expand_paths_errors_name_the_flag(data_files):
    d = str(data_files)
    with pytest.raises(UserError, match=r"^--input_file is empty"):
        file_sets.expand_paths(" , ", "input_file")
    with pytest.raises(UserError, match=r"^--eval_input_file: no file matches '.*/z\*'$"):
        file_sets.expand_paths(f"{d}/a-0.tfrecord,{d}/z*", "eval_input_file")
    with pytest.raises(UserError, match=r"^--input_file: .*/missing.tfrecord does not exist$"):
        file_sets.expand_paths(f"{d}/missing.tfrecord", "input_file")
    with pytest.raises(UserError, match=r"^--input_file: .*/dir.tfrecord is a directory: give "
                                        r"the files in it, by name or with a glob such as "
                                        r".*/dir.tfrecord/\* \(comma-separated\)$"):
        file_sets.expand_paths(f"{d}/dir.tfrecord", "input_file")
    for i in range(2):
        (data_files / f"part-{i:05d}-of-00003").write_text("shard")
    with pytest.raises(BadFileError, match=r"part-00002-of-00003 does not exist \(1 of the 3 "
                                           r"shards of --input_file=.*part@3 are missing\)"):
        file_sets.expand_paths(f"{d}/part@3", "input_file")


# === The run lock ===

HOLD_LOCK = """
import sys, time
from official_bert.run_directory import lock as run_lock
with run_lock.RunLock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
"""


def test_run_lock_refuses_a_second_process_until_the_holder_is_killed(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path)], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirectoryError) as info:
            run_lock.RunLock(str(tmp_path)).acquire()
        message = str(info.value)
        assert f"--output_dir {tmp_path} is in use by process {holder.pid} on " in message
        assert "choose another --output_dir" in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with run_lock.RunLock(str(tmp_path)):  # the kernel dropped the killed process's lock
        owner = json.loads((tmp_path / run_lock.LOCK_FILE).read_text())
        assert owner["pid"] == os.getpid()
    assert not (tmp_path / run_lock.LOCK_FILE).exists()  # released: no empty file left


def test_run_lock_removes_only_its_own_file(tmp_path):
    lock_file = tmp_path / run_lock.LOCK_FILE
    lock = run_lock.RunLock(str(tmp_path)).acquire()
    # Someone removed the file and another process made (and locked) a new one:
    # releasing ours must leave theirs.
    lock_file.unlink()
    other = run_lock.RunLock(str(tmp_path)).acquire()
    lock.release()
    assert json.loads(lock_file.read_text())["pid"] == os.getpid()
    other.release()
    assert not lock_file.exists()


def test_run_lock_opened_before_the_holder_removed_it_locks_the_new_file(tmp_path):
    """A second process opened the lock file, then the holder released it
    (removing it): the flock it then gets is on a removed file, so it opens and
    locks the file at the path instead; a third run is refused."""
    holder = run_lock.RunLock(str(tmp_path)).acquire()
    stale = os.open(tmp_path / run_lock.LOCK_FILE, os.O_RDWR)  # opened while held
    holder.release()
    real_open = os.open
    opened = []

    def open_the_stale_one_first(path, *args):
        if not opened:
            opened.append(path)
            return os.dup(stale)
        return real_open(path, *args)

    second = run_lock.RunLock(str(tmp_path))
    os.open = open_the_stale_one_first
    try:
        second.acquire()
    finally:
        os.open = real_open
        os.close(stale)
    assert opened and (tmp_path / run_lock.LOCK_FILE).exists()
    with pytest.raises(RunDirectoryError, match="is in use by process"):
        run_lock.RunLock(str(tmp_path)).acquire()
    second.release()


# === Paths with a scheme: TensorFlow's in-memory ram:// ===


@pytest.fixture
def ram():
    """A fresh ram:// directory of this process."""
    import tensorflow as tf

    path = f"ram://test_io/{time.monotonic_ns()}"
    yield path
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)


def test_open_file_on_ram_reads_like_open(ram, tmp_path):
    raw = b"\xef\xbb\xbfsentence\tlabel\r\ncaf\xc3\xa9\tx\r\nlast line"
    io.atomic_write(f"{ram}/a.tsv", raw)
    (tmp_path / "a.tsv").write_bytes(raw)
    for path in (f"{ram}/a.tsv", str(tmp_path / "a.tsv")):  # the same as a local file
        with io.open_file(path, encoding="utf-8-sig", newline="") as f:
            assert list(f) == ["sentence\tlabel\r\n", "café\tx\r\n", "last line"]
        with io.open_file(path, "rb") as f:  # GFile's own lines would drop the \r
            assert list(f) == [b"\xef\xbb\xbfsentence\tlabel\r\n", b"caf\xc3\xa9\tx\r\n",
                               b"last line"]
        with io.open_file(path) as f:  # text: the byte-order mark is dropped (io.strip_bom)
            assert f.read() == "sentence\tlabel\ncafé\tx\nlast line"
    assert io.read_text(f"{ram}/a.tsv").startswith("sentence")
    io.atomic_write(f"{ram}/bad.txt", b"ok\n\xff\n")
    with pytest.raises(BadFileError, match="bad.txt line 2 is not UTF-8"):
        io.read_text(f"{ram}/bad.txt")


def test_ram_paths(ram):
    io.atomic_write(f"{ram}/run/x.tfrecord.summary.json", "{}")
    io.atomic_write(f"{ram}/run/x.tfrecord", b"data")
    io.atomic_write(f"{ram}/run/deep/er/file.txt", "x")
    # TensorFlow's ram:// calls any prefix of a stored name a directory; io does not.
    assert not io.exists(f"{ram}/run/x.tfrec") and not io.isdir(f"{ram}/run/x.tfrec")
    assert io.isfile(f"{ram}/run/x.tfrecord") and not io.isdir(f"{ram}/run/x.tfrecord")
    assert io.isdir(f"{ram}/run") and io.isdir(f"{ram}/run/deep") and io.exists(ram)
    assert {"x.tfrecord", "x.tfrecord.summary.json"} <= set(io.listdir(f"{ram}/run"))
    assert file_sets.expand_paths(f"{ram}/run/x*", "input_file") == [f"{ram}/run/x.tfrecord"]
    assert io.glob(f"{ram}/run/*.json") == [f"{ram}/run/x.tfrecord.summary.json"]
    assert not [p for p in io.glob(f"{ram}/run/.*")]  # atomic writes left no temporaries
    io.atomic_copy(f"{ram}/run/x.tfrecord", f"{ram}/copy/x.tfrecord")
    with io.open_file(f"{ram}/copy/x.tfrecord", "rb") as f:
        assert f.read() == b"data"
    # A directory is renamed file by file (ram:// renames single names only).
    staging = io.make_temporary_dir(ram, "export")
    io.atomic_write(f"{staging}/saved_model.pb", b"pb")
    io.atomic_write(f"{staging}/variables/variables.index", b"index")
    import tensorflow as tf

    with tf.io.gfile.GFile(f"{staging}/assets/a/b.txt", "w") as f:  # no makedirs: not listed
        f.write("asset")
    io.rename(staging, f"{ram}/123")
    assert not io.exists(staging)
    assert io.read_text(f"{ram}/123/variables/variables.index") == "index"
    assert io.read_text(f"{ram}/123/assets/a/b.txt") == "asset"
    assert io.walk_files(f"{ram}/123") == [f"{ram}/123/{n}" for n in (
        "assets/a/b.txt", "saved_model.pb", "variables/variables.index")]
    with pytest.raises(FileExistsError):
        io.rename(f"{ram}/run/x.tfrecord", f"{ram}/copy/x.tfrecord")


def test_run_lock_on_ram_is_a_lock_file(ram):
    with run_lock.RunLock(f"{ram}/run"):
        owner = json.loads(io.read_text(f"{ram}/run/{run_lock.LOCK_FILE}"))
        assert owner["pid"] == os.getpid()
        with pytest.raises(RunDirectoryError, match=f"in use by process {os.getpid()} .*"
                                                    f"if that run is gone, delete"):
            run_lock.RunLock(f"{ram}/run").acquire()
    assert not io.exists(f"{ram}/run/{run_lock.LOCK_FILE}")


# === End to end on ram:// ===

PRELUDE = r"""
import json, os, sys
import tensorflow as tf
from official_bert import file_sets, io

ARGS = json.loads(sys.argv[1])


def put(local, remote):
    # Not tf.io.gfile.copy: on ram:// it copies into a "directory" when the
    # target is a prefix of a stored name (see io._remote_kind).
    with open(local, "rb") as f:
        io.atomic_write(remote, f.read())


def command(name, *argv):
    # Runs `bert <name> argv...` in this process (`registry.run_command`).
    from official_bert.commands import registry
    try:
        registry.run_command(name, ["command", *argv])
    except SystemExit as e:  # absl's app.run exits
        if e.code:
            raise


def files(directory):
    # Every file below `directory` (ram://'s listdir leaves out implicit directories).
    out, pattern = [], directory
    for _ in range(4):
        pattern += "/*"
        out += [p[len(directory) + 1:] for p in io.glob(pattern) if io.isfile(p)]
    return sorted(out)


def results(path):
    return dict(line.split(" = ") for line in io.read_text(path).splitlines())
"""

GENERATE = PRELUDE + r"""
from official_bert.commands import create_pretraining_data as cpd
from official_bert.training import input_pipeline

put(ARGS["corpus"], "ram://data/corpus.txt")
put(ARGS["vocab"], "ram://data/vocab.txt")
flags = ["--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2",
         "--random_seed=3", "--progress_seconds=0", "--do_whole_word_mask"]
command("create-pretraining-data", "--input_file=ram://data/corpus*", "--vocab_file=ram://data/vocab.txt",
        "--output_file=ram://out/a.tfrecord,ram://out/b.tfrecord", "--num_workers=2", *flags)
summary = json.loads(io.read_text("ram://out/.a_tfrecord.summary.json"))
# The same command on local files (one worker, as ram:// forces): the same bytes.
from absl import flags as absl_flags
local = ARGS["local"]
absl_flags.FLAGS.unparse_flags()
absl_flags.FLAGS(["command", f"--input_file={ARGS['corpus']}", f"--vocab_file={ARGS['vocab']}",
                  f"--output_file={local}/a.tfrecord,{local}/b.tfrecord", "--num_workers=1",
                  *flags])
cpd.main(["command"])
same = all(io.open_file(f"ram://out/{n}", "rb").read() == open(f"{local}/{n}", "rb").read()
           for n in ("a.tfrecord", "b.tfrecord"))
records = {n: sum(1 for _ in tf.data.TFRecordDataset(f"ram://out/{n}"))
           for n in ("a.tfrecord", "b.tfrecord")}
batches = input_pipeline.pretraining_dataset("ram://out/*", 64, 10, batch_size=4,
                                             is_training=False)
print("JSON", json.dumps({
    "files": files("ram://out"), "summary_files": summary["files"],
    "instances": summary["instances"], "num_workers": summary["num_workers"],
    "records": records, "same_as_local": same,
    "read_back": sum(int(b["input_word_ids"].shape[0]) for b in batches)}))
"""

PRETRAIN = PRELUDE + r"""
from official_bert.commands import pretrain as run_pretraining

for name in os.listdir(ARGS["data"]):
    put(os.path.join(ARGS["data"], name), "ram://data/" + name)
flags = ["--input_file=ram://data/static-*.tfrecord",
         "--bert_config_file=ram://data/bert_config.json", "--vocab_file=ram://data/vocab.txt",
         "--max_seq_length=32", "--max_predictions_per_seq=5", "--train_batch_size=4",
         "--num_warmup_steps=1", "--save_checkpoints_steps=1", "--log_steps=1",
         "--do_train", "--do_eval", "--eval_batch_size=4", "--max_eval_steps=2",
         "--output_dir=ram://run"]
out = {}
for steps in (2, 4):  # the second call resumes from the first one's checkpoint, for more steps
    command("pretrain", *flags, f"--num_train_steps={steps}",
            *(["--allow_changed_settings"] if steps == 4 else []))
    out[steps] = {"files": files("ram://run"), "eval": results("ram://run/eval_results.txt"),
                  "vocab_equal": io.read_text("ram://run/vocab.txt")
                  == io.read_text("ram://data/vocab.txt")}
print("JSON", json.dumps(out))
"""

FINE_TUNE = PRELUDE + r"""
sys.path.insert(0, ARGS["tests"])  # a fresh process: the test modules and support it imports
from support import tiny_config
from test_run_classifier import DEV, DEV_LABELS, TRAIN, TRAIN_LABELS, VOCAB

from official_bert.commands import classify as run_classifier
from official_bert import checkpoints
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.serving.classification import ClassifierPredictor

io.atomic_write("ram://vocab/vocab.txt", "\n".join(VOCAB) + "\n")
encoder = BertEncoder.from_bert_config(tiny_config(vocab_size=len(VOCAB)))
encoder(dummy_inputs())
checkpoints.save_checkpoint(encoder, "ram://ckpt", vocab_file="ram://vocab/vocab.txt")
io.atomic_write("ram://sst/train.tsv", "sentence\tlabel\n" + "".join(
    f"{s}\t{y}\n" for s, y in zip(TRAIN, TRAIN_LABELS)))
io.atomic_write("ram://sst/dev.tsv", "sentence\tlabel\n" + "".join(
    f"{s}\t{y}\n" for s, y in zip(DEV, DEV_LABELS)))
io.atomic_write("ram://sst/test.tsv", "index\tsentence\n" + "".join(
    f"{i}\t{s}\n" for i, s in enumerate(DEV)))
command("classify", "--task_name=sst-2", "--data_dir=ram://sst",
        "--init_checkpoint=ram://ckpt", "--do_train", "--do_eval", "--do_predict",
        "--max_seq_length=16", "--train_batch_size=4", "--eval_batch_size=2",
        "--predict_batch_size=3", "--num_train_epochs=1", "--learning_rate=1e-3",
        "--output_dir=ram://out", "--export_dir=ram://export")
predictions = {}
for source in ("ram://export", "ram://out"):  # the SavedModel, and the run's checkpoint
    predictor = ClassifierPredictor(source)
    predictions[source] = [float(p) for p in predictor.predict(DEV)["probabilities"][:, 1]]
print("JSON", json.dumps({
    "ckpt": files("ram://ckpt"), "out": files("ram://out"), "export": files("ram://export"),
    "eval": results("ram://out/eval_results.txt"),
    "test_rows": len(io.read_text("ram://out/test_results.tsv").splitlines()),
    "config": json.loads(io.read_text("ram://out/classifier_config.json")),
    "predictions": predictions}))
"""


def drive(script, timeout=600, **args):
    """Runs a driver in one process; returns (its JSON, its stderr)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=REPO)
    env.pop("OFFICIAL_BERT_TRACEBACK", None)
    result = processes.run([sys.executable, "-c", script, json.dumps(args)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("JSON ")]
    return json.loads(line[len("JSON "):]), result.stderr


def test_create_pretraining_data_on_ram(tmp_path):
    from test_pretraining_input import synthetic_corpus, synthetic_vocab

    vocab, _ = synthetic_vocab(tmp_path / "vocab.txt")
    corpus = synthetic_corpus(tmp_path / "corpus.txt", n_docs=12)
    (tmp_path / "local").mkdir()
    out, _ = drive(GENERATE, corpus=str(corpus), vocab=str(vocab), local=str(tmp_path / "local"))
    # The outputs and the summary (written last, naming them) are all there, nothing else:
    # no temporaries, no workers' parts.
    assert out["files"] == [".a_tfrecord.summary.json", "a.tfrecord", "b.tfrecord"]
    assert out["summary_files"] == ["a.tfrecord", "b.tfrecord"]
    assert out["num_workers"] == 1  # ram:// is seen by this process only
    assert sum(out["records"].values()) == out["instances"] > 0
    assert out["same_as_local"]
    assert out["read_back"] == out["instances"] // 4 * 4  # the input pipeline reads ram://


@pytest.fixture(scope="module")
def pretraining_data(tmp_path_factory):
    from data_prep.create_pretraining_data import PretrainingDataConfig, create_pretraining_data
    from test_pretraining_input import synthetic_corpus, synthetic_vocab

    root = tmp_path_factory.mktemp("ram_pretraining")
    data = root / "data"
    data.mkdir()
    vocab, _ = synthetic_vocab(data / "vocab.txt")
    corpus = synthetic_corpus(root / "corpus.txt", n_docs=12)
    create_pretraining_data(str(corpus), str(data / "static-0.tfrecord"), str(vocab),
                            PretrainingDataConfig(dupe_factor=1, max_seq_length=32,
                                                  max_predictions_per_seq=5),
                            num_workers=1, progress_seconds=0, log=None)
    (data / "bert_config.json").write_text(json.dumps(dict(
        vocab_size=760, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64, type_vocab_size=2)))
    return data


@pytest.mark.slow  # 10 s or more here
def test_pretraining_on_ram_writes_everything_there_and_resumes(pretraining_data):
    out, log = drive(PRETRAIN, data=str(pretraining_data))
    first, second = out["2"], out["4"]
    for files in (first["files"], second["files"]):
        assert {"bert_config.json", "vocab.txt", "eval_results.txt", "checkpoint",
                "tokenizer_config.json"} <= set(files)
        assert any(f.startswith("train/events.out.tfevents") for f in files)
        assert any(f.startswith("eval/events.out.tfevents") for f in files)
        assert not [f for f in files if os.path.basename(f).startswith(".")]  # no lock, no temp
    assert {"ckpt-2.index", "ckpt-2.data-00000-of-00001"} <= set(first["files"])
    assert "ckpt-4.index" in second["files"]
    assert first["eval"]["global_step"] == "2" and second["eval"]["global_step"] == "4"
    assert set(first["eval"]) == {"global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                                  "masked_lm_unigram_baseline", "next_sentence_accuracy",
                                  "next_sentence_loss"}
    assert first["vocab_equal"] and second["vocab_equal"]
    assert "Resumed from ram://run/ckpt-2 at step 2" in log


@pytest.mark.slow  # 28 s; pre-training on ram:// runs by default
def test_fine_tuning_on_ram_with_a_saved_model_export():
    out, log = drive(FINE_TUNE, tests=os.path.join(REPO, "tests"))
    # save_checkpoint wrote a checkpoint directory with its config and vocabulary to ram://
    assert {"bert_config.json", "vocab.txt", "checkpoint"} <= set(out["ckpt"])
    assert {"eval_results.txt", "test_results.tsv", "classifier_config.json", "bert_config.json",
            "vocab.txt", "checkpoint", "ckpt-2.index"} <= set(out["out"])
    features = [f for f in out["out"] if f.startswith("features/")]  # the feature cache
    assert sorted(f.split("/")[1].split("-")[0] for f in features) == ["dev", "test", "train"]
    assert not [f for f in out["out"] if os.path.basename(f).startswith(".")]
    assert out["eval"]["global_step"] == "2" and out["eval"]["num_examples"] == "5"
    assert out["test_rows"] == 5 and out["config"]["labels"] == ["0", "1"]
    [version] = {f.split("/")[0] for f in out["export"]}
    assert version.isdigit() and f"{version}/saved_model.pb" in out["export"]
    assert f"{version}/variables/variables.index" in out["export"]
    assert f"Exported step 2 to ram://export/{version}" in log
    # The export says when it starts (it can take a minute) and how long it took.
    assert "Exporting step 2 to ram://export (this can take a minute)" in log
    assert re.search(rf"Exported step 2 to ram://export/{version} in \d+ s", log)
    # The SavedModel loaded from ram:// and the run's checkpoint predict alike.
    exported, from_run = out["predictions"]["ram://export"], out["predictions"]["ram://out"]
    assert len(exported) == 5
    assert exported == pytest.approx(from_run, abs=1e-5)


# === A path that is not there: the real cause (issue 56) ===


@pytest.fixture
def loop(tmp_path):
    """`a` → `b` → `a`: os.path.exists is False for both, and stat fails with ELOOP."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


def test_a_loop_of_symbolic_links_is_named_as_one(loop, tmp_path):
    from official_bert import checkpoints
    from official_bert.commands import system_errors

    assert io.missing(str(loop)) == "is a loop of symbolic links"
    assert io.missing(str(loop / "train.tsv")) == (
        f"does not exist: {loop} on its path is a loop of symbolic links")
    assert io.kind_of(str(loop)) == "a loop of symbolic links"
    # --output_dir, --init_checkpoint, a data file under --data_dir, a JSON file.
    with pytest.raises(UserError, match=f"^--output_dir {loop}: {loop} is a loop of symbolic "
                                        "links, not a directory"):
        io.check_writable(str(loop), "--output_dir")
    with pytest.raises(UserError, match=f"^{loop} is a loop of symbolic links; pass"):
        checkpoints.read_checkpoint(str(loop))
    from data_prep import glue
    with pytest.raises(UserError, match=f"{loop} on its path is a loop of symbolic links"):
        list(glue._rows(str(loop / "train.tsv"), "tsv"))
    with pytest.raises(UserError, match=f"^{loop} is a loop of symbolic links"):
        io.read_json(str(loop))
    # An OSError of one, whoever raised it.
    try:
        open(loop)
    except OSError as e:
        problem = system_errors.classify(e)
    assert problem.path == str(loop) and problem.what.startswith("a loop of symbolic links")


def test_other_paths_that_are_not_there_say_why(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    assert io.missing(str(tmp_path / "nothing")) == "does not exist"
    assert io.missing(str(tmp_path / "file" / "x")) == (
        f"does not exist: {tmp_path / 'file'} on its path is a file, not a directory")
    assert io.missing(str(tmp_path / "dangling")) == (
        f"is a symbolic link to {tmp_path / 'gone'}, which does not exist")
    assert io.kind_of(str(tmp_path / "dangling")) == "a symbolic link to nothing"
    assert io.missing("ram://nowhere/x") == "does not exist"
