"""Running a command-line entry point: absl flags, logging, signals, one-line errors.

Every command (`bert <command>`, the `run_*.py` scripts) is started by
`commands.registry`, which calls `app.run(main)`. Around the job it installs,
once, the signal policy (`signal_policy`): every signal that ends a process by
default and that a session delivers (SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1,
SIGUSR2, SIGALRM, SIGXCPU: `official_bert.interruption` lists them) stops the
job wherever it is: training saves a checkpoint first, temporaries are removed,
and one line says what was kept and how to resume (`interrupted: ...` with the
shell's 128 + N for a person's Ctrl-C or Ctrl-\\, 130 or 131; `preempted: ...`
with 75, google's preemption status, for the others). A later signal during
that stop is noted in one line and changes nothing. A closed stdout (`bert ... |
head`, SIGPIPE's case) ends any command quietly with the shell's status for
SIGPIPE, 141 (`closed_output_ends_quietly`; `bert flags-reference` and the
usage too); a standard stream that is not open at all (`>&-`) is /dev/null
(`standard_streams_open`). Four kinds of stop are printed as one `error: ...` line with exit
status 1:

* mistakes in what the user gave: `official_bert.errors.UserError` and its
  subclasses (`BadFileError`, `RunDirectoryError`, ...), raised where the input
  is read, with a message that names the input and the fix;
* a full disk: `errors.DiskFullError`, or an `OSError` with errno ENOSPC,
  EDQUOT or EFBIG (or TensorFlow's error for one) that escaped, reported with
  the file being written;
* any other operating-system error, whoever raised it (`OSError`, TensorFlow's
  file errors, a library's wrapping of one): a read-only or forbidden path, a
  name too long, not a directory, a directory, no such file
  (`commands.system_errors`): `error: <path>: <what> — <what to do>`;
* running out of memory (TensorFlow's `ResourceExhaustedError`, Python's
  `MemoryError`, C++'s `std::bad_alloc`), with what to lower, or out of threads
  (a thread that cannot start), with the limit to raise.

Anything else is a bug: it keeps its traceback, followed by one line saying so
and where to report it (`ISSUE_TRACKER`). Set OFFICIAL_BERT_TRACEBACK=1 to see
the traceback of the one-line errors too.

What a run prints (`configure_logging`, `quiet_tensorflow`): the project's
INFO lines as plain messages, warnings as `warning: ...`; nothing of
TensorFlow's internals (its C++ start-up lines, its Python INFO lines such as
SavedModel writing's `Function ... contains input name(s) ...` or `Sharding
callback duration`). `--verbosity=1` (`-v 1`), or OFFICIAL_BERT_VERBOSE=1,
shows all of it again with absl's prefixes (level, time, thread, file:line);
`--verbosity=-1` shows warnings and errors only.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import errno
import logging as std_logging
import os
import re
import signal
import sys
import threading
import traceback

from absl import app as absl_app
from absl import flags, logging

from official_bert import interruption, io
from official_bert.commands import system_errors
from official_bert.errors import (DISK_FULL_ERRNOS, DiskFullError, Interrupted, Stopped,
                                  UserError, stopped_by)

# Where bugs are reported: the repository's issue tracker.
ISSUE_TRACKER = "the official_bert repository's issue tracker (its Issues page)"
BUG_LINE = ("this is a bug in official_bert, not a mistake in your input: please report it, "
            "with the command and the traceback above, on " + ISSUE_TRACKER)

HELP_FLAGS = ("--help", "-h", "-help", "--helpshort", "-?")

OUT_OF_MEMORY_HINT = (
    "lower the batch size or --max_seq_length (or try without --jit_compile); checkpoints "
    "already saved in --output_dir are kept and the same command resumes from the latest")
OUT_OF_THREADS_HINT = (
    "the process reached a limit of the machine (threads, ulimit -u, or address space, ulimit "
    "-v): raise it, or run fewer jobs at once; checkpoints already saved in --output_dir are "
    "kept and the same command resumes from the latest")


def _system_problem(error: BaseException) -> system_errors.Problem | None:
    """The operating-system problem behind `error` (`system_errors.classify`);
    None for a user error, which says what it means itself."""
    return None if isinstance(error, UserError) else system_errors.classify(error)


def _disk_full_path(error: BaseException) -> str | None:
    """The file being written when the disk filled up, "" when unknown, None
    when `error` is not a full disk."""
    problem = _system_problem(error)
    return problem.path if problem and problem.errno in DISK_FULL_ERRNOS else None


def _resource_limit(error: BaseException) -> str | None:
    """The limit that stopped the job: "memory" (Python's `MemoryError`,
    TensorFlow's `ResourceExhaustedError`, C++'s `std::bad_alloc` as a library
    words it), "threads" (a thread that could not start: Python's "can't start
    new thread", under a thread or address-space limit), or None. A resource
    limit is the machine's, not a bug: one line, never the bug's traceback."""
    if _system_problem(error) is not None:
        return None
    text = str(error)
    if isinstance(error, MemoryError) or type(error).__name__ == "ResourceExhaustedError" or \
            "bad_alloc" in text:
        return "memory"
    if isinstance(error, RuntimeError) and "can't start new thread" in text:
        return "threads"
    return None


def _is_out_of_memory(error: BaseException) -> bool:
    return _resource_limit(error) is not None


def is_one_line_error(error: BaseException) -> bool:
    """Whether `error` is printed as one line: a user error, an operating-system
    error (a full disk, a read-only or forbidden path, a name too long, ...),
    out of memory."""
    return (isinstance(error, UserError) or _system_problem(error) is not None
            or _is_out_of_memory(error))


def _somewhere(outputs: dict | None) -> str:
    """What an error line names when its error names no path: the job's
    outputs (TensorFlow's SavedModel writer says "File too large" alone)."""
    if not outputs:
        return "a file"
    return "a file under " + " or ".join(f"{flag} {path}" for flag, path in outputs.items())


def one_line_error(error: BaseException, outputs: dict | None = None) -> str:
    """The `error: ...` line printed for a user error, an operating-system
    error or an out-of-memory stop; `outputs` (flag → path: the job's output
    plan names them) is where an error that names no path happened."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    problem = _system_problem(error)
    if problem is not None and not problem.path:
        problem = dataclasses.replace(problem, path=_somewhere(outputs))
    if problem is not None and problem.errno in DISK_FULL_ERRNOS:
        detail = error.strerror if isinstance(error, OSError) and error.strerror else problem.what
        return f"error: {DiskFullError(problem.path, detail[:200])}"
    if problem is not None:
        return problem.line()
    if _resource_limit(error) == "threads":
        return f"error: no thread can start ({lines[0]}): {OUT_OF_THREADS_HINT}"
    if _is_out_of_memory(error):
        detail = next((line for line in lines if "memory" in line.lower() or "bad_alloc" in line),
                      "")
        return f"error: out of memory{f' ({detail})' if detail else ''}: {OUT_OF_MEMORY_HINT}"
    return f"error: {lines[0] if lines else type(error).__name__}"


def _is_closed_output(error: BaseException) -> bool:
    """Whether `error` is a broken pipe on the standard output (`bert ... | head`):
    the reader stopped early, which is no error to report."""
    problem = _system_problem(error)
    return problem is not None and problem.errno == errno.EPIPE and not problem.path


def _stop_of(error: BaseException) -> Stopped | None:
    """The stop `error` means: itself; `Interrupted` for a `KeyboardInterrupt`
    (a Ctrl-C before the policy was installed); whatever a library made of the
    signal handler's exception (TensorFlow wraps it while tracing) when a stop
    was requested; else None."""
    if isinstance(error, Stopped):
        return error
    if isinstance(error, KeyboardInterrupt):
        return Interrupted()
    name = interruption.requested()
    return stopped_by(name) if name else None


def _on_stop_signal(signum, frame):
    del frame
    interruption.request(signum)


def _handled_signals() -> tuple:
    """The stop signals the policy takes: all of `interruption.STOP_SIGNALS` but
    those ignored when the process started (`nohup` ignores SIGHUP; a shell's
    background job, SIGINT and SIGQUIT), which stay ignored, as POSIX asks."""
    return tuple(s for s in interruption.STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN)


@contextlib.contextmanager
def signal_policy():
    """Every stop signal alike stops the job (`official_bert.interruption`):
    the one place that installs their handlers, around every job. Python takes
    signals in the main thread only: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interruption.reset()
    previous = {s: signal.signal(s, _on_stop_signal) for s in _handled_signals()}
    exiting_stopped = False
    try:
        yield
    except SystemExit:
        exiting_stopped = interruption.requested() is not None
        raise
    finally:
        # A process that ends stopped keeps the handler, and its request: a further
        # Ctrl-C while it exits (draining its log, `atexit`) is only recorded, never a
        # KeyboardInterrupt traceback. Otherwise the handlers are as they were and the
        # request forgotten: library code run next in this process starts afresh.
        if not exiting_stopped:
            for s, handler in previous.items():
                signal.signal(s, handler)
            interruption.reset()


def _exit_stopped(stop: Stopped) -> None:
    # After SIGHUP the terminal may be gone: the line is lost, the exit status is not.
    with contextlib.suppress(OSError, ValueError):
        print(f"{stop.PREFIX}: {stop}", file=sys.stderr, flush=True)
    sys.exit(stop.exit_code)


def _exit_quietly_on_closed_output() -> None:
    """The reader of stdout is gone: nothing more can reach it (exit 141, as a
    shell reports SIGPIPE), and Python's flush at exit must not complain."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(128 + signal.SIGPIPE)


@contextlib.contextmanager
def closed_output_ends_quietly():
    """A closed stdout (`bert ... | head`: the reader stopped early) ends the
    block quietly with exit 141, whatever wrote to it. Python ignores SIGPIPE,
    so a write or the last flush raises EPIPE: the block flushes before it
    ends, so that the error is raised here, not in the interpreter's exit."""
    try:
        yield
        sys.stdout.flush()
    except Exception as e:  # noqa: BLE001 - only a closed stdout; the rest is re-raised
        if _is_closed_output(e):
            _exit_quietly_on_closed_output()
        raise


def standard_streams_open() -> None:
    """A standard stream that is not open (`>&-`, `<&-`, a launcher that closed it) is
    /dev/null from here on: else the next file the job opens takes its descriptor, and
    what is written to that stream (a print, TensorFlow's native lines) lands in that
    file; and Python, which made the stream None, would fail at its first use."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        opened = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if opened != fd:
            os.dup2(opened, fd)
            os.close(opened)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))


def refuse_arguments(argv) -> None:
    """`UserError` for words left on the command line after the flags: every
    command takes flags only, and a word that was meant as a flag's value
    (`--do_train true`, `--output_dir /runs/x y`) must not be ignored."""
    if len(argv) > 1:
        raise UserError(f"unexpected argument(s): {' '.join(argv[1:])} (flags are written "
                        "--name=value; boolean flags as --name or --noname)")


def grouped_help(argv0: str, doc: str | None) -> str:
    """The script's doc (its example) and its flags, grouped as they were
    defined: the script's own, then `official_bert.commands.cli_flags`' groups (model
    files, training, distribution), leaving out absl's internals."""
    values = flags.FLAGS
    program = os.path.basename(argv0)
    parts = [(doc or "").strip(), "", f"usage: {program} [flags]"]
    for module in values.flags_by_module_dict():
        if module.startswith("absl."):
            continue
        text = values.module_help(module).strip()
        if text and (module == "__main__" or "." in module or os.sep in module):
            # The command's own flags, grouped under its module's name: say the command's.
            text = f"{program} flags:" + text[text.index("\n"):] if "\n" in text else ""
        if text:
            parts += ["", text]
    parts += ["", "--helpfull lists every flag, absl's included."]
    return "\n".join(parts)


def run(main, argv=None):
    """`absl.app.run(main)`, with user errors printed as one line,
    `--help` grouped (see `grouped_help`) and quiet logs (`configure_logging`)."""
    args = sys.argv if argv is None else argv
    standard_streams_open()
    quiet_tensorflow(args)
    if any(a in HELP_FLAGS for a in args[1:]):
        module = sys.modules.get(getattr(main, "__module__", "__main__"))
        with closed_output_ends_quietly():  # `bert classify --help | head`
            print(grouped_help(args[0], getattr(module, "__doc__", None)))
        sys.exit(0)

    def guarded(args):
        plan = io.OutputPlan()  # the job's: its outputs' claims, filled by the output policy
        try:
            configure_logging()
            with plan.in_force(), closed_output_ends_quietly():
                return main(args)
        except BaseException as e:  # noqa: BLE001 - a stop, one line for user errors, else a bug
            if isinstance(e, SystemExit):
                raise
            logging.flush()
            stop = _stop_of(e)
            if stop is not None:
                _exit_stopped(stop)
            if not isinstance(e, Exception):
                raise
            if os.environ.get("OFFICIAL_BERT_TRACEBACK"):
                raise
            if is_one_line_error(e):
                print(one_line_error(e, plan.named), file=sys.stderr)
            else:
                traceback.print_exc()
                print(f"error: {BUG_LINE}", file=sys.stderr)
            sys.stderr.flush()
            sys.exit(1)

    with signal_policy():
        try:
            absl_app.run(guarded, argv=argv)
        except Stopped as stop:  # while absl parsed the flags
            _exit_stopped(stop)


def quiet_tensorflow(argv=None):
    """Silences TensorFlow's C++ start-up chatter (call before importing TF).

    TF_CPP_MIN_LOG_LEVEL does not reach what TensorFlow 2.21's runtime writes
    before its logging is set up (oneDNN and CUDA probes, CPU features, and on
    a machine without a GPU an "E ... failed call to cuInit" line that is no
    error), so those lines are dropped from the process's stderr on their way
    out; everything else passes. `--verbosity=1` (or more) on the command line
    `argv` (default: sys.argv), or OFFICIAL_BERT_VERBOSE=1, keeps them.
    """
    standard_streams_open()  # (first: the filter's pipe must not take a closed stdout's 1)
    if verbose(argv):
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _drop_native_noise()


def command_line_verbosity(argv=None) -> int | None:
    """The `--verbosity` / `-v` value on the command line `argv` (default:
    sys.argv), read before absl parses the flags (TensorFlow's C++ logging is
    set when it is imported); None when absent or not an integer."""
    args = list(sys.argv if argv is None else argv)[1:]
    value = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name, equals, text = arg.lstrip("-").partition("=")
        if not arg.startswith("-") or name not in ("verbosity", "v"):
            continue
        if not equals:
            text = args[i + 1] if i + 1 < len(args) else ""
        try:
            value = int(text)
        except ValueError:
            pass
    return value


def verbose(argv=None) -> bool:
    """Whether this run shows everything: `--verbosity` >= 1 or OFFICIAL_BERT_VERBOSE."""
    return bool(os.environ.get("OFFICIAL_BERT_VERBOSE")) or (
        command_line_verbosity(argv) or 0) >= 1


# TensorFlow's and its neighbours' packages: their INFO lines are internals (SavedModel
# writing, tracing, checkpoint sharding), not a user's news.
_THIRD_PARTY = ("tensorflow", "keras", "tf_keras", "tensorflow_text", "tf2onnx", "onnx",
                "onnxruntime", "absl", "h5py")


def _package_directories() -> tuple:
    """The directories of the `_THIRD_PARTY` packages imported so far."""
    found = []
    for name in _THIRD_PARTY:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            found.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(found)


class TensorFlowChatter(std_logging.Filter):
    """Drops INFO (and DEBUG) records of TensorFlow's internals: those of its
    loggers, and those its files log through absl's logger; its warnings and
    errors pass."""

    def filter(self, record: std_logging.LogRecord) -> bool:
        if record.levelno >= std_logging.WARNING:
            return True
        if record.name.split(".")[0] in _THIRD_PARTY and record.name != "absl":
            return False
        return not os.path.abspath(record.pathname or "").startswith(_package_directories())


class PlainFormatter(std_logging.Formatter):
    """A run's log for a person: INFO as the bare message, a warning as
    `warning: message`; errors keep absl's prefix (level, time, file:line)."""

    def format(self, record: std_logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno >= std_logging.ERROR:
            return logging.get_absl_log_prefix(record) + text
        if record.levelno >= std_logging.WARNING:
            return "warning: " + text
        return text


def configure_logging(verbosity: int | None = None) -> None:
    """The log of a command run (`run` calls it once the flags are parsed):
    `PlainFormatter` and no `TensorFlowChatter` at the default verbosity (0)
    and below; absl's own format and every line with `--verbosity=1` or more
    (`verbosity`; default: the flag) or OFFICIAL_BERT_VERBOSE=1."""
    handler = logging.get_absl_handler()
    if verbosity is None:
        verbosity = flags.FLAGS.verbosity if flags.FLAGS.is_parsed() else 0
    chatter = [f for f in handler.filters if isinstance(f, TensorFlowChatter)]
    if verbosity >= 1 or os.environ.get("OFFICIAL_BERT_VERBOSE"):
        for f in chatter:
            handler.removeFilter(f)
        handler.setFormatter(logging.PythonFormatter())
        return
    handler.setFormatter(PlainFormatter())
    if not chatter:
        handler.addFilter(TensorFlowChatter())


# What the runtime prints at start-up on every machine (see `quiet_tensorflow`).
_NATIVE_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\)"
    r"|^[IWE]\d{4} [\d:. ]+ +\d+ (port|cudart_stub|cuda_platform|cuda_dnn|cuda_blas|cuda_fft|"
    r"cpu_feature_guard|service|dump_mlir_util|device_compiler)\.(cc|h):\d+\]"
    r"|^To enable the following instructions: .* rebuild TensorFlow"
    r"|oneDNN supports DT_INT64 only on platforms with AVX-512")


def _drop_native_noise() -> None:
    """Routes file descriptor 2 through a filter thread that drops `_NATIVE_NOISE`."""
    if getattr(_drop_native_noise, "active", False):
        return
    try:
        original = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
    except OSError:
        return

    def pump():
        with os.fdopen(read_end, "rb") as source:
            for line in source:
                if not _NATIVE_NOISE.search(line.decode("utf-8", "replace")):
                    # Still drained when the reader is gone (`2>&1 | head`, a closed
                    # terminal after SIGHUP): a pump that stopped would fill the pipe,
                    # and the next write to stderr would wait forever.
                    with contextlib.suppress(OSError):
                        os.write(original, line)

    thread = threading.Thread(target=pump, name="stderr-filter", daemon=True)
    thread.start()

    def restore():
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(original, 2)  # the pipe's last write end closes: the pump drains and ends
        thread.join(timeout=5)

    atexit.register(restore)
    _drop_native_noise.active = True
