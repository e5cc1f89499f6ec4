"""One-line errors from the command-line entry points (official_bert.app): a
user error, a full disk and running out of memory are one `error:` line; any
other exception is a bug, with its traceback and where to report it."""

import subprocess
import sys
import textwrap

import pytest

from support import processes

SCRIPT = textwrap.dedent("""
    import errno, sys
    from official_bert import app
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
            from official_bert.tasks import runner

            def layer(x):  # converted by autograph, as a Keras layer's call is
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)  # the handler runs here, inside the trace
                return x + 1

            @tf.function
            def step(x):
                return layer(x)

            with runner._sigterm_stops():
                step(tf.constant(1))
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
