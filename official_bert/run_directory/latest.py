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
rotates its checkpoints (--keep_checkpoint_max): one deleted between being
chosen and being opened is not damaged, so the newest is read instead, once.
A checkpoint already opened is kept: its files stay readable while open.
"""

from __future__ import annotations

import glob
import os
import re

import tensorflow as tf
from absl import logging

from official_bert import io
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
        # the checkpoints it has.) Imported here: the checkpoints package imports
        # this module as it loads.
        from official_bert.checkpoints.bert_checkpoint import CheckpointError, first_line

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


def read_latest(directory: str, read):
    """(prefix, `read(prefix)`) of the latest complete checkpoint of the run
    directory `directory` (module docstring). Its step, and whether the run
    is still training, are logged. `read`'s error stands unless the checkpoint
    was rotated away meanwhile (its .index is gone and a newer one is listed):
    then the newest is read, once."""
    prefix = latest_checkpoint(directory)
    try:
        value = read(prefix)
    except (ValueError, tf.errors.OpError):  # (a CheckpointError is a ValueError)
        newer = latest_checkpoint(directory)
        if io.exists(prefix + ".index") or newer in (None, prefix):
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
