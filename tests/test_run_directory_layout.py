"""Only the run-directory package spells a run directory's file names.

Every other module of the library (official_bert/ outside run_directory/, and
data_prep/) asks `RunDirectory` or uses `run_directory.layout`'s constants, so
that the layout is defined once. Read from the source with `ast`: the string
constants in code count; docstrings, comments, prose (a message or a flag's
help: a string with a space in it) and JSON keys (a dict's key, a subscript)
do not, since they name no file.
"""

import ast
import re

import pytest

from support import REPO_ROOT

# The names of run.json, the checkpoints (`ckpt-<N>`, TensorFlow's `checkpoint`
# state file), the best model's `best-<step>`, and the files the record binds.
FILE_NAME = re.compile(r"^(ckpt|checkpoint)$|(?<![\w-])ckpt-|(?<![\w-])best-"
                       r"|eval_results\.txt|run\.json|label_list\.txt|classifier_config\.json")


def library_files():
    for package in ("official_bert", "data_prep"):
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if path.relative_to(REPO_ROOT).parts[:2] != ("official_bert", "run_directory"):
                yield path


def not_file_names(tree) -> set:
    """ids of the string constants that are docstrings or JSON keys."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped.add(id(first.value))
        elif isinstance(node, ast.Dict):
            skipped.update(id(key) for key in node.keys if key is not None)
        elif isinstance(node, ast.Subscript):
            skipped.add(id(node.slice))
    return skipped


def spelled_file_names(path) -> list:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = not_file_names(tree)
    return [f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skipped and not re.search(r"\s", node.value)
            and FILE_NAME.search(node.value)]


def test_only_the_run_directory_package_spells_its_file_names():
    found = [hit for path in library_files() for hit in spelled_file_names(path)]
    assert not found, ("run-directory file names outside official_bert/run_directory/ "
                       "(use RunDirectory or run_directory.layout):\n" + "\n".join(found))


def test_only_the_run_directory_reads_the_state_file():
    """TensorFlow's state file, and its `latest_checkpoint` (which gives up when
    the newest checkpoint's files are gone), belong to `run_directory.latest`."""
    found = [f"{path.relative_to(REPO_ROOT)}:{number}"
             for path in library_files()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"tf\.train\.(latest_checkpoint|get_checkpoint_state)|"
                          r"update_checkpoint_state|model_checkpoint_path", line)]
    assert not found, "the checkpoint state file read outside run_directory/: " + ", ".join(found)


@pytest.mark.parametrize("source, found", [
    ('x = d / "eval_results.txt"', True),
    ('x = f"{d}/ckpt-{step}"', True),
    ('x = io.join(d, "checkpoint")', True),
    ('"""Writes eval_results.txt."""', False),  # a docstring
    ('x = {"checkpoint": 1}["checkpoint"]', False),  # JSON keys
    ('raise UserError("no label_list.txt in the run")', False),  # prose
    ('x = tempfile.mkdtemp(prefix="worker-ckpt-")', False),  # not the run's name
])
def test_the_grep_finds_names_in_code_only(tmp_path, source, found, monkeypatch):
    path = REPO_ROOT / "tests" / "x.py"  # only for the relative name in the message
    monkeypatch.setattr(type(path), "read_text", lambda self, encoding=None: source)
    assert bool(spelled_file_names(path)) == found
