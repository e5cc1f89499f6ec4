"""A task family is declared (`official_bert.tasks.families`): a family that
registers its row gets its `bert` command, its flags and distillation, and
runs end to end (tests/support/toy_family.py: a toy family, declared as one
outside the library is); the `Task` class keeps only the code that differs
between families, and the run builds it complete."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import sys

import pytest

from support import REPO_ROOT, processes, tiny_config
from official_bert.commands import cli, registry
from official_bert.configs import RunConfig
from official_bert.tasks import base, families
from official_bert.tasks.runner import run_task

TOY_FAMILY = str(REPO_ROOT / "tests" / "support" / "toy_family.py")
VOCAB = "[PAD] [UNK] [CLS] [SEP] [MASK] the a movie is was good bad very fun dull".split()
ROWS = ["1\tthe movie is good", "0\ta bad movie", "1\tvery good fun", "0\tdull , dull",
        "1\tgood", "0\tthe movie was bad", "1\ta good movie", "0\tvery dull"]


@pytest.fixture
def toy():
    """tests/support/toy_family.py, imported (its row registered) for the test alone:
    the other tests' commands are the library's."""
    yield importlib.import_module("support.toy_family")
    families.FAMILIES.pop("toy", None)
    sys.modules.pop("support.toy_family", None)


def test_the_task_class_keeps_only_what_differs_between_families():
    public = [name for name in vars(base.Task) if not name.startswith("_")]
    public += [name for name in base.Task.__annotations__ if name not in public]
    assert len(public) <= 12, public
    assert "spec" in public and not {"family", "distils", "train_steps", "run_directory",
                                     "check_flags_again"} & set(public)


def test_no_module_assigns_a_tasks_attributes_from_outside_its_class():
    """`task.<name> = ...` (or a task's copy changed) appears in no library module:
    the run resolves everything first and builds the task complete."""
    found = []
    for path in (REPO_ROOT / "official_bert").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            found += [f"{path.name}: {ast.unparse(t)}" for t in targets
                      if isinstance(t, ast.Attribute) and re.search(
                          r"(^|_)task$", ast.unparse(t.value))]
    assert not found


def test_a_registered_family_is_a_bert_command_with_its_rows_flags(toy, monkeypatch):
    command = registry.command("toy")
    assert command.task is toy.ToyTask.spec is families.family("toy")
    assert command.inputs == {"bert_config_file": "file", "vocab_file": "file",
                          "train_file": "file", "eval_file": "file", "predict_file": "file"}
    assert command.phases == ("read", "train", "eval", "predict", "export")
    assert command.outputs == {"output_dir": "run_dir", "export_dir": "export_dir"}
    # In a fresh `bert`, through $OFFICIAL_BERT_TASKS: its flags, the reference's source.
    monkeypatch.setenv(families.DECLARED_ENV, TOY_FAMILY)
    groups = cli.command_flags("toy")
    names = {flag["name"] for group in groups.values() for flag in group}
    assert {"train_file", "eval_file", "predict_file", "do_train", "output_dir",
            "teacher", "distill_alpha", "init_checkpoint"} <= names
    assert "distill_text" not in names  # (the row does not read it)
    assert [flag["name"] for flag in groups["toy_family"]] == ["eval_file", "predict_file",
                                                                "train_file"]


def _checkpoint(directory):
    from official_bert import checkpoints
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs

    directory.mkdir()
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    encoder = BertEncoder.from_bert_config(tiny_config(vocab_size=len(VOCAB)))
    encoder(dummy_inputs())
    checkpoints.save_checkpoint(encoder, str(directory), vocab_file=str(directory / "vocab.txt"))
    return directory


def test_a_toy_family_runs_end_to_end_and_distils(toy, tmp_path):
    ckpt = _checkpoint(tmp_path / "ckpt")
    data = tmp_path / "toy.tsv"
    data.write_text("\n".join(ROWS) + "\n")
    teacher = tmp_path / "teacher"
    settings = dict(init_checkpoint=str(ckpt), max_seq_length=8, train_batch_size=4,
                    num_train_epochs=2, learning_rate=1e-3)
    flags = [f"--{name}={value}" for name, value in settings.items()]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               **{families.DECLARED_ENV: TOY_FAMILY})
    result = processes.run(
        [sys.executable, "-m", "official_bert.commands.cli", "toy", "--do_train", "--do_eval",
         "--do_predict", *(f"--{mode}_file={data}" for mode in ("train", "eval", "predict")),
         f"--output_dir={teacher}", *flags],
        cwd=REPO_ROOT, env=env, text=True, capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    results = dict(line.split(" = ") for line in
                   (teacher / "eval_results.txt").read_text().splitlines())
    assert results["global_step"] == "4" and results["num_examples"] == "8"
    assert len((teacher / "toy_predictions.txt").read_text().split()) == 8
    assert json.loads((teacher / "run.json").read_text())["identity"]["task"] == "toy"

    # Distillation, by declaring it: the first run teaches a student of one layer.
    student = tmp_path / "student"
    run_task(toy.ToyTask, toy.ToyConfig(train_file=str(data)), RunConfig(
        do_train=True, output_dir=str(student), teacher=str(teacher), student_layers=["1"],
        **settings))
    record = json.loads((student / "run.json").read_text())
    assert record["settings"]["teacher"] == str(teacher / "ckpt-4")
    assert record["identity"]["student_layers"] == [1]
