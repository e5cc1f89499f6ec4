"""Reading a run directory while its run trains (issue 56, "readers of a live run").

A reader (predict, export-encoder, export-google, --init_checkpoint, --teacher)
takes the latest complete checkpoint, names its step, and says when the run
still trains (another process holds its lock). A checkpoint the trainer rotates
away between being chosen and being opened is not damaged: the newest is read.
"""

import logging
import subprocess
import sys

import pytest

from support import tiny_config


def _write_run(directory, steps):
    """A run directory as the Trainer leaves it: ckpt-<step> of a tiny encoder for
    each of `steps`, the state file naming them, bert_config.json beside."""
    import tensorflow as tf

    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from official_bert.run_directory.latest import write_state_file

    config = tiny_config()
    directory.mkdir(exist_ok=True)
    (directory / "bert_config.json").write_text(config.to_json_string())
    encoder = BertEncoder.from_bert_config(config)
    encoder(dummy_inputs())
    for step in steps:
        tf.train.Checkpoint(encoder=encoder).write(str(directory / f"ckpt-{step}"))
    write_state_file(str(directory), [f"ckpt-{step}" for step in steps])
    return directory


def _rotate(directory, old_step, new_step):
    """What a training run's save with keep_checkpoint_max does: the new one
    written and named, then the oldest's files deleted."""
    from official_bert.run_directory.latest import listed_checkpoints, write_state_file

    names = [p.rsplit("/", 1)[-1] for p in listed_checkpoints(str(directory))]
    _write_run(directory, [new_step])
    write_state_file(str(directory), [n for n in names if n != f"ckpt-{old_step}"]
                     + [f"ckpt-{new_step}"])
    for path in directory.glob(f"ckpt-{old_step}.*"):
        path.unlink()


@pytest.fixture
def lock_held(tmp_path):
    """Holds a run directory's lock from another process, as a training run does."""
    held = []

    def hold(directory):
        code = ("import sys, time\n"
                "from official_bert.run_directory.lock import RunLock\n"
                "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(120)\n")
        process = subprocess.Popen([sys.executable, "-c", code, str(directory)],
                                   stdout=subprocess.PIPE, text=True)
        held.append(process)
        assert process.stdout.readline().strip() == "held"
        return process

    yield hold
    for process in held:
        process.kill()
        process.wait()


def test_a_reader_of_a_live_run_names_the_step_and_says_it_trains(tmp_path, lock_held,
                                                                  caplog):
    from official_bert import checkpoints

    run = _write_run(tmp_path / "run", [10, 20])
    holder = lock_held(run)
    with caplog.at_level(logging.INFO, logger="absl"):
        ckpt = checkpoints.read_checkpoint(str(run))
    assert (ckpt.step, ckpt.prefix) == (20, str(run / "ckpt-20"))
    assert "ckpt-20 (step 20)" in caplog.text
    assert "still training" in caplog.text and f"process {holder.pid}" in caplog.text


def test_a_finished_run_is_read_without_a_warning(tmp_path, caplog):
    from official_bert import checkpoints

    run = _write_run(tmp_path / "run", [10])
    with caplog.at_level(logging.INFO, logger="absl"):
        assert checkpoints.read_checkpoint(str(run)).step == 10
    assert "ckpt-10 (step 10), the latest checkpoint of" in caplog.text
    assert "still training" not in caplog.text


def test_a_killed_runs_lock_file_is_no_training_run(tmp_path):
    """A run killed by SIGKILL leaves its lock file naming a dead process."""
    from official_bert.run_directory.lock import RunLock

    run = tmp_path / "run"
    run.mkdir()
    process = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                             capture_output=True, text=True, check=True)
    (run / ".official_bert.lock").write_text(
        '{"pid": %s, "host": "%s", "command": "bert classify"}'
        % (process.stdout.strip(), __import__("socket").gethostname()))
    assert RunLock(str(run)).holder() is None


def test_a_checkpoint_rotated_away_while_read_is_read_whole_as_it_was_opened(
        tmp_path, monkeypatch, caplog):
    """The trainer rotates the chosen checkpoint away (deletes its files) while the
    reader reads it: the reader holds the files it opened, so it reads them whole, at
    the step it chose, and nothing says "damaged"; a second read (the head's weights, an
    export) reads the same files."""
    from official_bert import checkpoints
    from official_bert.checkpoints import read, tf_checkpoints

    run = _write_run(tmp_path / "run", [10, 20])
    original, opened = read._read_tensorflow, []

    def rotated_while_read(path, prefix, config):
        opened.append(prefix.rsplit("/", 1)[-1])
        _rotate(run, 20, 30)  # ckpt-20's files are deleted now (ckpt-10, the older, kept)
        _rotate(run, 10, 40)
        assert not (run / "ckpt-20.index").exists()
        return original(path, prefix, config)

    monkeypatch.setattr(read, "_read_tensorflow", rotated_while_read)
    with caplog.at_level(logging.INFO, logger="absl"):
        ckpt = checkpoints.read_checkpoint(str(run))
    assert opened == ["ckpt-20"]
    assert (ckpt.step, ckpt.prefix) == (20, str(run / "ckpt-20"))
    assert tf_checkpoints.open_reader(ckpt.prefix).get_variable_to_shape_map()
    assert "copy or download" not in caplog.text and "damaged" not in caplog.text


def test_a_checkpoint_rotated_away_before_it_was_opened_gives_way_to_the_newest(
        tmp_path, monkeypatch, caplog):
    """Rotated away between being chosen and being opened: the newest is read."""
    from official_bert import checkpoints
    from official_bert.run_directory import latest

    run = _write_run(tmp_path / "run", [10, 20])
    hold, tried = latest.hold, []

    def rotated_first(prefix):
        tried.append(prefix.rsplit("/", 1)[-1])
        if len(tried) == 1:
            _rotate(run, 20, 30)
        return hold(prefix)

    monkeypatch.setattr(latest, "hold", rotated_first)
    with caplog.at_level(logging.INFO, logger="absl"):
        ckpt = checkpoints.read_checkpoint(str(run))
    assert tried == ["ckpt-20", "ckpt-30"] and ckpt.step == 30
    assert "rotated away" in caplog.text and "copy or download" not in caplog.text


def test_a_damaged_checkpoint_is_still_called_damaged(tmp_path):
    """The retry is for a rotated checkpoint alone: a truncated one that is still
    there is named, not silently replaced."""
    from official_bert import checkpoints

    run = _write_run(tmp_path / "run", [10, 20])
    index = run / "ckpt-20.index"
    index.write_bytes(index.read_bytes()[:20])
    with pytest.raises(checkpoints.CheckpointError, match="ckpt-20.index is damaged"):
        checkpoints.read_checkpoint(str(run))


def test_the_record_keeps_the_source_and_its_step(tmp_path):
    """A run started from another run's directory records it and the step read."""
    from official_bert.run_directory import RunDirectory

    run = RunDirectory(str(tmp_path / "student"))
    source = {"path": str(tmp_path / "teacher"), "checkpoint": "ckpt-20", "step": 20}
    run.start_session({"task": "classification", "max_seq_length": 32}, None, [],
                      started_from=source)
    run.note_checkpoint("ckpt-1")
    assert run.read_run_record()["started_from"] == source
    # A later session (a resume) reads the run's own checkpoint: the source stays.
    (tmp_path / "student" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    run.start_session({"task": "classification", "max_seq_length": 32}, None, [],
                      started_from={"path": "elsewhere", "checkpoint": None, "step": None})
    run.note_checkpoint("ckpt-2")
    assert run.read_run_record()["started_from"] == source
