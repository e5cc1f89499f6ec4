"""A run's training checkpoints: written, listed, rotated; never another's deleted.

The `Trainer` saves through `RunCheckpoints`. Checkpoint N is `output_dir/ckpt-N`
(TensorFlow's `.index` and `.data-*` files), listed in TensorFlow's `checkpoint`
state file (`latest`: read by a resume and by every reader of the run), and
noted in the run directory's record (`run.json`) before its files are written.
Rotation (`keep_checkpoint_max`) deletes the oldest of the checkpoints the
record names, and only those: a checkpoint that was in the directory before the
run (a pre-trained model, another tool's) is never deleted, whatever the state
file lists.

A run killed at any moment leaves a consistent directory: the files of a
checkpoint are written before the state file names it (atomically), and a
checkpoint is taken off the state file before its files are deleted, and off
the record after. A save that fails (a full disk) removes TensorFlow's staging
directory of it (`ckpt-N_temp/`); those a killed run left are removed by the
next run (`RunDirectory.remove_killed_leftovers`).

The best model (--keep_best_metric) is `best/best-<step>`, named by
`best/best.json` (`tasks.evaluation.BestCheckpoint`); `keep_only_best` deletes
the others.

A directory made before runs kept records holds checkpoints that no record
names: `unrecorded_run_checkpoints` tells a run's (adopted into the record
that starts now) from a checkpoint no run wrote (a pre-trained model, refused).
"""

from __future__ import annotations

import errno
import os

import tensorflow as tf

from official_bert import io
from official_bert.run_directory import layout
from official_bert.run_directory.latest import (checkpoint_files, listed_checkpoints, open_reader,
                                                write_state_file)


class RunCheckpoints:
    """Writes `checkpoint` (a `tf.train.Checkpoint`) as `directory/ckpt-<step>`
    and keeps the newest `keep` of those this run directory's runs wrote.

    Args:
        checkpoint: the `tf.train.Checkpoint` of what a save holds.
        directory: where the checkpoints go.
        keep: how many of the run's own checkpoints to keep.
        record: the run directory whose record lists the checkpoints its runs
            wrote (None: a worker's scratch directory, emptied by its owner
            after each save, or a trainer outside a run: nothing is noted or
            rotated; the state file names each one, to resume from).
    """

    def __init__(self, checkpoint: tf.train.Checkpoint, directory: str, keep: int,
                 record: "RunDirectory | None"):  # noqa: F821 (the package's, not imported)
        self.checkpoint, self.directory, self.keep, self.record = (
            checkpoint, directory, keep, record)
        self.last_saved = None  # the prefix this process last saved

    def save(self, step: int) -> str:
        """Writes checkpoint `step`; returns its prefix. (Every worker of a
        multi-worker run calls it: the write is a collective.)"""
        name = layout.checkpoint_name(step)
        prefix = io.join(self.directory, name)
        try:
            if self.record is not None:
                self.record.note_checkpoint(name)  # before the files: rotation may delete it
            try:
                path = self.checkpoint.write(prefix)
            except BaseException:
                self._remove_staged(step)
                raise
        except (OSError, tf.errors.PermissionDeniedError) as e:
            raise _naming(e, prefix) from e
        listed = [p for p in listed_checkpoints(self.directory)
                  if os.path.basename(p) != name and io.exists(p + ".index")]
        self._rotate([*listed, path])
        self.last_saved = path
        return path

    def _remove_staged(self, step: int) -> None:
        """TensorFlow stages a checkpoint in `ckpt-N_temp/` and leaves it when a
        write fails (a full disk): removed, so only complete checkpoints remain."""
        for temp in tf.io.gfile.glob(io.join(self.directory, layout.staged_checkpoints(step))):
            try:
                tf.io.gfile.rmtree(temp)
            except tf.errors.OpError:
                pass

    def _name(self, prefix: str) -> str:
        """How the state file names `prefix`: relative when it is in the directory."""
        inside = io.same_path(os.path.dirname(prefix), self.directory)
        return os.path.basename(prefix) if inside else prefix

    def _rotate(self, listed: list) -> None:
        """Names `listed` (oldest first, the new one last) in the state file,
        less the run's own checkpoints past `keep`, which are then deleted."""
        written = set(self.record.written_checkpoints()) if self.record is not None else ()
        own = [p for p in listed if os.path.basename(p) in written]
        excess = own[:-self.keep] if len(own) > self.keep else []
        write_state_file(self.directory, [self._name(p) for p in listed if p not in excess])
        for prefix in excess:
            for path in checkpoint_files(prefix):
                io.remove(path)
        if excess:
            self.record.forget_checkpoints(os.path.basename(p) for p in excess)


