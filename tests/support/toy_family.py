"""A toy task family, declared as any family outside the library declares itself
(tests/test_task_families.py): its row, registered, makes its `bert toy`
command and flags and gives it distillation; its class is the code alone.

Data: lines of a label (0 or 1), a tab and a sentence.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from official_bert import io
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.modeling.heads import BertClassifier
from official_bert.settings import setting
from official_bert.tasks import base, families, teacher
from official_bert.training import distillation


@dataclasses.dataclass
class ToyConfig:
    train_file: str | None = setting(None, "Lines: a label (0 or 1), a tab, a sentence.")
    eval_file: str | None = setting(None, "Lines as --train_file's, to evaluate on.")
    predict_file: str | None = setting(None, "Lines as --train_file's (labels unread).")


class ToyTask(base.Task):
    spec = families.register(families.TaskSpec(
        "toy", f"{__name__}:ToyTask", ToyConfig, command="toy", module=__name__,
        summary="a toy family: does a sentence say good?", results=("toy_predictions.txt",),
        distils="outputs"))

    def read_inputs(self):
        self.rows = {mode: [line.split("\t", 1) for line in io.read_text(path).splitlines()]
                     for mode, path in base.mode_files(self.config).items()
                     if getattr(self.run_config, f"do_{mode}")}
        return base.InputRecord()

    def build_model(self, bert_config=None):
        model = BertClassifier(BertEncoder.from_bert_config(bert_config or self.bert_config), 2)
        model(dummy_inputs())
        return model

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.size(features["label"]), tf.float32)}  # (a label a row)

    def loss_and_metrics(self, model, features, normalizers, training):
        logits = model(features, training=training)
        labels_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(features["label"], logits)
        per_example = teacher.mixed_loss(self, labels_loss, logits, features)
        return tf.reduce_sum(per_example) / normalizers["examples"], {}

    def teacher_loss(self, teacher_logits, logits, features):
        return distillation.soft_targets(teacher_logits, logits,
                                         self.run_config.distill_temperature)

    def train_dataset(self):
        return base.TrainingSet(self._arrays("train"))

    def evaluate(self, trainer):
        arrays = self._arrays("eval")
        predicted = self._logits(trainer, arrays).argmax(-1)
        return {"eval_accuracy": float(np.mean(predicted == arrays["label"])),
                "num_examples": len(predicted)}

    def predict(self, trainer):
        predicted = self._logits(trainer, self._arrays("predict")).argmax(-1)
        io.atomic_write(self.run_directory.file("toy_predictions.txt"),
                        "".join(f"{label}\n" for label in predicted))

    def _logits(self, trainer, arrays):
        return base.predict_logits(trainer, arrays, self.run_config.eval_batch_size,
                                   self.run_config)

    def _arrays(self, mode):
        tokenizer, length = self.model_files.tokenizer(), self.run_config.max_seq_length
        ids, mask, types = (np.asarray(column, np.int32) for column in zip(
            *(tokenizer.encode(text, max_seq_length=length) for _, text in self.rows[mode])))
        return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
                "label": np.asarray([int(label) for label, _ in self.rows[mode]], np.int32),
                "example_index": np.arange(len(ids), dtype=np.int32)}
