"""Running the project's scripts as processes, without paying TensorFlow's import each time.

A test that runs `python run_classifier.py ...` spends 3-5 s of CPU importing
TensorFlow and Keras before the command does anything, and the suite runs a few
hundred commands. `run` starts them from a fork server instead: a helper
process imports TensorFlow, Keras and the text ops once and forks a child per
command, which imports the project and runs the script as `python` would
(`runpy`, `__main__`, `sys.argv`, the working directory, the environment, the
umask, stdin/stdout/stderr on file descriptors 0-2, the exit status). Each command is
still its own process: its exit status, what it prints (the one-line errors
included), its signals and its global state (absl flags, Keras' dtype policy,
TensorFlow's context, which a child creates after the fork) are its own, and
nothing it does reaches the tests' process or the next command.

    result = processes.run([sys.executable, "run_classifier.py", "--do_train", ...],
                           env=env, input="text", timeout=300)
    result.returncode, result.stdout, result.stderr   # as subprocess.run(..., text=True)
    process = processes.start([...])                  # as subprocess.Popen(..., stdout=PIPE,
    process.send_signal(signal.SIGTERM)               #   stderr=PIPE): pid, poll, wait,
    stdout, stderr = process.communicate(timeout=60)  #   send_signal, kill, communicate

A server serves one environment as the interpreter and TensorFlow read it when
they start (TF_*, CUDA_*, PYTHON*, KERAS_*, ...); another such environment gets
its own server. `run` takes a real process (`subprocess.run`) where a fork is
not the same as a fresh interpreter: an environment without
TF_CPP_MIN_LOG_LEVEL (a user's shell, where what TensorFlow prints while it is
imported is part of what a test checks), interpreter options (`python -X ...`),
a program other than Python, or a file-size limit (a child's captured output
is a file, which the limit would cut). Tests of a fresh interpreter itself (that
importing a module does not import TensorFlow, that an export names the ops it
needs before the text ops are imported) use `subprocess` directly.

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
import time

REPO = pathlib.Path(__file__).resolve().parents[2]

# Environment variables read when TensorFlow or Python start: a command asking for other
# values than a server started with gets a server of its own.
_READ_AT_START = ("TF_", "CUDA_", "PYTHON", "XLA_", "OMP_", "KMP_", "MKL_", "LD_", "KERAS_")

# What the server imports before it forks: TensorFlow, Keras and the text ops, the bulk of a
# command's start-up. Not the project: a child imports it as a fresh process does, so a
# script that patches a module of the project before the rest imports it (test drivers)
# patches what the command uses, and one that must run without the project can block it.
_PRELOAD = ("numpy", "tensorflow", "keras", "tensorflow_text", "absl.app", "absl.flags",
            "absl.logging")

_SERVER = r"""
import importlib, json, os, runpy, select, sys, traceback, types

requests, replies = int(sys.argv[1]), int(sys.argv[2])
for name in json.loads(sys.argv[3]):
    try:
        importlib.import_module(name)
    except ImportError:  # not installed: the children import what they need
        pass
# sys.path as a child starts it: without -c's "" (a script's python has no cwd on it) and
# without the server's PYTHONPATH (a child puts its own first).
own = os.environ.get("PYTHONPATH", "").split(os.pathsep)
home = [p for p in sys.path if p and p not in own]


