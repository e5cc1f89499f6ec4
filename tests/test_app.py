"""One-line errors from the command-line entry points (official_bert.commands.app): a
user error, a full disk and running out of memory are one `error:` line; any
other exception is a bug, with its traceback and where to report it."""

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from official_bert.commands import app, registry
from support import processes

REPO = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import errno, sys
    from official_bert.commands import app
    from official_bert.errors import BadFileError, UserError

    def main(argv):
        kind = sys.argv[1]
        if kind == "oom":
            import tensorflow as tf
            raise tf.errors.ResourceExhaustedError(
                None, None, "Graph execution error:\\n\\nOut of memory while trying to "
                "allocate 9.40GiB.\\nHint: If you want to see a list of allocated tensors")
        if kind == "user":
            raise UserError("--train_file=x.conll: no such file")
        if kind == "bad_file":
            raise BadFileError("x.tsv", "has 2 columns, expected 3", line=7, fix="fix it")
        if kind == "disk":
            raise OSError(errno.ENOSPC, "No space left on device", "/data/out.tfrecord")
        if kind == "file_size":
            raise OSError(errno.EFBIG, "File too large", "/data/big.bin")
        if kind == "tf_disk":
            import tensorflow as tf
            raise tf.errors.ResourceExhaustedError(
                None, None, "/runs/x/ckpt-2.data-00000-of-00001.tempstate123; No space left "
                "on device")
        if kind == "sigterm_while_tracing":
            # A preemption that lands while TensorFlow traces a function (the
            # first evaluation step, say): autograph wraps what the handler raises.
            import os, signal, time
            import tensorflow as tf

            def layer(x):  # converted by autograph, as a Keras layer's call is
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)  # the handler runs here, inside the trace
                return x + 1

            @tf.function
            def step(x):
                return layer(x)

            step(tf.constant(1))  # (app.run's signal policy stops it)
            raise RuntimeError("not stopped")
        if kind == "value":
            raise ValueError("a ValueError nobody raised on purpose")
        raise RuntimeError("a bug")

    app.run(main, sys.argv[:2])
""")


def _run(kind, env=None):
    return processes.run([sys.executable, "-c", SCRIPT, kind], capture_output=True, text=True,
                         env=env, timeout=300)


@pytest.mark.parametrize("kind, expected", [
    ("oom", "error: out of memory (Out of memory while trying to allocate 9.40GiB.): lower the "
            "batch size or --max_seq_length"),
    ("user", "error: --train_file=x.conll: no such file"),
    ("bad_file", "error: x.tsv line 7 has 2 columns, expected 3; fix it"),
    ("disk", "error: the disk is full (writing /data/out.tfrecord: No space left on device); "
             "free some space and run the same command again"),
    ("file_size", "error: the disk is full (writing /data/big.bin: File too large)"),
    ("tf_disk", "error: the disk is full (writing /runs/x/ckpt-2.data-00000-of-00001.tempstate123"),
])
def test_user_errors_full_disks_and_out_of_memory_are_one_line(kind, expected):
    result = _run(kind)
    assert result.returncode == 1, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith(expected), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "out of memory" not in result.stderr or kind == "oom"


@pytest.mark.parametrize("kind, name", [("bug", "RuntimeError: a bug"),
                                        ("value", "ValueError: a ValueError nobody raised")])
def test_a_bug_keeps_its_traceback_and_says_where_to_report_it(kind, name):
    result = _run(kind)
    assert result.returncode == 1
    assert "Traceback" in result.stderr and name in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: this is a bug in official_bert") and "issue tracker" in last


def test_sigterm_while_a_function_is_traced_is_a_preemption(tmp_path):
    # From a file: autograph converts only functions whose source it can read.
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    result = subprocess.run([sys.executable, str(script), "sigterm_while_tracing"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 75, result.stderr[-3000:]
    assert "preempted: stopped by SIGTERM outside training: nothing was lost" in result.stderr
    assert "Traceback" not in result.stderr and "error:" not in result.stderr


# === What a run prints: the user's lines, not TensorFlow's internals (issue 37) ===

# Lines of TensorFlow's internals a normal run must not print: its C++ start-up, SavedModel
# writing's Python INFO lines, and absl's prefix (`I1126 20:50:01.123 12345 file.py:12]`).
INTERNALS = ("Sharding callback duration", "contains input name(s)", "Assets written to",
             "Writing fingerprint", "cuInit", "oneDNN", "This TensorFlow binary",
             "rebuild TensorFlow", "absl::InitializeLog", "cuda drivers")
ABSL_PREFIX = r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] "

LOGGING_SCRIPT = textwrap.dedent("""
    import sys
    from absl import logging
    from official_bert.commands import app

    def main(argv):
        logging.info("our news")
        logging.warning("our warning")
        import tensorflow as tf
        module = tf.Module()
        module.v = tf.Variable(1.0)
        tf.saved_model.save(module, sys.argv[1])  # INFO lines of TensorFlow's internals
        logging.info("saved")

    app.run(main, sys.argv[:1] + sys.argv[2:])
