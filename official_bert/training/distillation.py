"""Distillation losses: what a student learns from its teacher.

Soft targets (Hinton et al., 2015): the teacher's distribution at a
temperature T, matched by the student's at the same T. The gradients of a
softened loss shrink as 1/T², so it is scaled by T² to keep its weight against
the labels' loss when T changes:

    task loss = alpha * (loss on the labels) + (1 - alpha) * T² * KL(teacher_T ‖ student_T)

with mean squared error between the two outputs for regression. Spans
(SQuAD) are two distributions over positions, start and end, each masked to
the sequence; tags (NER) one distribution per token, averaged over the real
tokens.

Representations, for general distillation (on a corpus, before a task):
hidden states by cosine when the widths match (DistilBERT), and otherwise the
last layer's self-attention relations (MiniLMv2, Wang et al., 2021):
softmax(X Xᵀ / √d) for X each of the queries, keys and values, split into the
same number of relation heads in teacher and student, so that the two may
have different widths and head counts.

Every function takes logits or activations as tensors and returns a scalar;
masks are 1 for a real token and 0 for padding. No TensorFlow-only op: the
functions are `keras.ops`, tested against hand computations
(tests/test_distillation.py).
"""

from __future__ import annotations

import math

from keras import ops

# What padding gets before a softmax over positions: far below any logit, finite so
# that a row of padding alone still has a defined (uniform) distribution.
_MASKED = -1e9


def soft_target_loss(teacher_logits, student_logits, temperature: float, mask=None):
    """T² · KL(softmax(teacher / T) ‖ softmax(student / T)) over the last axis,
    averaged over every other position (only where `mask` is 1, when given:
    a [batch] or [batch, tokens] array of 0/1)."""
    return _masked_mean(soft_targets(teacher_logits, student_logits, temperature), mask)


def soft_targets(teacher_logits, student_logits, temperature: float):
    """T² · KL(softmax(teacher / T) ‖ softmax(student / T)) over the last axis,
    one value per other position (a task sums them over its global batch)."""
    teacher = ops.softmax(ops.cast(teacher_logits, "float32") / temperature, axis=-1)
    student_log = ops.log_softmax(ops.cast(student_logits, "float32") / temperature, axis=-1)
    teacher_log = ops.log(ops.maximum(teacher, 1e-30))
    return temperature ** 2 * ops.sum(teacher * (teacher_log - student_log), axis=-1)


def regression_loss(teacher_outputs, student_outputs):
    """Mean squared error between the teacher's and the student's scores."""
    difference = ops.cast(student_outputs, "float32") - ops.cast(teacher_outputs, "float32")
    return ops.mean(ops.square(difference))


def span_loss(teacher_start, teacher_end, student_start, student_end, temperature: float,
              mask):
    """The soft-target loss of the start and of the end distributions over
    positions, each masked to the sequence (`mask` [batch, tokens]), averaged."""
    start = ops.mean(position_soft_targets(teacher_start, student_start, temperature, mask))
    end = ops.mean(position_soft_targets(teacher_end, student_end, temperature, mask))
    return (start + end) / 2


def position_soft_targets(teacher_logits, student_logits, temperature: float, mask):
    """Per example: the soft-target loss of a distribution over the positions
    of its sequence (`mask` [batch, tokens]: padding takes no probability)."""
    def over_positions(logits):
        return ops.where(ops.cast(mask, "bool"), ops.cast(logits, "float32"), _MASKED)

    return soft_targets(over_positions(teacher_logits), over_positions(student_logits),
                        temperature)


def task_loss(labels_loss, soft_loss, alpha: float, labelled=None):
    """alpha · (loss on the labels) + (1 - alpha) · (soft-target loss); where
    `labelled` (1/0, broadcast against the losses) is 0, a row of unlabelled
    text the teacher labelled (--distill_text), the soft-target loss alone."""
    mixed = alpha * labels_loss + (1.0 - alpha) * soft_loss
    if labelled is None:
        return mixed
    return ops.where(ops.cast(labelled, "bool"), mixed, soft_loss)


