"""The record of what the project wrote: a hidden ledger in each directory it
published into, so that a rerun may replace its own earlier output and
nothing else.

A file's entry is its size and mtime at publication: once someone changes
it, it is theirs. A directory published whole lists every file below it in
its own ledger. The output policy asks `is_published_output` before it lets a
command replace what is there.
"""

from __future__ import annotations

import fcntl
import json
import os

from official_bert.io import staging
from official_bert.io.paths import is_local, local_key


# The hidden file in which the project records the outputs it published in a
# directory (name → size and mtime_ns at publication), so that a rerun may
# replace its own earlier output and nothing else. Inside a directory published
# whole (`publish_directory`) the same file lists every file below it.
OUTPUT_LEDGER = ".official_bert.outputs.json"


def record(path: str) -> None:
    """Records the file `path` in its directory's `OUTPUT_LEDGER` as this
    project's output, as it is now (size, mtime): a rerun may replace it; once
    someone changes it, it is theirs. The ledger is read and rewritten under a
    lock on the directory, so that writers in one directory lose no entry."""
    if not is_local(path):
        return
    directory, name = os.path.split(local_key(path))
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        entries = {n: entry for n, entry in read(directory).items()
                   if os.path.lexists(os.path.join(directory, n))}  # forget what is gone
        entries[name] = _fingerprint(os.path.join(directory, name))
        write(directory, entries)
    finally:
        os.close(fd)


def is_published_output(path: str) -> bool:
    """Whether `path` is an output this project published and nobody changed
    since: a file its directory's ledger lists with its current size and
    mtime, or a directory whose own ledger lists exactly the files below it."""
    if not is_local(path):
        return False
    path = local_key(path)
    if os.path.islink(path) or not os.path.lexists(path):
        return False
    if os.path.isdir(path):
        listed = read(path)
        return bool(listed) and listed == listing(path)
    directory, name = os.path.split(path)
    return read(directory).get(name) == _fingerprint(path)


def is_in_ledger(path: str) -> bool:
    """Whether the ledger of `path`'s directory names it (changed or not)."""
    if not is_local(path):
        return False
    directory, name = os.path.split(local_key(path))
    return name in read(directory)


def _fingerprint(path: str) -> dict:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def listing(directory: str) -> dict:
    """Every file below `directory` but its ledgers (relative path → fingerprint)."""
    files = {}
    for root, _, names in os.walk(directory):
        for name in names:
            if name != OUTPUT_LEDGER:
                full = os.path.join(root, name)
                files[os.path.relpath(full, directory)] = _fingerprint(full)
    return files


def read(directory: str) -> dict:
    """The entries of `directory`'s ledger ({} when there is none or it is damaged: then
    nothing there counts as the project's, the safe side)."""
    try:
        with open(os.path.join(directory, OUTPUT_LEDGER), encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def write(directory: str, entries: dict) -> None:
    """Replaces the ledger of `directory` by `entries`, atomically."""
    path = os.path.join(directory, OUTPUT_LEDGER)
    tmp = staging.temporary_name(path)
    try:
        with staging.open_new(tmp, "w") as f:
            f.write(json.dumps(entries, indent=1, sort_keys=True) + "\n")
            staging.sync(f)
        os.replace(tmp, path)
    except BaseException as e:
        staging.remove(tmp)
        staging.reraise_disk_full(e, path)
