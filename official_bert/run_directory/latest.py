"""Which checkpoints a run directory holds, and reading its latest one while it trains.

TensorFlow's `checkpoint` state file lists a directory's checkpoints (oldest
first; the last is the latest). Only this module reads or writes it:
`listed_checkpoints`, `latest_checkpoint` (the newest complete one: not
`tf.train.latest_checkpoint`, which gives up when the newest one's files are
gone) and `write_state_file`.

A command that reads a run directory (predict, export-encoder, export-google,
--init_checkpoint, --teacher) may do so while the run trains. `read_latest`
reads the latest complete checkpoint, names its step in the log and says when
the run is still training (another process holds its lock). A training run
rotates its checkpoints (--keep_checkpoint_max), and a command reads its
checkpoint more than once (its variables, then its weights; an export copies
it; a teacher is read as the student trains), so the chosen checkpoint is held
(`hold`): each of its files is opened at once and read through that open
descriptor for as long as the command runs, so a rotation that deletes it
deletes nothing the command still reads. One deleted between being chosen and
being opened is not damaged: the newest is chosen instead. Where files cannot
be held so (an object store, a system without /proc/self/fd), a checkpoint
rotated away while read is read again as the newest, once.
"""

from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import tempfile

import tensorflow as tf
from absl import logging

from official_bert import io
from official_bert.errors import CheckpointError, first_line, show_path_as
from official_bert.run_directory import layout
from official_bert.run_directory.lock import RunLock

_STEP = re.compile(rf"^(?:{layout.CHECKPOINT_NAME}-|{layout.BEST_CHECKPOINT})(\d+)$")


def listed_checkpoints(directory) -> list:
    """The checkpoint prefixes the state file of `directory` lists, oldest
    first ([] without one)."""
    state_file = io.join(directory, layout.CHECKPOINT_INDEX)
    if not io.exists(state_file):
        return []
    try:
        state = tf.train.get_checkpoint_state(directory)
        if state is None:  # TensorFlow logs a parse error and returns None
            raise ValueError("not a CheckpointState text proto, or no model_checkpoint_path")
    except (tf.errors.OpError, ValueError) as e:  # text_format.ParseError is a ValueError
        # (Treating it as "no checkpoint" would start the run over and overwrite
        # the checkpoints it has.)
        indexes = sorted(io.glob(io.join(glob.escape(str(directory)), "*.index")),
                         key=lambda p: (len(p), p))
        newest = os.path.basename(indexes[-1])[:-len(".index")] if indexes else None
        raise CheckpointError(
            state_file, f"is not a readable checkpoint state file ({first_line(e)})",
            fix=(f"write it again as the one line  model_checkpoint_path: \"{newest}\"  to "
                 f"resume from {newest}" if newest else "delete it to start the run over")
        ) from None
    paths = list(state.all_model_checkpoint_paths)
    if state.model_checkpoint_path and (not paths or paths[-1] != state.model_checkpoint_path):
        paths.append(state.model_checkpoint_path)
    return [p if os.path.isabs(p) or "://" in p else io.join(directory, p) for p in paths]


def latest_checkpoint(directory) -> str | None:
    """The newest listed checkpoint of `directory` whose files are there: after
    a damaged one was deleted (as `damaged_checkpoint_error` says), the one
    before it."""
    for prefix in reversed(listed_checkpoints(directory)):
        if io.exists(prefix + ".index"):
            return prefix
    return None


def write_state_file(directory: str, names: list) -> None:
    """TensorFlow's `checkpoint` state file (a `CheckpointState` text proto)
    naming `names` (oldest first; the last is the latest), atomically. Names
    relative to the directory, as `tf.train.CheckpointManager` writes them, so
    that the run directory can be moved."""
    def quoted(name):
        return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"model_checkpoint_path: {quoted(names[-1])}"]
    lines += [f"all_model_checkpoint_paths: {quoted(name)}" for name in names]
    io.atomic_write(io.join(directory, layout.CHECKPOINT_INDEX), "\n".join(lines) + "\n")


def checkpoint_step(prefix: str) -> int | None:
    """The step of a run's checkpoint (`ckpt-<N>`, `best-<N>`); None for
    another name."""
    match = _STEP.match(os.path.basename(prefix))
    return int(match.group(1)) if match else None


# How many times a checkpoint may be chosen again because the run rotated it away
# between being chosen and being opened (each try takes a few system calls).
HOLD_TRIES = 20
# Where an open descriptor can be named as a path (Linux; elsewhere nothing is held).
_OPEN_FILES = "/proc/self/fd"
# The checkpoints this process holds: (temporary directory, descriptors), released at exit.
_HELD: list = []
# A held checkpoint's prefix -> the prefix of its held files (`readable`).
_HELD_AS: dict = {}


