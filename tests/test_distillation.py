"""The distillation losses (`training.distillation`) against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from official_bert.training import distillation


def value(x) -> float:
    return float(np.asarray(x))


def softmax(row):
    e = [math.exp(v - max(row)) for v in row]
    return [v / sum(e) for v in e]


def kl(p, q):
    return sum(a * math.log(a / b) for a, b in zip(p, q))


def test_soft_target_loss_is_t_squared_kl_at_the_temperature():
    teacher, student, t = [2.0, 0.0, -1.0], [0.5, 0.5, 0.0], 2.0
    by_hand = t * t * kl(softmax([v / t for v in teacher]), softmax([v / t for v in student]))
    got = distillation.soft_target_loss(np.array([teacher]), np.array([student]), t)
    assert value(got) == pytest.approx(by_hand, rel=1e-6)
    # p = softmax(1, 0, -0.5) = (0.6285, 0.2312, 0.1403), q = softmax(0.25, 0.25, 0) =
    # (0.3599, 0.3599, 0.2803): KL = 0.1511, times T² = 4.
    assert by_hand == pytest.approx(0.6045, abs=1e-4)


def test_soft_target_loss_is_zero_when_the_student_matches():
    logits = np.array([[1.0, -2.0, 0.5], [0.0, 0.0, 3.0]])
    assert value(distillation.soft_target_loss(logits, logits + 7.0, 3.0)) == pytest.approx(
        0.0, abs=1e-6)  # a constant shift is the same distribution


def test_soft_target_loss_averages_only_real_tokens():
    teacher = np.array([[[3.0, 0.0], [0.0, 3.0], [9.0, -9.0]]])
    student = np.array([[[0.0, 0.0], [0.0, 0.0], [-9.0, 9.0]]])  # the padded token differs most
    mask = np.array([[1, 1, 0]])
    one = kl(softmax([3.0, 0.0]), [0.5, 0.5])
    assert value(distillation.soft_target_loss(teacher, student, 1.0, mask)) == pytest.approx(
        one, rel=1e-6)  # both real tokens are the same KL; the padded one is left out


def test_task_loss_mixes_labels_and_soft_targets():
    assert value(distillation.task_loss(np.float32(2.0), np.float32(0.5), 0.25)) == \
        pytest.approx(0.25 * 2.0 + 0.75 * 0.5)


def test_regression_loss_is_mean_squared_error():
    got = distillation.regression_loss(np.array([1.0, 2.0, 4.0]), np.array([1.5, 2.0, 2.0]))
    assert value(got) == pytest.approx((0.25 + 0.0 + 4.0) / 3)


def test_span_loss_masks_padding_out_of_the_position_distributions():
    mask = np.array([[1, 1, 0]])
    teacher_start, student_start = np.array([[2.0, 0.0, 50.0]]), np.array([[0.0, 0.0, -50.0]])
    teacher_end, student_end = np.array([[0.0, 1.0, 0.0]]), np.array([[0.0, 1.0, 9.0]])
    start = kl(softmax([2.0, 0.0]), [0.5, 0.5])
    end = 0.0  # the same over the two real positions
    got = distillation.span_loss(teacher_start, teacher_end, student_start, student_end, 1.0,
                                 mask)
    assert value(got) == pytest.approx((start + end) / 2, rel=1e-6)


def test_hidden_state_loss_is_one_minus_cosine_over_real_tokens():
    teacher = np.array([[[1.0, 0.0], [1.0, 1.0], [5.0, 5.0]]])
    student = np.array([[[0.0, 2.0], [2.0, 2.0], [-1.0, 0.0]]])
    mask = np.array([[1, 1, 0]])
    # orthogonal: 1 - 0; parallel: 1 - 1; the padded token is left out.
    assert value(distillation.hidden_state_loss(teacher, student, mask)) == pytest.approx(0.5)


def relations_by_hand(x, heads, mask):
    """softmax(X Xᵀ / √d) per head over the real columns, as plain Python lists."""
    tokens, width = len(x), len(x[0])
    size = width // heads
    out = []
    for h in range(heads):
        part = [row[h * size:(h + 1) * size] for row in x]
        rows = []
        for i in range(tokens):
            scores = [sum(a * b for a, b in zip(part[i], part[j])) / math.sqrt(size)
                      for j in range(tokens) if mask[j]]
            rows.append(softmax(scores))
        out.append(rows)
    return out


def test_attention_relations_of_different_widths():
    """A teacher of width 4 and a student of width 2, one relation head each
    ... and two: the relations are token × token, whatever the width."""
    rng = np.random.default_rng(0)
    mask = [1, 1, 1, 0]
    teacher = [rng.normal(size=(4, 4)).tolist() for _ in range(3)]  # queries, keys, values
    student = [rng.normal(size=(4, 2)).tolist() for _ in range(3)]
    for heads in (1, 2):
        by_hand = 0.0
        for t, s in zip(teacher, student):
            rt, rs = relations_by_hand(t, heads, mask), relations_by_hand(s, heads, mask)
            rows = [kl(rt[h][i], rs[h][i]) for h in range(heads) for i in range(4) if mask[i]]
            by_hand += sum(rows) / len(rows)
        got = distillation.attention_relation_loss(
            tuple(np.array([t]) for t in teacher), tuple(np.array([s]) for s in student), heads,
            np.array([mask]))
        assert value(got) == pytest.approx(by_hand, rel=1e-5)


def test_a_width_that_does_not_split_into_the_heads_is_refused():
    with pytest.raises(ValueError, match="does not split into 4 relation heads"):
        distillation.self_attention_relations(np.ones((1, 2, 6)), 4, np.ones((1, 2)))
