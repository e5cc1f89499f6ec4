"""The official SQuAD metric on hand-computed cases."""

import pytest

from official_bert.metrics import squad as m


def dataset(*qas):
    return [{"title": "t", "paragraphs": [{"context": "c", "qas": list(qas)}]}]


def qa(qid, *answers, impossible=False):
    out = {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0} for a in answers]}
    if impossible:
        out["is_impossible"] = True
    return out


def test_normalize_answer():
    assert m.normalize_answer("The  Cat, a DOG!") == "cat dog"
    assert m.normalize_answer("an apple-pie") == "applepie"
    assert m.normalize_answer("theatre") == "theatre"  # articles only as words
    assert m.normalize_answer("Café") == "café"  # accents are kept


def test_exact_and_f1_hand_computed():
    assert m.exact_match_score("the Eiffel Tower.", "Eiffel tower") == 1.0
    # pred "red big house", gold "the big house": common {big, house} = 2;
    # precision 2/3, recall 2/2 → F1 = 2 * (2/3) / (2/3 + 1) = 0.8.
    assert m.f1_score_v1("red big house", "the big house") == pytest.approx(0.8)
    assert m.f1_score_v1("cat", "dog") == 0.0
    # Repeated tokens count with multiplicity: pred "a b b", gold "b b b c"
    # ("a" is an article and disappears): common 2 of pred 2 / gold 4 → 2/3.
    assert m.f1_score_v1("a b b", "b b b c") == pytest.approx(2 / 3)
    # v1.1 scores two empty answers 0; v2.0 scores them 1.
    assert m.f1_score_v1("", "") == 0.0
    assert m.compute_f1("", "") == 1.0
    assert m.compute_f1("", "x") == 0.0


def test_evaluate_v1_max_over_gold_and_missing():
    data = dataset(qa("1", "Denver Broncos", "Broncos"), qa("2", "1895"), qa("3", "x"))
    preds = {"1": "the Broncos", "2": "in 1895 and 1943"}  # "3" is missing
    result = m.evaluate_v1(data, preds)
    # q1: EM 1 (vs "Broncos"), F1 1. q2: EM 0; F1: 4 tokens (in 1895 and 1943),
    # 1 shared: P 1/4, R 1 → 2 * 0.25 / 1.25 = 0.4. q3 (missing): 0.
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 * 1.4 / 3)
    assert result["total"] == 3 and result["missing_predictions"] == 1


def test_evaluate_v2_has_ans_no_ans_and_best_threshold():
    data = dataset(qa("a", "blue whale"), qa("b", "tokyo"),
                   qa("c", impossible=True), qa("d", impossible=True))
    preds = {"a": "the blue whale", "b": "", "c": "", "d": "paris"}
    odds = {"a": -3.0, "b": 2.0, "c": 1.0, "d": -1.0}
    result = m.evaluate_v2(data, preds, odds)
    # exact: a 1, b 0, c 1, d 0 → 50; same F1. HasAns {a, b}: 50; NoAns {c, d}: 50.
    assert result["exact"] == 50.0 and result["f1"] == 50.0 and result["total"] == 4
    assert result["HasAns_exact"] == 50.0 and result["HasAns_total"] == 2
    assert result["NoAns_exact"] == 50.0 and result["NoAns_total"] == 2
    # The search starts at 2 (all null → both no-answer questions right) and answers
    # in order of odds: a (+1 → 3, thresh -3), d (-1 → 2), c (0, pred "" → 2),
    # b (+0, pred "" → 2). Best 3/4 at threshold -3.
    assert result["best_exact"] == 75.0 and result["best_exact_thresh"] == -3.0
    assert result["best_f1"] == 75.0 and result["best_f1_thresh"] == -3.0


def test_threshold_search_with_best_non_null_answers_and_tuning():
    data = dataset(qa("a", "blue whale"), qa("b", "tokyo"), qa("c", impossible=True))
    best_non_null = {"a": "blue whale", "b": "tokyo", "c": "paris"}
    odds = {"a": -2.0, "b": 0.5, "c": 1.5}
    # Threshold t answers questions with odds <= t: answering a and b (t = 0.5)
    # and not c is perfect.
    assert m.tuned_threshold(data, best_non_null, odds) == 0.5
    # All null is best when every answer is wrong: the threshold lies below every odds.
    wrong = {"a": "x", "b": "y", "c": "z"}
    t = m.tuned_threshold(data, wrong, odds)
    assert t < -2.0
    # The official search reports 0.0 for that start state.
    result = m.evaluate_v2(data, {"a": "", "b": "", "c": ""}, odds, best_thresh_preds=wrong)
    assert result["best_f1_thresh"] == 0.0 and result["best_f1"] == pytest.approx(100 / 3)


def test_has_gold_answers():
    assert m.has_gold_answers(dataset(qa("a", "x")))
    assert m.has_gold_answers(dataset(qa("a", impossible=True)))
    assert not m.has_gold_answers(dataset({"id": "a", "question": "?"}))
    assert not m.has_gold_answers(dataset(qa("a")))
