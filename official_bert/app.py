"""Running a command-line entry point: absl flags, logging, one-line errors.

Every `run_*.py` script (and every `bert <command>`) calls `app.run(main)`.
Three kinds of stop are printed as one `error: ...` line with exit status 1:

* mistakes in what the user gave: `official_bert.errors.UserError` and its
  subclasses (`BadFileError`, `RunDirectoryError`, ...), raised where the input
  is read, with a message that names the input and the fix;
* a full disk: `errors.DiskFullError`, or an `OSError` with errno ENOSPC,
  EDQUOT or EFBIG (or TensorFlow's error for one) that escaped, reported with
  the file being written;
* running out of memory (TensorFlow's `ResourceExhaustedError`, Python's
  `MemoryError`), with what to lower.

Anything else is a bug: it keeps its traceback, followed by one line saying so
and where to report it (`ISSUE_TRACKER`). Set OFFICIAL_BERT_TRACEBACK=1 to see
the traceback of the one-line errors too.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import threading
import traceback

from absl import app as absl_app
from absl import flags, logging

from official_bert.errors import DiskFullError, Preempted, UserError, is_disk_full

# Where bugs are reported: the repository's issue tracker.
ISSUE_TRACKER = "the official_bert repository's issue tracker (its Issues page)"
BUG_LINE = ("this is a bug in official_bert, not a mistake in your input: please report it, "
            "with the command and the traceback above, on " + ISSUE_TRACKER)

# How TensorFlow's C++ file systems word an ENOSPC / EDQUOT / EFBIG.
_DISK_FULL_TEXT = re.compile(r"no space left on device|disk quota exceeded|file too large",
                             re.IGNORECASE)


HELP_FLAGS = ("--help", "-h", "-help", "--helpshort", "-?")

OUT_OF_MEMORY_HINT = (
    "lower the batch size or --max_seq_length (or try without --jit_compile); checkpoints "
    "already saved in --output_dir are kept and the same command resumes from the latest")


def _is_tensorflow_error(error: BaseException) -> bool:
    # By module: checking tf.errors.OpError would import TensorFlow here.
    return type(error).__module__.startswith("tensorflow") and hasattr(error, "message")


def _disk_full_path(error: BaseException) -> str | None:
    """The file being written when the disk filled up, "" when unknown, None
    when `error` is not a full disk."""
    if isinstance(error, UserError):
        return None
    if is_disk_full(error):
        return str(error.filename or "")
    if _is_tensorflow_error(error) and _DISK_FULL_TEXT.search(str(error)):
        text = re.sub(r"\{\{function_node [^}]*\}\}", " ", str(error))
        text = re.sub(r"\[Op:[^\]]*\]", " ", text)
        found = re.search(r"(?<![\w/])(/[^\s:;,'\"]+|[a-z]+://[^\s:;,'\"]+)", text)
        return found.group(1) if found else ""
    return None


def _is_out_of_memory(error: BaseException) -> bool:
    return (isinstance(error, MemoryError) or type(error).__name__ == "ResourceExhaustedError"
            ) and _disk_full_path(error) is None


def is_one_line_error(error: BaseException) -> bool:
    """Whether `error` is printed as one line: a user error, a full disk, out of memory."""
    return (isinstance(error, UserError) or _disk_full_path(error) is not None
            or _is_out_of_memory(error))


def one_line_error(error: BaseException) -> str:
    """The `error: ...` line printed for a user error, a full disk or an out-of-memory stop."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    disk_path = _disk_full_path(error)
    if disk_path is not None:
        found = _DISK_FULL_TEXT.search(str(error))
        detail = found.group(0) if found else ""
        if isinstance(error, OSError):
            detail = error.strerror or detail
        return f"error: {DiskFullError(disk_path or 'a file', detail[:200] or None)}"
    if _is_out_of_memory(error):
        detail = next((line for line in lines if "memory" in line.lower()), "")
        return f"error: out of memory{f' ({detail})' if detail else ''}: {OUT_OF_MEMORY_HINT}"
    return f"error: {lines[0] if lines else type(error).__name__}"


def refuse_arguments(argv) -> None:
    """`UserError` for words left on the command line after the flags: every
    command takes flags only, and a word that was meant as a flag's value
    (`--do_train true`, `--output_dir /runs/x y`) must not be ignored."""
    if len(argv) > 1:
        raise UserError(f"unexpected argument(s): {' '.join(argv[1:])} (flags are written "
                        "--name=value; boolean flags as --name or --noname)")


def grouped_help(argv0: str, doc: str | None) -> str:
    """The script's doc (its example) and its flags, grouped as they were
    defined: the script's own, then `official_bert.cli_flags`' groups (model
    files, training, distribution), leaving out absl's internals."""
    values = flags.FLAGS
    parts = [(doc or "").strip(), "", f"usage: {os.path.basename(argv0)} [flags]"]
    for module in values.flags_by_module_dict():
        if module.startswith("absl."):
            continue
        text = values.module_help(module).strip()
        if text:
            parts += ["", text]
    parts += ["", "--helpfull lists every flag, absl's included."]
    return "\n".join(parts)


def run(main, argv=None):
    """`absl.app.run(main)`, with user errors printed as one line and
    `--help` grouped (see `grouped_help`)."""
    quiet_tensorflow()
    args = sys.argv if argv is None else argv
    if any(a in HELP_FLAGS for a in args[1:]):
        module = sys.modules.get(getattr(main, "__module__", "__main__"))
        try:
            print(grouped_help(args[0], getattr(module, "__doc__", None)), flush=True)
        except BrokenPipeError:  # `bert classify --help | head`: the reader stopped early
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)

    def guarded(args):
        try:
            return main(args)
        except Exception as e:  # noqa: BLE001 - one line for user errors, else a bug report
            logging.flush()
            if isinstance(e, Preempted) or Preempted.received:
                print(f"preempted: {e if isinstance(e, Preempted) else Preempted()}",
                      file=sys.stderr, flush=True)
                sys.exit(Preempted.EXIT_CODE)
            if os.environ.get("OFFICIAL_BERT_TRACEBACK"):
                raise
            if is_one_line_error(e):
                print(one_line_error(e), file=sys.stderr)
            else:
                traceback.print_exc()
                print(f"error: {BUG_LINE}", file=sys.stderr)
            sys.stderr.flush()
            sys.exit(1)

    absl_app.run(guarded, argv=argv)


def quiet_tensorflow():
    """Silences TensorFlow's C++ start-up chatter (call before importing TF).

    TF_CPP_MIN_LOG_LEVEL does not reach what TensorFlow 2.21's runtime writes
    before its logging is set up (oneDNN and CUDA probes, CPU features, and on
    a machine without a GPU an "E ... failed call to cuInit" line that is no
    error), so those lines are dropped from the process's stderr on their way
    out; everything else passes. OFFICIAL_BERT_VERBOSE=1 keeps them.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if not os.environ.get("OFFICIAL_BERT_VERBOSE"):
        _drop_native_noise()


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
