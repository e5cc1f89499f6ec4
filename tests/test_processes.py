"""The fork server of tools/kit/processes.py runs a command as a fresh `python` would.

What a script sees (its argv, __name__, sys.path[0], working directory, umask,
environment, stdin) is compared with a real interpreter's on the same command
line; then the exit status, a timeout, signals, two commands at once, and what
a child must not inherit from the server (the project's modules, numpy's seed).
"""

import os
import signal
import subprocess
import sys

import pytest

from support import processes

PROBE = """
import json, os, sys
mask = os.umask(0)
print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0], "cwd": os.getcwd(),
                  "umask": mask, "word": os.environ.get("PROBE_WORD"), "stdin": sys.stdin.read(),
                  "project": "official_bert" in sys.modules}))
sys.stderr.write("to stderr\\n")
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


@pytest.fixture
def env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PROBE_WORD="hello", PROBE_EXIT="3")


def _both(args, env, cwd):
    """(forked, real) results of the same command line."""
    assert processes.forks(args, env)
    old = os.umask(0o027)
    try:
        forked = processes.run(args, env=env, cwd=cwd, input="some input")
        real = subprocess.run(args, env=env, cwd=cwd, input="some input", text=True,
                              capture_output=True)
    finally:
        os.umask(old)
    return forked, real


def test_a_script_sees_what_a_fresh_python_gives_it(env, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    forked, real = _both([sys.executable, str(script), "--flag=1", "word"], env, tmp_path / "..")
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode, real.stdout, real.stderr)
    assert real.returncode == 3 and '"umask": 23' in real.stdout  # 0o027
    assert '"project": false' in real.stdout


def test_code_and_modules_too(env, tmp_path):
    forked, real = _both([sys.executable, "-c", PROBE, "x"], env, tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode, real.stdout, real.stderr)
    module = [sys.executable, "-m", "json.tool"]
    assert processes.run(module, env=env, input='{"a": 1}').stdout == '{\n    "a": 1\n}\n'


def test_timeouts_signals_and_two_at_once(env):
    sleeper = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run(sleeper, env=env, timeout=1)
    process = processes.start(sleeper, env=env)
    assert process.poll() is None
    quick = processes.run([sys.executable, "-c", "print(6 * 7)"], env=env)
    assert quick.stdout == "42\n" and process.poll() is None  # while the other runs
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == -signal.SIGTERM
    assert process.communicate() == ("up\n", "")
    killed = processes.run([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"], env=env)
    assert killed.returncode == -signal.SIGKILL


def test_each_child_draws_its_own_numpy_seed(env):
    draw = [sys.executable, "-c", "import numpy; print(numpy.random.randint(1 << 30))"]
    assert processes.run(draw, env=env).stdout != processes.run(draw, env=env).stdout
