"""Running a command-line entry point: absl flags, logging, one-line errors.

Every `run_*.py` script calls `app.run(main)`. Mistakes in what the user gave
(a missing file, a bad flag value, a checkpoint that does not fit) raise
`ValueError` / `OSError` subclasses with a message that names the bad input and
the fix; they are printed as one `error: ...` line with exit status 1 instead of
a traceback. Running out of memory (TensorFlow's `ResourceExhaustedError`,
Python's `MemoryError`) is reported the same way, with what to lower. Set
OFFICIAL_BERT_TRACEBACK=1 to see the traceback anyway.
"""

from __future__ import annotations

import os
import sys

from absl import app as absl_app
from absl import logging

USER_ERRORS = (ValueError, OSError)


HELP_FLAGS = ("--help", "-h", "-help", "--helpshort", "-?")

OUT_OF_MEMORY_HINT = (
    "lower the batch size or --max_seq_length (or try without --jit_compile); checkpoints "
    "already saved in --output_dir are kept and the same command resumes from the latest")


def _is_out_of_memory(error: BaseException) -> bool:
    # By name: checking tf.errors.ResourceExhaustedError would import TensorFlow here.
    return isinstance(error, MemoryError) or type(error).__name__ == "ResourceExhaustedError"


def one_line_error(error: BaseException) -> str:
    """The `error: ...` line printed for a user error or an out-of-memory stop."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if _is_out_of_memory(error):
        detail = next((line for line in lines if "memory" in line.lower()), "")
        return f"error: out of memory{f' ({detail})' if detail else ''}: {OUT_OF_MEMORY_HINT}"
    return f"error: {lines[0] if lines else type(error).__name__}"


def grouped_help(argv0: str, doc: str | None) -> str:
    """The script's doc (its example) and its flags, grouped as they were
    defined: the script's own, then `official_bert.cli_flags`' groups (model
    files, training, distribution), leaving out absl's internals."""
    from absl import flags

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
    args = sys.argv if argv is None else argv
    if any(a in HELP_FLAGS for a in args[1:]):
        module = sys.modules.get(getattr(main, "__module__", "__main__"))
        print(grouped_help(args[0], getattr(module, "__doc__", None)))
        sys.exit(0)

    def guarded(args):
        try:
            return main(args)
        except Exception as e:  # noqa: BLE001 - re-raised unless a user error or OOM
            if (os.environ.get("OFFICIAL_BERT_TRACEBACK")
                    or not (isinstance(e, USER_ERRORS) or _is_out_of_memory(e))):
                raise
            logging.flush()
            print(one_line_error(e), file=sys.stderr)
            sys.exit(1)

    absl_app.run(guarded, argv=argv)


def quiet_tensorflow():
    """Silences TensorFlow's C++ start-up chatter (call before importing TF)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
