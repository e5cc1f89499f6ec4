"""Running the project's scripts as processes, without paying TensorFlow's import each time.

A test that runs `python run_classifier.py ...` spends 3-5 s of CPU importing
TensorFlow and Keras before the command does anything, and the suite runs a few
hundred commands. `run` starts them from a fork server instead: a helper
process imports TensorFlow, Keras and the text ops once and forks a child per
command, which imports the project and runs the script as `python` would
(`runpy`, `__main__`, `sys.argv`, the working directory, the environment,
stdin/stdout/stderr on file descriptors 0-2, the exit status). Each command is
still its own process: its exit status, what it prints (the one-line errors
included), its signals and its global state (absl flags, Keras' dtype policy,
TensorFlow's context, which a child creates after the fork) are its own, and
nothing it does reaches the tests' process or the next command.

    result = processes.run([sys.executable, "run_classifier.py", "--do_train", ...],
                           env=env, input="text", timeout=300)
    result.returncode, result.stdout, result.stderr   # as subprocess.run(..., text=True)

A server serves one environment as the interpreter and TensorFlow read it when
they start (TF_*, CUDA_*, PYTHON*, KERAS_*, ...); another such environment gets
its own server. `run` takes a real process (`subprocess.run`) where a fork is
not the same as a fresh interpreter: an environment without
TF_CPP_MIN_LOG_LEVEL (a user's shell, where what TensorFlow prints while it is
imported is part of what a test checks), interpreter options (`python -X ...`)
or a program other than Python. Tests of a fresh interpreter itself (that
importing a module does not import TensorFlow; a signal sent from outside to a
process the test starts with Popen) use `subprocess` directly.

TESTS_FORK_SERVER=0 in the tests' environment turns the server off: every
command then runs in a real process (to compare, or to debug). A server starts
on first use (about the cost of one command) and ends with the tests' process.
"""

from __future__ import annotations

import atexit
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading

REPO = pathlib.Path(__file__).resolve().parents[2]

# Environment variables read when TensorFlow or Python start: a command asking for other
# values than the server started with runs in a real process.
_READ_AT_START = ("TF_", "CUDA_", "PYTHON", "XLA_", "OMP_", "KMP_", "MKL_", "LD_", "KERAS_")

# What the server imports before it forks: TensorFlow, Keras and the text ops, the bulk of a
# command's start-up. Not the project: a child imports it as a fresh process does, so a
# script that patches a module of the project before the rest imports it (test drivers)
# patches what the command uses, and one that must run without the project can block it.
_PRELOAD = ("numpy", "tensorflow", "keras", "tensorflow_text", "absl.app", "absl.flags",
            "absl.logging")

_SERVER = r"""
import importlib, json, os, resource, runpy, signal, sys, traceback, types

requests, replies = int(sys.argv[1]), int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
for name in json.loads(sys.argv[4]):
    try:
        importlib.import_module(name)
    except ImportError:  # a module renamed or gone: the children import what they need
        pass
sys.path.pop(0)
home = [p for p in sys.path if p]  # without -c's "": a script's python has no cwd on it


def child(request):
    os.close(requests)
    os.close(replies)
    os.setpgrp()  # the tests' timeout kills the command and what it started
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request["file_size_limit"]:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead
        limit = request["file_size_limit"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    for fd, (path, mode) in enumerate(request["stdio"]):
        opened = os.open(path, mode)
        os.dup2(opened, fd)
        os.close(opened)
    sys.dont_write_bytecode = bool(request["env"].get("PYTHONDONTWRITEBYTECODE"))
    if "numpy" in sys.modules:  # a fresh process seeds numpy's global generator anew
        sys.modules["numpy"].random.seed()
    kind, target, args = request["kind"], request["target"], request["args"]
    sys.path[:] = [os.path.dirname(os.path.abspath(target)) if kind == "script" else ""] + [
        p for p in request["pythonpath"] if p] + home
    sys.argv = [target if kind == "script" else ("-c" if kind == "code" else target), *args]
    code = 0
    try:
        if kind == "script":
            runpy.run_path(target, run_name="__main__")
        elif kind == "module":
            sys.argv[0] = target
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(target, "<string>", "exec"), main.__dict__)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    import atexit, threading
    atexit._run_exitfuncs()  # what a normal exit runs (app's stderr filter drains here)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code & 0xFF)


buffer = b""
while True:
    while b"\n" not in buffer:
        chunk = os.read(requests, 1 << 16)
        if not chunk:
            sys.exit(0)
        buffer += chunk
    line, buffer = buffer.split(b"\n", 1)
    request = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child(request)
    os.write(replies, (json.dumps({"pid": pid}) + "\n").encode())
    _, status = os.waitpid(pid, 0)
    os.write(replies, (json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n").encode())
"""


