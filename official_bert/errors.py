"""The error types for bad user input and bad files.

A command stops with one `error: ...` line (`official_bert.commands.app`) when one of
these is raised; anything else is a bug and keeps its traceback. Raise them
where the input is read, with a message that names the input (the flag, or
the file and its line / record) and says what would fix it.

    UserError               a flag value, or a combination of flags, is wrong
      BadFileError          a file the user gave is missing, unreadable or malformed
      RunDirectoryError     --output_dir is in use, or holds another run's files
      DiskFullError         the disk filled up while writing (nothing half-written is left)
    Stopped                 not an error: a signal stopped the job (exit 130 / 75)
      Interrupted           SIGINT (Ctrl-C)
      Preempted             SIGTERM (a preempted VM); training saves a checkpoint first

Each reader's own error type is a `BadFileError`: `modeling.configs.ConfigError`,
`checkpoints.CheckpointError`, `text.tokenization.VocabError`, and in
`data_prep` `GlueFormatError`, `SquadFormatError`, `SwagFormatError`,
`ConllFormatError`.

`UserError` subclasses `ValueError` so that library callers that already catch
`ValueError` around a call keep working.
"""

from __future__ import annotations

import errno

# errno values of an OSError that mean "no room to write": a full disk, a full
# quota, or a file-size limit (`ulimit -f`, RLIMIT_FSIZE).
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class UserError(ValueError):
    """Bad user input: the message names the input and the fix."""


class BadFileError(UserError):
    """A user file is missing, unreadable or malformed.

    Args:
        path: the file (None when the content did not come from a file, e.g.
            a config built in Python: the message is then `problem` alone).
        problem: what is wrong, e.g. "is not UTF-8 (invalid start byte)".
            Given alone (`BadFileError("the whole message")`), the one
            argument is the message and `path` is None.
        line: 1-based line number, when the file is text.
        record: 0-based record number, when the file is a record file.
        fix: what the user can do about it.

    Example:
    >>> str(BadFileError("train.tsv", "has 2 columns, expected 3", line=7))
    'train.tsv line 7 has 2 columns, expected 3'
    """

    # What the message names when there is no path (e.g. "the BERT config").
    subject: str | None = None

    def __init__(self, path, problem: str | None = None, *, line: int | None = None,
                 record: int | None = None, fix: str | None = None):
        if problem is None:
            path, problem, self.subject = None, str(path), None
        self.path = None if path is None else str(path)
        self.problem, self.line, self.record, self.fix = problem, line, record, fix
        where = "" if path is None else str(path)
        if line is not None:
            where += f" line {line}"
        elif record is not None:
            where += f" record {record}"
        subject = where or self.subject
        text = f"{subject} {problem}" if subject else problem
        super().__init__(text + (f"; {fix}" if fix else ""))


class RunDirectoryError(UserError):
    """`--output_dir` is locked by a running process, or holds files of another run."""


class DiskFullError(UserError):
    """The disk filled up while writing `path`; what was being written is removed."""

    def __init__(self, path, detail: str | None = None):
        self.path = str(path)
        super().__init__(
            f"the disk is full (writing {path}{f': {detail}' if detail else ''}); free some "
            "space and run the same command again: nothing half-written was kept, and a "
            "training run resumes from its last checkpoint")


class Stopped(BaseException):
    """Not an error: a signal (`SIGNAL`) stopped the job; the command exits
    with `EXIT_CODE` so that a supervisor can tell it from a failure, and the
    same command resumes or finishes it. Raised at a step boundary by training,
    after a checkpoint (`step`, `checkpoint`), and at once elsewhere by the
    boundary's signal handler (`official_bert.interruption`), where every file
    is written atomically, so nothing half-written is kept.

    A `BaseException`, as `KeyboardInterrupt` is: an `except Exception` that
    turns errors into messages must not catch a stop."""

    SIGNAL = ""
    EXIT_CODE = 1
    PREFIX = "stopped"  # the first word of its line

    def __init__(self, step: int | None = None, checkpoint: str | None = None):
        self.step, self.checkpoint = step, checkpoint
        if checkpoint is None:
            super().__init__(f"stopped by {self.SIGNAL} outside training: nothing was lost "
                             "(nothing half-written was kept); run the same command again to "
                             "finish (what a run trained is kept, and not trained again)")
            return
        super().__init__(f"stopped by {self.SIGNAL} at step {step}: checkpoint {checkpoint} is "
                         "saved; run the same command again to resume from it")

    @property
    def exit_code(self) -> int:
        return self.EXIT_CODE


class Preempted(Stopped):
    """SIGTERM: how cloud VMs and TPU hosts are preempted (google's exit status)."""

    SIGNAL = "SIGTERM"
    EXIT_CODE = 75  # EX_TEMPFAIL: a temporary failure, try again
    PREFIX = "preempted"


class Interrupted(Stopped):
    """SIGINT: Ctrl-C (the shell's exit status for it, 128 + 2)."""

    SIGNAL = "SIGINT"
    EXIT_CODE = 130
    PREFIX = "interrupted"


def stopped_by(signal_name: str, step: int | None = None,
               checkpoint: str | None = None) -> Stopped:
    """The `Stopped` for the signal named `signal_name` ("SIGINT", "SIGTERM")."""
    kind = Interrupted if signal_name == "SIGINT" else Preempted
    return kind(step, checkpoint)


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` is an `OSError` meaning the disk (or a quota, or the
    file-size limit) is full."""
    return isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS


def not_utf8_error(path, reason: str, *, where: str | None = None, line: int | None = None,
                   fix: str | None = None) -> BadFileError:
    """The `BadFileError` for a file that is not UTF-8.

    Args:
        path: the file.
        reason: the decoder's reason, e.g. "invalid start byte".
        where: where the bad byte is, e.g. "at byte 17" (None: unknown).
        line: the 1-based line of the bad byte, when known.
        fix: what the user can do (default: convert the file to UTF-8).

    `io.not_utf8` finds `where` and `line` by reading the file; this module
    reads nothing, so that every module can import it.

    Example:
    >>> str(not_utf8_error("a.tsv", "invalid start byte", where="at byte 3", line=1))
    'a.tsv line 1 is not UTF-8 (invalid start byte at byte 3); convert the file to UTF-8'
    """
    detail = f"{reason} {where}" if where else reason
    return BadFileError(path, f"is not UTF-8 ({detail})", line=line,
                        fix=fix or "convert the file to UTF-8")
