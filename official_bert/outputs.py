"""The one output policy: what every command that writes checks before any work.

An output flag names a path of one kind (the registry's `Command.outputs`):

* "file": one file. A device node or a pipe there (`/dev/null`, `/dev/full`,
  `/dev/stdout`, a FIFO) is written through (`io.write_through`), never
  replaced by a regular file;
* "file_prefix": a set of files named by a comma-separated list, published
  together with a manifest beside them (create-pretraining-data's
  `--output_file`): each member is a "file", and a device is refused (the set
  has a manifest and is renamed into place);
* "dir": a directory the command fills and publishes whole
  (`io.publish_directory`: extend-vocab, export-google).

Run directories ("run_dir") and versioned exports ("export_dir") have owners of
their own (the run-directory package, `serving.versions`); this policy leaves
them alone.

Before any work, for each output (`check_command_outputs`): its name fits the
file system (NAME_MAX bytes a component); it is of the right kind (not a
directory where a file goes, not a file where a directory goes); it can be
written (`io.check_writable`); and what is there now may be replaced: nothing,
an empty directory, the project's own earlier output (recorded when it was
published: `io.is_published_output`, or the manifest of a file set that
lists it), or anything when the user gave `--overwrite`. Everything else (a
file the user made, or one of ours they changed since) is refused in one line
naming the flag. What the check found is written into the job's output plan
(`io.OutputPlan`, the one in force), and the writer publishes by it: an
output that was new is published only if it still is (of two writers one
wins, the other gets one line); one of ours only while it is still that file.
The plan also names the job's outputs, for an error line that names no path.

This module is the library's: it takes a command's outputs as a plain mapping
(flag name → kind) and never imports the command layer.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from official_bert import file_sets, io
from official_bert.errors import UserError

# The output kinds this policy checks; "run_dir" and "export_dir" have their own owners.
FILE, FILE_PREFIX, DIRECTORY = "file", "file_prefix", "dir"
KINDS = (FILE, FILE_PREFIX, DIRECTORY)

# The longest path the system takes (Linux's PATH_MAX, in bytes).
PATH_MAX = 4096


def check_command_outputs(command: Any, flag_values: Any,
                          plan: io.OutputPlan | None = None) -> io.OutputPlan:
    """Checks every output of a command (`check_output`) with the values its
    flags were given, and names them all in `plan`; called by the command
    boundary after flag parsing, before any work.

    Args:
        command: anything with `outputs` (flag name → kind), or that mapping.
        flag_values: the parsed flags (absl's `FLAGS`, a config: attribute
            access); `overwrite` among them says whether --overwrite was given.
        plan: the job's output plan; default: the plan in force.

    Returns:
        The plan, with a claim for every output of a kind this policy checks.
    """
    plan = plan or io.plan_in_force()
    outputs: Mapping[str, str] = getattr(command, "outputs", command) or {}
    overwrite = bool(flag_value(flag_values, "overwrite"))
    given = _given_paths(flag_values, skip=set(outputs))
    for flag, kind in outputs.items():
        value = flag_value(flag_values, flag)
        plan.name(f"--{flag}", value)
        if kind in KINDS and value:
            # First: an output that is one of the inputs says so (not "it exists").
            members = _members(value) if kind == FILE_PREFIX else [os.fspath(value)]
            io.refuse_output_over_input({f"--{flag}": m for m in members}, given)
            check_output(value, f"--{flag}", kind, overwrite, plan)
    return plan


def _given_paths(flag_values: Any, skip) -> list[tuple[str, str]]:
    """(flag, path) of every other value the command was given that could name
    a file (each part of a comma-separated list; globs left out): what its
    outputs must not replace."""
    if hasattr(flag_values, "flag_values_dict"):  # absl's FlagValues
        values = flag_values.flag_values_dict()
    elif isinstance(flag_values, Mapping):
        values = dict(flag_values)
    else:
        values = dict(vars(flag_values))
    found = []
    for name, value in values.items():
        if name in skip or not value:
            continue
        parts = value if isinstance(value, (list, tuple)) else [value]
        for part in parts:
            for path in (str(part).split(",") if isinstance(part, str) else ()):
                path = path.strip()
                if path and not io.has_magic(path):
                    found.append((name, path))
    return found


def flag_value(flag_values: Any, name: str):
    """A flag's value (from absl's FlagValues, a config object or a dict), or
    None when the command has no such flag. The input policy reads flags so too."""
    if isinstance(flag_values, dict):
        return flag_values.get(name)
    try:
        if name not in flag_values:
            return None
    except TypeError:  # a config object: attributes only
        pass
    return getattr(flag_values, name, None)


def check_output(path: str, flag: str, kind: str, overwrite: bool = False,
                 plan: io.OutputPlan | None = None) -> None:
    """`UserError` naming `flag` unless `path` may be written as an output of
    `kind` (module docstring); claims it in `plan` (default: the plan in
    force) as it will be published."""
    if kind not in KINDS:
        raise ValueError(f"check_output: kind {kind!r} is not one of {KINDS}")
    plan = plan or io.plan_in_force()
    members = _members(path) if kind == FILE_PREFIX else [os.fspath(path)]
    for member in members:
        _check_one(member, flag, kind, overwrite, plan)


def ensure_checked(path: str, flag: str, kind: str) -> None:
    """`check_output` for a writer called without the command boundary (a
    library call, a test): an output the boundary checked already keeps its
    claim (and its --overwrite)."""
    plan = io.plan_in_force()
    members = _members(path) if kind == FILE_PREFIX else [os.fspath(path)]
    if not all(plan.is_claimed(member) for member in members):
        check_output(path, flag, kind, plan=plan)


def _members(value: str) -> list[str]:
    """The files of a comma-separated output list."""
    return [part.strip() for part in os.fspath(value).split(",") if part.strip()]


def _check_one(path: str, flag: str, kind: str, overwrite: bool, plan: io.OutputPlan) -> None:
    if not io.is_local(path):
        return  # object stores: no kinds of path, no devices; rename replaces
    check_name_fits(path, flag)
    if io.is_stream(path):
        if kind == FILE:
            return  # written through: the device stays a device
        raise UserError(f"{flag} {path} is a device or a pipe: this command publishes "
                        f"{'a set of files with a manifest beside them' if kind == FILE_PREFIX else 'a directory'}"
                        "; name a regular path")
    _check_kind(path, flag, kind)
    io.check_writable(path, flag)
    plan.claim(path, _publication(path, flag, kind, overwrite))


def check_name_fits(path: str, flag: str) -> None:
    """`UserError` naming `flag` when the file system would refuse the name
    (a component over NAME_MAX bytes, or the whole over PATH_MAX)."""
    part = io.name_too_long(path)
    if part is not None:
        raise UserError(f"{flag}: the name {part[:40]}... is {len(os.fsencode(part))} bytes; "
                        f"the file system allows {io.NAME_MAX} in one name; choose a shorter one")
    if len(os.fsencode(os.path.abspath(io.local_path(path)))) >= PATH_MAX:
        raise UserError(f"{flag}: the path is longer than the file system allows "
                        f"({PATH_MAX} bytes); choose a shorter one")


def _check_kind(path: str, flag: str, kind: str) -> None:
    local = io.local_path(path)
    if kind == DIRECTORY and os.path.lexists(local) and not os.path.isdir(local):
        raise UserError(f"{flag} {path} is {io.kind_of(path)}, not a directory: this command "
                        "writes a directory; name a new or empty directory")
    if kind != DIRECTORY and os.path.isdir(local):
        raise UserError(f"{flag} {path} is a directory; name a file in it")


def _publication(path: str, flag: str, kind: str, overwrite: bool) -> str:
    """How `path` may be published: "new", "ours" or "replace" (`io.OutputPlan.claim`);
    `UserError` when something the project did not write is there."""
    local = io.local_path(path)
    if not os.path.lexists(local) or (kind == DIRECTORY and os.path.isdir(local)
                                      and not os.listdir(local)):
        return "new"
    if is_our_output(path):
        return "ours"
    if overwrite:
        return "replace"
    what = "a directory that is not empty" if os.path.isdir(local) else "a file"
    raise UserError(f"{flag} {path} exists ({what} this project did not write, or one "
                    "changed since it did): it is kept; choose another name, or add "
                    "--overwrite to replace it")


def is_our_output(path: str) -> bool:
    """Whether `path` is the project's own earlier output, unchanged: recorded
    when published (`io.is_published_output`), or a member of a file set
    whose manifest lists it with its size (outputs made before the record, or
    left in place by a writer killed while it published the set)."""
    if io.is_published_output(path):
        return True
    # The record, when it names the file, decides (an edit that kept the size is seen).
    return not io.is_in_ledger(path) and file_sets.is_listed_member(path)