def keep_only_best(run_directory, step: int | None) -> None:
    """Deletes every `best/best-*` but the best model's of `step` (older best
    models, and a killed write's files, its `best-<step>_temp` directory
    included), and points best/'s `checkpoint` state file at that one (none
    when `step` is None). `best.json` names the step first: a run killed in
    between leaves the pair whole."""
    keep = run_directory.best_checkpoint(step) + "." if step is not None else None
    prefix = run_directory.best_checkpoint("")
    for name in io.listdir(run_directory.best):
        path = io.join(run_directory.best, name)
        if path.startswith(prefix) and not (keep and path.startswith(keep)):
            if io.isdir(path):
                io.remove_tree(path)
            else:
                io.remove(path)
    if step is not None:
        write_state_file(run_directory.best, [layout.best_checkpoint_name(step)])
    else:
        io.remove(run_directory.best_state_file)


def _naming(error, prefix: str) -> BaseException:
    """`error` (the directory made unwritable, a full disk) as an `OSError` that
    names the checkpoint being saved: what failed first may be a temporary of
    run.json or a file of TensorFlow's staging, which a user did not ask for."""
    code = getattr(error, "errno", None) or errno.EACCES
    return OSError(code, os.strerror(code), prefix)


# The key of the Trainer's global step in a checkpoint it wrote (an object-based one;
# google's TF1 checkpoints name theirs "global_step", a pre-trained model has none).
_TRAINER_STEP = "global_step/.ATTRIBUTES/VARIABLE_VALUE"


def unrecorded_run_checkpoints(run_directory) -> list:
    """The checkpoints of a directory without a record: a run's made before
    records were kept (they hold the Trainer's global step) are returned, to be
    adopted into its record; when the newest holds none, no run wrote it (a
    pre-trained model): `RunDirectoryError`. A damaged newest one is left to the
    `Trainer`, which names it."""
    def written_by_a_run(prefix) -> bool | None:
        try:
            return _TRAINER_STEP in open_reader(prefix).get_variable_to_shape_map()
        except (tf.errors.OpError, ValueError, IndexError):
            return None  # damaged: not readable enough to tell

    listed = [p for p in listed_checkpoints(run_directory.path) if io.exists(p + ".index")]
    kinds = {p: written_by_a_run(p) for p in listed}
    if listed and kinds[listed[-1]] is False:
        raise run_directory.foreign_checkpoint_error()
    return [os.path.basename(p) for p in listed if kinds[p]]


def model_mismatch(prefix: str, model) -> str | None:
    """What keeps checkpoint `prefix` (a run's, written as the Trainer writes:
    `tf.train.Checkpoint(model=...)`) from restoring into `model`: a variable
    of another shape, or one the checkpoint lacks (another task's head); None
    when it fits. The weights are read into `model`, a throwaway one: nothing
    is written."""
    try:
        status = tf.train.Checkpoint(model=model).read(prefix)
        # The model alone is read: the optimizer's, the step's and the generators' values
        # are left on purpose, and TensorFlow would warn of each one (53 lines) when the
        # status is collected.
        status.expect_partial()
        status.assert_existing_objects_matched()
    except (tf.errors.OpError, IndexError):
        return None  # damaged: the Trainer names the file, and the checkpoint to resume from
    except (ValueError, AssertionError) as e:  # a shape; an object the checkpoint lacks
        return str(e).strip().splitlines()[0][:200]
    return None
