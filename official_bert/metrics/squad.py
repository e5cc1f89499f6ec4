"""The official SQuAD evaluation (v1.1 and v2.0 scripts' logic).

* Answers are normalized: lower case, punctuation removed, the articles
  "a", "an", "the" removed, white space collapsed.
* Exact match is 1 when the normalized prediction equals a normalized gold
  answer; F1 is the bag-of-tokens F1; both take the max over the gold answers
  and are averaged over all questions (a question without a prediction scores
  0), as percentages.
* v2.0 (`evaluate_v2`): a question with no (non-empty) gold answer has the gold
  answer "" and F1 is 1 only when both are empty; HasAns_* and NoAns_* split the
  scores; with the null odds (`null_odds.json`: null score minus best non-null
  score) the best threshold is searched as `find_all_best_thresh` does:
  `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh`.

`evaluate_v1` reproduces evaluate-v1.1.py's numbers; `evaluate_v2` reproduces
evaluate-v2.0.py's with `--na-prob-file` (and `--na-prob-thresh` 1.0).
"""

from __future__ import annotations

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def get_tokens(s: str) -> list:
    if not s:
        return []
    return normalize_answer(s).split()


def exact_match_score(prediction: str, ground_truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score_v1(prediction: str, ground_truth: str) -> float:
    """evaluate-v1.1.py's F1 (0 when nothing is shared, also for two empties)."""
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(ground_truth_tokens)
    return 2 * precision * recall / (precision + recall)


def compute_f1(a_gold: str, a_pred: str) -> float:
    """evaluate-v2.0.py's F1 (1 when both are empty)."""
    gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
        return float(gold_toks == pred_toks)
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_toks)
    recall = num_same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield qa


def has_gold_answers(dataset) -> bool:
    """Whether `dataset` (the JSON `data` list) can be scored: every question
    has an `answers` list and some question has an answer or is impossible."""
    questions = list(_questions(dataset))
    return bool(questions) and all(isinstance(qa.get("answers"), list) for qa in questions) and any(
        qa["answers"] or qa.get("is_impossible") for qa in questions)


def evaluate_v1(dataset, predictions: dict) -> dict:
    """evaluate-v1.1.py: {"exact_match", "f1"} in percent (+ counts)."""
    f1 = exact_match = total = missing = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            missing += 1
            continue
        ground_truths = [a["text"] for a in qa["answers"]]
        if not ground_truths:
            continue
        prediction = predictions[qa["id"]]
        exact_match += max(exact_match_score(prediction, g) for g in ground_truths)
        f1 += max(f1_score_v1(prediction, g) for g in ground_truths)
    if total == 0:
        raise ValueError("the evaluation data has no questions")
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total,
            "total": total, "missing_predictions": missing}


def get_raw_scores(dataset, preds):
    exact_scores, f1_scores = {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        gold_answers = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
        if not gold_answers:
            # For unanswerable questions, only correct answer is empty string
            gold_answers = [""]
        if qid not in preds:
            continue
        a_pred = preds[qid]
        exact_scores[qid] = max(float(normalize_answer(a) == normalize_answer(a_pred))
                                for a in gold_answers)
        f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    new_scores = {}
    for qid, s in scores.items():
        pred_na = na_probs[qid] > na_prob_thresh
        new_scores[qid] = float(not qid_to_has_ans[qid]) if pred_na else s
    return new_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
    if qid_list is None:
        qid_list = list(exact_scores)
    total = len(qid_list)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact_scores[k] for k in qid_list) / total),
        ("f1", 100.0 * sum(f1_scores[k] for k in qid_list) / total),
        ("total", total),
    ])


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans, initial_thresh=0.0):
    """The null-odds threshold that maximizes the score, and that score (%).

    The search starts from "no answer for every question", which the official
    script reports as threshold 0.0 (`initial_thresh`) although predicting ""
    when odds > 0.0 is not that; `tuned_threshold` passes a value below every
    odds instead, so that applying the threshold reproduces the best score.
    """
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = best_score = num_no_ans
    best_thresh = initial_thresh
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(dataset, preds: dict, na_probs: dict | None = None,
                na_prob_thresh: float = 1.0, best_thresh_preds: dict | None = None) -> dict:
    """evaluate-v2.0.py's output dict.

    Args:
        dataset: the SQuAD JSON `data` list.
        preds: qas_id → answer ("" = no answer).
        na_probs: qas_id → null odds (None: all 0, and no threshold search).
        best_thresh_preds: the answers the threshold search assumes for
            questions it answers (default `preds`, as the official script;
            pass the best non-null answers to search every threshold exactly).
    """
    qid_to_has_ans = {qa["id"]: bool(qa["answers"])
                      for qa in _questions(dataset)}
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    search = na_probs is not None
    if na_probs is None:
        na_probs = {k: 0.0 for k in preds}
    exact_raw, f1_raw = get_raw_scores(dataset, preds)
    if not exact_raw:
        raise ValueError("no prediction matches a question of the evaluation data")
    exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    out_eval = make_eval_dict(exact_thresh, f1_thresh)
    has_ans = [k for k in has_ans_qids if k in exact_thresh]
    no_ans = [k for k in no_ans_qids if k in exact_thresh]
    if has_ans:
        for key, value in make_eval_dict(exact_thresh, f1_thresh, has_ans).items():
            out_eval[f"HasAns_{key}"] = value
    if no_ans:
        for key, value in make_eval_dict(exact_thresh, f1_thresh, no_ans).items():
            out_eval[f"NoAns_{key}"] = value
    if search:
        search_preds = best_thresh_preds if best_thresh_preds is not None else preds
        if best_thresh_preds is not None:
            exact_raw, f1_raw = get_raw_scores(dataset, search_preds)
        out_eval["best_exact"], out_eval["best_exact_thresh"] = find_best_thresh(
            search_preds, exact_raw, na_probs, qid_to_has_ans)
        out_eval["best_f1"], out_eval["best_f1_thresh"] = find_best_thresh(
            search_preds, f1_raw, na_probs, qid_to_has_ans)
    return dict(out_eval)


def tuned_threshold(dataset, best_non_null: dict, null_odds: dict) -> float:
    """The --null_score_diff_threshold that maximizes F1 on `dataset`.

    Args:
        best_non_null: qas_id → the best non-null answer.
        null_odds: qas_id → null score - best non-null score.
    """
    qid_to_has_ans = {qa["id"]: bool(qa["answers"]) for qa in _questions(dataset)}
    _, f1_raw = get_raw_scores(dataset, best_non_null)
    odds = {k: v for k, v in null_odds.items() if k in f1_raw}
    below_all = min(odds.values()) - 1.0 if odds else 0.0
    return find_best_thresh(best_non_null, f1_raw, odds, qid_to_has_ans,
                            initial_thresh=below_all)[1]
