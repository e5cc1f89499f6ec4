"""Operating-system errors, whoever raised them, are one line naming the path
(`official_bert/commands/system_errors.py`, printed by `commands/app.py`):
`error: <path>: <what> — <what to do>`; a bug keeps its traceback."""

from __future__ import annotations

import errno
import subprocess
import sys

import pytest

from support import processes

from official_bert import io, outputs
from official_bert.commands import app, system_errors


def tensorflow_error(kind: str, message: str):
    import tensorflow as tf

    return getattr(tf.errors, kind)(None, None, message)


class SafetensorError(Exception):
    """Stands for safetensors' error type (same module name, same wording)."""


SafetensorError.__module__ = "safetensors_rust"


# (the error, the errno it is, the path it names); built lazily (TensorFlow's types).
HAND_CASES = {
    "read-only": (lambda: OSError(errno.EROFS, "Read-only file system", "/ro/vocab.txt"),
                  errno.EROFS, "/ro/vocab.txt"),
    "permission": (lambda: PermissionError(errno.EACCES, "Permission denied", "/etc/x.txt"),
                   errno.EACCES, "/etc/x.txt"),
    "not permitted": (lambda: OSError(errno.EPERM, "Operation not permitted", "/sys/x"),
                      errno.EPERM, "/sys/x"),
    "name too long": (lambda: OSError(errno.ENAMETOOLONG, "File name too long", "/t/" + "a" * 300),
                      errno.ENAMETOOLONG, "/t/" + "a" * 300),
    "not a directory": (lambda: NotADirectoryError(errno.ENOTDIR, "Not a directory", "/f/x"),
                        errno.ENOTDIR, "/f/x"),
    "is a directory": (lambda: IsADirectoryError(errno.EISDIR, "Is a directory", "/d"),
                       errno.EISDIR, "/d"),
    "no such file": (lambda: FileNotFoundError(errno.ENOENT, "No such file", "/none.txt"),
                     errno.ENOENT, "/none.txt"),
    "rename": (lambda: OSError(errno.EACCES, "Permission denied", "/a/.x.tmp", None, "/b/x"),
               errno.EACCES, "/a/.x.tmp → /b/x"),
    "tf permission": (lambda: tensorflow_error("PermissionDeniedError",
                                               "/runs/x/ckpt-1.index; Permission denied"),
                      errno.EACCES, "/runs/x/ckpt-1.index"),
    "tf not found": (lambda: tensorflow_error("NotFoundError",
                                              "/data/x.tfrecord; No such file or directory"),
                     errno.ENOENT, "/data/x.tfrecord"),
    "tf is a directory": (lambda: tensorflow_error("FailedPreconditionError",
                                                   "/runs/out; Is a directory"),
                          errno.EISDIR, "/runs/out"),
    "tf unknown read-only": (lambda: tensorflow_error(
        "UnknownError", "{{function_node __wrapped__WriteFile}} /ro/a.txt; Read-only file system "
        "[Op:WriteFile]"), errno.EROFS, "/ro/a.txt"),
    "tf disk full": (lambda: tensorflow_error("ResourceExhaustedError",
                                              "/runs/x/ckpt.tempstate1; No space left on device"),
                     errno.ENOSPC, "/runs/x/ckpt.tempstate1"),
    "safetensors full disk": (lambda: SafetensorError(
        'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space '
        'left on device" })'), errno.ENOSPC, ""),
    "h5py text": (lambda: OSError("Unable to create file (unable to open file: name = "
                                  "'/ro/w.h5', errno = 30, error message = 'Read-only file "
                                  "system')"), errno.EROFS, "/ro/w.h5"),
}


@pytest.mark.parametrize("case", list(HAND_CASES))
def test_each_operating_system_error_is_classified_with_its_path(case):
    make, code, path = HAND_CASES[case]
    problem = system_errors.classify(make())
    assert problem is not None and problem.errno == code and problem.path == path, problem
    line = app.one_line_error(make())
    assert app.is_one_line_error(make()) and line.startswith("error: ") and "\n" not in line
    assert path in line


@pytest.mark.parametrize("make", [
    lambda: ValueError("is a directory"),  # not raised by file I/O
    lambda: OSError(errno.EBADF, "Bad file descriptor"),  # a bug, not the user's path
    lambda: tensorflow_error("NotFoundError", "Key bert/encoder/x not found in checkpoint"),
    lambda: KeyError("/some/path: Permission denied"),
])
def test_what_is_not_an_operating_system_error_keeps_its_traceback(make):
    assert system_errors.classify(make()) is None
    assert not app.is_one_line_error(make())


