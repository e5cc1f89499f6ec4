"""The error types for bad user input and bad files.

A command stops with one `error: ...` line (`official_bert.commands.app`) when one of
these is raised; anything else is a bug and keeps its traceback. Raise them
where the input is read, with a message that names the input (the flag, or
the file and its line / record) and says what would fix it.

    UserError               a flag value, or a combination of flags, is wrong
      BadFileError          a file the user gave is missing, unreadable or malformed
      RunDirectoryError     --output_dir is in use, or holds another run's files
      DiskFullError         the disk filled up while writing (nothing half-written is left)
    Stopped                 not an error: a signal stopped the job (the signal policy below)
      Interrupted           a person's key: SIGINT (Ctrl-C), SIGQUIT (Ctrl-\\); exit 128 + N
      Preempted             the job's surroundings: SIGTERM (a preempted VM), SIGHUP, ...; exit 75

Each reader's own error type is a `BadFileError`: `modeling.configs.ConfigError`,
`checkpoints.CheckpointError`, `text.tokenization.VocabError`, and in
`data_prep` `GlueFormatError`, `SquadFormatError`, `SwagFormatError`,
`ConllFormatError`.

`UserError` subclasses `ValueError` so that library callers that already catch
`ValueError` around a call keep working.
"""

from __future__ import annotations

import errno
import signal

# errno values of an OSError that mean "no room to write": a full disk, a full
# quota, or a file-size limit (`ulimit -f`, RLIMIT_FSIZE).
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


# errno values of an OSError that mean a limit of the machine or the process, not the file:
# too many open files (the process's, the system's), no memory, a resource temporarily
# unavailable (a thread that cannot start); and how the C library words them (TensorFlow's
# errors carry the words, not the number).
MACHINE_LIMIT_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN)
_MACHINE_LIMIT_WORDS = ("too many open files", "cannot allocate memory",
                        "resource temporarily unavailable")


def is_machine_limit(error: BaseException) -> bool:
    """Whether `error` is a limit of the machine or the process (`MACHINE_LIMIT_ERRNOS`),
    not a problem of the file it was reading: a reader must never call the file
    damaged for it."""
    if isinstance(error, OSError) and error.errno in MACHINE_LIMIT_ERRNOS:
        return True
    return any(words in str(error).lower() for words in _MACHINE_LIMIT_WORDS)


class UserError(ValueError):
    """Bad user input: the message names the input and the fix."""


# Paths that a line names as something else: a spooled copy of a stream is
# named as the stream the user gave (`official_bert.inputs.spool`).
_SHOWN_AS: dict[str, str] = {}


def show_path_as(path: str, words: str | None) -> None:
    """From now on a `BadFileError` about `path` names it as `words` (None: as itself)."""
    if words is None:
        _SHOWN_AS.pop(path, None)
    else:
        _SHOWN_AS[path] = words


def shown_path(path: str) -> str:
    """How a line names `path` (`show_path_as`)."""
    return _SHOWN_AS.get(path, path)


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
        where = "" if path is None else shown_path(str(path))
        if line is not None:
            where += f" line {line}"
        elif record is not None:
            where += f" record {record}"
        subject = where or self.subject
        text = f"{subject} {problem}" if subject else problem
        super().__init__(text + (f"; {fix}" if fix else ""))


class CheckpointError(BadFileError):
    """A checkpoint is missing, damaged, of an unknown kind, or does not fit the model."""

    subject = "the checkpoint"