def readable(prefix):
    """The prefix to open the checkpoint `prefix` by: its held files (`hold`) when
    this process holds it, else `prefix` itself. Every TensorFlow read of a
    checkpoint goes through it (`tf_checkpoints.open_reader`, ...), so that what
    the command opened once stays what it reads, rotated away or not."""
    if prefix is None:
        return None
    return _HELD_AS.get(os.fspath(prefix), prefix)


def hold(prefix: str) -> str | None:
    """A prefix naming the files of checkpoint `prefix` as they are now, for as long
    as this process runs: each file is opened at once, and named in a temporary
    directory by a link to its open descriptor, so a rotation that deletes the
    checkpoint leaves it readable (what the command opened, it keeps). None when
    its files cannot be held so (not a local path, no `/proc/self/fd`); "" when
    a file is gone already (rotated away: choose again)."""
    if not io.is_local(prefix) or not os.path.isdir(_OPEN_FILES):
        return None
    local = io.local_path(prefix)
    names = [local + ".index"] + sorted(glob.glob(glob.escape(local) + ".data-*"))
    descriptors = []
    try:
        for name in names:
            descriptors.append(os.open(name, os.O_RDONLY))
    except FileNotFoundError:
        for fd in descriptors:
            os.close(fd)
        return ""
    if not _HELD:
        atexit.register(_release)
    directory = tempfile.mkdtemp(prefix="official_bert-reading-")
    _HELD.append((directory, descriptors))
    for name, fd in zip(names, descriptors):
        os.symlink(f"{_OPEN_FILES}/{fd}", os.path.join(directory, os.path.basename(name)))
        show_path_as(os.path.join(directory, os.path.basename(name)), name)
    held = os.path.join(directory, os.path.basename(local))
    show_path_as(held, prefix)
    _HELD_AS[os.fspath(prefix)] = held
    return held


def _release() -> None:
    _HELD_AS.clear()
    while _HELD:
        directory, descriptors = _HELD.pop()
        shutil.rmtree(directory, ignore_errors=True)
        for fd in descriptors:
            try:
                os.close(fd)
            except OSError:
                pass


def read_latest(directory: str, read):
    """(prefix, `read(prefix)`) of the latest complete checkpoint of the run
    directory `directory` (module docstring), held (`hold`) before it is read:
    `read` and every later reader open it through `readable(prefix)`. Its step,
    and whether the run is still training, are logged. Where it cannot be held,
    `read`'s error stands unless the checkpoint was rotated away meanwhile (its
    .index is gone and a newer one is listed): then the newest is read, once."""
    prefix = latest_checkpoint(directory)
    held = hold(prefix) if prefix else None
    for _ in range(HOLD_TRIES):
        if held != "":
            break
        newer = latest_checkpoint(directory)  # rotated away before it was opened
        logging.info("%s was rotated away by its run before it was read (nothing is "
                     "damaged): reading the newest, %s", os.path.basename(prefix),
                     os.path.basename(newer) if newer else None)
        prefix = newer
        held = hold(prefix) if prefix else None
    if held == "":
        held = None
    try:
        value = read(prefix)
    except (ValueError, tf.errors.OpError):  # (a CheckpointError is a ValueError)
        newer = latest_checkpoint(directory)
        if held or io.exists(prefix + ".index") or newer in (None, prefix):
            raise
        logging.info("%s was rotated away by its run while it was read (nothing is damaged): "
                     "reading the newest, %s", os.path.basename(prefix), os.path.basename(newer))
        prefix, value = newer, read(newer)
    _say_what_is_read(directory, prefix)
    return prefix, value


def _say_what_is_read(directory: str, prefix: str) -> None:
    step = checkpoint_step(prefix)
    at = f" (step {step})" if step is not None else ""
    holder = RunLock(directory).holder()
    if holder is None:
        logging.info("Reading %s%s, the latest checkpoint of %s", os.path.basename(prefix), at,
                     directory)
    else:
        logging.warning("Reading %s%s, the latest checkpoint of %s so far: the run is still "
                        "training (%s holds its lock), so later steps are not in it",
                        os.path.basename(prefix), at, directory, holder)


# === A checkpoint's files ===


def open_reader(prefix):
    """The reader of the checkpoint at `prefix` (its files as this process holds
    them, when it read them from a run that trains: `readable`). Not
    `tf.train.load_checkpoint`: it takes a path that `tf.io.gfile.isdir` calls a
    directory for one, and TensorFlow's `ram://` calls every prefix of a stored
    name one."""
    return tf.compat.v1.train.NewCheckpointReader(readable(prefix))


def checkpoint_files(prefix) -> list:
    """The files of the TensorFlow checkpoint `prefix` (.index, .data-*)."""
    return [prefix + ".index"] + io.glob(glob.escape(prefix) + ".data-*")
