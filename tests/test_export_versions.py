"""Export versions are reserved atomically, checked before any work, and killed
exports' leftovers are cleaned (issue 36).

* Two exports into one export directory in the same second both publish, under
  two versions: the version is chosen as the export is published, and locally
  the publication is one `rename(2)` that fails when the name exists, so the
  export that lost the race takes the next free version. Real exports in three
  processes: one killed (SIGKILL) as it publishes, then two started together,
  held at a barrier until both have chosen the same version (their clocks
  stopped at the same second), then released.
* The same race between threads, for the default version (eight exports) and
  for an explicit one (one export gets it, the other is refused in one line).
* `check_export_version_free`: an explicit version that is taken is refused
  before any work (the run flow calls it before training; `save` before it
  writes anything), and nothing is created.
* `remove_killed_exports`: the next export removes the staging directories of
  exports whose process is gone, only those this module names and this host
  made; never a live export's, another host's, or anything else.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import types

import pytest

from support import REPO_ROOT, processes

DRIVER = r"""
import json, os, signal, sys, time, types

sys.path.insert(0, sys.argv[1])  # a fresh process: the repository (tools.kit)
mode, export_dir, barrier, now, seed = sys.argv[2:7]

import numpy as np
import tensorflow as tf
from absl import logging

from official_bert.serving import encoder as encoder_serving, versions
from tools.kit.serving_exports import SEQ, VOCAB, random_encoder

versions.time = types.SimpleNamespace(time=lambda: float(now))  # every process: the same second
publish = versions.publish_version


