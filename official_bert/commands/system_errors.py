"""Operating-system errors, whoever raised them, as one line that names the path.

An `OSError` (its errno), TensorFlow's file errors (`PermissionDeniedError`,
`NotFoundError` of a file, `FailedPreconditionError` "is a directory",
`UnknownError` with the C library's text) and a library's error that wraps an
operating-system one (safetensors' `SafetensorError` "Os { code: 28, ... }",
h5py's) are the same few problems: `classify` finds which (`PROBLEMS`, by errno)
and the path, and the command boundary (`app.one_line_error`) prints

    error: <path>: <what> — <what to do>

An error that is none of these (another errno, a `NotFoundError` of a
checkpoint variable) is not classified: it is a bug and keeps its traceback.
"""

from __future__ import annotations

import dataclasses
import errno
import re

# errno → (what happened to the path, what to do). The full disk's errnos are
# here too (`errors.DISK_FULL_ERRNOS`): the boundary words them as `DiskFullError`.
PROBLEMS = {
    errno.ENOSPC: ("no space left on device", "free some space and run the same command again"),
    errno.EDQUOT: ("disk quota exceeded", "free some space and run the same command again"),
    errno.EFBIG: ("file too large", "raise the file-size limit (ulimit -f) or write elsewhere"),
    errno.EROFS: ("is on a read-only file system",
                  "choose a path on a writable file system (or remount it read-write)"),
    errno.EACCES: ("permission denied",
                   "choose a path you may use, or change its permissions (ls -ld shows them)"),
    errno.EPERM: ("operation not permitted",
                  "choose a path you may use, or change its permissions (ls -ld shows them)"),
    errno.ENAMETOOLONG: ("the name is too long for the file system",
                         "choose a shorter name (at most 255 bytes for each part of the path)"),
    errno.ENOTDIR: ("a part of the path is a file, not a directory",
                    "check the path: each part before the last must be a directory"),
    errno.EISDIR: ("is a directory", "give the path of a file, not of a directory"),
    errno.ENOENT: ("no such file or directory",
                   "check the path (a file read must stay there until the command ends; the "
                   "directory an output goes to must exist)"),
    errno.ELOOP: ("a loop of symbolic links (too many levels of symbolic links)",
                  "check the path's symbolic links (ls -l shows where each one points)"),
    errno.EMFILE: ("too many open files", "raise the limit (ulimit -n) and run again"),
    errno.EIO: ("input/output error", "check the device (dmesg) and run again"),
    errno.EPIPE: ("broken pipe", "the reader of the output stopped early"),
}

# How the C library words each errno (TensorFlow's and other libraries' messages
# carry the text, not the number).
_TEXTS = {
    errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large", errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
    errno.ENAMETOOLONG: "file name too long", errno.ENOTDIR: "not a directory",
    errno.EISDIR: "is a directory", errno.ENOENT: "no such file or directory",
    errno.ELOOP: "too many levels of symbolic links", errno.EMFILE: "too many open files",
    errno.EIO: "input/output error", errno.EPIPE: "broken pipe",
}

# TensorFlow's error classes that report a file problem without an errno text.
_TENSORFLOW_KINDS = {"PermissionDeniedError": errno.EACCES}

# The libraries whose errors may wrap an operating-system error in their text.
_LIBRARIES = ("tensorflow", "safetensors", "h5py", "keras", "onnx", "tf2onnx")

# A path in a message: absolute, or a URL (gs://, ram://).
_PATH = re.compile(r"(?<![\w/])(/[^\s:;,'\"]+|[a-z]+://[^\s:;,'\"]+)")
# Rust's io::Error as safetensors prints it: "Os { code: 28, kind: StorageFull, ... }".
_RUST_CODE = re.compile(r"Os \{ code: (\d+)")


@dataclasses.dataclass(frozen=True)
class Problem:
    """An operating-system error, classified: its errno, the path ("" when
    unknown), what happened and what to do."""
    errno: int
    path: str
    what: str
    fix: str

    def line(self) -> str:
        return f"error: {self.path or 'a file'}: {self.what} — {self.fix}"


def classify(error: BaseException) -> Problem | None:
    """The `Problem` of `error` when it is an operating-system error (`PROBLEMS`),
    whatever raised it; None otherwise."""
    code = _errno_of(error)
    if code not in PROBLEMS:
        return None
    what, fix = PROBLEMS[code]
    return Problem(code, _path_of(error), what, fix)


def _errno_of(error: BaseException) -> int | None:
    if isinstance(error, OSError) and error.errno is not None:
        return error.errno
    module = type(error).__module__ or ""
    if not (isinstance(error, OSError) or module.startswith(_LIBRARIES)):
        return None
    text = str(error)
    found = _RUST_CODE.search(text)
    if found:
        return int(found.group(1))
    lowered = text.lower()
    for code, words in _TEXTS.items():
        if words in lowered:
            return code
    kind = type(error).__name__
    if kind == "NotFoundError" and _PATH.search(_without_graph_names(text)) and (
            "could not find" in lowered or "no such" in lowered):
        return errno.ENOENT
    return _TENSORFLOW_KINDS.get(kind) if module.startswith("tensorflow") else None


def _without_graph_names(text: str) -> str:
    """TensorFlow's message without the names of functions and ops (not paths)."""
    text = re.sub(r"\{\{function_node [^}]*\}\}", " ", text)
    return re.sub(r"\[Op:[^\]]*\]", " ", text)


def _path_of(error: BaseException) -> str:
    """The path the error is about: `OSError.filename` (and `filename2`, for a
    rename), else the first path in the message; "" when none."""
    if isinstance(error, OSError) and error.filename not in (None, ""):
        names = [error.filename, error.filename2]
        return " → ".join(str(n if not isinstance(n, bytes) else n.decode(errors="replace"))
                          for n in names if n not in (None, ""))
    found = _PATH.search(_without_graph_names(str(error)))
    return found.group(1) if found else ""
