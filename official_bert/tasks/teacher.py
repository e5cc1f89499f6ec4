"""The teacher (--teacher): for task distillation, a fine-tuned run of the same
task whose outputs the student (the run's own model) learns beside the labels;
for general distillation (`tasks.general_distillation`), any BERT checkpoint,
with or without a masked-LM head.

The teacher is any checkpoint this project reads that holds the task's
trained head: a run directory (its latest checkpoint), one of its `ckpt-N`,
or a google or Hugging Face checkpoint with the head. It may be of any size;
it must share the student's vocabulary and casing (the same ids mean the same
text) and, through its head's shape, the number of labels. A teacher that is
a run of this project is checked by what its run says it is (its record, or
the files of a run made before records): the student's task family, and the
student's labels; labels in another order (--labels=1,0 for a student's 0,1)
are mapped, its outputs' columns reordered to the student's, since the same
head's shape would otherwise teach inverted soft labels. Its outputs on the
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
from official_bert.errors import UserError
from official_bert.progress import Progress, duration
from official_bert.run_directory import run_of, task_words
from official_bert.text import tokenization
from official_bert.training import input_pipeline

# The feature a task's loss reads the teacher's outputs from.
FEATURE = "teacher_logits"
# With --distill_text: 1 for a row of the training file, 0 for a row of the
# unlabelled text (its labels are placeholders; it learns the teacher alone).
LABELLED = "labelled"
# The end of every line that refuses a teacher of another task.
_WHAT_A_TEACHER_IS = "a teacher is a run fine-tuned on this task, with the student's labels"


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

    def __init__(self, path: str, model, has_head: bool = True, label_order=None):
        self.path = path
        self.model = model
        self.has_head = has_head  # (always, for task distillation: its head is required)
        # The teacher's output column of each of the student's labels (None: the same order).
        self.label_order = label_order

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
        label_order = _check_trained_as(path, task) if task.distils == "outputs" else None
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
            raise UserError(f"--teacher {path}: {why}; {_WHAT_A_TEACHER_IS}")
        else:
            has_head = True
        # The checkpoint read (a run directory's latest), which a resume must read again.
        read = ckpt.prefix or ckpt.path
        logging.info("Teacher: %s (%d layers, hidden size %d), %s", read,
                     ckpt.config.num_hidden_layers, ckpt.config.hidden_size,
                     "its head restored" if has_head else "without a masked-LM head")
        return cls(os.fspath(read), model, has_head, label_order)

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

        inputs = {k: v for k, v in arrays.items() if k != FEATURE}
        dataset = input_pipeline.numpy_dataset(inputs, batch_size, False, 0)
        # (minutes on a large training set: a line now and then, with the time left)
        total = len(next(iter(inputs.values())))
        progress, parts, done = Progress(total, unit="rows"), [], 0
        logging.info("Teacher: labelling %s rows", f"{total:,}")
        for features in dataset(tf.distribute.InputContext()):
            parts.append(_as_arrays(forward(features)))
            done += len(next(iter(features.values())))
            if progress.update(done):
                logging.info("Teacher: %s", progress.line())
        if isinstance(parts[0], dict):
            outputs = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        else:
            outputs = np.concatenate(parts)
        if self.label_order is not None:  # (the labels' axis is the last: rows or tokens)
            outputs = outputs[..., self.label_order]
        rows = len(next(iter(outputs.values())) if isinstance(outputs, dict) else outputs)
        logging.info("Teacher: its outputs on %s rows, computed once in %s", f"{rows:,}",
                     duration(progress.elapsed))
        return outputs


def _check_trained_as(path: str, task) -> list | None:
    """What the teacher's run says it is (`RunDirectory.trained_identity`)
    against the student: `UserError` for another task family, for regression
    against classes, or for other labels. Returns the teacher's output column
    of each of the student's labels when they are the same labels in another
    order, else None. A checkpoint no run of this project wrote says nothing:
    its head's shape is checked alone (`Teacher.load`)."""
    trained = run_of(path).trained_identity()
    families = trained.get("task")
    families = [families] if isinstance(families, str) else families or []
    family = type(task).family
    if families and family not in families:
        raise UserError(f"--teacher {path} is a {task_words(trained)} run, not a {family} one: "
                        f"its outputs mean another task's; {_WHAT_A_TEACHER_IS}")
    student = task.run_files().identity
    if None not in (trained.get("regression"), student.get("regression")) and \
            trained["regression"] != student["regression"]:
        raise UserError(f"--teacher {path} is a {_kind(trained)} and the student a "
                        f"{_kind(student)}: give a teacher trained as the student is")
    theirs, ours = trained.get("labels"), student.get("labels")
    if theirs is None or ours is None or theirs == ours:
        return None
    if sorted(theirs) != sorted(ours):
        raise UserError(f"--teacher {path} was trained with the labels {','.join(theirs)}, "
                        f"the student has {','.join(ours)}: its outputs are scores of other "
                        f"labels; {_WHAT_A_TEACHER_IS}")
    logging.info("Teacher: its labels are %s, the student's %s: its outputs are reordered "
                 "to the student's", ",".join(theirs), ",".join(ours))
    return [theirs.index(label) for label in ours]


def _kind(identity: dict) -> str:
    return "regression" if identity.get("regression") else "classifier"


def _as_arrays(outputs):
    """A model's outputs as float32 numpy: an array, or a dict of them."""
    if isinstance(outputs, collections.abc.Mapping):
        return {k: np.asarray(v, np.float32) for k, v in outputs.items()}
    return np.asarray(outputs, np.float32)
