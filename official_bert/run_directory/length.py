"""A run's --max_seq_length, decided once, before its task is built
(`tasks.runner`), from what the run directories say:

  1. the flag, when it is given (said, when a trained run is then read at
     another length than it was trained with);
  2. for a run that does not train: the length its run was trained with (its
     record), so that evaluating, predicting and exporting read as it trained;
  3. for fine-tuning from a checkpoint pre-trained on this run's own training
     text (task-adaptive pre-training, a run of this project): the length that
     pre-training used, so that the two steps of adaptation cannot disagree;
  4. else the flag's default.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable

from absl import logging

from official_bert import io
from official_bert.errors import UserError
from official_bert.run_directory import RunDirectory, run_of

# The run families whose run can be a checkpoint adapted to a task's text.
ADAPTING_TASKS = ("pretraining", "distillation")


def resolve_max_seq_length(run_directory: RunDirectory, config,
                           training_files: Callable[[], Iterable[str]]) -> int:
    """The length the run reads at (the module's docstring), logged when it is
    not the flag's. `config`: the run's `RunConfig` (`given`: the flags given);
    `training_files()`: the files it trains on (asked only when --init_checkpoint
    is a run that may have been adapted to them)."""
    given = "max_seq_length" in config.given
    if not config.do_train:
        return _trained_length(run_directory, config, given)
    if given or not config.init_checkpoint:
        return config.max_seq_length
    return _adapted_length(config, training_files) or config.max_seq_length


def _trained_length(run_directory: RunDirectory, config, given: bool) -> int:
    trained = run_directory.trained_length()
    if trained is None or trained == config.max_seq_length:
        return config.max_seq_length
    if given:
        logging.warning("--max_seq_length=%d: this run was trained at %d tokens, and now reads "
                        "%d (leave the flag out to use the trained length)",
                        config.max_seq_length, trained, config.max_seq_length)
        return config.max_seq_length
    logging.info("--max_seq_length=%d: the length this run was trained with (%s; "
                 "--max_seq_length=N reads another)", trained,
                 os.path.basename(run_directory.run_record))
    return trained


def _adapted_length(config, training_files) -> int | None:
    """The length --init_checkpoint's run was pre-trained with, when that run
    trained on one of this run's training files; else None."""
    try:
        if not io.isdir(config.init_checkpoint):
            return None
        record = run_of(config.init_checkpoint).read_run_record() or {}
        if (record.get("identity") or {}).get("task") not in ADAPTING_TASKS:
            return None
        ours = {os.path.abspath(p) for p in training_files() if p and io.is_local(p)}
    except (UserError, OSError):
        # (the model files' and the flags' own checks say what is wrong)
        return None
    identity, settings = record["identity"], record.get("settings") or {}
    length = identity.get("max_seq_length")
    if not set(settings.get("training_data") or {}) & ours or \
            length in (None, config.max_seq_length):
        return None
    logging.info("--max_seq_length=%d: the length %s was pre-trained with on this task's "
                 "training text (--max_seq_length=N trains at another)", length,
                 config.init_checkpoint)
    return length
