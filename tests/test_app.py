"""One-line errors from the command-line entry points (official_bert.app)."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys
    from official_bert import app

    def main(argv):
        kind = sys.argv[1]
        if kind == "oom":
            import tensorflow as tf
            raise tf.errors.ResourceExhaustedError(
                None, None, "Graph execution error:\\n\\nOut of memory while trying to "
                "allocate 9.40GiB.\\nHint: If you want to see a list of allocated tensors")
        if kind == "user":
            raise FileNotFoundError("--train_file=x.conll: no such file")
        raise RuntimeError("a bug")

    app.run(main, sys.argv[:2])
""")


def _run(kind, env=None):
    return subprocess.run([sys.executable, "-c", SCRIPT, kind], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize("kind, expected", [
    ("oom", "error: out of memory (Out of memory while trying to allocate 9.40GiB.): lower the "
            "batch size or --max_seq_length"),
    ("user", "error: --train_file=x.conll: no such file"),
])
def test_user_errors_and_out_of_memory_are_one_line(kind, expected):
    result = _run(kind)
    assert result.returncode == 1, result.stderr[-2000:]
    assert expected in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_a_bug_keeps_its_traceback():
    result = _run("bug")
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "RuntimeError: a bug" in result.stderr
