"""Token classification (NER): a tag for each word's first sub-token."""

from __future__ import annotations

import keras
import tensorflow as tf

from official_bert.modeling.heads import BertTokenClassifier


def masked_token_loss(logits, labels, normalizer):
    """Cross-entropy over the labelled positions (`labels` >= 0; -1 = not
    labelled: later sub-tokens, [CLS], [SEP], padding), summed and divided by
    `normalizer` (the global batch's labelled positions).

    Returns:
        (loss, {"token_accuracy": (correct, labelled)}).
    """
    valid = labels >= 0
    safe = tf.where(valid, labels, 0)
    per_token = keras.losses.sparse_categorical_crossentropy(safe, logits, from_logits=True)
    weights = tf.cast(valid, tf.float32)
    loss = tf.reduce_sum(per_token * weights) / tf.maximum(normalizer, 1.0)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), safe), tf.float32)
    return loss, {"token_accuracy": (tf.reduce_sum(correct * weights), tf.reduce_sum(weights))}


class TokenClassificationTask:
    """The `training.Task` of `BertTokenClassifier` (NER): the loss over each
    word's first sub-token only (`label_ids` -1 elsewhere).

    Args:
        bert_config: the encoder's `BertConfig`.
        num_labels: int. Tags in the label list.
        dtype_policy: None, "mixed_bfloat16" or "mixed_float16".
    """

    def __init__(self, bert_config, num_labels, dtype_policy=None):
        self.bert_config = bert_config
        self.num_labels = num_labels
        self.dtype_policy = dtype_policy

    def build_model(self):
        from official_bert.modeling.encoder import BertEncoder, dummy_inputs

        encoder = BertEncoder.from_bert_config(self.bert_config, dtype=self.dtype_policy)
        # The pooler (C) gets no gradient from a token-level loss; the Trainer
        # needs a gradient for every trainable variable.
        encoder.pooler.trainable = False
        model = BertTokenClassifier(encoder, self.num_labels,
                                    dropout=self.bert_config.hidden_dropout_prob)
        model(dummy_inputs())
        return model

    def loss_normalizers(self, features):
        return {"tokens": tf.reduce_sum(tf.cast(features["label_ids"] >= 0, tf.float32))}

    def loss_and_metrics(self, model, features, normalizers, training):
        logits = model(features, training=training)
        return masked_token_loss(logits, features["label_ids"], normalizers["tokens"])
