"""Pre-training: masked LM + next sentence."""

from __future__ import annotations

import keras
import tensorflow as tf

from official_bert.modeling.heads import BertPretrainer, PRETRAINING_INPUTS


class PretrainingTask:
    """The `training.Task` of pre-training: masked LM + next sentence.

    loss = Σ w · xent(masked LM) / Σ w  +  Σ xent(next sentence) / N, with w
    the `masked_lm_weights` (0 on padding predictions) and both sums over the
    whole global batch (the `Trainer` all-reduces the normalizers), as
    google-research/bert's per-batch loss.

    Metrics (numerator, denominator sums): `masked_lm_accuracy` and
    `masked_lm_loss` (weighted by `masked_lm_weights`), `next_sentence_accuracy`
    and `next_sentence_loss` (per example).

    Args:
        bert_config: the encoder's `BertConfig`.
        dtype_policy: None, "mixed_bfloat16" or "mixed_float16".
        seed: int or None. Seeds Keras before the weights are created.

    Example:
    >>> from official_bert.modeling.configs import BertConfig
    >>> task = PretrainingTask(BertConfig(vocab_size=100, hidden_size=32,
    ...     num_hidden_layers=1, num_attention_heads=4, intermediate_size=64))
    >>> type(task.build_model()).__name__
    'BertPretrainer'
    """

    def __init__(self, bert_config, dtype_policy=None, seed=None):
        self.bert_config = bert_config
        self.dtype_policy = dtype_policy
        self.seed = seed

    def build_model(self):
        from official_bert.modeling.encoder import BertEncoder

        if self.seed is not None:
            keras.utils.set_random_seed(self.seed)
        encoder = BertEncoder.from_bert_config(self.bert_config, dtype=self.dtype_policy)
        model = BertPretrainer(encoder)
        model._ensure_built()
        return model

    def loss_normalizers(self, features):
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        return {"masked_lm_weights": tf.reduce_sum(weights),
                "examples": tf.cast(tf.shape(weights)[0], tf.float32)}

    def loss_and_metrics(self, model, features, normalizers, training):
        outputs = model({k: features[k] for k in PRETRAINING_INPUTS}, training=training)
        mlm_logits = outputs["masked_lm_logits"]
        labels = tf.cast(features["masked_lm_ids"], tf.int32)
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        mlm_xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, mlm_logits)
        mlm_sum = tf.reduce_sum(mlm_xent * weights)
        mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32),
                                       labels), tf.float32)

        nsp_logits = outputs["next_sentence_logits"]
        nsp_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
        nsp_xent = tf.nn.sparse_softmax_cross_entropy_with_logits(nsp_labels, nsp_logits)
        nsp_sum = tf.reduce_sum(nsp_xent)
        nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32),
                                       nsp_labels), tf.float32)

        loss = (mlm_sum / tf.maximum(normalizers["masked_lm_weights"], 1e-5)
                + nsp_sum / tf.maximum(normalizers["examples"], 1.0))
        local_weights = tf.reduce_sum(weights)
        local_examples = tf.cast(tf.size(nsp_labels), tf.float32)
        metrics = {
            "masked_lm_accuracy": (tf.reduce_sum(mlm_correct * weights), local_weights),
            "masked_lm_loss": (mlm_sum, local_weights),
            "next_sentence_accuracy": (tf.reduce_sum(nsp_correct), local_examples),
            "next_sentence_loss": (nsp_sum, local_examples),
        }
        return loss, metrics
