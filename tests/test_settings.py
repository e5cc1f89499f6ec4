"""Each setting is defined once: every command's flags agree with its configs.

A command module lists the config dataclasses its flags come from as
`CONFIGS` (`official_bert.commands.cli_flags`). For every command of `bert` under
`official_bert.commands`, each flag, as absl defines it in a fresh process,
must have the name, type, default and choices of the field of the first of
those configs that has it (the command's own defaults: `SquadRunConfig`'s
--max_seq_length=384), and no flag may exist without such a field. A flag
defined by hand, or a default changed on one side only, fails here.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import pathlib
import subprocess
import sys
import typing

import pytest

from official_bert.commands import cli, registry
from official_bert import settings
from official_bert import configs
from support import processes

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIG_COMMANDS = {command.name: command.module_name for command in registry.COMMANDS}

# What `absl.flags` calls each type of flag (`Flag.flag_type()`).
ABSL_TYPES = {str: "string", int: "int", float: "float", bool: "bool",
              list: "comma separated list of strings"}


def _field_type(annotation) -> type:
    """str, int, float, bool or list: the annotation without its `| None`."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    annotation = args[0] if args else annotation
    return typing.get_origin(annotation) or annotation


def _fields_as_flags(config_classes) -> dict:
    """{name: (type, default, choices)} as the flags of the fields of
    `config_classes` should be (the first class with a name wins), read from
    the dataclass fields themselves."""
    expected = {}
    for config_class in config_classes:
        hints = typing.get_type_hints(config_class)
        for field in dataclasses.fields(config_class):
            if not field.metadata.get(settings.FLAG, True) or field.name in expected:
                continue
            default = (field.default_factory() if field.default_factory is not dataclasses.MISSING
                       else field.default)
            choices = field.metadata.get(settings.CHOICES)
            kind = "string enum" if choices else ABSL_TYPES[_field_type(hints[field.name])]
            expected[field.name] = (kind, default, list(choices) if choices else None)
    return expected


_CONFIGS_OF = r"""
import json, sys
from official_bert.commands import registry
try:
    configs = registry.configs_of(registry.command(sys.argv[1]))
except AttributeError:  # no CONFIGS
    configs = None
print(json.dumps(None if configs is None else [[c.__module__, c.__qualname__] for c in configs]))
"""


def _configs_of(command: str) -> list:
    """The configs the flags of `bert <command>` come from (`registry.configs_of`:
    its module's `CONFIGS`, and --overwrite's), found in a fresh process."""
    out = processes.run([sys.executable, "-c", _CONFIGS_OF, command], text=True,
                        capture_output=True, check=True).stdout
    names = json.loads(out)
    assert names is not None, f"{command} has no CONFIGS: list the configs its flags come from"
    return [getattr(importlib.import_module(m), name) for m, name in names]


@pytest.mark.parametrize("command", sorted(CONFIG_COMMANDS))
def test_every_flag_is_its_config_field(command):
    expected = _fields_as_flags(_configs_of(command))
    defined = {flag["name"]: (flag["type"], flag["default"], flag["choices"])
               for group in cli.command_flags(command).values() for flag in group}
    assert defined, f"{command} defines no flags"
    without_field = sorted(set(defined) - set(expected))
    assert not without_field, f"bert {command}: flags without a config field: {without_field}"
    # Through JSON, as the flags come back: a tuple default compares as a list.
    expected = json.loads(json.dumps({name: expected[name] for name in defined}))
    differ = {name: {"flag": defined[name], "field": expected[name]} for name in defined
              if tuple(defined[name]) != tuple(expected[name])}
    assert not differ, f"bert {command}: flag vs field (type, default, choices): {differ}"


def test_no_flag_is_defined_by_hand():
    """No `flags.DEFINE_*` in the commands or cli_flags outside `define_flags`
    (its `_DEFINE` table included): every flag comes from a setting."""
    offenders = []
    for path in sorted((ROOT / "official_bert" / "commands").glob("*.py")):
        tree = ast.parse(path.read_text())
        allowed = {id(node) for top in tree.body
                   if (isinstance(top, ast.FunctionDef) and top.name == "define_flags")
                   or (isinstance(top, ast.Assign) and path.name == "cli_flags.py"
                       and any(getattr(t, "id", "") == "_DEFINE" for t in top.targets))
                   for node in ast.walk(top)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("DEFINE")
                    and id(node) not in allowed):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"flags defined by hand (make them settings of a config): {offenders}"


def test_the_configs_module_loads_no_tensorflow():
    """`--help` stays fast: the configs every command's flags come from import
    no TensorFlow."""
    code = ("import sys, official_bert.configs, official_bert.commands.cli_flags; "
            "print(any(m.split('.')[0] in ('tensorflow', 'keras') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], text=True, capture_output=True,
                         check=True).stdout
    assert out.strip() == "False"


# A task built without a run config uses its command's defaults.
TASK_RUN_DEFAULTS = [
    ("official_bert.tasks.classification", "ClassificationTask", configs.RunConfig),
    ("official_bert.tasks.squad", "SpanLabelingTask", configs.SquadRunConfig),
    ("official_bert.tasks.multiple_choice", "MultipleChoiceTask", configs.SwagRunConfig),
    ("official_bert.tasks.ner", "NerTask", configs.RunConfig),
    ("official_bert.tasks.pretraining", "PretrainingTask", configs.PretrainRunConfig),
]


def test_each_task_defaults_to_its_commands_settings():
    commands = {name: _configs_of(name)
                for name in ("classify", "squad", "swag", "ner", "pretrain")}
    run_configs = {c for classes in commands.values() for c in classes
                   if issubclass(c, configs.RunConfig)}
    assert run_configs == {c for _, _, c in TASK_RUN_DEFAULTS}
    for module, name, run_config in TASK_RUN_DEFAULTS:
        task = getattr(importlib.import_module(module), name)()
        assert task.run_config == run_config(), name


def test_with_defaults_changes_only_the_defaults_named():
    squad, run = configs.SquadRunConfig(), configs.RunConfig()
    assert squad.max_seq_length == 384
    assert dataclasses.replace(squad, max_seq_length=128).__dict__ == run.__dict__
    field = {f.name: f for f in dataclasses.fields(configs.SquadRunConfig)}["max_seq_length"]
    assert field.metadata[settings.HELP] == settings.settings_of(configs.RunConfig)[4].help
    with pytest.raises(TypeError, match="no field"):
        settings.with_defaults(configs.RunConfig, "Bad", max_seq_lenght=1)