class _Server:
    """The helper process; one command at a time."""

    def __init__(self, env: dict):
        self.env = dict(env)
        request_read, self._requests = os.pipe()
        self._replies, reply_write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(request_read), str(reply_write), str(REPO),
             json.dumps(_PRELOAD)],
            pass_fds=(request_read, reply_write), env=self.env, cwd=str(REPO),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(request_read)
        os.close(reply_write)
        self._buffer = b""
        self.lock = threading.Lock()

    def _reply(self) -> dict:
        while b"\n" not in self._buffer:
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise RuntimeError("the fork server ended")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, request: dict, timeout: float | None) -> tuple[int, bool]:
        """(exit status, timed out) of one command."""
        with self.lock:
            os.write(self._requests, (json.dumps(request) + "\n").encode())
            pid = self._reply()["pid"]
            timer = None
            timed_out = threading.Event()
            if timeout:
                def kill():
                    timed_out.set()
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                timer = threading.Timer(timeout, kill)
                timer.start()
            try:
                status = self._reply()["status"]
            finally:
                if timer:
                    timer.cancel()
            return status, timed_out.is_set()

    def close(self):
        try:
            os.close(self._requests)
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


# TESTS_FORK_SERVER=0 runs every command in a real process (to compare, or to debug).
_ENABLED = os.environ.get("TESTS_FORK_SERVER", "1") != "0"

# One server per environment at start-up (the tests' own, and the one most helpers pass:
# TF_CPP_MIN_LOG_LEVEL=3); the least recently used goes beyond `_MOST_SERVERS`.
_servers: dict = {}
_MOST_SERVERS = 3


# Read later, by the child itself: PYTHONPATH (the child puts it on sys.path),
# PYTHONDONTWRITEBYTECODE (sets sys.dont_write_bytecode) and CUDA_VISIBLE_DEVICES (read
# when TensorFlow's context starts, which a child does after the fork).
_READ_BY_THE_CHILD = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "CUDA_VISIBLE_DEVICES")


def _start_key(env: dict) -> tuple:
    """What of `env` the interpreter and TensorFlow read when they start."""
    return tuple(sorted((k, v) for k, v in env.items()
                        if k.startswith(_READ_AT_START) and k not in _READ_BY_THE_CHILD))


def _server_for(env: dict) -> _Server:
    key = _start_key(env)
    server = _servers.pop(key, None)
    if server is None or server.process.poll() is not None:
        server = _Server(env)
        atexit.register(server.close)
    _servers[key] = server  # the most recently used last
    while len(_servers) > _MOST_SERVERS:
        _servers.pop(next(iter(_servers))).close()
    return server


def _parse(args: list) -> tuple[str, str, list] | None:
    """("script" | "module" | "code", target, the rest) of a Python command line, or None."""
    if len(args) < 2 or args[0] != sys.executable:
        return None
    if args[1] == "-m" and len(args) > 2:
        return "module", args[2], list(args[3:])
    if args[1] == "-c" and len(args) > 2:
        return "code", args[2], list(args[3:])
    if args[1].startswith("-"):
        return None
    return "script", args[1], list(args[2:])


def run(args, *, env: dict | None = None, cwd=None, input: str | bytes | None = None,
        timeout: float | None = None, file_size_limit: int | None = None,
        text: bool = True, capture_output: bool = True,
        check: bool = False) -> subprocess.CompletedProcess:
    """`subprocess.run(args, capture_output=True, ...)` for a Python command line
    (`[sys.executable, script | -m module | -c code, ...]`), from the fork server
    (one per environment at start-up; see the module's docstring). A timeout raises
    `subprocess.TimeoutExpired` and `check` a failure `CalledProcessError`, as
    subprocess.run does; the output is always captured (`capture_output` is
    accepted for the same call's sake)."""
    result = _run(args, env, cwd, input, timeout, file_size_limit, text)
    if check:
        result.check_returncode()
    return result


def _run(args, env, cwd, input, timeout, file_size_limit, text) -> subprocess.CompletedProcess:
    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    parsed = _parse(args)
    if parsed is None or "TF_CPP_MIN_LOG_LEVEL" not in env or not _ENABLED:
        return _real_process(args, env, cwd, input, timeout, file_size_limit, text)
    kind, target, rest = parsed
    server = _server_for(env)
    with tempfile.TemporaryDirectory(prefix="fork-run-") as scratch:
        stdin_path, stdout_path, stderr_path = (os.path.join(scratch, n)
                                                for n in ("stdin", "stdout", "stderr"))
        data = input.encode() if isinstance(input, str) else (input or b"")
        with open(stdin_path, "wb") as f:
            f.write(data)
        request = dict(
            kind=kind, target=target, args=rest, env=env, cwd=str(cwd or os.getcwd()),
            pythonpath=env.get("PYTHONPATH", "").split(os.pathsep),
            file_size_limit=file_size_limit,
            stdio=[(stdin_path if input is not None else os.devnull, os.O_RDONLY),
                   (stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                   (stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)])
        status, timed_out = server.run(request, timeout)
        stdout = pathlib.Path(stdout_path).read_bytes()
        stderr = pathlib.Path(stderr_path).read_bytes()
    if text:
        stdout, stderr = stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")
    if timed_out:
        raise subprocess.TimeoutExpired(args, timeout, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(args, status, stdout, stderr)


def _real_process(args, env, cwd, input, timeout, file_size_limit, text):
    def limit_file_size():
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(args, env=env, cwd=cwd, input=input, timeout=timeout, text=text,
                          capture_output=True,
                          preexec_fn=limit_file_size if file_size_limit else None)
