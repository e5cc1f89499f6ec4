"""The error types for bad user input and bad files.

A command stops with one line (`official_bert.app`) when one of these is
raised; anything else is a bug and keeps its traceback. Raise them where the
input is read, with a message that names the input (the flag, or the file and
its line / record) and says what would fix it.

    UserError               a flag value, or a combination of flags, is wrong
      BadFileError          a file the user gave is missing, unreadable or malformed
      RunDirectoryError     --output_dir is in use, or holds another run's files
      DiskFullError         the disk filled up while writing (nothing half-written is left)

`modeling.configs.ConfigError` and `checkpoints.CheckpointError` are
`BadFileError`s.

`UserError` subclasses `ValueError` so that library callers that already catch
`ValueError` around a call keep working.
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad user input: the message names the input and the fix."""


class BadFileError(UserError):
    """A user file is missing, unreadable or malformed.

    Args:
        path: the file.
        problem: what is wrong, e.g. "is not UTF-8 (invalid start byte)".
        line: 1-based line number, when the file is text.
        record: 0-based record number, when the file is a record file.
        fix: what the user can do about it.

    Example:
    >>> str(BadFileError("train.tsv", "has 2 columns, expected 3", line=7))
    'train.tsv line 7 has 2 columns, expected 3'
    """

    def __init__(self, path, problem: str, *, line: int | None = None,
                 record: int | None = None, fix: str | None = None):
        self.path, self.problem, self.line, self.record, self.fix = (
            str(path), problem, line, record, fix)
        where = str(path)
        if line is not None:
            where += f" line {line}"
        elif record is not None:
            where += f" record {record}"
        super().__init__(f"{where} {problem}" + (f"; {fix}" if fix else ""))


class RunDirectoryError(UserError):
    """`--output_dir` is locked by a running process, or holds files of another run."""


class DiskFullError(UserError):
    """The disk filled up while writing `path`; what was being written is removed."""

    def __init__(self, path):
        self.path = str(path)
        super().__init__(
            f"the disk is full (writing {path}); free some space and run the same command "
            "again: nothing half-written was kept, and a training run resumes from its last "
            "checkpoint")