def child(request):
    os.close(requests)
    os.close(replies)
    os.setpgrp()  # a timeout kills the command and what it started
    os.umask(request["umask"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
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
    os._exit(run(kind, target) & 0xFF)


def run(kind, target):
    code = 0
    try:
        if kind == "script":
            runpy.run_path(target, run_name="__main__")
        elif kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(target, "<string>", "exec"), main.__dict__)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    import atexit
    atexit._run_exitfuncs()  # what a normal exit runs (app's stderr filter drains here)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def reply(message):
    os.write(replies, (json.dumps(message) + "\n").encode())


# Requests come as JSON lines; each gets {"id", "pid"} at once and {"pid", "status"}
# when its process ends (commands may overlap: a test starts one, then runs another).
running, buffer = set(), b""
while True:
    ready, _, _ = select.select([requests], [], [], 0.01 if running else None)
    if ready:
        chunk = os.read(requests, 1 << 16)
        if not chunk:
            sys.exit(0)
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            request = json.loads(line)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                child(request)
            running.add(pid)
            reply({"id": request["id"], "pid": pid})
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        running.discard(pid)
        reply({"pid": pid, "status": os.waitstatus_to_exitcode(status)})
"""


class _Server:
    """The helper process, and a thread reading its replies."""

    def __init__(self, env: dict):
        self.env = dict(env)
        request_read, self._requests = os.pipe()
        reply_read, reply_write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(request_read), str(reply_write),
             json.dumps(_PRELOAD)],
            pass_fds=(request_read, reply_write), env=self.env, cwd=str(REPO),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(request_read)
        os.close(reply_write)
        self._lock = threading.Lock()
        self._started: dict = {}   # request id → pid
        self._ended: dict = {}     # pid → exit status
        self._changed = threading.Condition(self._lock)
        self._next_id = 0
        self._reader = threading.Thread(target=self._read, args=(reply_read,), daemon=True,
                                        name="fork-server-replies")
        self._reader.start()

    def _read(self, fd):
        with os.fdopen(fd, "rb") as replies:
            for line in replies:
                message = json.loads(line)
                with self._changed:
                    if "id" in message:
                        self._started[message["id"]] = message["pid"]
                        self._ended.pop(message["pid"], None)  # an earlier process's pid
                    else:
                        self._ended[message["pid"]] = message["status"]
                    self._changed.notify_all()
        with self._changed:  # the server ended: nothing more will come
            self._changed.notify_all()

    def start(self, request: dict) -> int:
        """Forks a child for `request`; its pid."""
        with self._changed:
            self._next_id += 1
            request_id = self._next_id
            os.write(self._requests, (json.dumps({**request, "id": request_id}) + "\n").encode())
            while request_id not in self._started:
                if not self._reader.is_alive():
                    raise RuntimeError("the fork server ended")
                self._changed.wait(1)
            return self._started.pop(request_id)

    def status(self, pid: int, timeout: float | None) -> int | None:
        """The exit status of `pid` once it ends, None if it runs past `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while pid not in self._ended:
                if not self._reader.is_alive():
                    raise RuntimeError("the fork server ended")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._changed.wait(1 if left is None else min(left, 1))
            return self._ended.pop(pid)

    def close(self):
        try:
            os.close(self._requests)
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


class ForkedProcess:
    """A command started by the fork server, used as `subprocess.Popen(...,
    stdout=PIPE, stderr=PIPE)` is: `pid`, `poll`, `wait`, `communicate`
    (the output once it has ended), `send_signal`, `terminate`, `kill`, `returncode`."""

    def __init__(self, server: _Server, args: list, request: dict, scratch, text: bool):
        self.args, self._server, self._scratch, self._text = args, server, scratch, text
        self.returncode = None
        self.pid = server.start(request)

    def poll(self):
        if self.returncode is None:
            self.returncode = self._server.status(self.pid, 0)
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            self.returncode = self._server.status(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, timeout=None):
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired as e:
            e.output, e.stderr = self._output()
            raise
        output = self._output()
        self._scratch.cleanup()
        return output

    def _output(self):
        out, err = (pathlib.Path(self._scratch.name, name).read_bytes()
                    for name in ("stdout", "stderr"))
        if self._text:
            out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        return out, err

    def send_signal(self, sig):
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        """SIGKILL to the command and whatever it started."""
        if self.returncode is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


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
    if not forks(args, env) or file_size_limit:  # (the limit would cut the captured output)
        return _real_process(args, env, cwd, input, timeout, file_size_limit, text)
    process = _fork(args, env, cwd, input, text)
    try:
        stdout, stderr = process.communicate(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def start(args, *, env: dict | None = None, cwd=None, input: str | bytes | None = None,
          text: bool = True):
    """`subprocess.Popen(args, stdout=PIPE, stderr=PIPE, ...)` for a Python command
    line: a `ForkedProcess` from the fork server, or a real `Popen` where `run`
    would take a real process. Its stdin is `input` (all of it, given now)."""
    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    if not forks(args, env):
        process = subprocess.Popen(args, env=env, cwd=cwd, text=text, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE,
                                   stdin=subprocess.PIPE if input is not None else None)
        if input is not None:
            process.stdin.write(input)
            process.stdin.close()
        return process
    return _fork(args, env, cwd, input, text)


def forks(args, env) -> bool:
    """Whether the command line `args` in `env` runs from the fork server."""
    return (_ENABLED and _parse([str(a) for a in args]) is not None
            and "TF_CPP_MIN_LOG_LEVEL" in env)


def _fork(args, env, cwd, input, text) -> ForkedProcess:
    kind, target, rest = _parse(args)
    scratch = tempfile.TemporaryDirectory(prefix="fork-run-")
    stdin = os.path.join(scratch.name, "stdin")
    with open(stdin, "wb") as f:
        f.write(input.encode() if isinstance(input, str) else (input or b""))
    request = dict(
        kind=kind, target=target, args=rest, env=env, cwd=str(cwd or os.getcwd()),
        umask=_umask(), pythonpath=env.get("PYTHONPATH", "").split(os.pathsep),
        stdio=[(stdin if input is not None else os.devnull, os.O_RDONLY),
               (os.path.join(scratch.name, "stdout"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
               (os.path.join(scratch.name, "stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)])
    return ForkedProcess(_server_for(env), args, request, scratch, text)


def _umask() -> int:
    """This process's umask, which a real child would inherit (reading it sets it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _real_process(args, env, cwd, input, timeout, file_size_limit, text):
    def limit_file_size():
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(args, env=env, cwd=cwd, input=input, timeout=timeout, text=text,
                          capture_output=True,
                          preexec_fn=limit_file_size if file_size_limit else None)


# The stop signals a terminal sends to its whole foreground process group (a command's
# worker processes too): Ctrl-C, Ctrl-\ and the hang-up of a closed terminal. The others
# (a supervisor's SIGTERM, a scheduler's SIGUSR1, ...) are sent to the one process.
GROUP_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)


def send_as_a_session_does(process, signum) -> None:
    """Sends `signum` to a started command as a user's session would: to its process
    group (`GROUP_SIGNALS`) when it leads one (a forked command does), else to it."""
    if signum in GROUP_SIGNALS and os.getpgid(process.pid) == process.pid:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
