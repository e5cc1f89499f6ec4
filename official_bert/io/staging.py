"""The steps of writing a file safely: a hidden temporary name beside it,
created new, synced, renamed into place without replacing, removed.

* data goes to a hidden temporary name in the destination's directory
  (`.<name>.tmp-<pid>-<random>`, `temporary_name`), shortened to fit NAME_MAX
  whenever the destination's name fits (`paths.fit_name`); the temporaries of
  a writer that was killed are cleared by the next run in the directory
  (`remove_stale_temporaries`);
* files get the user's umask (not `mkstemp`'s 0600), and a temporary file is
  created with O_EXCL, so it never follows a symlink someone left in its place
  (`open_new`);
* a rename refuses to replace in the same step as it moves (`rename`);
* a full disk is reported as such (`errors.DiskFullError`, `reraise_disk_full`).

`publishing` builds the one writer and the one publishing step on these.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil

from official_bert.errors import DiskFullError, is_disk_full
from official_bert.io.paths import (NAME_MAX, exists, fit_name, gfile, is_local, isdir, join,
                                    local_path, makedirs, name_too_long, open_file,
                                    files_below)

# The hidden temporary name of a file being written: `.<name>.tmp-<pid>-<hex>`.
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]+$")


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


def remove(path: str) -> None:
    """Removes a file if it is there (a name longer than NAME_MAX names nothing)."""
    if is_local(path):
        if name_too_long(local_path(path)) is None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(local_path(path))
    elif gfile().exists(path):
        gfile().remove(path)


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
        for path in files_below(source):
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
