"""GLUE metrics against values worked out by hand (in the comments)."""

import math

import numpy as np
import pytest

from official_bert.metrics import classification as m


def test_accuracy():
    assert m.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5


def test_f1_of_the_positive_class():
    # TP = 2 (rows 0, 2), FP = 1 (row 1), FN = 1 (row 3): 2*2 / (2*2 + 1 + 1)
    assert m.f1_score([1, 0, 1, 1, 0], [1, 1, 1, 0, 0]) == pytest.approx(2 / 3)
    # The other class as positive: TP = 1 (row 4), FP = 1 (row 3), FN = 1 (row 1)
    assert m.f1_score([1, 0, 1, 1, 0], [1, 1, 1, 0, 0], positive=0) == pytest.approx(0.5)
    assert m.f1_score([0, 0], [0, 0]) == 0.0  # no positive anywhere: 0, as scikit-learn


def test_matthews_binary():
    # TP = 1, TN = 2, FP = 0, FN = 1: (1*2 - 0*1) / sqrt(1 * 2 * 2 * 3) = 2 / sqrt(12)
    assert m.matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(2 / math.sqrt(12))
    assert m.matthews_corrcoef([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert m.matthews_corrcoef([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    assert m.matthews_corrcoef([1, 0, 1, 0], [1, 1, 1, 1]) == 0.0  # constant prediction


def test_matthews_three_classes():
    # c = 4 correct of s = 6; every class occurs twice and is predicted twice:
    # (4*6 - (4+4+4)) / sqrt((36 - 12)(36 - 12)) = 12 / 24
    assert m.matthews_corrcoef([0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 1, 2]) == pytest.approx(0.5)


def test_pearson():
    # dx = (-1, 0, 1), dy = (-5/3, -2/3, 7/3): 4 / sqrt(2 * 78/9) = 12 / sqrt(156)
    assert m.pearson([1, 2, 3], [1, 2, 5]) == pytest.approx(12 / math.sqrt(156))
    assert m.pearson([1, 2, 3], [6, 4, 2]) == pytest.approx(-1.0)
    assert math.isnan(m.pearson([1, 1, 1], [1, 2, 3]))


def test_spearman_with_ties():
    assert m.rank_average([10, 20, 10, 30]).tolist() == [1.5, 3.0, 1.5, 4.0]
    # ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4): 4.5 / sqrt(4.5 * 5) = sqrt(0.9)
    assert m.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(math.sqrt(0.9))
    # Monotonic but not linear: rho 1, r below 1.
    assert m.spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)
    assert m.pearson([1, 2, 3, 4], [1, 4, 9, 16]) < 0.99


def test_compute_by_task_kind():
    assert set(m.compute("binary", [0, 1], [0, 1])) == {"accuracy", "f1"}
    assert set(m.compute("matthews", [0, 1], [0, 1])) == {"accuracy", "matthews_corr"}
    assert set(m.compute("multiclass", [0, 1, 2], [0, 1, 2])) == {"accuracy"}
    assert set(m.compute("regression", [0.5, 1.0], [0.4, 2.0])) == {"pearson", "spearman"}
    with pytest.raises(ValueError, match="unknown metric kind"):
        m.compute("bleu", [0], [0])


def test_evaluate_logits_classification():
    results = m.evaluate_logits("binary", [[0.0, 1.0], [2.0, 0.0]], [1, 1])
    # -log softmax: row 0 log(1 + e^-1), row 1 log(1 + e^2)
    expected_loss = (math.log(1 + math.exp(-1)) + math.log(1 + math.exp(2))) / 2
    assert results["loss"] == pytest.approx(expected_loss)
    assert results["accuracy"] == 0.5
    assert results["f1"] == pytest.approx(2 / 3)  # TP 1, FN 1
    np.testing.assert_allclose(m.softmax([[0.0, math.log(3)]]), [[0.25, 0.75]])


def test_evaluate_logits_regression():
    results = m.evaluate_logits("regression", [[1.0], [2.0], [4.0]], [1.0, 3.0, 4.0])
    assert results["loss"] == pytest.approx(1 / 3)  # squared errors 0, 1, 0
    assert results["spearman"] == pytest.approx(1.0)


def test_bad_shapes_are_errors():
    with pytest.raises(ValueError, match="shapes"):
        m.accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="no examples"):
        m.accuracy([], [])
    with pytest.raises(ValueError, match="do not fit"):
        m.evaluate_logits("binary", [[0.0, 1.0]], [1, 0])
