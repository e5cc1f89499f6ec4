"""Paths on any file system: where a path is, what is there, how to open it.

* paths with a scheme (`gs://`, `s3://`, `hdfs://`, TensorFlow's in-memory
  `ram://`) go through `tf.io.gfile`, local paths through `os` (no TensorFlow
  import for the data tools). `open_file` gives the same Python file object
  either way (encodings, newlines, line iteration); read as UTF-8 text it
  drops a byte-order mark at the start (`reading.strip_bom`'s rule). On
  object stores a rename is a copy and a delete, so there a reader can see a
  file appear late, never a partial one. `ram://` lives in one process only
  (`is_process_local`);
* what stands at a local path, in words for an error line (`missing`,
  `kind_of`), and what tells one file from another that took its name since
  (`identity`);
* a device node or a pipe (`/dev/null`, `/dev/stdout`, a FIFO) is a stream
  (`is_stream`): writers write it through, never replace it by a file;
* names that fit: NAME_MAX bytes a component (`name_too_long`, `fit_name`);
* one glob and a walk, on any file system (`glob`, `walk_files`).
"""

from __future__ import annotations

import codecs
import errno
import glob as _glob
import hashlib
import io as _pyio
import os
import stat as _stat_mode

from official_bert.errors import UserError

# TensorFlow is imported only where a path has a scheme (`gfile`, `_stat`):
# data_prep/ reads and writes local files through this package without it.


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


def size(path: str) -> int:
    """The size of a file in bytes."""
    if is_local(path):
        return os.path.getsize(local_path(path))
    return gfile().stat(path).length


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


def _is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")


def same_path(a: str, b: str) -> bool:
    """Whether two paths name the same file (symlinks and `..` resolved)."""
    if is_local(a) and is_local(b):
        return os.path.realpath(local_path(a)) == os.path.realpath(local_path(b))
    return os.fspath(a).rstrip("/") == os.fspath(b).rstrip("/")


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


def local_key(path: str) -> str:
    """The absolute local path: what an output's claim and a ledger know a local path by."""
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
    return sorted(p for p in files_below(top)
                  if not any(d.startswith(".") for d in p[len(top) + 1:].split("/")[:-1]))


def files_below(directory: str) -> list[str]:
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
