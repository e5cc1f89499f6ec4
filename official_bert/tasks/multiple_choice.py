"""Multiple choice (SWAG): one score per choice, softmax over the choices.

The model is `modeling.heads.BertMultipleChoice` (a learned vector on each
choice's pooled [CLS]); each choice is packed `[CLS] context [SEP] start
ending [SEP]` (`data_prep.swag`). The loss is the softmax cross-entropy over
an example's choices, a mean over the global batch.

Files in --output_dir: `eval_results.txt` (eval_accuracy, eval_loss) and
`test_results.tsv` (one row per example: the probability of each choice).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from data_prep import swag
from official_bert import io
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.heads import BertMultipleChoice
from official_bert.serving import multiple_choice as serving
from official_bert.tasks import base, families, teacher
from official_bert.configs import MultipleChoiceConfig, RunConfig
from official_bert.training import distillation


class MultipleChoiceTask(base.Task):
    """Fine-tunes, evaluates, predicts and exports a `BertMultipleChoice`.

    Features: [batch, choices, seq] encoder inputs plus `label` (int32, the
    gold choice).
    """

    spec = families.MULTIPLE_CHOICE

    def __init__(self, config: MultipleChoiceConfig | None = None,
                 run_config: RunConfig | None = None, *, model_files=None, run_directory=None,
                 bert_config=None):
        super().__init__(config, run_config, model_files=model_files,
                         run_directory=run_directory, bert_config=bert_config)
        self.examples = {}

    # --- the model and its loss (the Trainer's protocol) ------------------------

    def build_model(self, bert_config=None):
        bert_config = bert_config or self.bert_config
        encoder = BertEncoder.from_bert_config(bert_config, dtype=self.run_config.dtype_policy)
        model = BertMultipleChoice(encoder, dropout=bert_config.hidden_dropout_prob)
        ones = tf.ones([1, 2, 8], tf.int32)
        model({"input_word_ids": ones, "input_mask": ones, "input_type_ids": ones * 0})
        return model

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["label"])[0], tf.float32)}

    def loss_and_metrics(self, model, features, normalizers, training):
        logits = model(features, training=training)
        per_example = teacher.mixed_loss(self, keras.losses.sparse_categorical_crossentropy(
            features["label"], logits, from_logits=True), logits, features)
        loss = tf.reduce_sum(per_example) / tf.maximum(normalizers["examples"], 1.0)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                   features["label"]), tf.float32)
        return loss, {"accuracy": (tf.reduce_sum(correct), tf.cast(tf.size(correct), tf.float32))}

    def teacher_loss(self, teacher_logits, logits, features):
        """Per example: the soft-target loss over its choices."""
        return distillation.soft_targets(teacher_logits, logits,
                                         self.run_config.distill_temperature)

    # --- inputs and data -------------------------------------------------------------

    # check_flags and run_files: `base.Task`'s (--train_file, --eval_file, --predict_file).

    def read_inputs(self):
        run, config = self.run_config, self.config
        if run.do_train:
            examples = swag.read_swag(config.train_file)
            self.examples["train"] = examples[:run.max_train_examples or None]
        if run.do_eval:
            self.examples["eval"] = swag.read_swag(config.eval_file)
        if run.do_predict:
            self.examples["predict"] = swag.read_swag(config.predict_file, require_label=False)
        return base.InputRecord()

    def _arrays(self, split):
        return swag.convert_examples(self.examples[split], self.model_files.tokenizer(),
                                     self.run_config.max_seq_length)

    def train_dataset(self):
        logging.info("train: %d examples, %d choices each", len(self.examples["train"]),
                     len(self.examples["train"][0].endings))
        return base.TrainingSet(self._arrays("train"))

    def _log_probabilities(self, trainer, arrays, batch_size):
        """Log-probabilities [examples, choices] in file order."""
        logits = base.predict_logits(trainer, arrays, batch_size, self.run_config)
        return tf.nn.log_softmax(logits, axis=-1).numpy()

    # --- evaluation, prediction, export ---------------------------------------------

    def evaluate(self, trainer) -> dict:
        arrays = self._arrays("eval")
        log_probs = self._log_probabilities(trainer, arrays, self.run_config.eval_batch_size)
        labels = arrays["label"]
        return {"eval_accuracy": float(np.mean(np.argmax(log_probs, -1) == labels)),
                "eval_loss": float(-np.mean(log_probs[np.arange(len(labels)), labels])),
                "num_examples": len(labels)}

    def predict(self, trainer) -> None:
        probabilities = np.exp(self._log_probabilities(trainer, self._arrays("predict"),
                                                       self.run_config.predict_batch_size))
        path = self.run_directory.file("test_results.tsv")
        io.atomic_write(path, "".join("\t".join(f"{p:.8f}" for p in row) + "\n"
                                      for row in probabilities))
        logging.info("Wrote %d predictions to %s", len(probabilities), path)

    def evaluation_arrays(self):
        return self._arrays("eval") if "eval" in self.examples else None

    def export(self, model, export_dir, version):
        return serving.export_multiple_choice(
            model, self.model_files.vocab_file, self.model_files.do_lower_case,
            self.run_config.max_seq_length, export_dir, version=version,
            int8=self.run_config.quantize)
