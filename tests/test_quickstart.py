"""The quickstart's reruns are honest: a rerun with other settings starts the
stage afresh, one with the same settings resumes and says how many steps were
done before and now, and --fresh starts over. (The whole quickstart runs in the
slow docs tests: `python quickstart.py --fast`.)"""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT


def quickstart(out, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, str(REPO_ROOT / "quickstart.py"),
                             f"--output_dir={out}", *args], cwd=REPO_ROOT, env=env, text=True,
                            capture_output=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_reruns_say_what_they_did(tmp_path):
    out = tmp_path / "qs"
    first = quickstart(out, "--stages=data,pretrain", "--pretrain_steps=4")
    assert "step 4/4" in first and "resumed" not in first
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pretrain"]["steps_before"] == 0 and summary["pretrain"]["steps_now"] == 4

    # Other settings: the old run is not resumed as if it were this one.
    changed = quickstart(out, "--stages=pretrain", "--pretrain_steps=6")
    assert "settings changed ({'steps': 4} → {'steps': 6}): starting this stage afresh" in changed
    assert json.loads((out / "summary.json").read_text())["pretrain"]["steps_now"] == 6

    # The same settings again: it resumes, and the summary says so.
    again = quickstart(out, "--stages=pretrain", "--pretrain_steps=6")
    assert "6 steps were done before, 0 now" in again
    assert "afresh" not in again

    # Stages not run now are shown as an earlier run's.
    shown = quickstart(out, "--stages=data")
    assert "[from an earlier run, " in shown

    # --fresh removes what the quickstart wrote and starts over.
    fresh = quickstart(out, "--fresh", "--stages=data,pretrain", "--pretrain_steps=4")
    assert "resumed" not in fresh and "step 4/4" in fresh