""")


def _fresh_environment():
    """A user's environment: no TF_CPP_MIN_LOG_LEVEL (the tests set one), no verbose switch."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "OFFICIAL_BERT_VERBOSE")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def _log_lines(stderr):
    return [line for line in stderr.splitlines() if line.strip()]


def test_a_normal_run_prints_its_own_lines_plainly_and_nothing_of_tensorflow(tmp_path):
    # A fresh python, not the fork server: TensorFlow's C++ start-up happens in the command.
    result = subprocess.run([sys.executable, "-c", LOGGING_SCRIPT, str(tmp_path / "m")],
                            capture_output=True, text=True, timeout=300,
                            env=_fresh_environment())
    assert result.returncode == 0, result.stderr[-3000:]
    assert _log_lines(result.stderr) == ["our news", "warning: our warning", "saved"], \
        result.stderr[-3000:]


@pytest.mark.parametrize("flag", ["--verbosity=1", "-v=1"])
def test_verbosity_1_shows_everything_with_absls_prefixes(tmp_path, flag):
    result = subprocess.run([sys.executable, "-c", LOGGING_SCRIPT, str(tmp_path / "m"), flag],
                            capture_output=True, text=True, timeout=300,
                            env=_fresh_environment())
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(ABSL_PREFIX + "our news$", result.stderr, re.M), result.stderr[-3000:]
    assert "Writing fingerprint" in result.stderr or "Sharding callback" in result.stderr


def test_verbosity_minus_1_shows_warnings_only(tmp_path):
    result = subprocess.run([sys.executable, "-c", LOGGING_SCRIPT, str(tmp_path / "m"),
                             "--verbosity=-1"], capture_output=True, text=True, timeout=300,
                            env=_fresh_environment())
    assert result.returncode == 0, result.stderr[-3000:]
    assert _log_lines(result.stderr) == ["warning: our warning"], result.stderr[-3000:]


def test_command_line_verbosity_is_read_before_absl_parses_it():
    from official_bert.commands import app

    assert app.command_line_verbosity(["x", "--verbosity=1"]) == 1
    assert app.command_line_verbosity(["x", "-v", "2"]) == 2
    assert app.command_line_verbosity(["x", "-v=-1", "--output_dir=v"]) == -1
    assert app.command_line_verbosity(["x", "--verbosity=loud"]) is None
    assert app.command_line_verbosity(["x", "--vocab_file=v.txt"]) is None


@pytest.mark.slow  # 10 s or more here
def test_a_command_run_prints_no_tensorflow_internals(tmp_path):
    """`bert export-encoder` on a tiny checkpoint, as a user runs it: its own lines, each
    without absl's prefix, and no line of TensorFlow's internals."""
    from support import fault_kit

    world = fault_kit.World(tmp_path / "world").build(pretraining_data=False)
    result = subprocess.run(
        [sys.executable, "-m", "official_bert.commands.cli", "export-encoder",
         f"--init_checkpoint={world.ckpt}", "--max_seq_length=16",
         f"--output_dir={tmp_path / 'hub'}"],
        capture_output=True, text=True, timeout=600, env=_fresh_environment(), cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = _log_lines(result.stderr)
    assert f"Wrote encoder: {tmp_path / 'hub' / 'encoder'}" in lines, result.stderr[-3000:]
    assert not [line for line in lines if re.match(ABSL_PREFIX, line)], result.stderr[-3000:]
    assert not [line for line in lines if any(text in line for text in INTERNALS)], lines


# === --help speaks the user's language (issue 37) ===


def _help(*args):
    return processes.run([sys.executable, "-m", "official_bert.commands.cli", *args, "--help"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)


def test_bert_help_opens_with_what_it_does():
    result = _help()
    assert result.returncode == 0, result.stderr
    first = result.stdout.strip().splitlines()[0]
    assert first.startswith("`bert`: one command for every job"), first
    assert "entry(argv)" not in result.stdout


@pytest.mark.parametrize("command", list(registry.BY_NAME))
def test_help_names_no_path_a_user_lacks_and_no_python_identifier(command):
    """Every example runs after the README's set-up: no `../shared/...`; and the help
    names files and flags, not the project's modules (`official_bert.io.sidecar_path`)."""
    result = _help(command)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "../shared" not in text
    identifiers = re.findall(r"\b(?:official_bert|data_prep)\.\w+[\w.()]*", text)
    assert not identifiers, identifiers
    assert "entry(argv)" not in text
    assert f"usage: bert {command} [flags]" in text


@pytest.mark.parametrize("error, expected", [
    (RuntimeError("can't start new thread"),
     "error: no thread can start (can't start new thread): the process reached a limit of the "
     "machine (threads, ulimit -u, or address space, ulimit -v)"),
    (MemoryError(), "error: out of memory: lower the batch size"),
    (RuntimeError("std::bad_alloc"), "error: out of memory (std::bad_alloc): lower the batch"),
])
def test_running_out_of_threads_or_memory_is_a_resource_line_not_a_bug(error, expected):
    """Issue 56: under a 2 GB address-space limit a thread that could not start was
    reported as "a bug in official_bert"."""
    assert app.is_one_line_error(error)
    line = app.one_line_error(error)
    assert line.startswith(expected) and "\n" not in line and "bug" not in line
    assert not app.is_one_line_error(RuntimeError("a bug"))
