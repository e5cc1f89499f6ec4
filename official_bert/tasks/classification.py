"""Sentence(-pair) classification and regression (GLUE and your own data)."""

from __future__ import annotations

import tensorflow as tf

from official_bert.modeling.heads import BertClassifier


class ClassificationTask:
    """The `training.Task` of `BertClassifier`: softmax cross-entropy over the
    classes, or mean squared error for regression (`num_classes=1`), summed
    over the global batch and divided by its number of examples.

    Features: the encoder's inputs plus `label` (int32 class id, or float score).

    Args:
        bert_config: the encoder's `BertConfig`.
        num_classes: int (1 = regression).
        dtype_policy: None, "mixed_bfloat16" or "mixed_float16".
    """

    def __init__(self, bert_config, num_classes, dtype_policy=None):
        self.bert_config = bert_config
        self.num_classes = num_classes
        self.dtype_policy = dtype_policy

    @property
    def is_regression(self):
        return self.num_classes == 1

    def build_model(self):
        from official_bert.modeling.encoder import BertEncoder, dummy_inputs

        encoder = BertEncoder.from_bert_config(self.bert_config, dtype=self.dtype_policy)
        model = BertClassifier(encoder, self.num_classes,
                               dropout=self.bert_config.hidden_dropout_prob)
        model(dummy_inputs())
        return model

    def per_example_loss(self, logits, labels):
        if self.is_regression:
            return tf.square(logits[:, 0] - tf.cast(labels, tf.float32))
        return tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(labels, tf.int32), logits)

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["label"])[0], tf.float32)}

    def loss_and_metrics(self, model, features, normalizers, training):
        logits = model(features, training=training)
        labels = features["label"]
        loss = tf.reduce_sum(self.per_example_loss(logits, labels)) / tf.maximum(
            normalizers["examples"], 1.0)
        count = tf.cast(tf.shape(labels)[0], tf.float32)
        if self.is_regression:
            squared = tf.square(logits[:, 0] - tf.cast(labels, tf.float32))
            return loss, {"mse": (tf.reduce_sum(squared), count)}
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                   tf.cast(labels, tf.int32)), tf.float32)
        return loss, {"accuracy": (tf.reduce_sum(correct), count)}
