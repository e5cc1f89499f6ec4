"""Sets of files: the files of one output, published together, and the flag
patterns that name data files.

* a set of files (the shards of one output) is published as a unit:
  every member is written under its temporary name first, a manifest marked
  incomplete is written, then all are renamed, and the manifest is rewritten
  complete last (`publish_together`); readers refuse a set whose manifest is
  incomplete or names a file that is gone (`check_published_sets`, called by
  `expand_paths`). Sidecar files (manifests, stats) have hidden names that no
  data pattern matches (`sidecar_path`);
* path patterns of a flag are expanded in one place: `expand_paths`
  (comma-separated globs and `prefix@N` shards of data files); one glob is
  `io.glob`.

Every file goes through `official_bert.io` (atomic writes, any file system).
"""

from __future__ import annotations

import json
import os
import re
from typing import Iterable

from absl import logging

from official_bert import io
from official_bert.errors import BadFileError, UserError


# === Sidecar files ===


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
    budget = io.NAME_MAX - len(f"..{kind}.json")  # a long output name's sidecar still fits
    return os.path.join(directory, f".{io.fit_name(name.replace('.', '_'), budget)}.{kind}.json")


def legacy_sidecar_path(path: str, kind: str = "summary") -> str:
    """The name earlier versions used (`<output>.<kind>.json`), still read."""
    return f"{os.fspath(path)}.{kind}.json"


# === Publishing a set ===


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
    plan = io.plan_in_force()
    taken = [final for final in staged if not plan.holds(final)]
    if taken:  # another writer published it since the check: its manifest is left alone
        raise io.written_meanwhile(taken[0])
    entries = None
    if manifest_path:
        folder = os.path.dirname(os.fspath(manifest_path))
        entries = dict(manifest or {})
        entries["files"] = sorted(_relative(f, folder) for f in staged)
        entries["sizes"] = {_relative(f, folder): io.size(tmp) for f, tmp in staged.items()}
        entries["complete"] = False
        io.atomic_write(manifest_path, json.dumps(entries, indent=2, sort_keys=True) + "\n")
    for final, tmp in staged.items():
        try:
            io.publish_file(tmp, final, overwrite=True, plan=plan)
        except FileExistsError:
            raise io.written_meanwhile(final) from None
    if manifest_path:
        entries["complete"] = True
        io.atomic_write(manifest_path, json.dumps(entries, indent=2, sort_keys=True) + "\n")


def _relative(path: str, folder: str) -> str:
    path = os.fspath(path)
    if os.path.dirname(path) == folder:
        return os.path.basename(path)
    if io.is_local(path) and io.is_local(folder):
        return os.path.relpath(io.local_path(path), io.local_path(folder) or ".")
    return path  # another file system: the full path


# === Checking a set ===


def _manifests_in(directory: str) -> list[str]:
    pattern = io.join(directory, "." + "*" + MANIFEST_SUFFIX)
    found = [p for p in io.glob(pattern) if os.path.basename(p).startswith(".")]
    return found + io.glob(io.join(directory, "*" + MANIFEST_SUFFIX))


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
            manifest = json.loads(io.read_text(manifest_path))
        except (OSError, ValueError):
            continue  # not a manifest this project wrote
        listed = manifest.get("files") if isinstance(manifest, dict) else None
        if isinstance(listed, list) and all(isinstance(n, str) for n in listed):
            found.append((manifest_path, manifest, listed))
    return found


