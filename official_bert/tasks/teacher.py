"""Distillation (--teacher): one wrapper, whatever the family.

The teacher is any checkpoint this project reads. For task distillation
(`spec.distils == "outputs"`), a fine-tuned run of the same task whose outputs
the student (the run's own model) learns beside the labels: a run directory
(its latest checkpoint), one of its `ckpt-N`, or a google or Hugging Face
checkpoint with the task's trained head. For general distillation
("representations", `tasks.general_distillation`), any BERT checkpoint, with
or without a masked-LM head.

It may be of any size; it must share the student's vocabulary and casing (the
same ids mean the same text) and, through its head's shape, the number of
labels. A teacher that is a run of this project is checked by what its run
says it is (its record, or the files of a run made before records): the
student's task family, and the student's labels; labels in another order
(--labels=1,0 for a student's 0,1) are mapped, its outputs' columns reordered
to the student's, since the same head's shape would otherwise teach inverted
soft labels.

`Distillation` holds the teacher and is what the `Trainer` trains: the
teacher's outputs are computed once, under one feature (`OUTPUTS`): on the
in-memory training features before training (task distillation), or on each
batch beside the student (general distillation). `mixed_loss` is the one mix
of labels and teacher; a family says only which loss compares two outputs
(its `teacher_loss`).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import os

import numpy as np
import tensorflow as tf
from absl import logging

from official_bert import checkpoints
from official_bert.errors import UserError
from official_bert.modeling.encoder import ENCODER_INPUTS
from official_bert.progress import Progress, duration
from official_bert.run_directory import run_of, task_words
from official_bert.text import tokenization
from official_bert.training import distillation, input_pipeline

# The feature that holds the teacher's outputs (whatever the family).
OUTPUTS = "teacher_outputs"
# With --distill_text: 1 for a row of the training file, 0 for a row of the
# unlabelled text (its labels are placeholders; it learns the teacher alone).
LABELLED = "labelled"
# The end of every line that refuses a teacher of another task.
_WHAT_A_TEACHER_IS = "a teacher is a run fine-tuned on this task, with the student's labels"


def mixed_loss(task, labels_loss, outputs, features):
    """The student's loss per example (or token): alpha · `labels_loss` + (1 −
    alpha) · `task.teacher_loss(teacher's outputs, outputs, features)`; in the
    rows of --distill_text (unlabelled), the teacher's alone. `labels_loss`
    itself when the features hold no teacher's outputs (no --teacher, or
    evaluation)."""
    if OUTPUTS not in features:
        return labels_loss
    # A batch's tokens may be cut to its longest sequence (--dynamic_padding): the
    # teacher's outputs, kept at full length, are cut with them (a no-op on the other axes).
    teacher = tf.nest.map_structure(lambda ours, student: ours[:, :tf.shape(student)[1]],
                                    features[OUTPUTS], outputs)
    labelled = features.get(LABELLED)
    if labelled is not None:  # one flag a row, for every value of the row
        labelled = tf.reshape(labelled, [-1] + [1] * (len(labels_loss.shape) - 1))
    return distillation.task_loss(labels_loss, task.teacher_loss(teacher, outputs, features),
                                  task.run_config.distill_alpha, labelled)


class Teacher:
    """A loaded teacher: its checkpoint's path, its model (the task's model at
    the teacher's size, with the teacher's weights), whether its head was in
    the checkpoint, and, for general distillation, how many relation heads
    its last layer is compared in (None: the student's width is the
    teacher's, the hidden states are compared).

    Use `Teacher.load(path, task, identity)`: it checks the teacher fits."""

    def __init__(self, path: str, model, has_head: bool = True, label_order=None,
                 relation_heads: int | None = None):
        self.path = path
        self.model = model
        self.has_head = has_head  # (always, for task distillation: its head is required)
        # The teacher's output column of each of the student's labels (None: the same order).
        self.label_order = label_order
        self.relation_heads = relation_heads

    @classmethod
    def load(cls, path: str, task, identity: dict) -> "Teacher":
        """The teacher at `path` for `task` (built, its inputs read: `identity`
        is what they say, the labels). `UserError` when it does not fit."""
        try:
            ckpt = checkpoints.read_checkpoint(path)
        except UserError as e:  # (its line names the path, not the flag)
            raise UserError(f"--teacher: {e}") from None
        _check_same_text(path, ckpt, task.model_files)
        kind = task.spec.distils
        label_order = _check_trained_as(path, task.spec.name, identity) \
            if kind == "outputs" else None
        model = task.build_model(ckpt.config)  # the task's model, at the teacher's size
        checkpoints.assign_encoder_weights(model.encoder, ckpt.weights)
        load = getattr(model, "load_head_weights", None)
        report = load(ckpt) if load else None
        if kind == "representations":  # general distillation: a masked-LM head if any
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
        heads = (relation_heads_between(ckpt.config, task.bert_config)
                 if kind == "representations" else None)
        return cls(os.fspath(read), model, has_head, label_order, heads)

    # --- task distillation: its outputs on the training features, once -------------

    def label(self, arrays: dict, batch_size: int) -> dict:
        """`arrays` with the teacher's outputs on them as `OUTPUTS`."""
        return {**arrays, OUTPUTS: self.logits(arrays, batch_size)}

    def logits(self, arrays: dict, batch_size: int):
        """The teacher's outputs (float32) on in-memory features, in their order:
        an array, or a dict of arrays for a model of several outputs (spans)."""
        model = self.model

        @tf.function(reduce_retracing=True)
        def forward(features):
            return model(features, training=False)

        inputs = {k: arrays[k] for k in ENCODER_INPUTS}
        dataset = input_pipeline.numpy_dataset(inputs, batch_size, False, 0)
        # (minutes on a large training set: a line now and then, with the time left)
        total = len(inputs["input_word_ids"])
        progress, parts, done = Progress(total, unit="rows"), [], 0
        logging.info("Teacher: labelling %s rows", f"{total:,}")
        for features in dataset(tf.distribute.InputContext()):
            parts.append(_as_arrays(forward(features)))
            done += len(features["input_word_ids"])
            if progress.update(done):
                logging.info("Teacher: %s", progress.line())
        outputs = tf.nest.map_structure(lambda *batches: np.concatenate(batches), *parts)
        if self.label_order is not None:  # (the labels' axis is the last: rows or tokens)
            outputs = outputs[..., self.label_order]
        logging.info("Teacher: its outputs on %s rows, computed once in %s", f"{total:,}",
                     duration(progress.elapsed))
        return outputs

    # --- general distillation: its representations, beside the student ---------------

    def representations(self, features) -> dict:
        """The teacher's outputs on a batch of pre-training features: its last
        hidden states ("sequence_output", when the student's width is its own)
        or its last layer's self-attention relations ("relations", MiniLMv2's,
        of the queries, keys and values), and its masked-LM logits
        ("masked_lm_logits", when it has the head). No gradient."""
        inputs = {k: features[k] for k in ENCODER_INPUTS}
        encoded = self.model.encoder(inputs, training=False)
        outputs = {}
        if self.relation_heads is None:
            outputs["sequence_output"] = encoded["sequence_output"]
        else:
            outputs["relations"] = [
                distillation.self_attention_relations(vectors, self.relation_heads,
                                                      features["input_mask"])
                for vectors in last_layer_qkv(self.model.encoder, encoded)]
        if self.has_head:
            outputs["masked_lm_logits"] = self.model.heads_on(
                encoded, features["masked_lm_positions"])["masked_lm_logits"]
        return tf.nest.map_structure(tf.stop_gradient, outputs)

    def in_scope(self, model) -> None:
        """Holds `model` (the teacher's model built again in the strategy's scope
        and the run's precision, so that every replica reads it) in place of the
        one `load` built, with its weights: the teacher is held once."""
        model.set_weights(self.model.get_weights())
        model.trainable = False
        self.model = model


@dataclasses.dataclass
class Distillation:
    """A task that learns from a teacher besides its labels: what the `Trainer`
    trains with --teacher (the `training.trainer.Task` protocol). Evaluation,
    prediction and export are the student's alone (the task's)."""

    task: object
    teacher: Teacher

    def __post_init__(self):
        if self.task.spec.distils == "representations":
            logging.info("%s", describe(self.teacher, self.task))

    def build_model(self):
        student = self.task.build_model()
        if self.task.spec.distils == "representations":  # (it runs beside the student)
            self.teacher.in_scope(self.task.build_model(self.teacher.model.encoder.config))
        return student

    def loss_normalizers(self, features):
        return self.task.loss_normalizers(features)

    def loss_and_metrics(self, model, features, normalizers, training):
        if training and self.task.spec.distils == "representations":
            features = {**features, OUTPUTS: self.teacher.representations(features)}
        return self.task.loss_and_metrics(model, features, normalizers, training)

    def labelled(self, data):
        """The task's in-memory training data (`base.TrainingSet`) with the
        teacher's outputs, computed once; --distill_text's rows joined after the
        training file's. A pipeline of the task's own is left as it is."""
        if data.features is None:
            return data
        batch_size = self.task.run_config.eval_batch_size
        features = self.teacher.label(data.features, batch_size)
        if data.unlabelled is not None:
            features = join_unlabelled(features, self.teacher.label(data.unlabelled, batch_size))
        return dataclasses.replace(data, features=features, unlabelled=None)

    # The Trainer asks the task which input failed (pre-training's pipelines).
    def find_bad_input(self):
        find = getattr(self.task, "find_bad_input", None)
        return find() if find else None

    def find_lost_input(self):
        find = getattr(self.task, "find_lost_input", None)
        return find() if find else None


def join_unlabelled(labelled: dict, unlabelled: dict) -> dict:
    """The training features followed by those of --distill_text (both with the
    teacher's outputs), with `LABELLED` telling them apart."""
    rows = [len(a["input_word_ids"]) for a in (labelled, unlabelled)]
    joined = {k: tf.nest.map_structure(lambda a, b: np.concatenate([a, b]), labelled[k],
                                       unlabelled[k]) for k in labelled}
    joined[LABELLED] = np.concatenate([np.ones(rows[0], np.float32),
                                       np.zeros(rows[1], np.float32)])
    logging.info("--distill_text: %s rows the teacher labelled beside %s training rows",
                 f"{rows[1]:,}", f"{rows[0]:,}")
    return joined


def describe(teacher: Teacher, task) -> str:
    """What a student of general distillation learns from its teacher: one line."""
    ours, student, run = teacher.model.encoder.config, task.bert_config, task.run_config
    masked_lm = (f"its masked-LM distribution at temperature {run.distill_temperature} "
                 f"(labels' share {run.distill_alpha})" if teacher.has_head else
                 "not its masked-LM distribution (it has no masked-LM head, as sentence "
                 "encoders ship none: the masked LM learns from its labels alone)")
    representation = ("its last layer's hidden states (cosine)" if teacher.relation_heads is None
                      else f"its last layer's self-attention relations (MiniLMv2, "
                           f"{teacher.relation_heads} relation heads)")
    return (f"General distillation: the student (L={student.num_hidden_layers}, "
            f"H={student.hidden_size}) learns from the teacher (L={ours.num_hidden_layers}, "
            f"H={ours.hidden_size}) {representation}; {masked_lm}")


def last_layer_qkv(encoder, outputs) -> tuple:
    """The queries, keys and values [batch, tokens, H] of the encoder's last
    self-attention, from its input (the previous block's output)."""
    blocks = outputs["encoder_outputs"]
    inputs = blocks[-2] if len(blocks) > 1 else outputs["embedding_output"]
    attention = encoder.transformer_layers[-1].attention
    return attention.query(inputs), attention.key(inputs), attention.value(inputs)


def relation_heads_between(teacher, student) -> int | None:
    """The relation heads of MiniLMv2's loss between two configs; None when
    the widths match (the hidden states are compared)."""
    if teacher.hidden_size == student.hidden_size:
        return None
    return distillation.relation_heads(teacher.hidden_size, teacher.num_attention_heads,
                                       student.hidden_size, student.num_attention_heads)


def _check_same_text(path, ckpt, files) -> None:
    """The teacher reads the student's ids as the same text: its vocabulary and casing."""
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


def _check_trained_as(path: str, family: str, student: dict) -> list | None:
    """What the teacher's run says it is (`RunDirectory.trained_identity`)
    against the student (its family and what its inputs say, `student`):
    `UserError` for another task family, for regression against classes, or
    for other labels. Returns the teacher's output column of each of the
    student's labels when they are the same labels in another order, else
    None. A checkpoint no run of this project wrote says nothing: its head's
    shape is checked alone (`Teacher.load`)."""
    trained = run_of(path).trained_identity()
    families = trained.get("task")
    families = [families] if isinstance(families, str) else families or []
    if families and family not in families:
        raise UserError(f"--teacher {path} is a {task_words(trained)} run, not a {family} one: "
                        f"its outputs mean another task's; {_WHAT_A_TEACHER_IS}")
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