def hidden_state_loss(teacher_hidden, student_hidden, mask):
    """1 - cosine similarity of each real token's teacher and student vectors
    (same width), averaged over the real tokens."""
    return _masked_mean(hidden_state_distances(teacher_hidden, student_hidden), mask)


def hidden_state_distances(teacher_hidden, student_hidden):
    """1 - cosine similarity of the teacher's and the student's vector, per
    token ([batch, tokens]; a task sums them over its global batch)."""
    teacher = ops.cast(teacher_hidden, "float32")
    student = ops.cast(student_hidden, "float32")
    dot = ops.sum(teacher * student, axis=-1)
    norms = ops.sqrt(ops.sum(ops.square(teacher), axis=-1) * ops.sum(ops.square(student), axis=-1))
    return 1.0 - dot / ops.maximum(norms, 1e-12)


def relation_heads(teacher_width: int, teacher_heads: int, student_width: int,
                   student_heads: int) -> int:
    """How many relation heads both sides' queries, keys and values are split
    into: the teacher's attention heads, or else the student's, when both
    widths split into them; else the widths' greatest common divisor."""
    for heads in (teacher_heads, student_heads):
        if teacher_width % heads == 0 and student_width % heads == 0:
            return heads
    return math.gcd(teacher_width, student_width)


def self_attention_relations(vectors, num_relation_heads: int, mask):
    """MiniLMv2's relation of one of the queries, keys or values [batch, tokens,
    width]: softmax(X Xᵀ / √d) per relation head (d = width / heads), padding
    columns masked; [batch, heads, tokens, tokens] log-probabilities."""
    batch, tokens, width = ops.shape(vectors)
    if width % num_relation_heads:
        raise ValueError(f"a width of {width} does not split into {num_relation_heads} "
                         "relation heads")
    size = width // num_relation_heads
    heads = ops.transpose(ops.reshape(ops.cast(vectors, "float32"),
                                      (batch, tokens, num_relation_heads, size)), (0, 2, 1, 3))
    scores = ops.matmul(heads, ops.transpose(heads, (0, 1, 3, 2))) / (size ** 0.5)
    columns = ops.cast(mask, "bool")[:, None, None, :]
    return ops.log_softmax(ops.where(columns, scores, _MASKED), axis=-1)


def attention_relation_loss(teacher_qkv, student_qkv, num_relation_heads: int, mask):
    """MiniLMv2's loss: for each of queries, keys and values (the two tuples of
    [batch, tokens, width] tensors, widths free), KL(teacher ‖ student) of
    their relations, averaged over heads and the real tokens' rows; summed
    over the three."""
    return _masked_mean(
        attention_relation_divergences(teacher_qkv, student_qkv, num_relation_heads, mask), mask)


def attention_relation_divergences(teacher_qkv, student_qkv, num_relation_heads: int, mask):
    """`attention_relation_loss` per token (its row of each relation), before
    the mean over the real tokens: [batch, tokens]."""
    return relation_divergences(
        [self_attention_relations(t, num_relation_heads, mask) for t in teacher_qkv],
        student_qkv, mask)


def relation_divergences(teacher_relations, student_qkv, mask):
    """`attention_relation_divergences` from the teacher's relations computed
    already (`self_attention_relations`, [batch, heads, tokens, tokens]
    each): the student's are split into as many heads. [batch, tokens]."""
    total = 0.0
    for teacher_log, student in zip(teacher_relations, student_qkv):
        student_log = self_attention_relations(student, teacher_log.shape[1], mask)
        kl = ops.sum(ops.exp(teacher_log) * (teacher_log - student_log), axis=-1)
        total = total + ops.mean(kl, axis=1)  # over the heads
    return total


def _masked_mean(values, mask=None):
    """The mean of `values` where `mask` is 1 (all of them without a mask)."""
    if mask is None:
        return ops.mean(values)
    weights = ops.cast(mask, "float32")
    return ops.sum(values * weights) / ops.maximum(ops.sum(weights), 1.0)
