"""The run lock: a run's exclusive use of its `--output_dir`.

`tasks` takes it for a run (`RunDirectory.lock`), `bert download` for its directory; a
second process into the same directory fails at once with
`errors.RunDirectoryError` naming the holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys

from official_bert import io
from official_bert.errors import RunDirectoryError
from official_bert.run_directory.layout import LOCK_FILE


class RunLock:
    """Exclusive use of a run directory for the life of this process.

    Local directories: an `fcntl.flock` on `<dir>/.official_bert.lock`, which
    the kernel releases when the process ends however it ends (a SIGKILL
    included), so a killed run never leaves a stale lock behind. Other file
    systems (no flock): the lock file's pid and host; a lock of a process that
    is gone from this host is taken over, one from another host must be removed
    by hand. The lock file says who holds it (pid, host, command), and a second
    run into the directory fails at once with `RunDirectoryError` naming them.

    `release` (the end of the run, however it ends but a kill) removes the lock
    file, so that no empty file is left in the directory; only while this
    process still holds it, and only the file it locked (never one another
    process made since). A process that opened the file before it was removed
    finds, once it has the lock, that the file is no longer the one at the
    path, and starts over.

    Example:
    >>> import tempfile
    >>> with RunLock(tempfile.mkdtemp()):
    ...     pass
    """

    def __init__(self, directory: str):
        self.directory = os.fspath(directory)
        self.path = io.join(self.directory, LOCK_FILE)
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
        io.makedirs(self.directory)
        if io.is_local(self.directory):
            fd = self._lock_local()
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(self._owner()).encode(), 0)
            self._fd = fd
            io.remove_stale_temporaries(self.directory)
            return self
        if io.gfile().exists(self.path):
            with io.gfile().GFile(self.path, "r") as f:
                holder = f.read()
            try:
                owner = json.loads(holder)
            except ValueError:
                owner = {}
            same_host = owner.get("host") == socket.gethostname()
            if not (same_host and not io.process_alive(int(owner.get("pid", 0)))):
                raise RunDirectoryError(
                    f"--output_dir {self.directory} is in use by {self._describe(holder)}; "
                    f"if that run is gone, delete {self.path}")
        with io.gfile().GFile(self.path, "w") as f:
            f.write(json.dumps(self._owner()))
        return self

    def _lock_local(self) -> int:
        """An open descriptor of the lock file, flock'ed: the file at the path
        now (a holder that released it removed the file it had: locking that
        one would lock nothing)."""
        path = io.local_path(self.path)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, io.new_file_mode())
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                os.close(fd)
                raise RunDirectoryError(
                    f"--output_dir {self.directory} is in use by {self._describe(holder)}; "
                    "wait for it to finish, or choose another --output_dir") from None
            if _same_file(fd, path):
                return fd
            os.close(fd)  # removed (or replaced) since we opened it: open the one there now

    def holder(self) -> str | None:
        """Who holds the lock ("process P on H (command)"), for a reader of the
        run; None when nobody does. Read from the file alone, never by taking
        the lock: a reader holding it, even briefly, would turn a run starting
        then away. A holder of this host is believed while its pid lives (a
        killed run's file names a dead one); another host's while its file says so."""
        try:
            text = io.read_text(self.path) if io.exists(self.path) else ""
            owner = json.loads(text) if text.strip() else None
        except (OSError, ValueError):
            return None
        if not isinstance(owner, dict) or owner.get("pid") == os.getpid():
            return None
        if owner.get("host") == socket.gethostname() and not io.process_alive(
                int(owner.get("pid") or 0)):
            return None
        return self._describe(text)

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # no owner any more
            # Still locked by this process: the file at the path is ours to remove,
            # unless it is another one now (someone removed ours and made a new one).
            if _same_file(self._fd, io.local_path(self.path)):
                try:
                    os.unlink(io.local_path(self.path))
                except OSError:
                    pass  # a read-only directory: the empty file stays
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        elif not io.is_local(self.directory):
            io.remove(self.path)

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _same_file(fd: int, path: str) -> bool:
    """Whether the open `fd` is the file at `path` now."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
