"""A task written outside the library: multi-label classification.

Each text has any number of labels (e.g. the topics of a news item, the
tags of a comment), so the head scores every label on its own: one sigmoid
per label on the pooled [CLS] vector, trained with binary cross-entropy.
This module is all a new task needs; `run_multilabel.py` beside it is its
script. The run flow (`official_bert.tasks.runner.run_task`) does the rest: model
files, validation before anything is written, the run directory's lock,
seeding, dtype, distribution, training, checkpoints and resume,
eval_results.txt.

Data: JSON lines, `{"text": "...", "labels": ["sports", "politics"]}`.
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
from official_bert.tasks import base
from official_bert.configs import RunConfig
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

    def __init__(self, config: MultiLabelConfig, run_config: RunConfig, *, model_files=None):
        super().__init__(run_config, model_files=model_files)
        self.config, self.rows = config, {}

    # The model and its loss (what the Trainer calls).

    def build_model(self):
        encoder = BertEncoder.from_bert_config(self.bert_config, dtype=self.run_config.dtype_policy)
        model = BertClassifier(encoder, len(self.labels))  # one logit per label
        model(dummy_inputs())
        return model

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["label"])[0], tf.float32)}

    def loss_and_metrics(self, model, features, normalizers, training):
        logits = model(features, training=training)
        targets = tf.cast(features["label"], tf.float32)
        per_label = tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits)
        loss = tf.reduce_sum(tf.reduce_mean(per_label, axis=-1)) / normalizers["examples"]
        correct = tf.cast(tf.equal(tf.cast(logits > 0, tf.float32), targets), tf.float32)
        return loss, {"label_accuracy": (tf.reduce_sum(correct), tf.cast(tf.size(correct),
                                                                        tf.float32))}

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

    def run_files(self):
        return dataclasses.replace(
            super().run_files(), results=("predictions.jsonl",),
            record={"labels.txt": "".join(f"{label}\n" for label in self.labels)})

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

    def num_train_examples(self):
        return len(self.rows["train"])

    def train_dataset(self):
        return input_pipeline.numpy_dataset(self._arrays("train"), self.run_config.train_batch_size,
                                            True, self.run_config.seed)

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
