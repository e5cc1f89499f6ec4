"""Multiple choice (SWAG): one score per choice, softmax over the choices."""

from __future__ import annotations

import keras
import tensorflow as tf

from official_bert.modeling.heads import BertMultipleChoice


class MultipleChoiceTask:
    """The `training.Task` of `BertMultipleChoice` (SWAG): softmax cross-entropy
    over each example's choices, a mean over the global batch.

    Features: [batch, choices, seq] encoder inputs plus `label` (int32, the
    gold choice).

    Args:
        bert_config: the encoder's `BertConfig`.
        dtype_policy: None, "mixed_bfloat16" or "mixed_float16".
    """

    def __init__(self, bert_config, dtype_policy=None):
        self.bert_config = bert_config
        self.dtype_policy = dtype_policy

    def build_model(self):
        from official_bert.modeling.encoder import BertEncoder

        encoder = BertEncoder.from_bert_config(self.bert_config, dtype=self.dtype_policy)
        model = BertMultipleChoice(encoder, dropout=self.bert_config.hidden_dropout_prob)
        ones = tf.ones([1, 2, 8], tf.int32)
        model({"input_word_ids": ones, "input_mask": ones, "input_type_ids": ones * 0})
        return model

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["label"])[0], tf.float32)}

    def loss_and_metrics(self, model, features, normalizers, training):
        logits = model(features, training=training)
        per_example = keras.losses.sparse_categorical_crossentropy(
            features["label"], logits, from_logits=True)
        loss = tf.reduce_sum(per_example) / tf.maximum(normalizers["examples"], 1.0)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                   features["label"]), tf.float32)
        return loss, {"accuracy": (tf.reduce_sum(correct), tf.cast(tf.size(correct), tf.float32))}
