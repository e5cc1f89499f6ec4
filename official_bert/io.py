"""Files: atomic writes, sets of files published together, path patterns, the run lock.

Every file the project writes goes through here, so that:

* a reader never sees a half-written file: data goes to a hidden temporary name
  in the destination's directory (`.<name>.tmp-<pid>-<random>`), is flushed and
  fsynced, and is renamed over the destination in one step;
* a set of files (the shards of one output) is published as a unit:
  every member is written under its temporary name first, a manifest marked
  incomplete is written, then all are renamed, and the manifest is rewritten
  complete last (`publish_together`); readers refuse a set whose manifest is
  incomplete or names a file that is gone (`check_published_sets`, called by
  `expand_paths`). Sidecar files (manifests, stats) have hidden names that no
  data pattern matches (`sidecar_path`);
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
* path patterns are expanded in one place: `glob` (one pattern), `expand_paths`
  (comma-separated globs and `prefix@N` shards of data files, for a flag).

`RunLock` gives a run exclusive use of its `--output_dir` (`tasks.base` takes it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob as _glob
import io as _pyio
import json
import os
import re
import secrets
import shutil
import socket
import sys
from typing import Iterable, Iterator

from official_bert.errors import (BadFileError, DiskFullError, RunDirectoryError, UserError,
                                  not_utf8)

# TensorFlow is imported only where a path has a scheme (`_gfile`, `_stat`):
# data_prep/ reads and writes local files through this module without it.

# The hidden temporary name of a file being written: `.<name>.tmp-<pid>-<hex>`.
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]+$")
LOCK_FILE = ".official_bert.lock"


# === Paths ===


def is_local(path: str) -> bool:
    """Whether `path` is on the local file system (no `scheme://`, or `file://`)."""
    path = os.fspath(path)
    return "://" not in path or path.startswith("file://")


def _local(path: str) -> str:
    path = os.fspath(path)
    return path[len("file://"):] if path.startswith("file://") else path


def _gfile():
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
        return os.path.exists(_local(path))
    return _remote_kind(path) is not None


def isdir(path: str) -> bool:
    if is_local(path):
        return os.path.isdir(_local(path))
    return _remote_kind(path) == "dir"


def isfile(path: str) -> bool:
    if is_local(path):
        return os.path.isfile(_local(path))
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
        if _gfile().glob(pattern):
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
        directory = os.path.dirname(os.path.abspath(_local(path)))
        if not os.path.isdir(directory):
            raise UserError(f"cannot write output {path}: output directory "
                            f"{directory} does not exist; create it first")


def listdir(path: str) -> list[str]:
    """The sorted names in a directory (object stores' "name/" for a directory is "name")."""
    if is_local(path):
        return sorted(os.listdir(_local(path)))
    return sorted(name.rstrip("/") for name in _gfile().listdir(path))


def makedirs(path: str) -> None:
    """Makes a directory and its parents; `UserError` when the path (or a
    parent) is a file: the paths come from the user's flags."""
    if is_local(path):
        try:
            os.makedirs(_local(path), exist_ok=True)  # mode 0o777 & ~umask
        except (FileExistsError, NotADirectoryError):
            raise UserError(f"cannot make the directory {path}: it (or a directory above it) "
                            "is a file; choose another path") from None
    else:
        _gfile().makedirs(path)


def remove(path: str) -> None:
    if is_local(path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(_local(path))
    elif _gfile().exists(path):
        _gfile().remove(path)


def open_file(path: str, mode: str = "r", encoding: str = "utf-8", newline: str | None = None):
    """`open` for local paths; for the others a `tf.io.gfile.GFile` behind Python's
    own buffering and text decoding, so that `encoding` (e.g. "utf-8-sig") and
    `newline` mean what they mean to `open` (GFile's own line reading drops the
    "\\r" of "\\r\\n"). Modes "r", "rb", "w", "wb", "a", "ab"."""
    text = {} if "b" in mode else {"encoding": encoding, "newline": newline}
    if is_local(path):
        return open(_local(path), mode, **text)
    raw = _GFileStream(path, mode.replace("b", "").replace("t", "") + "b")
    buffered = (_pyio.BufferedReader(raw, 1 << 20) if raw.readable()
                else _pyio.BufferedWriter(raw, 1 << 20))
    return buffered if "b" in mode else _pyio.TextIOWrapper(buffered, **text)


class _GFileStream(_pyio.RawIOBase):
    """A `tf.io.gfile.GFile` (binary) as a raw Python stream."""

    def __init__(self, path: str, mode: str):
        super().__init__()
        self.name, self._mode = path, mode
        self._file = _gfile().GFile(path, mode)

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


def read_text(path: str) -> str:
    """The whole file as UTF-8 text; `BadFileError` naming the line of a bad byte."""
    with open_file(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise BadFileError(path, f"is not UTF-8 ({e.reason} at byte {e.start})", line=line,
                           fix="convert the file to UTF-8") from None


def read_json(path: str, error: type[BadFileError] = BadFileError, *, what: str = "a JSON file",
              missing_fix: str = "check the file name", directory_fix: str | None = None):
    """The parsed JSON value of `path` (a UTF-8 file, a byte-order mark allowed).

    Every way the file can be wrong is an `error` (a `BadFileError` type)
    naming it: missing, a directory, not UTF-8 (with the line), not JSON
    (with the line and column). `what` says what the file should have been.
    """
    if not exists(path):
        raise error(path, "does not exist", fix=missing_fix)
    if isdir(path):
        raise error(path, f"is a directory, not {what}", fix=directory_fix)
    try:
        with open_file(path, encoding="utf-8-sig") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise error(path, f"is not valid JSON ({e.msg} at column {e.colno})",
                    line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from None


def same_path(a: str, b: str) -> bool:
    """Whether two paths name the same file (symlinks and `..` resolved)."""
    if is_local(a) and is_local(b):
        return os.path.realpath(_local(a)) == os.path.realpath(_local(b))
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temporary_name(path: str) -> str:
    """A hidden, unique name beside `path` for writing it: `.<name>.tmp-<pid>-<hex>`."""
    path = os.fspath(path)
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def reraise_disk_full(error: BaseException, path: str):
    """Raises `DiskFullError` for an out-of-space `OSError`, else `error` itself."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
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
    fd = os.open(_local(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(
        os, "O_NOFOLLOW", 0), 0o666 & ~_umask())
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": encoding}))


def sync(file) -> None:
    """Flushes `file`, and fsyncs it when it is a local file."""
    file.flush()
    try:
        fd = file.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a local file: closing it completes it
    os.fsync(fd)


@contextlib.contextmanager
def atomic_output(path: str, mode: str = "w", encoding: str = "utf-8") -> Iterator:
    """Writes `path` through a file object; it appears complete, or not at all.

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
        rename(tmp, path, overwrite=True)
    except BaseException as e:
        remove(tmp)
        reraise_disk_full(e, path)


def atomic_write(path: str, data: str | bytes) -> None:
    """Writes `data` (text as UTF-8) to `path` atomically."""
    with atomic_output(path, "wb") as f:
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
        os.mkdir(_local(path))  # mode 0o777 & ~umask, unlike tempfile.mkdtemp's 0700
    else:
        _gfile().makedirs(path)
    return path


def remove_tree(path: str) -> None:
    if is_local(path):
        shutil.rmtree(_local(path), ignore_errors=True)
    elif exists(path):
        try:
            _gfile().rmtree(path)
        except Exception as e:  # noqa: BLE001 - only ram://'s phantom entry is forgiven
            # TensorFlow's ram:// lists a name-prefix sibling as a child (with
            # `assets` and `assets.extra`, a SavedModel's, `assets` lists
            # `.extra`): DeleteRecursively removes everything, then fails on it.
            if type(e).__name__ != "NotFoundError" or exists(path):
                raise


def rename(source: str, destination: str, overwrite: bool = False) -> None:
    """Renames a file or directory (refusing to replace one unless `overwrite`).

    A directory on a file system with a scheme is moved file by file (object
    stores have no directories to rename; TensorFlow's `ram://` renames single
    names only), then the source is removed.
    """
    if not overwrite and exists(destination):
        raise FileExistsError(destination)
    if is_local(source):
        os.replace(_local(source), _local(destination))
    elif isdir(source):
        source = os.fspath(source).rstrip("/")
        for path in _files_below(source):
            target = os.fspath(destination).rstrip("/") + path[len(source):]
            _gfile().makedirs(os.path.dirname(target))
            _gfile().rename(path, target, overwrite=True)
        remove_tree(source)
    else:
        _gfile().rename(source, destination, overwrite=True)


def publish_together(staged: dict, manifest_path: str | None = None,
                     manifest: dict | None = None) -> None:
    """Publishes several staged files as one output.

    Args:
        staged: final path → the temporary path holding its content (written
            completely, e.g. with `temporary_name`).
        manifest_path: the set's manifest (a `sidecar_path`), listing the final
            files under "files" (paths relative to its directory), their
            "sizes" in bytes, and whether the set is "complete".
        manifest: extra entries for the manifest.

    Order: the manifest is written first with "complete": false (replacing
    any previous set's, which must not vouch for a half-new set), then every
    file is renamed into place, then the manifest is rewritten with
    "complete": true. A crash in between leaves a manifest that says the set
    is incomplete, and `check_published_sets` refuses it; temporaries left by
    a killed writer are hidden names that `remove_stale_temporaries` clears.
    """
    entries = None
    if manifest_path:
        folder = os.path.dirname(os.fspath(manifest_path))
        entries = dict(manifest or {})
        entries["files"] = sorted(_relative(f, folder) for f in staged)
        entries["sizes"] = {_relative(f, folder): size(tmp) for f, tmp in staged.items()}
        entries["complete"] = False
        atomic_write(manifest_path, json.dumps(entries, indent=2, sort_keys=True) + "\n")
    for final, tmp in staged.items():
        rename(tmp, final, overwrite=True)
    if manifest_path:
        entries["complete"] = True
        atomic_write(manifest_path, json.dumps(entries, indent=2, sort_keys=True) + "\n")


def size(path: str) -> int:
    """The size of a file in bytes."""
    if is_local(path):
        return os.path.getsize(_local(path))
    return _gfile().stat(path).length


def _relative(path: str, folder: str) -> str:
    path = os.fspath(path)
    if os.path.dirname(path) == folder:
        return os.path.basename(path)
    if is_local(path) and is_local(folder):
        return os.path.relpath(_local(path), _local(folder) or ".")
    return path  # another file system: the full path


# === Sidecar files and the manifests of sets ===

MANIFEST_SUFFIX = ".summary.json"


def sidecar_path(path: str, kind: str = "summary") -> str:
    """Where a tool keeps what it says about its output `path` (a summary,
    stats, a manifest): `.<name with dots as underscores>.<kind>.json` beside it.

    Hidden, and without the output's name or extension as they are spelled,
    so that no pattern for the data (`out.tfrecord*`, `*.tfrecord*`, `out-*`)
    matches it, with Python's glob or TensorFlow's (whose `*` also matches a
    leading dot), and readers that know nothing of sidecars never open one.

    Example:
    >>> sidecar_path("/data/wiki-128.tfrecord")
    '/data/.wiki-128_tfrecord.summary.json'
    """
    directory, name = os.path.split(os.fspath(path))
    return os.path.join(directory, f".{name.replace('.', '_')}.{kind}.json")


def legacy_sidecar_path(path: str, kind: str = "summary") -> str:
    """The name earlier versions used (`<output>.<kind>.json`), still read."""
    return f"{os.fspath(path)}.{kind}.json"


def _manifests_in(directory: str) -> list[str]:
    pattern = join(directory, "." + "*" + MANIFEST_SUFFIX)
    found = [p for p in glob(pattern) if os.path.basename(p).startswith(".")]
    return found + glob(join(directory, "*" + MANIFEST_SUFFIX))


def _by_directory(files: Iterable[str]) -> dict[str, set]:
    by_dir: dict[str, set] = {}
    for path in files:
        path = os.fspath(path)
        by_dir.setdefault(os.path.dirname(path), set()).add(os.path.basename(path))
    return by_dir


def _set_manifests(directory: str) -> list[tuple[str, dict, list]]:
    """(path, content, the file names it lists) of each set manifest in `directory`."""
    found = []
    for manifest_path in _manifests_in(directory):
        try:
            manifest = json.loads(read_text(manifest_path))
        except (OSError, ValueError):
            continue  # not a manifest this project wrote
        listed = manifest.get("files") if isinstance(manifest, dict) else None
        if isinstance(listed, list) and all(isinstance(n, str) for n in listed):
            found.append((manifest_path, manifest, listed))
    return found


def check_published_sets(files: Iterable[str], flag: str) -> None:
    """`BadFileError` when a file belongs to a set (`publish_together`) that
    is incomplete: its manifest says the writer did not finish, a file the
    manifest lists is gone, or one has another size than the manifest
    recorded (truncated by a copy: a TFRecord cut at a record boundary reads
    as a valid, shorter file). Files no manifest lists (other tools' data,
    or a set copied without its hidden manifest) pass: `unlisted_set_warning`
    says so for those that look like one set.

    Every manifest in the files' directories is read (cheap: a few small JSON
    files); a subset of a complete set (e.g. one shard held out for
    evaluation) passes.
    """
    for directory, names in _by_directory(files).items():
        for manifest_path, manifest, listed in _set_manifests(directory):
            if not names & set(listed):
                continue
            ours = sorted(names & set(listed))
            if manifest.get("complete") is False:
                raise BadFileError(
                    join(directory, ours[0]),
                    f"is one of the {len(listed)} files of an unfinished output (the command "
                    f"that wrote them was stopped before it finished: {manifest_path} says "
                    "so)", fix="run that command again; it replaces the whole set")
            missing = [n for n in listed if not exists(join(directory, n))]
            if missing:
                raise BadFileError(
                    join(directory, ours[0]),
                    f"is one of the {len(listed)} files of one output ({manifest_path}), but "
                    f"{len(missing)} of them are gone (e.g. {join(directory, missing[0])})",
                    fix=f"restore them, or make the whole set again; --{flag} must not read "
                        "part of a set by accident")
            sizes = manifest.get("sizes")
            for name in ours if isinstance(sizes, dict) else ():
                want = sizes.get(name)
                got = size(join(directory, name))
                if isinstance(want, int) and got != want:
                    raise BadFileError(
                        join(directory, name),
                        f"is {got} bytes, but {manifest_path} recorded {want} when it was "
                        "written: it was truncated or changed since",
                        fix="copy it again, or make the set again")


# A file named as one shard of a set: tensorflow/models' `name-00000-of-00003` (and `.tfrecord`
# or any ending after it).
_SHARD_NAME = re.compile(r"^(?P<prefix>.*)-\d+-of-\d+(?P<suffix>.*)$")


def unlisted_sets(files: Iterable[str]) -> list[list[str]]:
    """Groups of `files` that look like the shards of one set and that no
    manifest in their directory lists, so that `check_published_sets` cannot
    tell whether the set is whole: names of the form `name-00000-of-00003`
    (one is enough: the name says there are more), or two or more names that
    are the same but for their numbers (`pretrain-00.tfrecord`,
    `pretrain-01.tfrecord`: what create_pretraining_data is usually given).
    """
    groups = []
    for directory, names in _by_directory(files).items():
        listed = {n for _, _, names_listed in _set_manifests(directory) for n in names_listed}
        alike: dict[str, list] = {}
        for name in sorted(names - listed):
            shard = _SHARD_NAME.match(name)
            key = (f"{shard['prefix']}-*-of-*{shard['suffix']}" if shard
                   else re.sub(r"\d+", "*", name))
            if shard or key != name:
                alike.setdefault(key, []).append(join(directory, name))
        groups += [group for group in alike.values()
                   if len(group) > 1 or _SHARD_NAME.match(os.path.basename(group[0]))]
    return groups


def unlisted_set_warning(files: Iterable[str], flag: str) -> str | None:
    """One warning for `unlisted_sets(files)` (None when there are none):
    what cannot be checked, and how to make it checkable."""
    groups = unlisted_sets(files)
    if not groups:
        return None
    first = groups[0]
    shown = (f"{first[0]} ... {os.path.basename(first[-1])}" if len(first) > 1 else first[0])
    more = f" (and {len(groups) - 1} more such group(s))" if len(groups) > 1 else ""
    return (f"--{flag}: {len(first)} file(s) that look like the shards of one set ({shown}){more} "
            "are listed by no manifest, so whether the set is complete (no shard lost or cut "
            "short) cannot be checked. create_pretraining_data writes the manifest as a hidden "
            f"file beside its first output ({os.path.basename(sidecar_path(first[0]))} for "
            f"{os.path.basename(first[0])}); copy it with the data (`cp dir/*` skips hidden "
            "files: use `cp -a dir/. dest/` or rsync), or remake the set")


def remove_stale_temporaries(directory: str) -> list[str]:
    """Removes the temporaries (`.<name>.tmp-<pid>-*`) of writers that are gone.

    Only local directories, and only names whose process no longer runs on
    this machine. Returns the removed paths.
    """
    if not is_local(directory) or not os.path.isdir(_local(directory)):
        return []
    removed = []
    for name in os.listdir(_local(directory)):
        match = _TEMPORARY.match(name)
        if match and not _process_alive(int(match.group("pid"))):
            path = os.path.join(_local(directory), name)
            remove_tree(path) if os.path.isdir(path) else remove(path)
            removed.append(path)
    return removed


def _process_alive(pid: int) -> bool:
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

# What `expand_paths` never returns: sidecar files that share a data prefix
# (`sidecar_path` names are hidden, so they are skipped as hidden names).
SIDECAR_SUFFIXES = (".json", ".incomplete")
_SHARDS = re.compile(r"^(?P<prefix>.+)@(?P<count>\d+)$")


def glob(pattern: str) -> list[str]:
    """The sorted paths matching one glob (`glob.glob`, or `tf.io.gfile.glob`);
    a literal path gives itself when it exists."""
    if is_local(pattern):
        return sorted(_glob.glob(_local(pattern)))
    return sorted(_gfile().glob(pattern))


def has_magic(pattern: str) -> bool:
    """Whether `pattern` holds glob characters (`*`, `?`, `[`)."""
    return _glob.has_magic(os.fspath(pattern))


def walk_files(directory: str) -> list[str]:
    """Every file under `directory`, recursively, sorted; hidden directories
    are not entered (hidden files are listed: the caller decides)."""
    if is_local(directory):
        files = []
        for root, dirs, names in os.walk(_local(directory)):
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
        return [join(root, name) for root, _, names in _gfile().walk(directory)
                for name in names]
    files, pattern = [], directory
    for _ in range(8):
        pattern += "/*"
        files += [p for p in _gfile().glob(pattern) if isfile(p)]
    return files


def expand_paths(patterns: str | Iterable[str], flag: str, check_sets: bool = True,
                 ) -> list[str]:
    """Comma-separated globs (or a list of them) → the sorted files they name.

    Also takes the sharded form `prefix@N` (files `prefix-00000-of-0000N` ...,
    as tensorflow/models names shards; every one must exist). Directories,
    hidden names (temporaries, sidecars) and legacy sidecars (`*.json`,
    `*.incomplete`) are skipped. Raises `UserError` naming `--flag` when
    nothing is given or a pattern matches no file, and (`check_sets`)
    `BadFileError` for a file of an unfinished set (`check_published_sets`).

    Example:
    >>> expand_paths("/no/such/dir/*.tfrecord", "input_file")
    Traceback (most recent call last):
    ...
    official_bert.errors.UserError: --input_file: no file matches '/no/such/dir/*.tfrecord'
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    patterns = [os.fspath(p).strip() for p in patterns if p and os.fspath(p).strip()]
    if not patterns:
        raise UserError(f"--{flag} is empty: give files or globs, comma-separated")
    files: list[str] = []
    for pattern in patterns:
        shards = _SHARDS.match(pattern)
        if shards:
            count = int(shards.group("count"))
            matches = [f"{shards.group('prefix')}-{i:05d}-of-{count:05d}" for i in range(count)]
            missing = [m for m in matches if not exists(m)]
            if missing:
                raise BadFileError(missing[0], f"does not exist ({len(missing)} of the {count} "
                                   f"shards of --{flag}={pattern} are missing)")
        else:
            matches = glob(pattern)
        matches = [m for m in matches if not isdir(m)
                   and not os.path.basename(m).startswith(".")
                   and not m.endswith(SIDECAR_SUFFIXES)]
        if not matches:
            if not has_magic(pattern) and not exists(pattern):
                raise UserError(f"--{flag}: {pattern} does not exist")
            raise UserError(f"--{flag}: no file matches {pattern!r}")
        files.extend(m for m in matches if m not in files)
    if check_sets:
        check_published_sets(files, flag)
    return files


# === The run lock ===


class RunLock:
    """Exclusive use of a run directory for the life of this process.

    Local directories: an `fcntl.flock` on `<dir>/.official_bert.lock`, which
    the kernel releases when the process ends however it ends (a SIGKILL
    included), so a killed run never leaves a stale lock behind. Other file
    systems (no flock): the lock file's pid and host; a lock of a process that
    is gone from this host is taken over, one from another host must be removed
    by hand. The lock file says who holds it (pid, host, command), and a second
    run into the directory fails at once with `RunDirectoryError` naming them.

    Example:
    >>> import tempfile
    >>> with RunLock(tempfile.mkdtemp()):
    ...     pass
    """

    def __init__(self, directory: str):
        self.directory = os.fspath(directory)
        self.path = join(self.directory, LOCK_FILE)
        self._fd = None

    def _owner(self) -> dict:
        return {"pid": os.getpid(), "host": socket.gethostname(),
                "command": " ".join(sys.argv)[:500]}

    def _describe(self, text: str) -> str:
        try:
            owner = json.loads(text)
            return (f"process {owner.get('pid')} on {owner.get('host')} "
                    f"({owner.get('command', '').strip() or 'unknown command'})")
        except ValueError:
            return "another process"

    def acquire(self) -> "RunLock":
        makedirs(self.directory)
        if is_local(self.directory):
            fd = os.open(_local(self.path), os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                os.close(fd)
                raise RunDirectoryError(
                    f"--output_dir {self.directory} is in use by {self._describe(holder)}; "
                    "wait for it to finish, or choose another --output_dir") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(self._owner()).encode(), 0)
            self._fd = fd
            remove_stale_temporaries(self.directory)
            return self
        if _gfile().exists(self.path):
            with _gfile().GFile(self.path, "r") as f:
                holder = f.read()
            try:
                owner = json.loads(holder)
            except ValueError:
                owner = {}
            same_host = owner.get("host") == socket.gethostname()
            if not (same_host and not _process_alive(int(owner.get("pid", 0)))):
                raise RunDirectoryError(
                    f"--output_dir {self.directory} is in use by {self._describe(holder)}; "
                    f"if that run is gone, delete {self.path}")
        with _gfile().GFile(self.path, "w") as f:
            f.write(json.dumps(self._owner()))
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # no owner any more; the directory's bytes as before
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        elif not is_local(self.directory):
            remove(self.path)

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
