"""The one input policy: what every command checks of what it reads, before any work.

The output policy's twin (`official_bert.outputs`), applied by the same
boundary (`commands.registry.job`) to every input a command declares (the
registry's `Command.inputs`: flag name → how it is read):

* "stream": read once, from start to end, as it comes (predict's
  `--input_file`): a pipe, a FIFO, standard input (`-`, /dev/stdin) or a
  terminal is read as it is; an empty stream is refused when it ends
  (`empty_error`, called by the reader);
* "file": a file the command opens by name, perhaps more than once (counted,
  then read; read again at every epoch; read by worker processes): a stream
  (pipe, FIFO, standard input, a device, a socket) is first copied into a
  temporary file (`spool`) that the command reads in its place, removed when
  the command ends, a stop included (one killed with SIGKILL leaves it to the
  next command's start, `io.remove_stale_temporaries`); each part of a
  comma-separated list is one input, and a glob is left to `file_sets`;
* "file_or_dir": a "file", or a directory the command searches (prepare-corpus);
* "dir": a directory (`--data_dir`).

Each input is classified first (`classify`): a regular file, a directory, a
stream, a device, missing, a loop of symbolic links, unreadable. What cannot be
read is refused in one line naming the flag and the real cause (`io.missing`);
a directory where a file goes, and a file where a directory goes, likewise.
An empty input is refused alike whatever its kind: a file of 0 bytes, a stream
that ended before its first byte (`empty_error`).

Nothing waits forever on a stream: while no byte comes (a FIFO nobody has
opened yet, a writer that stalls) a line every `WAIT_LOG_SECONDS` says what is
awaited, and after `wait_seconds()` (OFFICIAL_BERT_INPUT_WAIT, default 10
minutes) without a byte the command stops in one line. A "stream" input read
as it comes is opened by `open_stream`: a FIFO without its writer is waited
for so, up to its first byte; after it, the stream is read as it comes (a
person typing is waited for).

An input that vanishes or changes while a command runs is the reader's to
detect (training names it and keeps a checkpoint: `training.trainer`); a
spooled input cannot change: it is the command's own copy. A file the job
reads more than once by name (a vocabulary: by the model's files at the
start, by an export at the end) must be the same each time: a reader calls
`same_as_first_read`, which refuses, in one line naming the file, a second
read whose content differs from the job's first (an export would otherwise
hold a vocabulary whose ids are not the ones the model was trained with).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import select
import stat as _stat_mode
import sys
import tempfile
import time
from typing import Any, Iterator, Mapping

from absl import logging

from official_bert import file_sets, io
from official_bert.errors import BadFileError, UserError, show_path_as
from official_bert.outputs import flag_value

# How a command reads an input (`Command.inputs`' values).
STREAM, FILE, FILE_OR_DIR, DIRECTORY = "stream", "file", "file_or_dir", "dir"
WAYS = (STREAM, FILE, FILE_OR_DIR, DIRECTORY)

# What an input is (`classify`).
REGULAR, FOLDER, PIPE, DEVICE = "file", "directory", "stream", "device"
MISSING, LOOP, UNREADABLE, REMOTE = "missing", "loop", "unreadable", "remote"

# Names of the standard input.
STDIN_NAMES = ("-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0")

# A line every this many seconds while a stream gives nothing.
WAIT_LOG_SECONDS = 10.0
# How long a stream may give nothing before the command stops (OFFICIAL_BERT_INPUT_WAIT).
DEFAULT_WAIT_SECONDS = 600.0
# Where streams are spooled: under the system's temporary directory (TMPDIR).
SPOOL_DIRECTORY = "official_bert-spool"

# The spools of this process: their path → the path the user gave (`given_path`).
_SPOOLS: dict[str, str] = {}
# While a job runs (`prepared`): each file read by `same_as_first_read` → the digest of
# what the job read first. None outside a job (a library caller rereads as it likes).
_FIRST_READS: dict[str, str] | None = None


def same_as_first_read(path: str, content) -> None:
    """`BadFileError` naming `path` when the job read it before with other
    content (it changed while the command ran); nothing outside a job."""
    if _FIRST_READS is None or not io.is_local(path):
        return
    data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
    digest = hashlib.sha1(data).hexdigest()
    first = _FIRST_READS.setdefault(os.path.realpath(io.local_path(path)), digest)
    if first != digest:
        raise BadFileError(path, "changed while the command ran: read again now, it differs "
                           "from what the command read at its start, and what it writes "
                           "would mix the two", fix="put back the file the command started "
                           "with and run the same command again (a training run resumes "
                           "from its last checkpoint), or start over with the new one")


def given_path(path: str) -> str:
    """The path the user gave for `path`: the stream's, for a spool of one; else
    `path`. What a run record keeps (a spool's name changes every run)."""
    return _SPOOLS.get(path, path)


def wait_seconds() -> float:
    """How long a stream may stay silent (OFFICIAL_BERT_INPUT_WAIT seconds, else 10 min)."""
    try:
        return float(os.environ.get("OFFICIAL_BERT_INPUT_WAIT", DEFAULT_WAIT_SECONDS))
    except ValueError:
        return DEFAULT_WAIT_SECONDS


def classify(path: str) -> str:
    """What `path` is: REGULAR, FOLDER, PIPE (a pipe, a FIFO, a socket, standard
    input that is one), DEVICE (a terminal, /dev/null, ...), MISSING, LOOP,
    UNREADABLE, or REMOTE (a path with a scheme: its file system decides)."""
    if path == "-":
        path = "/dev/stdin"
    if not io.is_local(path):
        return REMOTE
    local = io.local_path(path)
    try:
        mode = os.stat(local).st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            return LOOP
        return UNREADABLE if e.errno == errno.EACCES else MISSING
    if _stat_mode.S_ISDIR(mode):
        return FOLDER if os.access(local, os.R_OK | os.X_OK) else UNREADABLE
    if _stat_mode.S_ISFIFO(mode) or _stat_mode.S_ISSOCK(mode):
        return PIPE
    if _stat_mode.S_ISCHR(mode) or _stat_mode.S_ISBLK(mode):
        return DEVICE
    return REGULAR if os.access(local, os.R_OK) else UNREADABLE


def _words(path: str, kind: str) -> str:
    """`kind` in words for a line about `path`."""
    if path in STDIN_NAMES:
        return "standard input"
    return {PIPE: "a pipe", DEVICE: "a device", FOLDER: "a directory"}.get(kind, "a file")


def empty_error(flag: str, path: str, kind: str = REGULAR) -> UserError:
    """The one line for an empty input, whatever its kind."""
    what = "" if kind == REGULAR else f" ({_words(path, kind)})"
    return UserError(f"{flag} {path}{what} is empty: nothing to read; give it the data")


def check_input(path: str, flag: str, way: str) -> str:
    """`UserError` naming `flag` unless `path` can be read `way`; its kind (`classify`)."""
    kind = classify(path)
    if kind == REMOTE:
        return kind
    if kind in (MISSING, LOOP):
        raise UserError(f"{flag} {path} {io.missing(path)}")
    if kind == UNREADABLE:
        raise UserError(f"{flag} {path} cannot be read (permission denied); make it readable "
                        "or give another")
    if kind == FOLDER and way in (STREAM, FILE):
        raise UserError(f"{flag} {path} is a directory; name a file in it")
    if kind != FOLDER and way == DIRECTORY:
        raise UserError(f"{flag} {path} is {_words(path, kind)}, not a directory")
    if kind == REGULAR and io.size("/dev/stdin" if path == "-" else path) == 0:
        raise empty_error(flag, path)
    return kind


# --- the boundary ------------------------------------------------------------


@contextlib.contextmanager
def prepared(command: Any, flag_values: Any) -> Iterator[None]:
    """Checks every input `command` declares (`check_input`) with the values its
    flags were given, and spools the streams it reads by name (`spool`),
    giving the flags the spools' paths; the spools are removed when the block
    ends, however it ends. Within the block, a file read twice must read the
    same (`same_as_first_read`). Called by the command boundary before any work."""
    declared: Mapping[str, str] = getattr(command, "inputs", command) or {}
    with contextlib.ExitStack() as spools:
        spools.enter_context(_first_reads())
        for name, way in declared.items():
            value = flag_value(flag_values, name)
            if value:
                new = _prepare_value(value, f"--{name}", way, spools)
                if new != value:
                    _set_value(flag_values, name, new)
        yield


@contextlib.contextmanager
def _first_reads() -> Iterator[None]:
    """A job's record of what it read first (`same_as_first_read`), for the block."""
    global _FIRST_READS
    outer, _FIRST_READS = _FIRST_READS, {}
    try:
        yield
    finally:
        _FIRST_READS = outer


def _prepare_value(value, flag: str, way: str, spools: contextlib.ExitStack):
    """`value` (a path, a comma-separated list, or a list) with each stream it
    names spooled when `way` reads by name; globs and `prefix@N` shards are left
    to `file_sets` (`expand_paths`), which names what they do not match."""
    parts = list(value) if isinstance(value, (list, tuple)) else [value]
    done = []
    for part in parts:
        names = file_sets.names_of(str(part)) if way != STREAM else [(str(part), False)]
        kept = []
        for name, pattern in names:
            if not pattern:
                kind = check_input(name, flag, way)
                if kind in (PIPE, DEVICE) and way != STREAM:
                    name = spools.enter_context(spool(name, flag, kind))
                elif name == "-" and way != STREAM:
                    name = "/dev/stdin"  # a file redirected to stdin: opened by its name
            kept.append(name)
        done.append(",".join(kept))
    return done if isinstance(value, (list, tuple)) else done[0]


def _set_value(flag_values: Any, name: str, value) -> None:
    if hasattr(flag_values, "flag_values_dict"):  # absl's FlagValues
        flag_values[name].value = value
    elif isinstance(flag_values, dict):
        flag_values[name] = value
    else:
        setattr(flag_values, name, value)


# --- spooling a stream ---------------------------------------------------------


@contextlib.contextmanager
def spool(path: str, flag: str, kind: str = PIPE) -> Iterator[str]:
    """Copies the stream `path` into a temporary file and yields its path;
    removes it when the block ends. An empty stream is refused (`empty_error`);
    error lines about the copy name `path` (`errors.show_path_as`)."""
    directory = os.path.join(tempfile.gettempdir(), SPOOL_DIRECTORY)
    os.makedirs(directory, exist_ok=True)
    io.remove_stale_temporaries(directory)  # those of a command killed with SIGKILL
    label = "stdin" if path in STDIN_NAMES else os.path.basename(path.rstrip("/")) or "input"
    copy = io.temporary_name(os.path.join(directory, f"{flag.lstrip('-')}-{label}"))
    if kind == DEVICE and path in STDIN_NAMES and os.isatty(sys.stdin.fileno()):
        logging.info("%s: reading the terminal until the end of input (Ctrl-D)", flag)
    try:
        with io.open_new(copy, "wb") as out:
            total = _copy_stream(path, flag, kind, out)
        if total == 0:
            raise empty_error(flag, path, kind)
        show_path_as(copy, f"{path} (read from {_words(path, kind)})")
        _SPOOLS[copy] = path
        logging.info("%s %s (%s): read %d bytes into %s (removed at the end)", flag, path,
                     _words(path, kind), total, copy)
        yield copy
    finally:
        io.remove(copy)
        show_path_as(copy, None)
        _SPOOLS.pop(copy, None)


def open_stream(path: str, flag: str):
    """A binary file object that reads the "stream" input `path` once, as it
    comes. A FIFO is opened without waiting for its writer (an open would wait
    forever when none comes): until its first byte (or its writer's end) a line
    every `WAIT_LOG_SECONDS` says what is awaited, and after `wait_seconds()`
    the command stops in one line naming `flag`. Anything else is opened as a
    file is."""
    if path in STDIN_NAMES or classify(path) != PIPE:
        return io.open_file(path, "rb")
    fd = _open_stream(path, flag)
    try:
        _await_first_byte(fd, path, flag)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _await_first_byte(fd: int, path: str, flag: str) -> None:
    """Returns once the stream `fd` has a byte to read, or has ended (its writer
    came and went); a line every WAIT_LOG_SECONDS meanwhile; `UserError` after
    `wait_seconds()`."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    limit, start = wait_seconds(), time.monotonic()
    last_line = start
    while not poller.poll(min(1.0, WAIT_LOG_SECONDS) * 1000):
        now = time.monotonic()
        if now - start >= limit:
            raise UserError(
                f"{flag} {path} ({_words(path, PIPE)}) gave nothing for {limit:.0f} s: its "
                "writer is gone or stuck; start the writer, or give a file "
                "(OFFICIAL_BERT_INPUT_WAIT sets the wait)")
        if now - last_line >= WAIT_LOG_SECONDS:
            last_line = now
            logging.info("waiting for %s %s (%s): nothing yet after %.0f s (stops after "
                         "%.0f s)", flag, path, _words(path, PIPE), now - start, limit)


def _open_stream(path: str, flag: str) -> int:
    """A descriptor of the stream: standard input's own, or the named one
    opened without waiting for its writer (a FIFO's open would wait forever)."""
    if path in STDIN_NAMES:
        return os.dup(sys.stdin.fileno())
    try:
        return os.open(io.local_path(path), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise UserError(f"{flag} {path} cannot be opened: {e.strerror}") from None


def _copy_stream(path: str, flag: str, kind: str, out) -> int:
    """Copies the stream into `out` until it ends; the bytes copied. A line
    every WAIT_LOG_SECONDS while nothing comes; `UserError` after
    `wait_seconds()` of nothing."""
    fd = _open_stream(path, flag)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    total, limit = 0, wait_seconds()
    silent_since = last_line = time.monotonic()
    try:
        while True:
            if not poller.poll(min(1.0, WAIT_LOG_SECONDS) * 1000):
                now = time.monotonic()
                if now - silent_since >= limit:
                    raise UserError(
                        f"{flag} {path} ({_words(path, kind)}) gave nothing for {limit:.0f} s "
                        f"({total} bytes read before): its writer is gone or stuck; start "
                        "the writer, or give a file (OFFICIAL_BERT_INPUT_WAIT sets the wait)")
                if now - last_line >= WAIT_LOG_SECONDS:
                    last_line = now
                    logging.info("waiting for %s %s (%s): %d bytes read, nothing new for %.0f s "
                                 "(stops after %.0f s)", flag, path, _words(path, kind), total,
                                 now - silent_since, limit)
                continue
            block = _read(fd)
            if block is None:
                continue  # woken with nothing yet (a FIFO's writer came and went)
            if not block:
                return total
            out.write(block)
            total += len(block)
            silent_since = time.monotonic()
    finally:
        os.close(fd)


def _read(fd: int) -> bytes | None:
    """What is there on `fd`; b"" at its end; None when nothing is there yet."""
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return None
