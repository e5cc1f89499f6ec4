"""The teacher (--teacher): for task distillation, a fine-tuned run of the same
task whose outputs the student (the run's own model) learns beside the labels;
for general distillation (`tasks.general_distillation`), any BERT checkpoint,
with or without a masked-LM head.

The teacher is any checkpoint this project reads that holds the task's
trained head: a run directory (its latest checkpoint), one of its `ckpt-N`,
or a google or Hugging Face checkpoint with the head. It may be of any size;
it must share the student's vocabulary and casing (the same ids mean the same
text) and, through its head's shape, the number of labels. Its outputs on the
training features are computed once per session, in the features' order, and
travel with them through the input pipeline as `teacher_logits` (a task's
loss then mixes the two: `training.distillation`).
"""

from __future__ import annotations

import collections.abc
import copy
import os

import numpy as np
import tensorflow as tf
from absl import logging

from official_bert import checkpoints
from official_bert.checkpoints import tf_checkpoints
from official_bert.errors import UserError
from official_bert.text import tokenization
from official_bert.training import input_pipeline

# The feature a task's loss reads the teacher's outputs from.
FEATURE = "teacher_logits"
# With --distill_text: 1 for a row of the training file, 0 for a row of the
# unlabelled text (its labels are placeholders; it learns the teacher alone).
LABELLED = "labelled"


def join_unlabelled(labelled: dict, unlabelled: dict) -> dict:
    """The training features followed by those of --distill_text (both with the
    teacher's outputs), with `LABELLED` telling them apart."""
    rows = [len(next(iter(a.values()))) for a in (labelled, unlabelled)]
    joined = {k: np.concatenate([labelled[k], unlabelled[k]]) for k in labelled}
    joined[LABELLED] = np.concatenate([np.ones(rows[0], np.float32),
                                       np.zeros(rows[1], np.float32)])
    logging.info("--distill_text: %s rows the teacher labelled beside %s training rows",
                 f"{rows[1]:,}", f"{rows[0]:,}")
    return joined


class Teacher:
    """A loaded teacher: its checkpoint's path, its model (the task's model at
    the teacher's size, with the teacher's weights) and whether its head was in
    the checkpoint.

    Use `Teacher.load(path, task)`: it checks the teacher fits the task."""

    def __init__(self, path: str, model, has_head: bool = True):
        self.path = path
        self.model = model
        self.has_head = has_head  # (always, for task distillation: its head is required)

    @classmethod
    def load(cls, path: str, task) -> "Teacher":
        """The teacher at `path` for `task` (whose `model_files` and
        `bert_config` are resolved). `UserError` when it does not fit."""
        try:
            ckpt = checkpoints.read_checkpoint(path)
        except UserError as e:  # (its line names the path, not the flag)
            raise UserError(f"--teacher: {e}") from None
        files = task.model_files
        if ckpt.vocab_file is None or (
                tokenization.load_vocab_list(ckpt.vocab_file) != list(files.vocab)):
            raise UserError(
                f"--teacher {path} has another vocabulary than the student's "
                f"({ckpt.vocab_file or 'none beside it'}, not {files.vocab_file}): the same ids "
                "would mean other text. Distil from a teacher with the student's vocabulary "
                "(for a task, one fine-tuned from a checkpoint with it)")
        if ckpt.do_lower_case is not None and ckpt.do_lower_case != files.do_lower_case:
            raise UserError(f"--teacher {path} is {'un' if not ckpt.do_lower_case else ''}cased "
                            f"and the student is not: give both the same casing")
        teacher_task = copy.copy(task)  # the task's model, at the teacher's size
        teacher_task.bert_config = ckpt.config
        model = teacher_task.build_model()
        checkpoints.assign_encoder_weights(model.encoder, ckpt.weights)
        load = getattr(model, "load_head_weights", None)
        report = load(ckpt) if load else None
        if task.distils == "representations":  # general distillation: a masked-LM head if any
            has_head = bool(report) and "masked_lm" in report.heads
        elif not report or report.initialized or report.skipped:
            why = report.what_the_checkpoint_holds() if report is not None else (
                "holds no head of this task")
            raise UserError(f"--teacher {path}: {why}; a teacher is a run fine-tuned on this "
                            "task, with the student's labels")
        else:
            has_head = True
        # The checkpoint read (a run directory's latest), which a resume must read again.
        read = (ckpt.path if ckpt.kind == "huggingface"
                else tf_checkpoints.checkpoint_prefix(ckpt.path) or ckpt.path)
        logging.info("Teacher: %s (%d layers, hidden size %d), %s", read,
                     ckpt.config.num_hidden_layers, ckpt.config.hidden_size,
                     "its head restored" if has_head else "without a masked-LM head")
        return cls(os.fspath(read), model, has_head)

    def with_logits(self, arrays: dict, batch_size: int) -> dict:
        """`arrays` with the teacher's outputs on them as `FEATURE` (a task whose
        model has one output per row)."""
        return {**arrays, FEATURE: self.logits(arrays, batch_size)}

    def logits(self, arrays: dict, batch_size: int):
        """The teacher's outputs (float32) on in-memory features, in their order:
        an array, or a dict of arrays for a model of several outputs (spans)."""
        model = self.model

        @tf.function(reduce_retracing=True)
        def forward(features):
            return model(features, training=False)

        dataset = input_pipeline.numpy_dataset(
            {k: v for k, v in arrays.items() if k != FEATURE}, batch_size, False, 0)
        parts = [_as_arrays(forward(features))
                 for features in dataset(tf.distribute.InputContext())]
        if isinstance(parts[0], dict):
            outputs = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        else:
            outputs = np.concatenate(parts)
        rows = len(next(iter(outputs.values())) if isinstance(outputs, dict) else outputs)
        logging.info("Teacher: its outputs on %s rows, computed once", f"{rows:,}")
        return outputs


def _as_arrays(outputs):
    """A model's outputs as float32 numpy: an array, or a dict of them."""
    if isinstance(outputs, collections.abc.Mapping):
        return {k: np.asarray(v, np.float32) for k, v in outputs.items()}
    return np.asarray(outputs, np.float32)
