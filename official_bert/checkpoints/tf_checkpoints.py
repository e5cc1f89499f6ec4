"""TensorFlow checkpoint files (`<prefix>.index`, `<prefix>.data-*`).

The prefix a path names (a run directory's latest checkpoint: the run
directory's `latest` says which), and damaged checkpoints: which file is
damaged, and which earlier checkpoint is intact to resume from or load instead.
"""

from __future__ import annotations

import glob
import os

import tensorflow as tf

from official_bert import io
from official_bert.errors import CheckpointError, first_line, is_machine_limit
from official_bert.run_directory.latest import (checkpoint_files, latest_checkpoint,
                                                listed_checkpoints, open_reader)

def checkpoint_prefix(path):
    """Resolves a TF checkpoint directory or prefix to a prefix, or None."""
    if io.isdir(path):
        latest = latest_checkpoint(path)
        if latest:
            return latest
        indexes = io.glob(io.join(path, "*.index"))
        if len(indexes) == 1:
            return indexes[0][: -len(".index")]
        if len(indexes) > 1:
            raise CheckpointError(
                path, f"holds several checkpoints "
                f"({', '.join(os.path.basename(i) for i in indexes)})",
                fix="pass the prefix of the one to load")
        return None
    if io.exists(path + ".index"):
        return path
    if path.endswith(".index") and io.exists(path):
        return path[: -len(".index")]
    return None


# === Damaged checkpoints ===


def checkpoint_damage(prefix) -> tuple | None:
    """(file, what is wrong) when the checkpoint `prefix` cannot be read back
    whole (its index, then every tensor: a truncated or corrupt file), else None.
    A limit of the machine met while reading (too many open files, no memory:
    `errors.is_machine_limit`) is no damage: its error is raised as it is."""
    index = prefix + ".index"
    if not io.exists(index):
        return index, "is missing"
    try:
        reader = open_reader(prefix)
    except (tf.errors.OpError, ValueError, IndexError) as e:
        if is_machine_limit(e):
            raise
        return index, f"is damaged: truncated or corrupt ({first_line(e)})"
    data_files = io.glob(glob.escape(prefix) + ".data-*")
    try:
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, ValueError, IndexError) as e:
        if is_machine_limit(e):
            raise
        where = data_files[0] if len(data_files) == 1 else prefix + ".data-*"
        return where, f"is damaged: truncated or corrupt ({first_line(e)})"
    return None


def damaged_checkpoint_error(prefix, error: BaseException | None = None,
                             resuming: bool = False):
    """A `CheckpointError` naming the damaged file of checkpoint `prefix` and
    whether an earlier checkpoint beside it is intact: when `resuming` a run
    in its directory, how to resume from that one; else (an
    --init_checkpoint) how to use it instead. None when the checkpoint reads
    back whole (then `error` was something else). An `error` that is a limit of
    the machine (`errors.is_machine_limit`: too many open files, no memory) is
    raised as it is: the boundary names the limit, and the checkpoint is fine."""
    if error is not None and is_machine_limit(error):
        raise error
    damage = checkpoint_damage(prefix)
    if damage is None:
        return None
    path, problem = damage
    directory = os.path.dirname(prefix)
    listed = [p for p in listed_checkpoints(directory) if p != prefix]
    files = ", ".join(os.path.basename(f) for f in checkpoint_files(prefix))
    earlier = next((p for p in reversed(listed)
                    if io.exists(p + ".index") and checkpoint_damage(p) is None), None)
    if resuming and earlier:
        fix = (f"the previous checkpoint {os.path.basename(earlier)} in {directory} is intact: "
               f"delete {files} there and run the same command to resume from it")
    elif resuming:
        fix = (f"no earlier checkpoint in {directory} is intact: delete {files} to start the "
               "run over, or restore the files from a copy")
    elif earlier:
        fix = (f"copy or download the checkpoint again, or pass the intact earlier one: "
               f"--init_checkpoint={earlier}")
    else:
        fix = "copy or download the checkpoint again"
    return CheckpointError(path, problem, fix=fix)
