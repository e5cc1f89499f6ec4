"""One case of the sweep, and the copy of the world it runs in."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Callable

# Where the case's copy of the world goes in an argv (the copy is made when the case runs).
WORLD = "{world}"


def at(*parts: str) -> str:
    """A path in the case's copy of the world, as argv writes it: at("glue", "dev.tsv")."""
    return "/".join((WORLD, *parts))


def _steps(value) -> tuple:
    """A setup as a flat tuple of steps (a step, or steps and tuples of them)."""
    if callable(value):
        return (value,)
    return tuple(step for item in value for step in _steps(item))


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad input (or, with control=True, a good one) of one command.

    argv: [script, args...] as `kit.command` takes it (`bert <command>`, a run_*.py file or
        `-m module`); paths in the world are written with `at()`.
    setup: the steps that damage the copy first (setups.py), in order: a step, or a
        tuple of steps and tuples of them.
    names: one of these must be in the error line (the file, the flag).
    outputs: paths in the world that must not exist after the error.
    after: a follow-up after a clean error, (ctx, case) -> (ok, why): a rerun
        without the fault must succeed or resume (else the outcome is "data lost");
        after a control that ran through, a check of its result (else "silent
        wrong result"), e.g. `setups.same_as_without_bom`.
    command: the table's name of the command (set from the case's module).
    """

    name: str
    argv: list
    setup: Callable | tuple = ()
    control: bool = False
    names: tuple = ()
    outputs: tuple = ()
    stdin: bytes | None = None
    file_size_limit: int | None = None
    after: Callable | None = None
    timeout: int = 300
    command: str = ""

    def __post_init__(self):
        object.__setattr__(self, "setup", _steps(self.setup))
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "outputs", tuple(self.outputs))

    @property
    def expect_error(self) -> bool:
        return not self.control


@dataclasses.dataclass
class Ctx:
    """One case's copy of the world."""

    root: pathlib.Path

    def p(self, *parts) -> str:
        return str(self.root.joinpath(*parts))

    def resolve(self, argv: list) -> list:
        """`argv` with `at()`'s paths in this copy."""
        return [str(a).replace(WORLD, str(self.root)) for a in argv]

    def paths(self, relative: tuple) -> list:
        return [self.p(path) for path in relative]
