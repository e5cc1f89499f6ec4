"""Files on any file system: paths, reading, atomic writes.

Every file the project writes goes through here, so that:

* a reader never sees a half-written file: data goes to a hidden temporary name
  in the destination's directory (`.<name>.tmp-<pid>-<random>`), is flushed and
  fsynced, and is renamed over the destination in one step (`atomic_output`);
  the temporaries of a writer that was killed are cleared by the next run in
  the directory (`remove_stale_temporaries`);
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
`expand_paths`) and `run_lock` (a run's exclusive use of its `--output_dir`).
"""

from __future__ import annotations

import codecs
import contextlib
import glob as _glob
import io as _pyio
import json
import os
import re
import secrets
import shutil
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
            raise UserError(f"cannot make the directory {path}: it (or a directory above it) "
                            "is a file; choose another path") from None
    else:
        gfile().makedirs(path)


def remove(path: str) -> None:
    if is_local(path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(local_path(path))
    elif gfile().exists(path):
        gfile().remove(path)


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
        raise error(path, "does not exist", fix=missing_fix)
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
    """A hidden, unique name beside `path` for writing it: `.<name>.tmp-<pid>-<hex>`."""
    path = os.fspath(path)
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


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
    directory = os.path.abspath(local_path(path))
    if os.path.isfile(directory):
        directory = os.path.dirname(directory)  # an existing output file: its directory
    while not os.path.lexists(directory):
        directory = os.path.dirname(directory)
    if not os.path.isdir(directory):
        raise UserError(f"{flag} {path}: {directory} is a file, not a directory; choose "
                        "another location")
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
    makedirs(os.path.dirname(path) or ".")
    tmp = temporary_name(path)
    try:
        with open_new(tmp, mode, encoding) as f:
            yield f
            sync(f)
        rename(tmp, path, overwrite=overwrite)
    except FileExistsError:
        remove(tmp)
        raise UserError(f"{path} exists now (another process wrote it while this one "
                        "worked): it is kept, and this output was not written; choose another "
                        "name") from None
    except BaseException as e:
        remove(tmp)
        reraise_disk_full(e, path)


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
