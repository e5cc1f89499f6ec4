"""Span labeling (SQuAD v1.1 / v2.0): start and end of the answer in the context."""

from __future__ import annotations

import keras
import tensorflow as tf

from official_bert.modeling.encoder import ENCODER_INPUTS
from official_bert.modeling.heads import BertSpanLabeler


class SpanLabelingTask:
    """The `training.Task` of `BertSpanLabeler` (SQuAD): the mean of the start
    and end cross-entropies, each a mean over the global batch's examples. The
    softmax runs over every position, padding included, as google-research/bert
    and Hugging Face train it (prediction never picks padding:
    `data_prep.squad.postprocess_predictions`).

    Features: the encoder's inputs plus `start_positions`, `end_positions`
    (int32; 0 = [CLS] for windows without the answer).

    Args:
        config: the encoder's `BertConfig`.
        dtype: None, "mixed_bfloat16" or "mixed_float16".
        seed: int. Seeds Keras before the head's weights are created.
    """

    def __init__(self, config, dtype=None, seed=42):
        self.config, self.dtype, self.seed = config, dtype, seed

    def build_model(self):
        from official_bert.modeling.encoder import BertEncoder, dummy_inputs

        keras.utils.set_random_seed(self.seed)
        encoder = BertEncoder.from_bert_config(self.config, dtype=self.dtype)
        # The span head never reads the pooled output, so the pooler gets no
        # gradient (google's optimizer skips such variables): not trainable here.
        encoder.pooler.trainable = False
        model = BertSpanLabeler(encoder)
        model(dummy_inputs())
        return model

    def loss_normalizers(self, features):
        return {"examples": tf.shape(features["input_word_ids"])[0]}

    def loss_and_metrics(self, model, features, normalizers, training):
        inputs = {k: features[k] for k in ENCODER_INPUTS}
        logits = model(inputs, training=training)
        losses, metrics = [], {}
        for name in ("start", "end"):
            labels = features[f"{name}_positions"]
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=logits[f"{name}_logits"])
            losses.append(tf.reduce_sum(per_example))
            correct = tf.cast(tf.equal(tf.argmax(logits[f"{name}_logits"], -1,
                                                 output_type=tf.int32), labels), tf.float32)
            metrics[f"{name}_accuracy"] = (tf.reduce_sum(correct),
                                           tf.cast(tf.size(correct), tf.float32))
        # total_loss = (start_loss + end_loss) / 2.0, each a mean over examples.
        loss = (losses[0] + losses[1]) / 2.0 / tf.cast(normalizers["examples"], tf.float32)
        return loss, metrics
