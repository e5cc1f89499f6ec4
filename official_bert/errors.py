"""The error types for bad user input and bad files.

A command stops with one `error: ...` line (`official_bert.app`) when one of
these is raised; anything else is a bug and keeps its traceback. Raise them
where the input is read, with a message that names the input (the flag, or
the file and its line / record) and says what would fix it.

    UserError               a flag value, or a combination of flags, is wrong
      BadFileError          a file the user gave is missing, unreadable or malformed
      RunDirectoryError     --output_dir is in use, or holds another run's files
      DiskFullError         the disk filled up while writing (nothing half-written is left)
    Preempted               not an error: SIGTERM stopped training after a checkpoint

Each reader's own error type is a `BadFileError`: `modeling.configs.ConfigError`,
`checkpoints.CheckpointError`, `text.tokenization.VocabError`, and in
`data_prep` `GlueFormatError`, `SquadFormatError`, `SwagFormatError`,
`ConllFormatError`.

`UserError` subclasses `ValueError` so that library callers that already catch
`ValueError` around a call keep working.
"""

from __future__ import annotations

import codecs
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


class Preempted(Exception):
    """Training stopped on SIGTERM (how cloud VMs and TPU hosts are preempted)
    after saving a checkpoint; the same command resumes it. Not an error: the
    command exits with `EXIT_CODE` so a supervisor can tell it from a failure."""

    EXIT_CODE = 75  # EX_TEMPFAIL: a temporary failure, try again
    # Set by the SIGTERM handler that raises outside training. TensorFlow may
    # wrap what a handler raises (a StagingError when the signal lands while a
    # function is being traced), so `app.run` asks this, not only the type.
    received = False

    def __init__(self, step: int | None = None, checkpoint: str | None = None):
        self.step, self.checkpoint = step, checkpoint
        if checkpoint is None:  # not while training: every file is written atomically
            super().__init__("stopped by SIGTERM outside training: nothing was lost; run the "
                             "same command again to finish (a trained run trains no further)")
            return
        super().__init__(
            f"stopped by SIGTERM at step {step}: checkpoint {checkpoint} is saved; run the same "
            "command again to resume from it")


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` is an `OSError` meaning the disk (or a quota, or the
    file-size limit) is full."""
    return isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS


def not_utf8(path, error: UnicodeDecodeError | None = None, *, fix: str | None = None,
             ) -> BadFileError:
    """A `BadFileError` naming the line of the first byte of `path` that is not UTF-8.

    For readers that decode as they go (csv, json, line loops) and catch the
    `UnicodeDecodeError` without knowing the line: the file is read again, in
    blocks, up to the bad byte (only on this error path).
    """
    from official_bert import io  # here: io imports this module at its top

    fix = fix or "convert the file to UTF-8"
    decoder = codecs.getincrementaldecoder("utf-8")()
    consumed = newlines = 0
    reason = error.reason if error is not None else "invalid byte"
    try:
        with io.open_file(path, "rb") as f:
            while True:
                block = f.read(1 << 20)
                if not block:
                    decoder.decode(b"", final=True)
                    break
                try:
                    decoder.decode(block)
                except UnicodeDecodeError as e:
                    # `e.start` counts from the bytes the decoder held back
                    # (at most 3 of an unfinished character) plus this block.
                    held = len(e.object) - len(block)
                    start = max(e.start - held, 0)
                    line = newlines + block.count(b"\n", 0, start) + 1
                    return BadFileError(path, f"is not UTF-8 ({e.reason} at byte "
                                        f"{consumed + start})", line=line, fix=fix)
                newlines += block.count(b"\n")
                consumed += len(block)
    except UnicodeDecodeError as e:  # the file ends inside a character
        return BadFileError(path, f"is not UTF-8 ({e.reason} at the end of the file)",
                            line=newlines + 1, fix=fix)
    except OSError:
        pass
    return BadFileError(path, f"is not UTF-8 ({reason})", fix=fix)
