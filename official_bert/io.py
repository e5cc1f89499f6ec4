"""Files on any file system: paths, reading, atomic writes.

Every file the project writes goes through here, so that:

* a reader never sees a half-written file: data goes to a hidden temporary name
  in the destination's directory (`.<name>.tmp-<pid>-<random>`), is flushed and
  fsynced, and is renamed over the destination in one step (`atomic_output`);
  the temporaries of a writer that was killed are cleared by the next run in
  the directory (`remove_stale_temporaries`). A temporary's name is shortened
  to fit NAME_MAX whenever the destination's fits (`fit_name`);
* every output is published by one step (`publish_file`, `publish_directory`)
  that follows what the output policy found before the work
  (`official_bert.outputs`, `claim_output`: never over another writer's or the
  user's file) and records what the project published in the directory's
  hidden ledger (`OUTPUT_LEDGER`), so that a rerun may replace its own output;
* a device node or a pipe (`/dev/null`, `/dev/stdout`, a FIFO) is written
  through, never replaced by a regular file (`is_stream`, `write_through`);
* files get the user's umask (not `mkstemp`'s 0600), and a temporary file is
  created with O_EXCL, so it never follows a symlink someone left in its place;
* a full disk is reported as such (`errors.DiskFullError`), with the partial
  file removed;
* paths with a scheme (`gs://`, `s3://`, `hdfs://`, TensorFlow's in-memory
  `ram://`) go through `tf.io.gfile`, local paths through `os` (no TensorFlow
  import for the data tools). `open_file` gives the same Python file object
  either way (encodings, newlines, line iteration). On object stores a rename
  is a copy and a delete, so there a reader can see a file appear late, never a
  partial one. `ram://` lives in one process only (`is_process_local`);
* a user's file that is not UTF-8 is reported with the line of its first bad
  byte (`read_text`, `not_utf8`);
* a UTF-8 byte-order mark at the very start of a text file is an encoding mark,
  not content: every text reader drops it (`strip_bom`: `read_text`,
  `open_file` in a text read mode, `text_lines` for readers that decode line by
  line); one anywhere else is a character of its line and stays.

Two modules build on this one: `file_sets` (the files of one output published
together with a manifest, and the flag patterns that name data files:
`expand_paths`) and `run_directory.lock` (a run's exclusive use of its `--output_dir`).
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import fcntl
import hashlib
import glob as _glob
import io as _pyio
import json
import os
import re
import secrets
import shutil
import stat as _stat_mode
from typing import Iterator

from official_bert.errors import (BadFileError, DiskFullError, UserError, is_disk_full,
                                  not_utf8_error)

# TensorFlow is imported only where a path has a scheme (`gfile`, `_stat`):
# data_prep/ reads and writes local files through this module without it.

# The hidden temporary name of a file being written: `.<name>.tmp-<pid>-<hex>`.
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]+$")


# === Paths ===


def is_local(path: str) -> bool:
    """Whether `path` is on the local file system (no `scheme://`, or `file://`)."""
    path = os.fspath(path)
    return "://" not in path or path.startswith("file://")


def local_path(path: str) -> str:
    """A local path without its `file://` scheme, as `os` takes it."""
    path = os.fspath(path)
    return path[len("file://"):] if path.startswith("file://") else path


def gfile():
    """`tf.io.gfile`, for paths with a scheme (TensorFlow is imported on first use)."""
    import tensorflow as tf

    return tf.io.gfile


def is_process_local(path: str) -> bool:
    """Whether `path` exists only inside this process (TensorFlow's `ram://`):
    worker processes cannot see it."""
    return os.fspath(path).startswith("ram://")


def join(*parts: str) -> str:
    return os.path.join(*[os.fspath(p) for p in parts])


def exists(path: str) -> bool:
    if is_local(path):
        return os.path.exists(local_path(path))
    return _remote_kind(path) is not None


def isdir(path: str) -> bool:
    if is_local(path):
        return os.path.isdir(local_path(path))
    return _remote_kind(path) == "dir"


def isfile(path: str) -> bool:
    if is_local(path):
        return os.path.isfile(local_path(path))
    return _remote_kind(path) == "file"


def _remote_kind(path: str) -> str | None:
    """"file", "dir" or None for a `tf.io.gfile` path.

    TensorFlow's `ram://` file system (2.21) calls any prefix of a stored name
    a directory (with `ram://d/x.json` stored, `ram://d/x` "exists" and is a
    directory, and `tf.io.gfile.copy` onto it writes `ram://d/x/x.json`). Here
    a `ram://` directory must hold a name below it, or be an empty one made by
    `makedirs` (which its parent lists).
    """
    stat = _stat(path)
    if stat is None:
        return None
    if not stat.is_directory:
        return "file"
    if not is_process_local(path):
        return "dir"
    path = os.fspath(path).rstrip("/")
    pattern = path
    for _ in range(8):  # its glob sees stored names only, not the directories between
        pattern += "/*"
        if gfile().glob(pattern):
            return "dir"
    parent, name = path.rsplit("/", 1)
    if parent.endswith(":/"):
        parent += "/"  # ram://name: its parent is ram://
    return "dir" if name in listdir(parent) else None  # made by makedirs, empty


def _stat(path: str):
    import tensorflow as tf

    try:
        return tf.io.gfile.stat(path)
    except tf.errors.NotFoundError:
        return None


# How an error line names a path that a loop of symbolic links leads into (ELOOP).
LOOP_WORDS = "a loop of symbolic links"


def missing(path: str) -> str:
    """Why `path`, which `exists` says is not there, is not, in words for an
    error line after the path: "does not exist", or what the operating system
    says really stops it: a loop of symbolic links (`exists` is False for one,
    and "does not exist" sent users looking for a typo), a symbolic link to
    nothing, a part of the path that is a file, a directory that may not be
    looked into. Paths with a scheme: "does not exist"."""
    if not is_local(path):
        return "does not exist"
    local = os.path.abspath(local_path(path))
    try:
        os.stat(local)
        return "does not exist"  # (it appeared since: the caller's check was first)
    except OSError as e:
        code = e.errno
    if code == errno.ELOOP:
        loop = _first_part_failing(local, errno.ELOOP)
        return (f"is {LOOP_WORDS}" if loop == local else
                f"does not exist: {loop} on its path is {LOOP_WORDS}")
    if code == errno.ENOENT and os.path.islink(local):
        return f"is a symbolic link to {os.readlink(local)}, which does not exist"
    if code == errno.ENOTDIR:
        part = os.path.dirname(_first_part_failing(local, errno.ENOTDIR))
        return f"does not exist: {part} on its path is {kind_of(part)}, not a directory"
    if code == errno.EACCES:
        return "cannot be looked at: a directory on its path denies it (permission denied)"
    return "does not exist"


def _first_part_failing(path: str, code: int) -> str:
    """The shortest leading part of the absolute `path` whose stat fails with `code`."""
    part = os.sep
    for name in path.split(os.sep)[1:]:
        part = os.path.join(part, name)
        try:
            os.stat(part)
        except OSError as e:
            if e.errno == code:
                return part
    return path


def check_output_directory(path: str) -> None:
    """`UserError` unless the directory of the local file `path` exists.

    For the data tools, which do not create directories (a typo in an output
    path should not make a new tree). Object stores have no directories to
    check: nothing is checked for paths with a scheme.
    """
    if is_local(path):
        directory = os.path.dirname(os.path.abspath(local_path(path)))
        if not os.path.isdir(directory):
            raise UserError(f"cannot write output {path}: output directory "
                            f"{directory} does not exist; create it first")


def listdir(path: str) -> list[str]:
    """The sorted names in a directory (object stores' "name/" for a directory is "name")."""
    if is_local(path):
        return sorted(os.listdir(local_path(path)))
    return sorted(name.rstrip("/") for name in gfile().listdir(path))


def makedirs(path: str) -> None:
    """Makes a directory and its parents; `UserError` when the path (or a
    parent) is a file: the paths come from the user's flags."""
    if is_local(path):
        try:
            os.makedirs(local_path(path), exist_ok=True)  # mode 0o777 & ~umask
        except (FileExistsError, NotADirectoryError):
            what = kind_of(path) if os.path.lexists(local_path(path)) else "a file"
            raise UserError(f"cannot make the directory {path}: it (or a directory above it) "
                            f"is {what}; choose another path") from None
    else:
        gfile().makedirs(path)


def remove(path: str) -> None:
    """Removes a file if it is there (a name longer than NAME_MAX names nothing)."""
    if is_local(path):
        if name_too_long(local_path(path)) is None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(local_path(path))
    elif gfile().exists(path):
        gfile().remove(path)


def size(path: str) -> int:
    """The size of a file in bytes."""
    if is_local(path):
        return os.path.getsize(local_path(path))
    return gfile().stat(path).length


# A file's content fingerprint (`content_fingerprint`): hashed whole up to
# WHOLE_FINGERPRINT bytes, else by FINGERPRINT_BLOCKS blocks of FINGERPRINT_BLOCK.
WHOLE_FINGERPRINT = 128 << 20
FINGERPRINT_BLOCK = 1 << 20
FINGERPRINT_BLOCKS = 32


def content_fingerprint(path: str) -> str:
    """What a run record knows a training file by: its content, not its size
    alone (a train.tsv with its labels flipped keeps its size) nor its mtime
    (a copy or a touch is the same data).

    A file up to 128 MiB (every GLUE, SQuAD, CoNLL and SWAG training file) is
    read whole: "sha256:<hex>" of its bytes. SST-2's 3.8 MB train.tsv takes
    5 ms here (sha256 at about 0.8 GB/s from the page cache), a fifth of
    reading it into lines (25 ms), and a fine-tuning session reads and
    tokenizes all of it anyway (seconds). A larger file (a pre-training
    shard) is read in 32 blocks of 1 MiB spread evenly from its first byte to
    its last: "sha256-32x1MiB:<hex>" of its size and those blocks, 32 MiB read
    whatever its size; an edit that falls between the blocks and keeps the size
    goes unseen there.
    """
    length = size(path)
    digest = hashlib.sha256()
    with open_file(path, "rb") as f:
        if length <= WHOLE_FINGERPRINT:
            for block in iter(lambda: f.read(FINGERPRINT_BLOCK), b""):
                digest.update(block)
            return "sha256:" + digest.hexdigest()
        digest.update(str(length).encode())
        step = (length - FINGERPRINT_BLOCK) / (FINGERPRINT_BLOCKS - 1)
        for index in range(FINGERPRINT_BLOCKS):
            f.seek(round(index * step))
            digest.update(f.read(FINGERPRINT_BLOCK))
    return f"sha256-{FINGERPRINT_BLOCKS}x{FINGERPRINT_BLOCK >> 20}MiB:" + digest.hexdigest()


def open_file(path: str, mode: str = "r", encoding: str = "utf-8", newline: str | None = None):
    """`open` for local paths; for the others a `tf.io.gfile.GFile` behind Python's
    own buffering and text decoding, so that `encoding` and `newline` mean what
    they mean to `open` (GFile's own line reading drops the "\\r" of "\\r\\n").
    Modes "r", "rb", "w", "wb", "a", "ab". Read as UTF-8 text, a byte-order mark
    at the start of the file is dropped (`strip_bom`'s rule, decoded as Python's
    "utf-8-sig"); binary modes give the bytes as they are."""
    if mode.startswith("r") and "b" not in mode and _is_utf8(encoding):
        encoding = "utf-8-sig"  # the BOM rule (`strip_bom`) for text read as it is decoded
    text = {} if "b" in mode else {"encoding": encoding, "newline": newline}
    if is_local(path):
        return open(local_path(path), mode, **text)
    raw = _GFileStream(path, mode.replace("b", "").replace("t", "") + "b")
    buffered = (_pyio.BufferedReader(raw, 1 << 20) if raw.readable()
                else _pyio.BufferedWriter(raw, 1 << 20))
    return buffered if "b" in mode else _pyio.TextIOWrapper(buffered, **text)


class _GFileStream(_pyio.RawIOBase):
    """A `tf.io.gfile.GFile` (binary) as a raw Python stream."""

    def __init__(self, path: str, mode: str):
        super().__init__()
        self.name, self._mode = path, mode
        self._file = gfile().GFile(path, mode)

    def readable(self) -> bool:
        return "r" in self._mode

    def writable(self) -> bool:
        return "r" not in self._mode

    def seekable(self) -> bool:
        return "r" in self._mode

    def readinto(self, buffer) -> int:
        data = self._file.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def write(self, data) -> int:
        self._file.write(bytes(data))
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        self._file.seek(offset, whence)
        return self._file.tell()

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        if not self.closed:
            try:
                self._file.close()  # a written file is only complete once closed
            finally:
                super().close()


# === Reading ===

# A UTF-8 byte-order mark, as bytes and as the character it decodes to.
BOM = codecs.BOM_UTF8
BOM_CHAR = "\ufeff"


def strip_bom(data):
    """`data` (the start of a text file: bytes or str) without a UTF-8
    byte-order mark at its very start.

    The one rule of every reader of a user's text file (vocabularies, CoNLL,
    GLUE and SWAG tables, SQuAD JSON, corpora, label lists, the text to predict
    or embed): a BOM at the start of the file is how an editor marked the
    encoding, not content, as Python's "utf-8-sig" reads it. Only one is
    dropped, and only there: a BOM anywhere else is a character of its line.
    `read_text`, `open_file` (text read modes) and `text_lines` apply it.
    """
    mark = BOM if isinstance(data, (bytes, bytearray)) else BOM_CHAR
    return data[len(mark):] if data[:len(mark)] == mark else data


def text_lines(lines):
    """The lines of a text file as a reader iterates them (bytes or str), the
    first one through `strip_bom`: for readers that decode line by line (to
    name the line that is not UTF-8). Items that are not lines (a reader's own
    markers) pass through, and the first line is the first bytes or str."""
    lines = iter(lines)
    for line in lines:
        if isinstance(line, (bytes, bytearray, str)):
            yield strip_bom(line)
            break
        yield line
    yield from lines


def _is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")


def read_text(path: str) -> str:
    """The whole file as UTF-8 text, without a byte-order mark at its start
    (`strip_bom`); `BadFileError` naming the line of a bad byte."""
    with open_file(path, "rb") as f:
        data = f.read()
    try:
        return strip_bom(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise not_utf8_error(path, e.reason, where=f"at byte {e.start}", line=line) from None


def not_utf8(path: str, error: UnicodeDecodeError | None = None, *,
             fix: str | None = None) -> BadFileError:
    """The `BadFileError` for `path`, naming the line and byte of its first
    byte that is not UTF-8 (`errors.not_utf8_error`).

    For readers that decode as they go (csv, json, line loops) and catch the
    `UnicodeDecodeError` without knowing the line: the file is read again, in
    blocks, up to the bad byte (only on this error path). `error` gives the
    reason when the file cannot be read again.
    """
    try:
        found = _first_bad_utf8(path)
    except OSError:
        found = None
    if found is None:
        reason = error.reason if error is not None else "invalid byte"
        return not_utf8_error(path, reason, fix=fix)
    reason, where, line = found
    return not_utf8_error(path, reason, where=where, line=line, fix=fix)


def _first_bad_utf8(path: str) -> tuple[str, str, int] | None:
    """(the decoder's reason, where, the 1-based line) of the first byte of
    `path` that is not UTF-8; None when the whole file decodes."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    consumed = newlines = 0
    with open_file(path, "rb") as f:
        while block := f.read(1 << 20):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as e:
                # `e.start` counts from the bytes the decoder held back
                # (at most 3 of an unfinished character) plus this block.
                held = len(e.object) - len(block)
                start = max(e.start - held, 0)
                line = newlines + block.count(b"\n", 0, start) + 1
                return e.reason, f"at byte {consumed + start}", line
            newlines += block.count(b"\n")
            consumed += len(block)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as e:  # the file ends inside a character
        return e.reason, "at the end of the file", newlines + 1
    return None


def read_json(path: str, error: type[BadFileError] = BadFileError, *, what: str = "a JSON file",
              missing_fix: str = "check the file name", directory_fix: str | None = None):
    """The parsed JSON value of `path` (a UTF-8 file; a byte-order mark at its
    start is dropped, `strip_bom`).

    Every way the file can be wrong is an `error` (a `BadFileError` type)
    naming it: missing, a directory, not UTF-8 (with the line), not JSON
    (with the line and column). `what` says what the file should have been.
    """
    if not exists(path):
        raise error(path, missing(path), fix=missing_fix)
    if isdir(path):
        raise error(path, f"is a directory, not {what}", fix=directory_fix)
    try:
        with open_file(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise error(path, f"is not valid JSON ({e.msg} at column {e.colno})",
                    line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from None


def same_path(a: str, b: str) -> bool:
    """Whether two paths name the same file (symlinks and `..` resolved)."""
    if is_local(a) and is_local(b):
        return os.path.realpath(local_path(a)) == os.path.realpath(local_path(b))
    return os.fspath(a).rstrip("/") == os.fspath(b).rstrip("/")


def refuse_output_over_input(outputs: dict, inputs) -> None:
    """`UserError` when an output would replace one of the inputs.

    Args:
        outputs: flag name → an output file or directory (None entries ignored).
        inputs: flag name → an input file or directory, or (flag, path) pairs
            (None paths ignored).
    """
    inputs = list(inputs.items() if isinstance(inputs, dict) else inputs)
    for out_flag, output in outputs.items():
        if not output:
            continue
        for in_flag, path in inputs:
            if path and same_path(output, path):
                raise UserError(f"{out_flag} is --{in_flag} ({path}): the run would write "
                                f"over its own input; choose another output")


# === Atomic writes ===


def new_file_mode() -> int:
    """The mode `open` gives a new file: read-write as far as the user's umask
    allows (`tempfile.mkstemp` would give 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def temporary_name(path: str) -> str:
    """A hidden, unique name beside `path` for writing it: `.<name>.tmp-<pid>-<hex>`.

    The embedded name is shortened (`fit_name`) so that the temporary fits in
    NAME_MAX bytes whenever `path`'s own name does: a legal 249-character output
    name must not fail on its temporary. It keeps the `_TEMPORARY` shape, so
    `remove_stale_temporaries` still recognises it.
    """
    path = os.fspath(path)
    directory, name = os.path.split(path)
    suffix = f".tmp-{os.getpid()}-{secrets.token_hex(4)}"
    return os.path.join(directory, f".{fit_name(name, NAME_MAX - 1 - len(suffix))}{suffix}")


# The longest name of one path component (Linux, macOS and most file systems), in bytes.
NAME_MAX = 255


def fit_name(name: str, budget: int) -> str:
    """`name`, or when its UTF-8 is longer than `budget` bytes, its start and a
    hash of the whole (`<start>~<12 hex>`): the same short name every time, so
    a derived name (a temporary, a sidecar) stays within NAME_MAX."""
    data = os.fsencode(name)
    if len(data) <= budget:
        return name
    digest = hashlib.sha256(data).hexdigest()[:12]
    # A cut inside a multi-byte character drops its first bytes ("ignore").
    return data[:budget - len(digest) - 1].decode("utf-8", "ignore") + "~" + digest


def name_too_long(path: str) -> str | None:
    """The first component of `path` longer than NAME_MAX bytes (the file
    system would refuse it: ENAMETOOLONG), or None."""
    for part in os.fspath(path).split("/"):
        if len(os.fsencode(part)) > NAME_MAX:
            return part
    return None


def reraise_disk_full(error: BaseException, path: str):
    """Raises `DiskFullError` for an out-of-space `OSError`, else `error` itself."""
    if is_disk_full(error):
        raise DiskFullError(path, error.strerror) from None
    raise error


def open_new(path: str, mode: str = "wb", encoding: str = "utf-8"):
    """Creates `path` (which must not exist) for writing: locally with O_EXCL and
    O_NOFOLLOW (never through a symlink planted at the name) and the user's
    umask. For the temporary names of `temporary_name`; callers rename them."""
    if mode not in ("w", "wb"):
        raise ValueError(f"open_new creates a new file: mode 'w' or 'wb', not {mode!r}")
    if not is_local(path):
        return open_file(path, mode, encoding)
    fd = os.open(local_path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(
        os, "O_NOFOLLOW", 0), new_file_mode())
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": encoding}))


def sync(file) -> None:
    """Flushes `file`, and fsyncs it when it is a local file."""
    file.flush()
    try:
        fd = file.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a local file: closing it completes it
    os.fsync(fd)


def check_writable(path: str, flag: str) -> None:
    """`UserError` naming `flag` when the output `path` (a file or directory,
    there or not yet) could not be written: a probe file is created in its
    directory, or in the nearest one above that exists, and removed. For every
    writer's validation, before any work: a read-only file system, a
    directory without write permission or a file where a directory must be
    are one line, not a traceback at the end. Local paths only (an object
    store's permissions show only when an object is written)."""
    if not path or not is_local(path):
        return
    if is_stream(path):  # written through (`write_through`): the device itself must take it
        if not os.access(local_path(path), os.W_OK):
            raise UserError(f"{flag} {path} cannot be written (permission denied); choose "
                            "a location you can write")
        return
    directory = os.path.abspath(local_path(path))
    if os.path.isfile(directory):
        directory = os.path.dirname(directory)  # an existing output file: its directory
    while not os.path.lexists(directory):
        directory = os.path.dirname(directory)
    if not os.path.isdir(directory):
        raise UserError(f"{flag} {path}: {directory} is {kind_of(directory)}, not a "
                        "directory; choose another location")
    probe = temporary_name(os.path.join(directory, "write-probe"))
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as e:
        raise UserError(f"{flag} {path} cannot be written: {directory} refuses new files "
                        f"({e.strerror}); choose a location you can write") from None
    os.remove(probe)


@contextlib.contextmanager
def atomic_output(path: str, mode: str = "w", encoding: str = "utf-8",
                  overwrite: bool = True) -> Iterator:
    """Writes `path` through a file object; it appears complete, or not at all.

    `overwrite=False` (for writers that never replace a file): publishing
    fails when `path` exists by then, in one step with the check (`rename`),
    so of two processes writing one new file exactly one succeeds; the other
    gets a `UserError` and its output is removed.

    Example:
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "results.txt")
    >>> with atomic_output(out) as f:
    ...     _ = f.write("eval_accuracy = 0.9\\n")
    >>> open(out).read()
    'eval_accuracy = 0.9\\n'
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_output writes a new file: mode 'w' or 'wb', not {mode!r}")
    path = os.fspath(path)
    if is_stream(path):
        with write_through(path, mode, encoding) as f:
            yield f
        return
    makedirs(os.path.dirname(path) or ".")
    tmp = temporary_name(path)
    try:
        with open_new(tmp, mode, encoding) as f:
            yield f
            sync(f)
        publish_file(tmp, path, overwrite=overwrite)
    except FileExistsError:
        remove(tmp)
        raise written_meanwhile(path) from None
    except BaseException as e:
        remove(tmp)
        reraise_disk_full(e, path)


@contextlib.contextmanager
def write_through(path: str, mode: str = "w", encoding: str = "utf-8") -> Iterator:
    """Writes a device node or a pipe (`is_stream`: /dev/null, /dev/stdout, a
    FIFO) directly: staging a file and renaming it over the name would
    replace the device with a regular file. Opened for appending, so that
    /dev/stdout redirected to a file keeps what is already there. A full
    device (/dev/full) is a `DiskFullError`."""
    text = {} if "b" in mode else {"encoding": encoding}
    try:
        with open(local_path(path), mode.replace("w", "a"), **text) as f:
            yield f
    except OSError as e:
        reraise_disk_full(e, path)


def written_meanwhile(path: str) -> UserError:
    """The one line for an output that another writer published while this one
    worked (`publish_file`'s or `publish_directory`'s `FileExistsError`)."""
    return UserError(f"{path} exists now (another process wrote it while this one worked): "
                     "it is kept, and this output was not written; choose another name")


def atomic_write(path: str, data: str | bytes, overwrite: bool = True) -> None:
    """Writes `data` (text as UTF-8) to `path` atomically (`atomic_output`)."""
    with atomic_output(path, "wb", overwrite=overwrite) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def atomic_copy(source: str, destination: str) -> None:
    """Copies `source` to `destination` atomically (nothing when they are one file)."""
    if same_path(source, destination):
        return
    with open_file(source, "rb") as src, atomic_output(destination, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


def make_temporary_dir(parent: str, prefix: str) -> str:
    """A new hidden directory inside `parent` (with the user's umask) to stage
    several files in before `publish_together` / a directory rename."""
    makedirs(parent)
    path = temporary_name(join(parent, prefix))
    if is_local(path):
        os.mkdir(local_path(path))  # mode 0o777 & ~umask, unlike tempfile.mkdtemp's 0700
    else:
        gfile().makedirs(path)
    return path


def remove_tree(path: str) -> None:
    if is_local(path):
        shutil.rmtree(local_path(path), ignore_errors=True)
    elif exists(path):
        try:
            gfile().rmtree(path)
        except Exception as e:  # noqa: BLE001 - only ram://'s phantom entry is forgiven
            # TensorFlow's ram:// lists a name-prefix sibling as a child (with
            # `assets` and `assets.extra`, a SavedModel's, `assets` lists
            # `.extra`): DeleteRecursively removes everything, then fails on it.
            if type(e).__name__ != "NotFoundError" or exists(path):
                raise


def rename(source: str, destination: str, overwrite: bool = False) -> None:
    """Renames a file or directory (refusing to replace one unless `overwrite`:
    `FileExistsError`).

    Locally the refusal and the rename are one step: a file is hard-linked to
    its new name (`link(2)` fails when the name exists) and its old name
    removed; a directory is renamed (`rename(2)` fails onto a directory that
    is not empty). Where a scheme's file system has no such step (object
    stores), existence is checked first: best effort. A directory on a file
    system with a scheme is moved file by file (object stores have no
    directories to rename; TensorFlow's `ram://` renames single names only),
    then the source is removed.
    """
    if not overwrite and exists(destination):
        raise FileExistsError(destination)
    if is_local(source):
        if overwrite or os.path.isdir(local_path(source)):
            os.replace(local_path(source), local_path(destination))
        else:
            _link_new(local_path(source), local_path(destination))
    elif isdir(source):
        source = os.fspath(source).rstrip("/")
        for path in _files_below(source):
            target = os.fspath(destination).rstrip("/") + path[len(source):]
            gfile().makedirs(os.path.dirname(target))
            gfile().rename(path, target, overwrite=True)
        remove_tree(source)
    else:
        gfile().rename(source, destination, overwrite=True)


def _link_new(source: str, destination: str) -> None:
    """Moves the file `source` to `destination`, which must not exist (`FileExistsError`)."""
    try:
        os.link(source, destination)
    except FileExistsError:
        raise
    except OSError:  # no hard links here (some FUSE and network file systems)
        if os.path.lexists(destination):
            raise FileExistsError(destination) from None
        os.rename(source, destination)
        return
    os.remove(source)


# === Publishing outputs: streams, claims, what the project wrote ===

# The hidden file in which the project records the outputs it published in a
# directory (name → size and mtime_ns at publication), so that a rerun may
# replace its own earlier output and nothing else. Inside a directory published
# whole (`publish_directory`) the same file lists every file below it.
OUTPUT_LEDGER = ".official_bert.outputs.json"

# Outputs checked by the output policy (`official_bert.outputs`) before the
# job's work, by absolute path: (how it may be published, its identity then).
# "new": nothing was there, so publishing never replaces (a second writer that
# got there first wins); "ours": the project's own earlier output, replaced
# only while it is still that file; "replace": --overwrite.
_claims: dict[str, tuple[str, tuple | None]] = {}


def kind_of(path: str) -> str:
    """What the existing local `path` is, in words for an error line: "a
    device", "a pipe", "a socket", "a file", or a link that leads to none of
    them ("a loop of symbolic links", "a symbolic link to nothing")."""
    try:
        mode = os.stat(local_path(path)).st_mode
    except OSError as e:
        return {errno.ELOOP: LOOP_WORDS,
                errno.ENOENT: "a symbolic link to nothing"}.get(e.errno, "a file")
    if _stat_mode.S_ISCHR(mode) or _stat_mode.S_ISBLK(mode):
        return "a device"
    if _stat_mode.S_ISFIFO(mode):
        return "a pipe"
    return "a socket" if _stat_mode.S_ISSOCK(mode) else "a file"


def is_stream(path: str) -> bool:
    """Whether the local `path` is a device node, a pipe or a socket, or a name
    in /dev or /proc (/dev/stdout redirected to a file): written through
    (`write_through`), never replaced by a regular file."""
    if not path or not is_local(path):
        return False
    path = local_path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if _stat_mode.S_ISREG(mode):  # a file reached through a process's descriptor
        return os.path.abspath(path).startswith(_DESCRIPTOR_NAMES)
    return not _stat_mode.S_ISDIR(mode)


# Names of a process's open files: writing one must reach that file, not replace the name.
_DESCRIPTOR_NAMES = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/")


def _key(path: str) -> str:
    return os.path.abspath(local_path(path))


def identity(path: str) -> tuple | None:
    """What tells one file (or directory) from another that took its name
    since, or changes to it: device, inode, size, mtime; None when absent."""
    try:
        st = os.lstat(local_path(path))
    except OSError:
        return None
    size = 0 if _stat_mode.S_ISDIR(st.st_mode) else st.st_size
    mtime = 0 if _stat_mode.S_ISDIR(st.st_mode) else st.st_mtime_ns
    return (st.st_dev, st.st_ino, size, mtime)


def claim_output(path: str, state: str) -> None:
    """Records how the output `path` may be published (see `_claims`); made by
    the output policy after its checks, before any work."""
    if state not in ("new", "ours", "replace"):
        raise ValueError(f"claim_output: state {state!r}")
    if is_local(path):
        _claims[_key(path)] = (state, identity(path))


def is_claimed(path: str) -> bool:
    return is_local(path) and _key(path) in _claims


def claim_holds(path: str) -> bool:
    """Whether `path` is still as its claim found it (nothing appeared at a
    "new" one, "ours" unchanged): for a writer to check before it touches
    anything shared (a set's manifest). Unclaimed paths hold."""
    state, was = _claims.get(_key(path), (None, None)) if is_local(path) else (None, None)
    if state == "new":
        return not os.path.lexists(local_path(path))
    if state == "ours":
        return identity(path) in (was, None)
    return True


def publish_file(tmp: str, path: str, overwrite: bool = True) -> None:
    """Renames the complete temporary file `tmp` to `path`: the one step that
    publishes a file (`atomic_output`, `file_sets.publish_together`).

    A claimed output (`claim_output`) is published as its claim says and
    recorded as the project's (`record_published`); `FileExistsError` when
    another writer published it since the claim (the caller refuses in one
    line). An unclaimed path (a run directory's own files) is replaced or not
    as `overwrite` says.
    """
    claim = _claims.get(_key(path)) if is_local(path) else None
    if claim is None:
        rename(tmp, path, overwrite=overwrite)
        return
    state, was = claim
    if state == "new" or (state == "ours" and not os.path.lexists(local_path(path))):
        rename(tmp, path, overwrite=False)
    else:
        _replace_unchanged(tmp, path, was if state == "ours" else None)
    record_published(path)
    _claims[_key(path)] = ("ours", identity(path))


def publish_directory(staging: str, target: str) -> None:
    """Renames the complete directory `staging` (beside `target`, see
    `make_temporary_dir`) to `target` in one step, and records inside it what
    it holds (`OUTPUT_LEDGER`), so a rerun knows it as the project's.

    `target` may be absent or an empty directory; a claimed `target` that is
    the project's own earlier output ("ours", unchanged) or --overwrite's
    ("replace") is moved aside and removed once the new one is in place.
    `FileExistsError` when `target` holds something else (another writer's
    output that appeared since the claim: of two writers one wins).
    """
    if not is_local(staging):
        if isdir(target) and not listdir(target):
            remove_tree(target)  # an empty directory: replaced, as locally
        rename(staging, target)
        return
    _write_ledger(local_path(staging), _directory_listing(local_path(staging)))
    state, was = _claims.get(_key(target), ("new", None))
    target_path = local_path(target)
    if state != "new" and os.path.lexists(target_path):
        _replace_unchanged(staging, target, was if state == "ours" else None)
    else:
        try:
            os.rename(local_path(staging), target_path)  # onto nothing or an empty directory
        except OSError as e:
            if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise FileExistsError(target) from None
            raise
    _claims[_key(target)] = ("ours", identity(target))


def _replace_unchanged(new: str, path: str, was: tuple | None) -> None:
    """Replaces `path` by `new` (a file or directory); with `was`, only while
    `path` is still that file (its identity). Holding an exclusive lock on the
    old file while comparing and replacing, so that of two writers replacing
    the same earlier output one replaces it and the other finds it changed."""
    path = local_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except FileNotFoundError:
        fd = None  # gone since the claim: nothing to replace
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        if was is not None and identity(path) != was:
            raise FileExistsError(path)
        if not os.path.isdir(local_path(new)):
            os.replace(local_path(new), path)
            return
        aside = temporary_name(path)
        if os.path.lexists(path):
            os.rename(path, aside)
        try:
            os.rename(local_path(new), path)
        except OSError:
            if os.path.lexists(aside) and not os.path.lexists(path):
                os.rename(aside, path)
            raise FileExistsError(path) from None
        remove_tree(aside) if os.path.isdir(aside) else remove(aside)
    finally:
        if fd is not None:
            os.close(fd)


def record_published(path: str) -> None:
    """Records the file `path` in its directory's `OUTPUT_LEDGER` as this
    project's output, as it is now (size, mtime): a rerun may replace it; once
    someone changes it, it is theirs. The ledger is read and rewritten under a
    lock on the directory, so that writers in one directory lose no entry."""
    if not is_local(path):
        return
    directory, name = os.path.split(_key(path))
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        ledger = {n: entry for n, entry in _read_ledger(directory).items()
                  if os.path.lexists(os.path.join(directory, n))}  # forget what is gone
        ledger[name] = _fingerprint(os.path.join(directory, name))
        _write_ledger(directory, ledger)
    finally:
        os.close(fd)


def is_published_output(path: str) -> bool:
    """Whether `path` is an output this project published and nobody changed
    since: a file its directory's ledger lists with its current size and
    mtime, or a directory whose own ledger lists exactly the files below it."""
    if not is_local(path):
        return False
    path = _key(path)
    if os.path.islink(path) or not os.path.lexists(path):
        return False
    if os.path.isdir(path):
        listed = _read_ledger(path)
        return bool(listed) and listed == _directory_listing(path)
    directory, name = os.path.split(path)
    return _read_ledger(directory).get(name) == _fingerprint(path)


def is_in_ledger(path: str) -> bool:
    """Whether the ledger of `path`'s directory names it (changed or not)."""
    if not is_local(path):
        return False
    directory, name = os.path.split(_key(path))
    return name in _read_ledger(directory)


def _fingerprint(path: str) -> dict:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _directory_listing(directory: str) -> dict:
    """Every file below `directory` but its ledgers (relative path → fingerprint)."""
    listing = {}
    for root, _, names in os.walk(directory):
        for name in names:
            if name != OUTPUT_LEDGER:
                full = os.path.join(root, name)
                listing[os.path.relpath(full, directory)] = _fingerprint(full)
    return listing


def _read_ledger(directory: str) -> dict:
    """The ledger of `directory` ({} when there is none or it is damaged: then
    nothing there counts as the project's, the safe side)."""
    try:
        with open(os.path.join(directory, OUTPUT_LEDGER), encoding="utf-8") as f:
            ledger = json.load(f)
    except (OSError, ValueError):
        return {}
    return ledger if isinstance(ledger, dict) else {}


def _write_ledger(directory: str, ledger: dict) -> None:
    path = os.path.join(directory, OUTPUT_LEDGER)
    tmp = temporary_name(path)
    try:
        with open_new(tmp, "w") as f:
            f.write(json.dumps(ledger, indent=1, sort_keys=True) + "\n")
            sync(f)
        os.replace(tmp, path)
    except BaseException as e:
        remove(tmp)
        reraise_disk_full(e, path)


def remove_stale_temporaries(directory: str) -> list[str]:
    """Removes the temporaries (`.<name>.tmp-<pid>-*`) of writers that are gone.

    Only local directories, and only names whose process no longer runs on
    this machine. Returns the removed paths.
    """
    if not is_local(directory) or not os.path.isdir(local_path(directory)):
        return []
    removed = []
    for name in os.listdir(local_path(directory)):
        match = _TEMPORARY.match(name)
        if match and not process_alive(int(match.group("pid"))):
            path = os.path.join(local_path(directory), name)
            remove_tree(path) if os.path.isdir(path) else remove(path)
            removed.append(path)
    return removed


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs on this machine (a process of another user counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# === Path patterns ===


def glob(pattern: str) -> list[str]:
    """The sorted paths matching one glob (`glob.glob`, or `tf.io.gfile.glob`);
    a literal path gives itself when it exists."""
    if is_local(pattern):
        return sorted(_glob.glob(local_path(pattern)))
    return sorted(gfile().glob(pattern))


def has_magic(pattern: str) -> bool:
    """Whether `pattern` holds glob characters (`*`, `?`, `[`)."""
    return _glob.has_magic(os.fspath(pattern))


def walk_files(directory: str) -> list[str]:
    """Every file under `directory`, recursively, sorted; hidden directories
    are not entered (hidden files are listed: the caller decides)."""
    if is_local(directory):
        files = []
        for root, dirs, names in os.walk(local_path(directory)):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            files.extend(os.path.join(root, n) for n in names)
        return sorted(files)
    top = os.fspath(directory).rstrip("/")
    return sorted(p for p in _files_below(top)
                  if not any(d.startswith(".") for d in p[len(top) + 1:].split("/")[:-1]))


def _files_below(directory: str) -> list[str]:
    """Every file below a directory with a scheme (for `ram://`, 8 levels deep:
    its listdir leaves out the directories that only hold files)."""
    if not is_process_local(directory):
        return [join(root, name) for root, _, names in gfile().walk(directory)
                for name in names]
    files, pattern = [], directory
    for _ in range(8):
        pattern += "/*"
        files += [p for p in gfile().glob(pattern) if isfile(p)]
    return files