def held(staging, final):
    if mode == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    open(os.path.join(barrier, str(os.getpid())), "w").close()
    deadline = time.monotonic() + 300
    while len(os.listdir(barrier)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    print("TRY", os.path.basename(final), flush=True)
    return publish(staging, final)


versions.publish_version = held
logging.set_verbosity(logging.INFO)  # as the commands log
encoder = random_encoder(int(seed))
ids = {"input_word_ids": np.asarray([[2, 7, 9, 3]], np.int32),
       "input_mask": np.ones([1, 4], np.int32), "input_type_ids": np.zeros([1, 4], np.int32)}
path = encoder_serving.export_encoder(encoder, VOCAB, True, SEQ, export_dir)
pooled = encoder(ids, training=False)["pooled_output"].numpy().tolist()
print("JSON", json.dumps({"path": path, "ids": {k: v.tolist() for k, v in ids.items()},
                          "pooled": pooled}))
"""


def _host():
    from official_bert.serving import versions

    return versions._host()


def _hidden(directory):
    return sorted(n for n in os.listdir(directory) if n.startswith("."))


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    root = tmp_path_factory.mktemp("raced")
    export_dir, barrier = root / "export", root / "barrier"
    barrier.mkdir()
    now = str(int(time.time()))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=str(REPO_ROOT))

    def start(mode, seed):
        return processes.start([sys.executable, "-c", DRIVER, str(REPO_ROOT), mode,
                                str(export_dir), str(barrier), now, str(seed)],
                               cwd=str(root), env=env)

    killed = start("die", 1)
    killed.communicate(timeout=600)
    left = _hidden(export_dir)
    racers = [start("race", seed) for seed in (2, 3)]
    outs = [racer.communicate(timeout=600) for racer in racers]
    return dict(export_dir=export_dir, now=int(now), killed=killed.returncode, left=left,
                racers=[(racer.returncode, out, err) for racer, (out, err) in zip(racers, outs)])


def test_two_exports_in_the_same_second_both_publish(raced):
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops of serving_default)

    results, tries = [], []
    for code, out, err in raced["racers"]:
        assert code == 0, err[-3000:]
        assert "Traceback" not in err
        [line] = [line for line in out.splitlines() if line.startswith("JSON ")]
        results.append(json.loads(line[len("JSON "):]))
        tries.append([line.split()[1] for line in out.splitlines() if line.startswith("TRY ")])
    now = raced["now"]
    # Both chose the same version; one published it, the other the next one.
    assert sorted(tries) == [[str(now)], [str(now), str(now + 1)]]
    assert sorted(os.path.basename(r["path"]) for r in results) == [str(now), str(now + 1)]
    assert sorted(os.listdir(raced["export_dir"])) == [str(now), str(now + 1)]  # nothing hidden
    for result in results:  # each version is its own export, whole
        serve = tf.saved_model.load(result["path"]).signatures["serve_ids"]
        pooled = serve(**{k: tf.constant(v, tf.int32) for k, v in result["ids"].items()})
        np.testing.assert_allclose(pooled["pooled_output"].numpy(), result["pooled"], atol=1e-5)


def test_a_killed_exports_staging_is_removed_by_the_next_export(raced):
    assert raced["killed"] == -signal.SIGKILL
    [left] = raced["left"]  # the killed export's staging, complete but never published
    assert left.startswith(f".export-{_host()}.tmp-")
    assert not [n for n in os.listdir(raced["export_dir"]) if n.startswith(".")]
    errs = "".join(err for _, _, err in raced["racers"])
    assert f"{left}, left by an export that was killed before it finished" in errs


# --- the race in threads ----------------------------------------------------------------


@pytest.fixture
def held_publishes(monkeypatch):
    """`publish_version` held until `n` threads have reached it; the clock stopped."""
    from official_bert.serving import versions

    state = {"n": 0, "arrived": 0, "tries": []}
    lock, everyone = threading.Lock(), threading.Event()
    publish = versions.publish_version

    def held(staging, final):
        with lock:
            state["arrived"] += 1
            state["tries"].append(os.path.basename(final))
            if state["arrived"] >= state["n"]:
                everyone.set()
        assert everyone.wait(60)
        return publish(staging, final)

    monkeypatch.setattr(versions, "publish_version", held)
    monkeypatch.setattr(versions, "time", types.SimpleNamespace(time=lambda: 1_800_000_000.5))
    return state


def _stage(export_dir, text):
    from official_bert.serving import versions

    staging = versions.staging_dir(str(export_dir))
    with open(os.path.join(staging, "saved_model.pb"), "w") as f:
        f.write(text)
    return staging


def _publish_all(export_dir, wanted):
    """Publishes one staged export per entry of `wanted` from as many threads at once;
    returns [(path or UserError message, text)]."""
    from official_bert import io
    from official_bert.errors import UserError
    from official_bert.serving import versions

    results = [None] * len(wanted)

    def export(i):
        staging = _stage(export_dir, f"export {i}")
        try:
            results[i] = (versions.publish_new_version(staging, str(export_dir), wanted[i]),
                          f"export {i}")
        except UserError as e:
            results[i] = (str(e), f"export {i}")
        finally:
            io.remove_tree(staging)

    threads = [threading.Thread(target=export, args=(i,)) for i in range(len(wanted))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def test_eight_exports_racing_for_the_default_version_all_publish(tmp_path, held_publishes):
    held_publishes["n"] = 8
    results = _publish_all(tmp_path, [None] * 8)
    assert held_publishes["tries"][:8] == ["1800000000"] * 8  # all chose the same version
    versions = sorted(int(os.path.basename(path)) for path, _ in results)
    assert versions == list(range(1_800_000_000, 1_800_000_008))
    for path, text in results:  # each version holds its own export
        assert open(os.path.join(path, "saved_model.pb")).read() == text
    assert sorted(os.listdir(tmp_path)) == [str(v) for v in versions]


def test_an_explicit_version_taken_in_the_race_is_refused_in_one_line(tmp_path,
                                                                      held_publishes):
    held_publishes["n"] = 2
    results = _publish_all(tmp_path, [7, 7])
    won = [(path, text) for path, text in results if path == str(tmp_path / "7")]
    lost = [message for message, _ in results if message != str(tmp_path / "7")]
    assert len(won) == 1 and lost == [
        f"{tmp_path / '7'} exists: an export never overwrites a version; pass another "
        "--export_version (or none: the next free one)"]
    assert open(tmp_path / "7" / "saved_model.pb").read() == won[0][1]
    assert os.listdir(tmp_path) == ["7"]


def test_on_an_object_store_a_taken_name_leaves_the_staging_whole(monkeypatch):
    """gs:// (TensorFlow's ram:// stands in): the held-back saved_model.pb goes back
    into the staging, which is then published under the next version."""
    import tensorflow as tf

    from official_bert import io
    from official_bert.serving import versions

    ram = f"ram://test_export_versions/{time.monotonic_ns()}"
    try:
        io.atomic_write(f"{ram}/5/saved_model.pb", "the published one")
        staging = versions.staging_dir(ram)
        io.atomic_write(f"{staging}/saved_model.pb", "the new one")
        io.atomic_write(f"{staging}/variables/variables.index", "index")
        with pytest.raises(FileExistsError):
            versions.publish_version(staging, f"{ram}/5")
        assert io.read_text(f"{staging}/saved_model.pb") == "the new one"
        chosen = iter([f"{ram}/5"])  # chosen before the other export published 5
        monkeypatch.setattr(versions, "version_dir", lambda d, v=None: next(chosen, f"{ram}/6"))
        assert versions.publish_new_version(staging, ram) == f"{ram}/6"
        assert io.read_text(f"{ram}/6/saved_model.pb") == "the new one"
        assert io.read_text(f"{ram}/6/variables/variables.index") == "index"
        assert io.read_text(f"{ram}/5/saved_model.pb") == "the published one"
    finally:
        if tf.io.gfile.exists(ram):
            tf.io.gfile.rmtree(ram)


# --- checked before any work --------------------------------------------------------------


def test_check_export_version_free(tmp_path):
    from official_bert.errors import UserError
    from official_bert.serving import versions

    missing = tmp_path / "missing"
    versions.check_export_version_free(str(missing), 3)
    versions.check_export_version_free(str(missing))
    versions.check_export_version_free(None, 3)
    assert not missing.exists()  # nothing is created
    (tmp_path / "export" / "3").mkdir(parents=True)
    versions.check_export_version_free(str(tmp_path / "export"), 4)
    versions.check_export_version_free(str(tmp_path / "export"))  # the default is never taken
    with pytest.raises(UserError) as taken:
        versions.check_export_version_free(str(tmp_path / "export"), 3)
    assert str(taken.value) == (
        f"{tmp_path / 'export' / '3'} exists: an export never overwrites a version; pass "
        "another --export_version (or none: the next free one)")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match=r"--export_dir .*file is a file: TF Serving's "):
        versions.check_export_version_free(str(tmp_path / "file"))
    for bad in (0, -2):
        with pytest.raises(UserError, match=f"--export_version must be positive, got {bad}"):
            versions.check_export_version_free(str(tmp_path / "export"), bad)


def test_save_refuses_a_taken_version_before_writing_anything(tmp_path, monkeypatch):
    import tensorflow as tf

    from official_bert.errors import UserError
    from official_bert.serving import encoder as encoder_serving
    from tools.kit.serving_exports import SEQ, VOCAB, random_encoder

    (tmp_path / "9").mkdir()
    module = encoder_serving.EncoderServing(random_encoder(1), VOCAB, True, SEQ)

    def saved(*args, **kwargs):
        raise AssertionError("the SavedModel was written")

    monkeypatch.setattr(tf.saved_model, "save", saved)
    with pytest.raises(UserError, match="9 exists: an export never overwrites a version"):
        module.save(str(tmp_path), 9)
    assert os.listdir(tmp_path) == ["9"]  # no staging directory


# --- leftovers of killed exports ------------------------------------------------------------


def test_only_dead_exports_of_this_host_are_removed(tmp_path):
    from official_bert.serving import versions

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    export_dir = tmp_path / "export"
    host = _host()
    removed_names = [f".export-{host}.tmp-{dead.pid}-0abc",  # killed here
                     f".export.tmp-{dead.pid}-0abd"]  # killed, named as before hosts were
    kept_names = [f".export-{host}.tmp-{live.pid}-0abe",  # still writing
                  f".export-{host}.tmp-{os.getpid()}-0abf",  # this process's own
                  f".export-another-host.tmp-{dead.pid}-0ac0",  # another machine's
                  f".vocab.txt.tmp-{dead.pid}-00ff",  # not an export's staging
                  ".export-notes", "1700000000"]
    try:
        for name in removed_names + kept_names[:3] + ["1700000000"]:
            (export_dir / name / "variables").mkdir(parents=True)
            (export_dir / name / "saved_model.pb").write_text("x")
        (export_dir / f".vocab.txt.tmp-{dead.pid}-00ff").write_text("x")
        (export_dir / ".export-notes").write_text("x")
        link = export_dir / f".export-{host}.tmp-{dead.pid}-0ac1"  # never followed
        link.symlink_to(outside, target_is_directory=True)
        kept_names.append(link.name)
        removed = versions.remove_killed_exports(str(export_dir))
    finally:
        live.kill()
        live.wait()
    assert sorted(os.path.basename(p) for p in removed) == sorted(removed_names)
    assert sorted(os.listdir(export_dir)) == sorted(kept_names)
    assert (outside / "keep.txt").read_text() == "kept"
    assert versions.remove_killed_exports(str(tmp_path / "missing")) == []
    assert versions.remove_killed_exports("ram://nothing/here") == []
