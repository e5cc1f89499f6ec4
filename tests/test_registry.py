"""Commands as data (`official_bert/commands/registry.py`): every command module
is registered, `bert --help` lists them, google's script names start their
registered command, and what each declares (outputs, phases) is well formed."""

from __future__ import annotations

import ast
import re
import sys

import pytest

from support import REPO_ROOT, processes

from official_bert import configs
from official_bert.commands import registry

COMMANDS_DIR = REPO_ROOT / "official_bert" / "commands"
# The boundary's own modules: not commands.
BOUNDARY = {"__init__", "app", "cli", "cli_flags", "registry", "system_errors"}


def test_every_command_module_is_registered_once():
    modules = {p.stem for p in COMMANDS_DIR.glob("*.py")} - BOUNDARY
    registered = [command.module for command in registry.COMMANDS]
    assert sorted(registered) == sorted(modules)
    assert len(registry.BY_NAME) == len(registry.COMMANDS)


@pytest.mark.parametrize("command", registry.COMMANDS, ids=lambda c: c.name)
def test_each_command_module_has_one_pattern(command):
    """Docstring, CONFIGS, define_flags(), main(argv), started by the registry;
    no entry() of its own and no flag defined when it is imported. A task
    family's command is its row's (a docstring alone: flags and main come from
    the row); a job's has no main (the registry's runs the job its row names)."""
    tree = ast.parse((COMMANDS_DIR / f"{command.module}.py").read_text())
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assigned = {getattr(node.targets[0], "id", "") for node in tree.body
                if isinstance(node, ast.Assign)}
    assert ast.get_docstring(tree) and "entry" not in functions
    if command.task is not None:
        assert not functions and "CONFIGS" not in assigned
    else:
        assert {"define_flags"} <= functions and "CONFIGS" in assigned
        assert ("main" in functions) == (command.job is None)
    top_level_calls = [ast.unparse(node) for node in tree.body if isinstance(node, ast.Expr)
                       and isinstance(node.value, ast.Call)]
    assert not [c for c in top_level_calls if "define" in c], top_level_calls
    assert f'registry.run_command("{command.name}")' in (COMMANDS_DIR / f"{command.module}.py").read_text()


def test_the_task_commands_share_one_main_made_from_their_rows():
    tasks = [command for command in registry.COMMANDS if command.task is not None]
    assert {command.name for command in tasks} == {"pretrain", "distill", "classify", "squad",
                                                   "swag", "ner"}
    mains = [path.stem for path in COMMANDS_DIR.glob("*.py")
             if re.search(r"^def main\b", path.read_text(), re.M)]
    assert len(mains) <= 14, mains
    for command in tasks:
        assert command.task.command == command.name
        assert registry.configs_of(command) == (command.task.config, command.task.run_config,
                                                configs.GoogleTpuFlags)


@pytest.mark.parametrize("command", registry.COMMANDS, ids=lambda c: c.name)
def test_what_each_command_declares_is_well_formed(command):
    assert set(command.outputs.values()) <= set(registry.OUTPUT_KINDS)
    assert command.phases and set(command.phases) <= set(registry.PHASES)
    assert command.takes_overwrite == any(
        kind in ("file", "file_prefix", "dir") for kind in command.outputs.values())
    if "train" in command.phases:  # what it trains, it resumes
        assert "run_dir" in command.outputs.values()


def test_bert_help_lists_every_registered_command():
    result = processes.run([sys.executable, "-m", "official_bert.commands.cli", "--help"],
                           capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    listed = re.findall(r"^  (\S+)  ", result.stdout, re.M)
    assert listed == [command.name for command in registry.COMMANDS]


GOOGLE = [command for command in registry.COMMANDS if command.google_script]


def test_each_google_script_is_registered():
    scripts = {p.name for p in REPO_ROOT.glob("*.py")
               if 'registry.run_command("' in p.read_text()}
    assert scripts == {command.google_script for command in GOOGLE}


@pytest.mark.parametrize("command", GOOGLE, ids=lambda c: c.google_script)
def test_each_google_script_starts_its_registered_command(command):
    text = (REPO_ROOT / command.google_script).read_text()
    assert f'registry.run_command("{command.name}")' in text
    result = processes.run([sys.executable, command.google_script, "--help"],
                           capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"usage: {command.google_script} [flags]" in result.stdout
    assert ("--[no]overwrite" in result.stdout) == command.takes_overwrite


def test_the_flags_reference_shows_overwrite_exactly_where_a_command_takes_it():
    text = (REPO_ROOT / "docs" / "flags.md").read_text()
    sections = dict(re.findall(r"^## `bert (\S+)`\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    assert set(sections) == set(registry.BY_NAME)
    for name, body in sections.items():
        assert ("`--overwrite`" in body) == registry.command(name).takes_overwrite, name
