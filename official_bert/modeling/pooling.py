"""Sentence vectors from the encoder's token vectors (`bert embed`, its SavedModel)."""

from __future__ import annotations

import tensorflow as tf

from official_bert.configs import SENTENCE_POOLINGS


def sentence_embedding(sequence_output, input_mask, pooling="mean", normalize=True):
    """One vector per sequence from the encoder's last layer, in float32.

    "mean" is sentence-transformers' mean pooling: the average of the token
    vectors weighted by `input_mask` (padding counts for nothing; a row with
    no token gives zeros, its count clamped at 1e-9 as theirs is); "cls" is
    the [CLS] token's vector (not the tanh pooler). `normalize` divides by the
    L2 norm (clamped at 1e-12, as torch's `F.normalize`), so a dot product is
    the cosine similarity. `bert embed` and its SavedModel both use this.

    Args:
        sequence_output: [batch, seq, hidden] float tensor.
        input_mask: [batch, seq] int tensor, 1 on the tokens.
        pooling: "mean" or "cls".
        normalize: bool.

    Returns:
        [batch, hidden] float32 tensor.
    """
    hidden = tf.cast(sequence_output, tf.float32)
    if pooling == "mean":
        mask = tf.cast(input_mask, tf.float32)[:, :, None]
        summed = tf.reduce_sum(hidden * mask, axis=1)
        vectors = summed / tf.maximum(tf.reduce_sum(mask, axis=1), 1e-9)
    elif pooling == "cls":
        vectors = hidden[:, 0]
    else:
        raise ValueError(f"pooling={pooling!r}: one of {SENTENCE_POOLINGS}")
    if normalize:
        norm = tf.sqrt(tf.reduce_sum(tf.square(vectors), axis=-1, keepdims=True))
        vectors = vectors / tf.maximum(norm, 1e-12)
    return vectors
