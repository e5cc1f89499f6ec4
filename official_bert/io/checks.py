"""The checks a writer makes before any work: the output can be written, its
directory is there, it is none of the inputs.

Local paths only where a check needs the file system's answer (an object
store's permissions show only when an object is written). The output policy
(`official_bert.outputs`) runs them for every output a command declares.
"""

from __future__ import annotations

import os

from official_bert.errors import UserError
from official_bert.io.paths import is_local, is_stream, kind_of, local_path, same_path
from official_bert.io.staging import temporary_name


def check_output_directory(path: str) -> None:
    """`UserError` unless the directory of the local file `path` exists.

    For the data tools, which do not create directories (a typo in an output
    path should not make a new tree). Object stores have no directories to
    check: nothing is checked for paths with a scheme.
    """
    if is_local(path):
        directory = os.path.dirname(os.path.abspath(local_path(path)))
        if not os.path.isdir(directory):
            raise UserError(f"cannot write output {path}: output directory "
                            f"{directory} does not exist; create it first")


def refuse_output_over_input(outputs: dict, inputs) -> None:
    """`UserError` when an output would replace one of the inputs.

    Args:
        outputs: flag name → an output file or directory (None entries ignored).
        inputs: flag name → an input file or directory, or (flag, path) pairs
            (None paths ignored).
    """
    inputs = list(inputs.items() if isinstance(inputs, dict) else inputs)
    for out_flag, output in outputs.items():
        if not output:
            continue
        for in_flag, path in inputs:
            if path and same_path(output, path):
                raise UserError(f"{out_flag} is --{in_flag} ({path}): the run would write "
                                f"over its own input; choose another output")


def check_writable(path: str, flag: str) -> None:
    """`UserError` naming `flag` when the output `path` (a file or directory,
    there or not yet) could not be written: a probe file is created in its
    directory, or in the nearest one above that exists, and removed. For every
    writer's validation, before any work: a read-only file system, a
    directory without write permission or a file where a directory must be
    are one line, not a traceback at the end. Local paths only (an object
    store's permissions show only when an object is written)."""
    if not path or not is_local(path):
        return
    if is_stream(path):  # written through (`write_through`): the device itself must take it
        if not os.access(local_path(path), os.W_OK):
            raise UserError(f"{flag} {path} cannot be written (permission denied); choose "
                            "a location you can write")
        return
    directory = os.path.abspath(local_path(path))
    if os.path.isfile(directory):
        directory = os.path.dirname(directory)  # an existing output file: its directory
    while not os.path.lexists(directory):
        directory = os.path.dirname(directory)
    if not os.path.isdir(directory):
        raise UserError(f"{flag} {path}: {directory} is {kind_of(directory)}, not a "
                        "directory; choose another location")
    probe = temporary_name(os.path.join(directory, "write-probe"))
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as e:
        raise UserError(f"{flag} {path} cannot be written: {directory} refuses new files "
                        f"({e.strerror}); choose a location you can write") from None
    os.remove(probe)