def first_line(error: BaseException) -> str:
    """The first line of an error's message (TensorFlow's run on), for a
    `CheckpointError`'s text."""
    text = str(getattr(error, "message", None) or error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:200]


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
    """Not an error: a signal (`signal_name`) stopped the job; the command exits
    with `exit_code` so that a supervisor can tell it from a failure, and the
    same command resumes or finishes it. Raised at a step boundary by training,
    after a checkpoint (`step`, `checkpoint`), and at once elsewhere by the
    boundary's signal handler (`official_bert.interruption`), where every file
    is written atomically, so nothing half-written is kept.

    A `BaseException`, as `KeyboardInterrupt` is: an `except Exception` that
    turns errors into messages must not catch a stop."""

    SIGNALS: tuple = ()  # the names of the signals this kind of stop is, its default first
    PREFIX = "stopped"  # the first word of its line

    def __init__(self, step: int | None = None, checkpoint: str | None = None,
                 signal_name: str | None = None):
        self.step, self.checkpoint = step, checkpoint
        self.signal_name = signal_name or self.SIGNALS[0]
        if checkpoint is None:
            super().__init__(f"stopped by {self.signal_name} outside training: nothing was lost "
                             "(nothing half-written was kept); run the same command again to "
                             "finish (what a run trained is kept, and not trained again)")
            return
        super().__init__(f"stopped by {self.signal_name} at step {step}: checkpoint "
                         f"{checkpoint} is saved; run the same command again to resume from it")

    @property
    def exit_code(self) -> int:
        raise NotImplementedError


# The signal policy: which signals stop a job, and the exit status each gives. Every signal
# that ends a process by default and that a user's session, a supervisor or a scheduler
# delivers is here, in one of two kinds, told apart by who sent it, which is what a
# supervisor needs to know (retry or not):
# * a person at the keyboard (`Interrupted`): the shell's 128 + N, as if the signal had
#   ended the process (130 for Ctrl-C, 131 for Ctrl-\): a person chose to stop, so a
#   supervisor must not start the job again by itself;
# * the job's surroundings (`Preempted`): EX_TEMPFAIL (75), google's preemption status,
#   "try again later": a preempted VM (SIGTERM), a closed terminal or ssh session (SIGHUP:
#   nobody chose to stop), a scheduler's warning before its time limit (SLURM's `--signal`
#   sends SIGUSR1 or SIGUSR2; `timeout -s ALRM`: SIGALRM) or a CPU-time limit (SIGXCPU,
#   `ulimit -t`, the last warning before SIGKILL). Rerun, the job resumes.
# Left out, on purpose: SIGPIPE (Python ignores it: a closed stdout is an EPIPE error, which
# the command boundary ends quietly, exit 141) and SIGXFSZ (Python ignores it: a file-size
# limit is an EFBIG error, the one-line "disk is full"); SIGKILL and SIGSTOP (no handler
# can run); SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS (the process itself
# is broken: nothing it does next can be trusted to save); SIGPROF, SIGVTALRM, SIGIO and
# the real-time signals (profilers' and programs' private timers and events, not a
# session's); SIGPWR (sent to init, not to a job).
INTERRUPT_SIGNALS = ("SIGINT", "SIGQUIT")
PREEMPT_SIGNALS = ("SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU")


class Preempted(Stopped):
    """The job's surroundings stopped it (`PREEMPT_SIGNALS`): SIGTERM, how cloud VMs
    and TPU hosts are preempted, a closed terminal, a scheduler's limit."""

    SIGNALS = PREEMPT_SIGNALS
    PREFIX = "preempted"

    @property
    def exit_code(self) -> int:
        return 75  # EX_TEMPFAIL: a temporary failure, try again


class Interrupted(Stopped):
    """A person stopped it (`INTERRUPT_SIGNALS`): SIGINT (Ctrl-C), SIGQUIT (Ctrl-\\)."""

    SIGNALS = INTERRUPT_SIGNALS
    PREFIX = "interrupted"

    @property
    def exit_code(self) -> int:
        return 128 + signal.Signals[self.signal_name]  # the shell's status for it


def stopped_by(signal_name: str, step: int | None = None,
               checkpoint: str | None = None) -> Stopped:
    """The `Stopped` for the signal named `signal_name` ("SIGINT", "SIGHUP", ...)."""
    kind = Interrupted if signal_name in INTERRUPT_SIGNALS else Preempted
    return kind(step, checkpoint, signal_name)


def stop_exit_code(signal_name: str) -> int:
    """The exit status of a job stopped by the signal named `signal_name`."""
    return stopped_by(signal_name).exit_code


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
