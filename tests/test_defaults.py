"""A library default is its flag's default: no setting is restated elsewhere.

The training library (`TrainingConfig`, `OptimizerConfig`, `Trainer`,
`create_optimizer` and the functions that build them from a run) serves every
task command, so each of its defaults named as a `RunConfig` setting must be
that setting's default; a setting a run derives (`num_train_steps` from the
epochs: None in `RunConfig`) has no default there at all. Each task built
without configs holds its own command's flag defaults (`SpanLabelingTask()`
packs 384 tokens, as `bert squad` does). A default changed on one side only
fails here.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pathlib
import pkgutil

import pytest

import data_prep
import official_bert
from official_bert import configs, settings
from official_bert.commands import registry
from official_bert.tasks import classification, multiple_choice, ner, pretraining, squad
from official_bert.training import optimization, trainer

RUN_SETTINGS = {s.name: s.default for s in settings.settings_of(configs.RunConfig)}

TRAINING_LIBRARY = {
    "TrainingConfig": trainer.TrainingConfig,
    "training_config": trainer.training_config,
    "Trainer": trainer.Trainer,
    "OptimizerConfig": optimization.OptimizerConfig,
    "OptimizerConfig.of_run": optimization.OptimizerConfig.of_run,
    "create_optimizer": optimization.create_optimizer,
}

# Each task command and the task it runs.
TASK_COMMANDS = {
    "classify": classification.ClassificationTask,
    "ner": ner.NerTask,
    "squad": squad.SpanLabelingTask,
    "swag": multiple_choice.MultipleChoiceTask,
    "pretrain": pretraining.PretrainingTask,
}


def _library_defaults(obj) -> dict:
    """{name: default} of a dataclass's fields, or of the keyword parameters of
    a function (of a class: of its `__init__`). A name without a default is
    absent."""
    if dataclasses.is_dataclass(obj):
        return {name: settings.default_of(obj, name) for name in
                (f.name for f in dataclasses.fields(obj)
                 if f.default is not dataclasses.MISSING
                 or f.default_factory is not dataclasses.MISSING)}
    function = obj.__init__ if inspect.isclass(obj) else obj
    return {p.name: p.default for p in inspect.signature(function).parameters.values()
            if p.default is not inspect.Parameter.empty}


def _flag_defaults(command: str) -> dict:
    """{flag: default} of a command, from its `CONFIGS` (the first class with a
    name defines its flag, as `cli_flags` does)."""
    defaults = {}
    for config_class in registry.configs_of(registry.command(command)):
        for setting in settings.settings_of(config_class):
            defaults.setdefault(setting.name, setting.default)
    return defaults


@pytest.mark.parametrize("name", sorted(TRAINING_LIBRARY))
def test_the_training_librarys_defaults_are_the_flags(name):
    defaults = _library_defaults(TRAINING_LIBRARY[name])
    differing = {key: (value, RUN_SETTINGS[key]) for key, value in defaults.items()
                 if key in RUN_SETTINGS and value != RUN_SETTINGS[key]}
    assert not differing, f"{name}'s defaults differ from the flags' (library, flag): {differing}"


def test_a_default_that_differs_is_found():
    @dataclasses.dataclass
    class Restated:
        log_steps: int = 100

    assert _library_defaults(Restated) == {"log_steps": 100} != {"log_steps": RUN_SETTINGS[
        "log_steps"]}


@pytest.mark.parametrize("command", sorted(TASK_COMMANDS))
def test_a_task_built_without_configs_holds_its_commands_defaults(command):
    task = TASK_COMMANDS[command]()
    held = {**dataclasses.asdict(task.run_config), **dataclasses.asdict(task.config)}
    flags = _flag_defaults(command)
    differing = {name: (held[name], default) for name, default in flags.items()
                 if name in held and held[name] != default}
    assert not differing, f"{command}'s task differs from its flags (task, flag): {differing}"
    keywords = _library_defaults(TASK_COMMANDS[command])
    assert not {name for name in keywords if name in flags and keywords[name] != flags[name]}


def test_the_optimizer_choices_are_one_list():
    optimizer = {s.name: s for s in settings.settings_of(configs.RunConfig)}["optimizer"]
    assert optimizer.choices == configs.OPTIMIZERS
    assert tuple(optimization.OPTIMIZER_CLASSES) == configs.OPTIMIZERS


def _setting_choices() -> dict:
    """{frozenset of a setting's choices: the setting} over every config module."""
    found = {}
    for package in (official_bert, data_prep):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith("configs"):
                continue
            for obj in vars(importlib.import_module(info.name)).values():
                if isinstance(obj, type) and dataclasses.is_dataclass(obj):
                    for field in dataclasses.fields(obj):
                        if field.metadata.get(settings.CHOICES):
                            found[frozenset(field.metadata[settings.CHOICES])] = (
                                f"{obj.__name__}.{field.name}")
    return found


def test_no_module_restates_a_settings_choices():
    # A literal ("bilstm", "dense") beside the setting's choices is a second list
    # that one day misses a choice: the library imports the configs' constant.
    choices = _setting_choices()
    assert "NerConfig.task_model" in choices.values()
    root = pathlib.Path(official_bert.__file__).parents[1]
    restated = []
    for path in sorted([*root.glob("official_bert/**/*.py"), *root.glob("data_prep/**/*.py")]):
        if path.name in ("configs.py", "run_settings.py"):  # where the settings are defined
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) > 1
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                            for e in node.elts)):
                setting = choices.get(frozenset(e.value for e in node.elts))
                if setting:
                    restated.append(f"{path.relative_to(root)}:{node.lineno} ({setting})")
    assert not restated, f"choices restated outside the configs: {restated}"
