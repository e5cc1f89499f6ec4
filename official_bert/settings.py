"""One definition of each setting: a dataclass field that carries its help.

Every config dataclass of this project (the run's `RunConfig`, each task's
config, each data command's options) declares its fields with `setting`, which
keeps the name, type (the annotation), default, help text and, for a closed set
of values, the choices in one place. The command line is generated from those
fields (`official_bert.commands.cli_flags.define_flags`), and so are `--help` and
docs/flags.md; nothing else restates a default. `tests/test_settings.py` checks
every command's flags against its configs.

    @dataclasses.dataclass
    class SquadConfig:
        doc_stride: int = setting(128, "Tokens between the starts of a context's windows.")

A command whose default differs from the library's (run_squad.py's
`--max_seq_length=384`) says so once, with `with_defaults`:

    SquadRunConfig = with_defaults(RunConfig, "SquadRunConfig", max_seq_length=384)

This module imports nothing of TensorFlow's, so that defining flags (and
`--help`) stays fast.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Sequence

# Field metadata keys.
HELP = "help"
CHOICES = "choices"
FLAG = "flag"  # False: a field set in Python only, never a flag


def setting(default: Any, help: str, *, choices: Sequence[str] | None = None,
            flag: bool = True) -> Any:
    """A dataclass field with its help text (and, for an enum, its choices).

    Args:
        default: the default value; a list default is copied per instance.
        help: one or two sentences for `--help` and docs/flags.md.
        choices: the allowed values of a string setting (an enum flag).
        flag: False for a setting that commands never expose as a flag.
    """
    metadata = {HELP: help, FLAG: flag}
    if choices is not None:
        metadata[CHOICES] = tuple(choices)
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class Setting:
    """What a flag is made from: one field of a config dataclass."""

    name: str
    kind: type  # str, int, float, bool or list
    default: Any
    help: str
    choices: tuple | None
    optional: bool  # None is a valid value


def settings_of(config_class) -> list[Setting]:
    """The flag-able fields of `config_class`, in definition order."""
    hints = typing.get_type_hints(config_class)
    out = []
    for field in dataclasses.fields(config_class):
        if not field.metadata.get(FLAG, True) or HELP not in field.metadata:
            continue
        kind, optional = _kind(hints[field.name])
        default = (field.default_factory() if field.default_factory is not dataclasses.MISSING
                   else field.default)
        out.append(Setting(field.name, kind, default, field.metadata[HELP],
                           field.metadata.get(CHOICES), optional))
    return out


def _kind(annotation) -> tuple[type, bool]:
    """(str | int | float | bool | list, whether None is allowed) of an annotation."""
    args = typing.get_args(annotation)
    optional = type(None) in args
    if optional:
        rest = [a for a in args if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else annotation
    origin = typing.get_origin(annotation) or annotation
    if origin in (list, tuple):
        return list, optional
    if origin in (str, int, float, bool):
        return origin, optional
    raise TypeError(f"a setting must be str, int, float, bool or list, not {annotation}")


def default_of(config_class, name: str) -> Any:
    """The default of the setting `name` of the dataclass `config_class`: how
    a library class or function whose parameter is that setting states its
    default without restating it (`training.trainer.TrainingConfig`)."""
    field = {f.name: f for f in dataclasses.fields(config_class)}[name]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def setting_of(config_class, name: str, default: Any = dataclasses.MISSING) -> Any:
    """The setting `name` of the dataclass `config_class` (its help, choices
    and default; `default` replaces the default) as a field of another config:
    a setting two configs share, defined once."""
    field = {f.name: f for f in dataclasses.fields(config_class)}[name]
    if default is dataclasses.MISSING:
        default = default_of(config_class, name)
    if isinstance(default, list):  # each instance its own list
        return dataclasses.field(default_factory=lambda: list(default), metadata=field.metadata)
    return dataclasses.field(default=default, metadata=field.metadata)


def with_defaults(config_class, name: str, **defaults):
    """A subclass of the dataclass `config_class` whose fields in `defaults`
    have other defaults (help and type unchanged): a command's own defaults,
    stated once."""
    hints = {f.name: f.type for f in dataclasses.fields(config_class)}
    unknown = set(defaults) - set(hints)
    if unknown:
        raise TypeError(f"{config_class.__name__} has no field(s) {', '.join(sorted(unknown))}")
    fields = [(field_name, hints[field_name], setting_of(config_class, field_name, value))
              for field_name, value in defaults.items()]
    return dataclasses.make_dataclass(name, fields, bases=(config_class,),
                                      namespace={"__module__": config_class.__module__,
                                                 "__doc__": config_class.__doc__})