def test_the_line_says_what_happened_and_what_to_do():
    line = app.one_line_error(OSError(errno.EROFS, "Read-only file system", "/ro/vocab.txt"))
    assert line == ("error: /ro/vocab.txt: is on a read-only file system — choose a path on a "
                    "writable file system (or remount it read-write)")


# A command boundary around real file operations (not hand-made exceptions).
SCRIPT = r"""
import os, sys
from official_bert.commands import app

def main(argv):
    kind, where = sys.argv[1], sys.argv[2]
    if kind == "directory":
        open(where, "w")
    elif kind == "long_name":
        open(os.path.join(where, "n" * 300), "w")
    elif kind == "not_a_directory":
        open(os.path.join(where, "x.txt"), "w")
    elif kind == "tensorflow":
        import tensorflow as tf
        tf.io.gfile.GFile(os.path.join(where, "no", "such", "x.txt")).read()
    elif kind == "pipe":
        for i in range(200000):
            print("line", i)
    elif kind.startswith("no_stdout"):  # a file opened now must not take descriptor 1
        with open(where, "w") as f:
            print("printed to stdout")
            os.write(1, b"written to descriptor 1\n")
            f.write("the file's own text\n")

if sys.argv[1].endswith("quieted"):  # as predict does when it is imported
    app.quiet_tensorflow()
app.run(main, sys.argv[:1])
"""


@pytest.mark.parametrize("kind, says", [
    ("directory", "is a directory — give the path of a file"),
    ("long_name", "the name is too long for the file system — choose a shorter name"),
    ("not_a_directory", "a part of the path is a file, not a directory"),
    ("tensorflow", "no such file or directory"),
])
def test_a_real_operating_system_error_is_one_line_naming_the_path(tmp_path, kind, says):
    where = tmp_path
    if kind == "not_a_directory":
        where = tmp_path / "a_file"
        where.write_text("")
    result = processes.run([sys.executable, "-c", SCRIPT, kind, str(where)],
                           capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and says in lines[0] and str(tmp_path) in lines[0], result.stderr


def test_a_closed_standard_output_ends_the_command_quietly(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    result = subprocess.run(
        f"{sys.executable} {script} pipe . | head -1; echo status ${{PIPESTATUS[0]}} >&2",
        shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=120)
    assert result.stdout == "line 0\n"
    assert "Traceback" not in result.stderr and "error:" not in result.stderr, result.stderr
    assert "status 141" in result.stderr


@pytest.mark.parametrize("kind", ["no_stdout", "no_stdout_quieted"])
def test_a_command_run_without_a_standard_output_works_and_its_files_stay_its_own(tmp_path,
                                                                                 kind):
    """`bert ... >&-`: descriptor 1 is not open, so Python's sys.stdout is None and the
    next file opened would take descriptor 1 (what goes to stdout would land in it). The
    boundary opens /dev/null there first (before its stderr filter's pipe, which predict
    starts when imported, can take it): the command works, its file holds its own text."""
    script, out = tmp_path / "script.py", tmp_path / "out.txt"
    script.write_text(SCRIPT)
    result = subprocess.run(f"{sys.executable} {script} {kind} {out} >&-", shell=True,
                            executable="/bin/bash", capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "error:" not in result.stderr, result.stderr
    assert out.read_text() == "the file's own text\n"


def test_an_error_that_names_no_path_names_the_commands_outputs():
    """TensorFlow's SavedModel writer says "File too large" and no path: the
    line names the running command's outputs instead of "a file"."""
    import tensorflow as tf

    error = tf.errors.UnknownError(None, None, "File too large")
    assert "(writing a file: file too large)" in app.one_line_error(error)
    plan = io.OutputPlan()  # the job's, as the output policy fills it
    outputs.check_command_outputs({"output_dir": "run_dir", "export_dir": "export_dir",
                                   "vocab_out": "file"},
                                  {"output_dir": "/runs/hub", "export_dir": "/srv/export"}, plan)
    line = app.one_line_error(error, plan.named)
    assert "(writing a file under --output_dir /runs/hub or --export_dir /srv/export: " in line
    assert "\n" not in line
