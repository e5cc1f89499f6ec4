"""Sentence-level metrics of GLUE: accuracy, F1, Matthews correlation, Pearson, Spearman.

Pure numpy (no scikit-learn or scipy), each the textbook definition, with the
degenerate cases defined as the GLUE evaluation (scikit-learn / scipy) defines
them: F1 and Matthews correlation are 0 when undefined (no positive, or a
constant prediction); a correlation with a constant side is nan.

Which task reports what (`TASK_METRICS`, by the kind of task):
    accuracy                         every classification task
    f1 (of label index 1)            every 2-class task (the official metric of MRPC, QQP)
    matthews_corr                    CoLA
    pearson, spearman                regression (STS-B)

Example:
>>> matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0])
0.5773502691896258
"""

from __future__ import annotations

import numpy as np


def accuracy(labels, predictions) -> float:
    """Fraction of `predictions` equal to `labels`."""
    labels, predictions = _pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1_score(labels, predictions, positive=1) -> float:
    """F1 of the `positive` class: 2 TP / (2 TP + FP + FN); 0 when undefined."""
    labels, predictions = _pair(labels, predictions)
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    denominator = 2 * tp + fp + fn
    return float(2 * tp / denominator) if denominator else 0.0


def matthews_corrcoef(labels, predictions) -> float:
    """Matthews correlation for any number of classes (Gorodkin's R_K).

    With C the confusion matrix, t_k = times class k occurs, p_k = times it is
    predicted, c = correct, s = examples:
        (c s - Σ p_k t_k) / sqrt((s² - Σ p_k²)(s² - Σ t_k²)),
    which for two classes is (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)).
    0 when the denominator is 0 (scikit-learn's convention).
    """
    labels, predictions = _pair(labels, predictions)
    classes = np.union1d(labels, predictions)
    t = np.array([np.sum(labels == k) for k in classes], dtype=np.float64)
    p = np.array([np.sum(predictions == k) for k in classes], dtype=np.float64)
    c = float(np.sum(labels == predictions))
    s = float(len(labels))
    denominator = np.sqrt((s * s - np.dot(p, p)) * (s * s - np.dot(t, t)))
    return float((c * s - np.dot(p, t)) / denominator) if denominator else 0.0


def pearson(x, y) -> float:
    """Pearson's r: covariance over the product of standard deviations."""
    x, y = _pair(x, y, float)
    dx, dy = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.dot(dx, dx) * np.dot(dy, dy))
    return float(np.dot(dx, dy) / denominator) if denominator else float("nan")


def rank_average(values) -> np.ndarray:
    """1-based ranks; tied values share the mean of their ranks."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman(x, y) -> float:
    """Spearman's rho: Pearson's r of the (tie-averaged) ranks."""
    x, y = _pair(x, y, float)
    return pearson(rank_average(x), rank_average(y))


# Metric names per kind of task (see the module docstring).
TASK_METRICS = {
    "binary": ("accuracy", "f1"),
    "multiclass": ("accuracy",),
    "matthews": ("accuracy", "matthews_corr"),
    "regression": ("pearson", "spearman"),
}


def compute(metric_kind: str, labels, predictions) -> dict:
    """The metrics of `TASK_METRICS[metric_kind]`, by name.

    Args:
        metric_kind: "binary", "multiclass", "matthews" or "regression".
        labels: class ids (or gold scores for regression).
        predictions: predicted class ids (or scores).
    """
    if metric_kind not in TASK_METRICS:
        raise ValueError(f"unknown metric kind {metric_kind!r}; use one of {sorted(TASK_METRICS)}")
    functions = {"accuracy": accuracy, "f1": f1_score, "matthews_corr": matthews_corrcoef,
                 "pearson": pearson, "spearman": spearman}
    return {name: functions[name](labels, predictions) for name in TASK_METRICS[metric_kind]}


def log_softmax(logits) -> np.ndarray:
    """Row-wise log-softmax in float64."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(logits) -> np.ndarray:
    """Row-wise softmax in float64."""
    return np.exp(log_softmax(logits))


def evaluate_logits(metric_kind: str, logits, labels) -> dict:
    """`loss` (mean cross-entropy, or mean squared error for regression) and
    the task's metrics, from a classifier's logits [examples, outputs].

    Example:
    >>> evaluate_logits("binary", [[0.0, 1.0], [2.0, 0.0]], [1, 1])["accuracy"]
    0.5
    """
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels)
    if logits.ndim != 2 or len(logits) != len(labels):
        raise ValueError(f"logits of shape {logits.shape} do not fit {len(labels)} labels")
    if metric_kind == "regression":
        scores = logits[:, 0]
        labels = labels.astype(np.float64)
        return {"loss": float(np.mean((scores - labels) ** 2)),
                **compute(metric_kind, labels, scores)}
    log_probs = log_softmax(logits)
    loss = float(-np.mean(log_probs[np.arange(len(labels)), labels.astype(np.int64)]))
    return {"loss": loss, **compute(metric_kind, labels, np.argmax(logits, axis=-1))}


def _pair(a, b, dtype=None):
    a, b = np.asarray(a, dtype=dtype), np.asarray(b, dtype=dtype)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"expected two 1-D arrays of one length, got shapes {a.shape} and {b.shape}")
    if len(a) == 0:
        raise ValueError("no examples to score")
    return a, b
