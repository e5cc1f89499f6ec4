"""Multi-label classification with BERT: a task written outside the library.

Each text has any number of labels (e.g. the topics of a news item, the
tags of a comment), so the head scores every label on its own: one sigmoid
per label on the pooled [CLS] vector, trained with binary cross-entropy.
This module is all a new task needs: its row (`TaskSpec`, registered) makes
its command, `bert multilabel` (load it with
OFFICIAL_BERT_TASKS=examples/multilabel/multilabel_task.py), its flags and
its section of the flag reference, and gives it distillation (--teacher); the
run flow does the rest: model files, validation before anything is written,
the run directory's lock, seeding, dtype, distribution, training,
checkpoints and resume, eval_results.txt. `run_multilabel.py` beside it is
its script.

Data: JSON lines, `{"text": "...", "labels": ["sports", "politics"]}`.

Example:
  OFFICIAL_BERT_TASKS=examples/multilabel/multilabel_task.py bert multilabel \\
    --do_train --do_eval --train_file=train.jsonl --eval_file=dev.jsonl \\
    --init_checkpoint=$MINILM --num_train_epochs=3 --output_dir=/tmp/multilabel
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import tensorflow as tf

from official_bert import io
from official_bert.errors import BadFileError, UserError
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.modeling.heads import BertClassifier
from official_bert.settings import setting
from official_bert.tasks import base, families, teacher
from official_bert.training import input_pipeline


@dataclasses.dataclass
class MultiLabelConfig:
    """The task's own settings; `run_multilabel.py` makes its flags from them."""

    train_file: str | None = setting(None, "JSON lines: {'text': ..., 'labels': [...]}.")
    eval_file: str | None = setting(None, "JSON lines with labels, to evaluate on.")
    predict_file: str | None = setting(None, "JSON lines to label.")
    threshold: float = setting(0.5, "A label is predicted when its probability is above this.")


def read_jsonl(path):
    """[(text, labels)] from a JSON-lines file; errors name the file and line."""
    rows = []
    for number, line in enumerate(io.read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows.append((str(row["text"]), [str(label) for label in row.get("labels", [])]))
        except (ValueError, KeyError, TypeError) as e:
            raise BadFileError(path, f"is not a JSON object with a 'text' ({e})",
                               line=number) from None
    if not rows:
        raise BadFileError(path, "holds no example")
    return rows


class MultiLabelTask(base.Task):
    """Multi-label classification: the model and loss, the data, the metrics."""

    spec = families.register(families.TaskSpec(
        "multilabel", f"{__name__}:MultiLabelTask", MultiLabelConfig, command="multilabel",
        summary="multi-label classification of JSON lines (the guide's example of a new task)",
        module=__name__, results=("predictions.jsonl",), distils="outputs"))

    def __init__(self, config=None, run_config=None, **resolved):
        super().__init__(config, run_config, **resolved)
        self.rows = {}

    # The model and its loss (what the Trainer calls).

    def build_model(self, bert_config=None):
        bert_config = bert_config or self.bert_config  # (a teacher's, of another size)
        encoder = BertEncoder.from_bert_config(bert_config, dtype=self.run_config.dtype_policy)
        model = BertClassifier(encoder, len(self.labels))  # one logit per label
        model(dummy_inputs())
        return model

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["label"])[0], tf.float32)}

    def loss_and_metrics(self, model, features, normalizers, training):
        logits = model(features, training=training)
        targets = tf.cast(features["label"], tf.float32)
        per_label = tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits)
        per_example = teacher.mixed_loss(self, tf.reduce_mean(per_label, axis=-1), logits,
                                         features)  # (with --teacher: its outputs too)
        loss = tf.reduce_sum(per_example) / normalizers["examples"]
        correct = tf.cast(tf.equal(tf.cast(logits > 0, tf.float32), targets), tf.float32)
        return loss, {"label_accuracy": (tf.reduce_sum(correct), tf.cast(tf.size(correct),
                                                                        tf.float32))}

    def teacher_loss(self, teacher_logits, logits, features):
        """Per example: each label's teacher probability (at temperature T) as its
        target, scaled by T² as soft targets are."""
        t = self.run_config.distill_temperature
        return t * t * tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.sigmoid(teacher_logits / t), logits=logits / t), axis=-1)

    # Inputs: read and checked before anything is written.

    def read_inputs(self):
        for mode in ("train", "eval", "predict"):
            if getattr(self.run_config, f"do_{mode}"):
                self.rows[mode] = read_jsonl(getattr(self.config, f"{mode}_file"))
        saved = self.run_directory.file("labels.txt")
        if "train" in self.rows:
            self.labels = sorted({label for _, labels in self.rows["train"] for label in labels})
        elif io.exists(saved):
            self.labels = io.read_text(saved).split()
        else:
            raise UserError("no labels.txt in --output_dir: train first")
        # What the run's record keeps: a rerun must have the same labels.
        return base.InputRecord(identity={"labels": self.labels}, record={
            "labels.txt": "".join(f"{label}\n" for label in self.labels)})

    # Data.

    def _arrays(self, mode):
        tokenizer = self.model_files.tokenizer()
        index = {label: i for i, label in enumerate(self.labels)}
        ids, mask, types = [], [], []
        targets = np.zeros((len(self.rows[mode]), len(self.labels)), np.int32)
        for row, (text, labels) in enumerate(self.rows[mode]):
            a, m, t = tokenizer.encode(text, max_seq_length=self.run_config.max_seq_length)
            ids.append(a), mask.append(m), types.append(t)
            for label in labels:
                if label in index:
                    targets[row, index[label]] = 1
        return {"input_word_ids": np.asarray(ids, np.int32),
                "input_mask": np.asarray(mask, np.int32),
                "input_type_ids": np.asarray(types, np.int32), "label": targets}

    def train_dataset(self):
        return base.TrainingSet(self._arrays("train"))  # (the run batches it)

    def _probabilities(self, trainer, mode, batch_size):
        out = trainer.predict(input_pipeline.numpy_dataset(self._arrays(mode), batch_size, False,
                                                           0),
                              lambda model, f: {"p": tf.sigmoid(model(f, training=False))})
        return out["p"]

    # Evaluation and prediction.

    def evaluate(self, trainer):
        gold = self._arrays("eval")["label"].astype(bool)
        chosen = self._probabilities(trainer, "eval", self.run_config.eval_batch_size) > \
            self.config.threshold
        true_positives = float((gold & chosen).sum())
        precision = true_positives / max(chosen.sum(), 1)
        recall = true_positives / max(gold.sum(), 1)
        return {"eval_micro_f1": 2 * precision * recall / max(precision + recall, 1e-12),
                "eval_precision": precision, "eval_recall": recall,
                "eval_exact_match": float((gold == chosen).all(axis=1).mean()),
                "num_examples": len(gold)}

    def predict(self, trainer):
        probabilities = self._probabilities(trainer, "predict", self.run_config.predict_batch_size)
        lines = [json.dumps({"text": text, "labels": [label for label, p in zip(self.labels, row)
                                                      if p > self.config.threshold]})
                 for (text, _), row in zip(self.rows["predict"], probabilities)]
        io.atomic_write(self.run_directory.file("predictions.jsonl"), "\n".join(lines) + "\n")
