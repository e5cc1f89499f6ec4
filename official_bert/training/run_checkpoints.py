"""A run's training checkpoints: written, listed, rotated; never another's deleted.

The `Trainer` saves through `RunCheckpoints`. Checkpoint N is
`output_dir/ckpt-N` (TensorFlow's `.index` and `.data-*` files), listed in
TensorFlow's `checkpoint` state file (which `tf.train.latest_checkpoint` and a
resume read), and noted in the run directory's record (`run.json`) before its
files are written. Rotation (`keep_checkpoint_max`) deletes the oldest of the
checkpoints the record names, and only those: a checkpoint that was in the
directory before the run (a pre-trained model, another tool's) is never
deleted, whatever the state file lists.

A run killed at any moment leaves a consistent directory: the files of a
checkpoint are written before the state file names it (atomically), and a
checkpoint is taken off the state file before its files are deleted, and off
the record after.
"""

from __future__ import annotations

import os

import tensorflow as tf

from official_bert import io
from official_bert.checkpoints.tf_checkpoints import checkpoint_files, run_checkpoints
from official_bert.run_directory import CHECKPOINT_INDEX, CHECKPOINT_NAME, RunDirectory


class RunCheckpoints:
    """Writes `checkpoint` (a `tf.train.Checkpoint`) as `directory/ckpt-<step>`
    and keeps the newest `keep` of those this run directory's runs wrote.

    Args:
        checkpoint: the `tf.train.Checkpoint` of what a save holds.
        directory: where the checkpoints go.
        keep: how many of the run's own checkpoints to keep.
        record: the run directory whose record lists the checkpoints its runs
            wrote (None: a scratch directory, emptied by its owner after each
            save; nothing is noted or rotated).
    """

    def __init__(self, checkpoint: tf.train.Checkpoint, directory: str, keep: int,
                 record: RunDirectory | None):
        self.checkpoint, self.directory, self.keep, self.record = (
            checkpoint, directory, keep, record)
        self.latest_checkpoint = None  # the prefix this process last saved

    def save(self, step: int) -> str:
        """Writes checkpoint `step`; returns its prefix. (Every worker of a
        multi-worker run calls it: the write is a collective.)"""
        name = f"{CHECKPOINT_NAME}-{step}"
        if self.record is not None:
            self.record.note_checkpoint(name)  # before the files: rotation may delete it
        path = self.checkpoint.write(io.join(self.directory, name))
        if self.record is not None:
            listed = [p for p in run_checkpoints(self.directory)
                      if os.path.basename(p) != name and io.exists(p + ".index")]
            self._rotate([*listed, path])
        self.latest_checkpoint = path
        return path

    def _name(self, prefix: str) -> str:
        """How the state file names `prefix`: relative when it is in the directory."""
        inside = io.same_path(os.path.dirname(prefix), self.directory)
        return os.path.basename(prefix) if inside else prefix

    def _rotate(self, listed: list) -> None:
        """Names `listed` (oldest first, the new one last) in the state file,
        less the run's own checkpoints past `keep`, which are then deleted."""
        written = set(self.record.written_checkpoints())
        own = [p for p in listed if os.path.basename(p) in written]
        excess = own[:-self.keep] if len(own) > self.keep else []
        write_state_file(self.directory, [self._name(p) for p in listed if p not in excess])
        for prefix in excess:
            for path in checkpoint_files(prefix):
                io.remove(path)
        if excess:
            self.record.forget_checkpoints(os.path.basename(p) for p in excess)


def write_state_file(directory: str, names: list) -> None:
    """TensorFlow's `checkpoint` state file (a `CheckpointState` text proto)
    naming `names` (oldest first; the last is the latest), atomically. Names
    relative to the directory, as `tf.train.CheckpointManager` writes them, so
    that the run directory can be moved."""
    def quoted(name):
        return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"model_checkpoint_path: {quoted(names[-1])}"]
    lines += [f"all_model_checkpoint_paths: {quoted(name)}" for name in names]
    io.atomic_write(io.join(directory, CHECKPOINT_INDEX), "\n".join(lines) + "\n")