def is_listed_member(path: str) -> bool:
    """Whether a set's manifest in `path`'s directory lists it with its
    current size: a file this project published (`publish_together`) and
    nobody has cut or rewritten to another size since. An incomplete manifest
    counts too: it is written before the first rename, so a member in place
    beside it is one a killed writer published (the same command replaces it)."""
    if not io.isfile(path):
        return False
    directory, name = os.path.split(os.fspath(path))
    for _, manifest, listed in _set_manifests(directory):
        sizes = manifest.get("sizes")
        if (name in listed and isinstance(sizes, dict)
                and sizes.get(name) == io.size(path)):
            return True
    return False


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
                    io.join(directory, ours[0]),
                    f"is one of the {len(listed)} files of an unfinished output (the command "
                    f"that wrote them was stopped before it finished: {manifest_path} says "
                    "so)", fix="run that command again; it replaces the whole set")
            missing = [n for n in listed if not io.exists(io.join(directory, n))]
            if missing:
                raise BadFileError(
                    io.join(directory, ours[0]),
                    f"is one of the {len(listed)} files of one output ({manifest_path}), but "
                    f"{len(missing)} of them are gone (e.g. {io.join(directory, missing[0])})",
                    fix=f"restore them, or make the whole set again; --{flag} must not read "
                        "part of a set by accident")
            sizes = manifest.get("sizes")
            for name in ours if isinstance(sizes, dict) else ():
                want = sizes.get(name)
                got = io.size(io.join(directory, name))
                if isinstance(want, int) and got != want:
                    raise BadFileError(
                        io.join(directory, name),
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
                alike.setdefault(key, []).append(io.join(directory, name))
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


# === Path patterns of a flag ===


# What `expand_paths` never returns: sidecar files that share a data prefix
# (`sidecar_path` names are hidden, so they are skipped as hidden names).
SIDECAR_SUFFIXES = (".json", ".incomplete")
_SHARDS = re.compile(r"^(?P<prefix>.+)@(?P<count>\d+)$")


def expand_paths(patterns: str | Iterable[str], flag: str, check_sets: bool = True,
                 ) -> list[str]:
    """Comma-separated globs (or a list of them) → the sorted files they name.

    Also takes the sharded form `prefix@N` (files `prefix-00000-of-0000N` ...,
    as tensorflow/models names shards; every one must exist). A file's own
    name comes first: a pattern that is the name of a file is that file (its
    `[1]` or `*` are not glob syntax; when the glob would match other files,
    a warning says which was used), and commas that are part of a file's name
    do not split it. Directories, hidden names (temporaries, sidecars) and
    legacy sidecars (`*.json`, `*.incomplete`) are skipped. Logs the files
    (the first few by name). Raises `UserError` naming `--flag` when nothing
    is given, a pattern is a directory or matches no file, and (`check_sets`)
    `BadFileError` for a file of an unfinished set (`check_published_sets`).

    Example:
    >>> expand_paths("/no/such/dir/*.tfrecord", "input_file")
    Traceback (most recent call last):
    ...
    official_bert.errors.UserError: --input_file: no file matches '/no/such/dir/*.tfrecord'
    """
    parts = patterns.split(",") if isinstance(patterns, str) else list(patterns)
    patterns = [p.strip() for p in _join_comma_names([os.fspath(p) for p in parts if p])
                if p.strip()]
    if not patterns:
        raise UserError(f"--{flag} is empty: give files or globs, comma-separated")
    files: list[str] = []
    for pattern in patterns:
        files.extend(m for m in _files_of(pattern, flag) if m not in files)
    if check_sets:
        check_published_sets(files, flag)
    _log_once(f"--{flag}: {len(files)} file(s): {_first_names(files)}")
    return files


_LOGGED: set[str] = set()


def _log_once(line: str, level: int = logging.INFO) -> None:
    """Logs `line` the first time: a run expands one flag at several stages
    (its checks, the task, the input pipeline), and says what it read once."""
    if line not in _LOGGED:
        _LOGGED.add(line)
        logging.log(level, "%s", line)


def names_of(value: str) -> list[str]:
    """The names in a flag's comma-separated `value` as `expand_paths` reads
    them (a comma in an existing file's name does not split it), stripped, and
    whether each is a pattern (a glob, or `prefix@N` shards) rather than a path:
    [(name, is_pattern)]."""
    names = [p.strip() for p in _join_comma_names(value.split(",")) if p.strip()]
    return [(name, io.has_magic(name) or (bool(_SHARDS.match(name)) and not io.exists(name)))
            for name in names]


def _join_comma_names(parts: list[str]) -> list[str]:
    """`parts` (a flag's value split at its commas) with the runs of parts that
    together, commas restored, are the name of an existing file joined again:
    a comma in a file's name does not split it."""
    joined, start = [], 0
    while start < len(parts):
        end = start + 1
        # A part that is neither a file nor a glob may begin a name with commas:
        # the longest run from it that names a file.
        if not _is_file(parts[start]) and not io.has_magic(parts[start]):
            end = next((stop for stop in range(len(parts), start + 1, -1)
                        if _is_file(",".join(parts[start:stop]))), end)
        joined.append(",".join(parts[start:end]))
        start = end
    return joined


def _is_file(path: str) -> bool:
    path = path.strip()
    return bool(path) and io.isfile(path)


def _files_of(pattern: str, flag: str) -> list[str]:
    """The data files of one pattern: the file of that name when there is one,
    else its `prefix@N` shards or its glob's matches."""
    if io.isfile(pattern):
        if io.has_magic(pattern):
            _warn_if_glob_differs(pattern, flag)
        return [pattern]
    if io.isdir(pattern):
        raise UserError(f"--{flag}: {pattern} is a directory: give the files in it, by name or "
                        f"with a glob such as {os.path.join(pattern, '*')} (comma-separated)")
    shards = _SHARDS.match(pattern)
    if shards:
        count = int(shards.group("count"))
        matches = [f"{shards.group('prefix')}-{i:05d}-of-{count:05d}" for i in range(count)]
        missing = [m for m in matches if not io.exists(m)]
        if missing:
            raise BadFileError(missing[0], f"{io.missing(missing[0])} ({len(missing)} of the "
                               f"{count} shards of --{flag}={pattern} are missing)")
    else:
        matches = io.glob(pattern)
    matches = _data_files(matches)
    if not matches:
        if not io.has_magic(pattern) and not io.exists(pattern):
            raise UserError(f"--{flag}: {pattern} {io.missing(pattern)}")
        raise UserError(f"--{flag}: no file matches {pattern!r}")
    return matches


def _data_files(paths: list[str]) -> list[str]:
    """`paths` without directories, hidden names and sidecars."""
    return [p for p in paths if not io.isdir(p) and not os.path.basename(p).startswith(".")
            and not p.endswith(SIDECAR_SUFFIXES)]


def _warn_if_glob_differs(pattern: str, flag: str) -> None:
    """Says so when `pattern`, a file's name with glob characters in it, would
    match other files as a glob: the file of that name is what is read."""
    others = [m for m in _data_files(io.glob(pattern)) if m != pattern]
    if others:
        _log_once(f"--{flag}: {pattern} is read as the file of that name; as a glob it would "
                  f"match {_first_names(others)} instead (to read those, name them)",
                  logging.WARNING)


def _first_names(paths: list[str], shown: int = 3) -> str:
    """The first `shown` of `paths`, and how many more."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more
