"""Fetching the files of `bert download`'s datasets and publishing their directories.

`Downloader` gets each file of a dataset (`datasets.REMOTES`) from its
official address, a mirror (`--base_url`) or a local directory
(`--source_dir`), resumably (HTTP Range into `<output_dir>/downloads/<name>.part`,
retried), verifies its size and pinned sha256 before anything is unpacked,
unpacks it into a hidden directory beside the destination (`datasets.DATASETS`)
and renames that into place, so a dataset directory exists complete or not at
all. What the command does for the user, and its flags, are in
`official_bert/commands/download.py`.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
import zipfile
from typing import Dict, Optional, Sequence, Tuple

from data_prep.configs import DOWNLOADS, DownloadOptions
from data_prep.datasets import DATASETS, GROUPS, REMOTES, Dataset, Remote, load_manifest
from official_bert import io
from official_bert.run_directory.lock import RunLock
from official_bert.errors import BadFileError, UserError

INFO_FILE = ".download.json"  # in each dataset directory: what it was made from
CHUNK = 1 << 16


# === Fetching ===


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} GB"


class Progress:
    """Prints `name: done of total (p%) at speed, t left` per 10% or every `seconds`."""

    def __init__(self, name: str, total: Optional[int], start: int, seconds: float, out):
        self.name, self.total, self.seconds, self.out = name, total, seconds, out
        self.start_bytes, self.done = start, start
        self.t0 = self.last = time.monotonic()
        self.next_tenth = (start * 10 // total + 1) if total else None

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.t0, 1e-6)
        speed = (self.done - self.start_bytes) / elapsed
        text = f"  {self.name}: {_human(self.done)}"
        if self.total:
            text += f" of {_human(self.total)} ({100 * self.done // self.total}%)"
        text += f" at {_human(speed)}/s"
        if self.total and speed > 0 and self.done < self.total:
            text += f", {(self.total - self.done) / speed:.0f} s left"
        return text

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        tenth = self.done * 10 // self.total if self.total else None
        if (tenth is not None and tenth >= self.next_tenth) or now - self.last >= self.seconds:
            print(self.line(), file=self.out, flush=True)
            self.last = now
            if tenth is not None:
                self.next_tenth = tenth + 1


class _Interrupted(Exception):
    """The connection ended before the whole file came."""


def _digest(path: str, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fetch_once(url: str, part: str, remote: Remote, timeout: float, progress_seconds: float,
                out) -> None:
    """One HTTP request: appends to `part` from its current size (Range)."""
    have = os.path.getsize(part) if os.path.exists(part) else 0
    headers = {"User-Agent": "official_bert-download/1.0", "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing after the bytes we have: the file is whole
            return
        raise
    with response:
        status = getattr(response, "status", 200)
        total = remote.size
        length = response.headers.get("Content-Length")
        if have and status == 206:
            match = re.match(r"bytes (\d+)-(\d+)/(\d+|\*)",
                             response.headers.get("Content-Range", ""))
            if not match or int(match.group(1)) != have:
                print(f"  {remote.name}: the server resumed at the wrong place; starting over",
                      file=out, flush=True)
                os.remove(part)
                raise _Interrupted("bad Content-Range")
            if match.group(3) != "*":
                total = total or int(match.group(3))
            print(f"  {remote.name}: resuming at {_human(have)}", file=out, flush=True)
            mode = "ab"
        else:
            if have:
                print(f"  {remote.name}: the server does not resume (HTTP {status}); starting "
                      "over", file=out, flush=True)
            have, mode = 0, "wb"
            if total is None and length is not None:
                total = int(length)
        expected_end = have + int(length) if length is not None else total
        progress = Progress(remote.name, total, have, progress_seconds, out)
        with io.open_file(part, mode) as f:
            while True:
                block = response.read(CHUNK)
                if not block:
                    break
                f.write(block)
                progress.update(len(block))
            io.sync(f)
        if expected_end is not None and progress.done < expected_end:
            raise _Interrupted(f"the connection closed at {_human(progress.done)} of "
                               f"{_human(expected_end)}")
        print(progress.line().replace(f"  {remote.name}:", f"  {remote.name}: done,"),
              file=out, flush=True)


def fetch(url: str, part: str, remote: Remote, retries: int = 5, timeout: float = 60.0,
          progress_seconds: float = 5.0, out=sys.stderr, wait: float = 1.0) -> None:
    """Downloads `url` into `part` (resuming it), retrying a dropped connection."""
    attempt = 0
    while True:
        try:
            _fetch_once(url, part, remote, timeout, progress_seconds, out)
            return
        except urllib.error.HTTPError as e:
            if e.code < 500 and e.code != 429:
                raise UserError(f"cannot download {remote.name} from {url}: HTTP {e.code} "
                                f"{e.reason}; use --base_url (a mirror) or --source_dir "
                                "(a directory with the file)") from None
            reason = f"HTTP {e.code} {e.reason}"
        except (_Interrupted, urllib.error.URLError, http.client.HTTPException, OSError) as e:
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
                io.reraise_disk_full(e, part)
            reason = str(getattr(e, "reason", None) or e) or type(e).__name__
        attempt += 1
        have = os.path.getsize(part) if os.path.exists(part) else 0
        if attempt > retries:
            raise UserError(
                f"downloading {remote.name} from {url} stopped at {_human(have)} ({reason}); "
                f"run the same command again to resume from there"
                + ("" if retries else " (or allow retries with --retries)")) from None
        delay = min(wait * 2 ** (attempt - 1), 30.0)
        print(f"  {remote.name}: {reason}; retrying from {_human(have)} in {delay:.1f} s "
              f"({attempt} of {retries})", file=out, flush=True)
        time.sleep(delay)


def _check_format(path: str, name: str) -> None:
    """What can be checked without a digest: the file parses as its kind."""
    extension = os.path.splitext(name)[1]
    try:
        if extension == ".zip":
            if not zipfile.is_zipfile(path):
                raise ValueError("not a zip archive")
        elif extension == ".json":
            with open(path, encoding="utf-8") as f:
                json.load(f)
        elif extension == ".py":
            with open(path, encoding="utf-8") as f:
                compile(f.read(), name, "exec")
        else:
            with open(path, encoding="utf-8") as f:
                for _ in f:
                    pass
    except (ValueError, SyntaxError, UnicodeDecodeError) as e:
        raise ValueError(f"is not a valid {extension or 'text'} file ({e})") from None


def verify(path: str, remote: Remote) -> list:
    """Raises `ValueError` (what is wrong) unless `path` is `remote`'s file;
    returns notes for the output (e.g. that the hash is not pinned)."""
    size = os.path.getsize(path)
    if remote.size is not None and size != remote.size:
        raise ValueError(f"has {size} bytes, not the {remote.size} of the pinned file")
    if remote.sha256 is not None:
        got = _digest(path, "sha256")
        if got != remote.sha256:
            raise ValueError(f"has sha256 {got}, not the pinned {remote.sha256}")
        return []
    notes = [f"sha256 not pinned yet ({_digest(path, 'sha256')}, {size} bytes)"]
    if remote.md5 is not None:
        got = _digest(path, "md5")
        if got != remote.md5:
            raise ValueError(f"has md5 {got}, not the pinned {remote.md5}")
        notes.append("md5 matches")
    _check_format(path, remote.name)
    notes.append("format checked")
    return notes


# === Downloading ===


class Downloader:
    """Gets the files of datasets and publishes each dataset directory atomically."""

    def __init__(self, options: DownloadOptions, out=sys.stderr):
        self.options, self.out = options, out
        self.remotes, self.manifest_base = load_manifest(options.manifest)
        self.output_dir = os.path.abspath(os.path.expanduser(options.output_dir))
        self.downloads = os.path.join(self.output_dir, DOWNLOADS)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def url_of(self, remote: Remote) -> str:
        base = self.options.base_url or (None if remote.url != REMOTES[remote.name].url
                                         else self.manifest_base)
        return base.rstrip("/") + "/" + remote.name if base else remote.url

    def _from_source_dir(self, remote: Remote) -> Tuple[str, list]:
        source = os.path.expanduser(self.options.source_dir)
        candidates = [os.path.join(source, remote.name),
                      os.path.join(source, os.path.basename(remote.name))]
        path = next((p for p in candidates if os.path.isfile(p)), None)
        if path is None:
            raise UserError(f"--source_dir {source} has no {remote.name} (nor "
                            f"{os.path.basename(remote.name)}); get it from {remote.url}")
        try:
            notes = verify(path, remote)
        except ValueError as e:
            raise BadFileError(path, str(e), fix=f"it is not {remote.name} as pinned (from "
                               f"{remote.url}); replace it") from None
        self.say(f"  {remote.name}: {path}, verified" + "".join(f"; {n}" for n in notes))
        return path, notes

    def get(self, name: str) -> Tuple[str, list, bool]:
        """The local path of remote `name` (verified), its notes, and whether it
        is a download of ours (deleted after unpacking unless --keep_archives)."""
        remote = self.remotes[name]
        if self.options.source_dir:
            path, notes = self._from_source_dir(remote)
            return path, notes, False
        final = os.path.join(self.downloads, name)
        part = final + ".part"
        if os.path.exists(final):  # kept by an earlier run
            try:
                notes = verify(final, remote)
                self.say(f"  {name}: already downloaded ({final})")
                return final, notes, True
            except ValueError as e:
                self.say(f"  {name}: the kept copy {e}; downloading it again")
                io.remove(final)
        io.makedirs(os.path.dirname(final))
        url = self.url_of(remote)
        self.say(f"  {name}: {url}" + (f" ({_human(remote.size)})" if remote.size else ""))
        fetch(url, part, remote, self.options.retries, self.options.timeout,
              self.options.progress_seconds, self.out, self.options.retry_wait)
        try:
            notes = verify(part, remote)
        except ValueError as e:
            io.remove(part)
            raise UserError(f"{name} from {url} {e}: the download is corrupt (or the file "
                            "changed at its source); it was deleted, nothing was unpacked") \
                from None
        io.rename(part, final, overwrite=True)
        self.say(f"  {name}: verified" + (f" (sha256 {remote.sha256[:16]}...)" if remote.sha256
                                          else "".join(f"; {n}" for n in notes)))
        return final, notes, True

    def dataset(self, dataset: Dataset) -> str:
        destination = os.path.join(self.output_dir, dataset.name)
        if os.path.exists(destination):
            self.say(f"{dataset.name}: already in {destination} (delete it to download again)")
            return destination
        self.say(f"{dataset.name}: {dataset.what}")
        files, notes, ours = {}, {}, []
        for name in dataset.files:
            files[name], notes[name], mine = self.get(name)
            if mine:
                ours.append(files[name])
        parent = os.path.dirname(destination)
        io.makedirs(parent)
        io.remove_stale_temporaries(parent)
        staging = io.make_temporary_dir(parent, os.path.basename(destination))
        try:
            dataset.unpack(files, staging)
            missing = [f for f in dataset.expect if not os.path.isfile(os.path.join(staging, f))]
            if missing:
                raise BadFileError(files[dataset.files[0]], f"unpacked without "
                                   f"{', '.join(missing)}", fix="is it the right file?")
            info = {"dataset": dataset.name, "files": [
                {"name": n, "url": self.url_of(self.remotes[n]) if not self.options.source_dir
                 else files[n], "sha256": self.remotes[n].sha256, "size": self.remotes[n].size,
                 "notes": notes[n]} for n in dataset.files]}
            io.atomic_write(os.path.join(staging, INFO_FILE), json.dumps(info, indent=2) + "\n")
            io.rename(staging, destination)
        except BaseException:
            io.remove_tree(staging)
            raise
        if not self.options.keep_archives:
            for path in ours:
                io.remove(path)
        unpinned = [n for n in dataset.files if self.remotes[n].sha256 is None]
        self.say(f"{dataset.name}: ready in {destination}" + (
            f" (sha256 not pinned yet for {', '.join(unpinned)}: size, md5 and format were "
            "checked)" if unpinned else ""))
        return destination

    def run(self, datasets: Sequence[Dataset]) -> list:
        # The flag as given: `self.output_dir` went through abspath, which makes
        # "gs://b/x" the local "<cwd>/gs:/b/x". Local only, because a download
        # resumes by appending to a `.part` file and unpacks with zipfile/tarfile.
        if not io.is_local(self.options.output_dir):
            raise UserError(f"--output_dir {self.options.output_dir}: downloads go to a local "
                            "directory (copy the result to other storage afterwards)")
        if self.options.source_dir and not os.path.isdir(
                os.path.expanduser(self.options.source_dir)):
            raise UserError(f"--source_dir {self.options.source_dir} is not a directory")
        if self.options.source_dir:  # its <group>/ directories would pass for unpacked datasets
            io.refuse_output_over_input(
                {"--output_dir": self.output_dir},
                {"source_dir": os.path.expanduser(self.options.source_dir)})
        io.check_writable(self.output_dir, "--output_dir")
        io.makedirs(self.output_dir)
        with RunLock(self.output_dir):
            return [self.dataset(d) for d in datasets]


def listing(remotes: Dict[str, Remote]) -> str:
    lines = []
    for dataset in DATASETS.values():
        lines.append(f"{dataset.name}: {dataset.what}")
        for name in dataset.files:
            r = remotes[name]
            size = _human(r.size) if r.size else "size unknown"
            pin = f"sha256 {r.sha256}" if r.sha256 else (
                f"sha256 NOT PINNED YET (md5 {r.md5})" if r.md5 else "sha256 NOT PINNED YET")
            lines.append(f"    {name}  {size}  {pin}\n        from {r.url}")
    lines.append("groups: " + ", ".join(f"{g} = {' '.join(m)}" for g, m in GROUPS.items()))
    return "\n".join(lines)
