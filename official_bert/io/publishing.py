"""Publishing outputs: the one atomic writer and the one publishing step, and
the record of what the project wrote.

* a reader never sees a half-written file: data is written under a hidden
  temporary name (`staging`), flushed and fsynced, and renamed over the
  destination in one step (`atomic_output`);
* every output is published by one step (`publish_file`, `publish_directory`)
  that follows the output plan in force (`plan`: what the output policy found
  before the work; never over another writer's or the user's file) and records
  what the project published in the directory's hidden ledger (`ledger`),
  so that a rerun may replace its own output;
* a device node or a pipe (`/dev/null`, `/dev/stdout`, a FIFO) is written
  through, never replaced by a regular file (`paths.is_stream`,
  `write_through`).

The staging primitives are called through their module (`staging.rename`), so
that a fault injected there (the fault kit's killed rename) reaches every
publication.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
from typing import Iterator

from official_bert.errors import UserError
from official_bert.io import ledger, staging
from official_bert.io.paths import (identity, is_local, is_stream, isdir, listdir,
                                    local_path, makedirs, open_file, same_path)
from official_bert.io.plan import Claim, OutputPlan, plan_in_force


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
    tmp = staging.temporary_name(path)
    try:
        with staging.open_new(tmp, mode, encoding) as f:
            yield f
            staging.sync(f)
        publish_file(tmp, path, overwrite=overwrite)
    except FileExistsError:
        staging.remove(tmp)
        raise written_meanwhile(path) from None
    except BaseException as e:
        staging.remove(tmp)
        staging.reraise_disk_full(e, path)


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
        staging.reraise_disk_full(e, path)


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


def publish_file(tmp: str, path: str, overwrite: bool = True,
                 plan: OutputPlan | None = None) -> None:
    """Renames the complete temporary file `tmp` to `path`: the one step that
    publishes a file (`atomic_output`, `file_sets.publish_together`).

    An output the plan claims (default: the plan in force) is published as
    its claim says and recorded as the project's (`ledger.record`);
    `FileExistsError` when another writer published it since the claim (the
    caller refuses in one line). An unclaimed path (a run directory's own
    files) is replaced or not as `overwrite` says.
    """
    plan = plan or plan_in_force()
    claim = plan.claim_of(path)
    if claim is None:
        staging.rename(tmp, path, overwrite=overwrite)
        return
    if claim.state == "new" or (claim.state == "ours" and not os.path.lexists(local_path(path))):
        staging.rename(tmp, path, overwrite=False)
    else:
        _replace_unchanged(tmp, path, claim.was if claim.state == "ours" else None)
    ledger.record(path)
    plan.published(path)


def publish_directory(staged: str, target: str, plan: OutputPlan | None = None) -> None:
    """Renames the complete directory `staged` (beside `target`, see
    `staging.make_temporary_dir`) to `target` in one step, and records inside
    it what it holds (`ledger.OUTPUT_LEDGER`), so a rerun knows it as the project's.

    `target` may be absent or an empty directory; a claimed `target` (in
    `plan`, default: the plan in force) that is the project's own earlier
    output ("ours", unchanged) or --overwrite's ("replace") is moved aside and
    removed once the new one is in place. `FileExistsError` when `target`
    holds something else (another writer's output that appeared since the
    claim: of two writers one wins).
    """
    if not is_local(staged):
        if isdir(target) and not listdir(target):
            staging.remove_tree(target)  # an empty directory: replaced, as locally
        staging.rename(staged, target)
        return
    plan = plan or plan_in_force()
    ledger.write(local_path(staged), ledger.listing(local_path(staged)))
    claim = plan.claim_of(target) or Claim("new", None)
    target_path = local_path(target)
    if claim.state != "new" and os.path.lexists(target_path):
        _replace_unchanged(staged, target, claim.was if claim.state == "ours" else None)
    else:
        try:
            os.rename(local_path(staged), target_path)  # onto nothing or an empty directory
        except OSError as e:
            if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise FileExistsError(target) from None
            raise
    plan.published(target)


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
        aside = staging.temporary_name(path)
        if os.path.lexists(path):
            os.rename(path, aside)
        try:
            os.rename(local_path(new), path)
        except OSError:
            if os.path.lexists(aside) and not os.path.lexists(path):
                os.rename(aside, path)
            raise FileExistsError(path) from None
        staging.remove_tree(aside) if os.path.isdir(aside) else staging.remove(aside)
    finally:
        if fd is not None:
            os.close(fd)
