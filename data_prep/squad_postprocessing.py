"""SQuAD's logits → answers: google-research/bert's `write_predictions`.

`postprocess_predictions` takes, for every window of every question
(`squad.convert_examples_to_features`), the n-best start and end logits,
keeps the legal spans (inside the context, in the window where the token has
the most context, at most `max_answer_length` long), recovers each span's
text from the original context (`get_final_text`) and, for v2.0, weighs the
null score (minimum over the windows of start[CLS] + end[CLS]) against the
best non-null span. `write_prediction_files` writes google's
predictions.json / nbest_predictions.json / null_odds.json contents to the
paths the caller gives.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from typing import Dict, Optional

from absl import logging

from official_bert import io
from official_bert.text import tokenization


def _strip_spaces(text):
    ns_chars = []
    ns_to_s_map = collections.OrderedDict()
    for i, c in enumerate(text):
        if c == " ":
            continue
        ns_to_s_map[len(ns_chars)] = i
        ns_chars.append(c)
    return "".join(ns_chars), ns_to_s_map


def get_final_text_span(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """`get_final_text`, also returning the (start, end + 1) of the result in `orig_text`."""
    # When we created the data, we kept track of the alignment between original
    # (whitespace tokenized) tokens and our WordPiece tokenized tokens. So
    # now `orig_text` contains the span of our original text corresponding to the
    # span that we predicted.
    #
    # However, `orig_text` may contain extra characters that we don't want in
    # our prediction.
    #
    # For example, let's say:
    #   pred_text = steve smith
    #   orig_text = Steve Smith's
    #
    # We don't want to return `orig_text` because it contains the extra "'s".
    #
    # We don't want to return `pred_text` because it's already been normalized
    # (the SQuAD eval script also does punctuation stripping/lower casing but
    # our tokenizer does additional normalization like stripping accent
    # characters).
    #
    # What we really want to return is "Steve Smith".
    #
    # Therefore, we have to apply a semi-complicated alignment heuristic between
    # `pred_text` and `orig_text` to get a character-to-character alignment. This
    # can fail in certain cases in which case we just return `orig_text`.
    whole = (orig_text, 0, len(orig_text))

    # We first tokenize `orig_text`, strip whitespace from the result
    # and `pred_text`, and check if they are the same length. If they are
    # NOT the same length, the heuristic has failed. If they are the same
    # length, we assume the characters are one-to-one aligned.
    tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    tok_text = " ".join(tokenizer.tokenize(orig_text))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        if verbose_logging:
            logging.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
        return whole
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        if verbose_logging:
            logging.info("Length not equal after stripping spaces: '%s' vs '%s'",
                         orig_ns_text, tok_ns_text)
        return whole

    # We then project the characters in `pred_text` back to `orig_text` using
    # the character-to-character alignment.
    tok_s_to_ns_map = {tok_index: i for i, tok_index in tok_ns_to_s_map.items()}
    orig_start_position = None
    if start_position in tok_s_to_ns_map:
        orig_start_position = orig_ns_to_s_map.get(tok_s_to_ns_map[start_position])
    if orig_start_position is None:
        return whole
    orig_end_position = None
    if end_position in tok_s_to_ns_map:
        orig_end_position = orig_ns_to_s_map.get(tok_s_to_ns_map[end_position])
    if orig_end_position is None:
        return whole
    return (orig_text[orig_start_position:orig_end_position + 1],
            orig_start_position, orig_end_position + 1)


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """Project the tokenized prediction back to the original text."""
    return get_final_text_span(pred_text, orig_text, do_lower_case, verbose_logging)[0]


def _get_best_indexes(logits, n_best_size):
    """Get the n-best logits from a list (ties: the lower index first)."""
    index_and_score = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
    return [i for i, _ in index_and_score[:n_best_size]]


def _compute_softmax(scores):
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(s - max_score) for s in scores]
    total = sum(exp_scores)
    return [s / total for s in exp_scores]


def _context_char_span(example, orig_doc_start, orig_doc_end, sub_start, sub_end):
    """Maps a (start, end) inside " ".join(doc_tokens[a:b+1]) to context offsets."""
    # Walk the joined words: word k starts at a running offset in orig_text.
    position = 0
    start_char = end_char = None
    for k in range(orig_doc_start, orig_doc_end + 1):
        word_start, word_end = example.word_spans[k]
        length = word_end - word_start
        if start_char is None and sub_start < position + length:
            start_char = word_start + max(sub_start - position, 0)
        if sub_end <= position + length:
            end_char = word_start + (sub_end - position)
            break
        position += length + 1  # the joining space
    if start_char is None:
        start_char = example.word_spans[orig_doc_start][0]
    if end_char is None:
        end_char = example.word_spans[orig_doc_end][1]
    return start_char, max(end_char, start_char)


PrelimPrediction = collections.namedtuple(
    "PrelimPrediction", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
# One n-best entry: (text, start_logit, end_logit, start_char, end_char).
NO_ANSWER = ("", 0.0, 0.0, -1, -1)


@dataclasses.dataclass
class SquadPrediction:
    """The post-processed answer of one question."""

    text: str  # the prediction ("" = no answer for v2.0)
    nbest: list  # google's nbest_predictions.json entries
    score_diff: Optional[float]  # v2.0: null score - best non-null score
    best_text: str  # the best non-null answer ("empty" if none)
    best_score: float  # its start + end logit
    start_char: int  # its character span in the context (-1 if none)
    end_char: int
    null_score: Optional[float]


@dataclasses.dataclass
class _NullScore:
    """v2.0: the lowest null score (start[CLS] + end[CLS]) over an example's windows."""

    score: float = 1000000  # large and positive
    feature_index: int = 0  # the paragraph slice with min null score
    start_logit: float = 0.0
    end_logit: float = 0.0


def _legal_spans(feature, start_indexes, end_indexes, max_answer_length):
    """(start, end) pairs of the candidates that can be answers."""
    for start_index in start_indexes:
        for end_index in end_indexes:
            # We could hypothetically create invalid predictions, e.g., predict
            # that the start of the span is in the question. We throw out all
            # invalid predictions.
            if start_index >= len(feature.tokens) or end_index >= len(feature.tokens):
                continue
            if start_index not in feature.token_to_orig_map:
                continue
            if end_index not in feature.token_to_orig_map:
                continue
            if not feature.token_is_max_context.get(start_index, False):
                continue
            if end_index < start_index:
                continue
            if end_index - start_index + 1 > max_answer_length:
                continue
            yield start_index, end_index


def _prelim_predictions(example_features, results, n_best_size: int, max_answer_length: int,
                        version_2_with_negative: bool) -> tuple[list, _NullScore]:
    """Every window's candidate spans, best first (with the null answer for
    v2.0), and the example's null score."""
    prelim_predictions = []
    null = _NullScore()
    for feature_index, feature in enumerate(example_features):
        start_logits, end_logits = results[feature.unique_id]
        # Only the window's tokens, never its padding, can be candidates
        # (google's searched all max_seq_length logits, so a model's
        # padding logits could crowd real tokens out of the n-best).
        start_logits = [float(x) for x in start_logits[:len(feature.tokens)]]
        end_logits = [float(x) for x in end_logits[:len(feature.tokens)]]
        start_indexes = _get_best_indexes(start_logits, n_best_size)
        end_indexes = _get_best_indexes(end_logits, n_best_size)
        # if we could have irrelevant answers, get the min score of irrelevant
        if version_2_with_negative:
            feature_null_score = start_logits[0] + end_logits[0]
            if feature_null_score < null.score:
                null = _NullScore(feature_null_score, feature_index, start_logits[0],
                                  end_logits[0])
        for start_index, end_index in _legal_spans(feature, start_indexes, end_indexes,
                                                   max_answer_length):
            prelim_predictions.append(PrelimPrediction(
                feature_index, start_index, end_index,
                start_logits[start_index], end_logits[end_index]))
    if version_2_with_negative:
        prelim_predictions.append(PrelimPrediction(
            null.feature_index, 0, 0, null.start_logit, null.end_logit))
    prelim_predictions.sort(key=lambda x: x.start_logit + x.end_logit, reverse=True)
    return prelim_predictions, null


def _span_text(example, feature, pred, do_lower_case, verbose_logging):
    """(final text, start char, end char) of a non-null candidate."""
    tok_tokens = feature.tokens[pred.start_index:pred.end_index + 1]
    orig_doc_start = feature.token_to_orig_map[pred.start_index]
    orig_doc_end = feature.token_to_orig_map[pred.end_index]
    orig_tokens = example.doc_tokens[orig_doc_start:orig_doc_end + 1]
    tok_text = " ".join(tok_tokens)
    # De-tokenize WordPieces that have been split off.
    tok_text = tok_text.replace(" ##", "").replace("##", "")
    # Clean whitespace
    tok_text = " ".join(tok_text.strip().split())
    orig_text = " ".join(orig_tokens)
    final_text, sub_start, sub_end = get_final_text_span(
        tok_text, orig_text, do_lower_case, verbose_logging)
    start_char, end_char = _context_char_span(
        example, orig_doc_start, orig_doc_end, sub_start, sub_end)
    return final_text, start_char, end_char


def _nbest(example, example_features, prelim_predictions, null: _NullScore, n_best_size: int,
           do_lower_case: bool, version_2_with_negative: bool, verbose_logging: bool) -> list:
    """The n-best distinct answers: (text, start_logit, end_logit, start_char, end_char)."""
    seen_predictions = {}
    nbest = []
    for pred in prelim_predictions:
        if len(nbest) >= n_best_size:
            break
        if pred.start_index > 0:  # this is a non-null prediction
            feature = example_features[pred.feature_index]
            final_text, start_char, end_char = _span_text(example, feature, pred,
                                                          do_lower_case, verbose_logging)
            if final_text in seen_predictions:
                continue
        else:
            final_text, start_char, end_char = "", -1, -1
        seen_predictions[final_text] = True
        nbest.append((final_text, pred.start_logit, pred.end_logit, start_char, end_char))

    # if we didn't include the empty option in the n-best, include it
    if version_2_with_negative and "" not in seen_predictions:
        nbest.append(("", null.start_logit, null.end_logit, -1, -1))
    # In very rare edge cases we could have no valid predictions. So we
    # just create a nonce prediction in this case to avoid failure.
    if not nbest:
        nbest.append(("empty", 0.0, 0.0, -1, -1))
    return nbest


def _choose(nbest: list, null: _NullScore, version_2_with_negative: bool,
            null_score_diff_threshold: float) -> SquadPrediction:
    """The answer among the n-best (v2.0: "" when the null score wins by more
    than the threshold)."""
    probs = _compute_softmax([e[1] + e[2] for e in nbest])
    nbest_json = [collections.OrderedDict(
        text=e[0], probability=p, start_logit=e[1], end_logit=e[2])
        for e, p in zip(nbest, probs)]
    if not version_2_with_negative:
        chosen = nbest[0]
        return SquadPrediction(
            text=chosen[0], nbest=nbest_json, score_diff=None, best_text=chosen[0],
            best_score=chosen[1] + chosen[2], start_char=chosen[3], end_char=chosen[4],
            null_score=None)
    # NO_ANSWER when the n-best holds only the null answer (google would crash here).
    chosen = next((e for e in nbest if e[0]), NO_ANSWER)
    # predict "" iff the null score - the score of best non-null > threshold
    score_diff = null.score - chosen[1] - chosen[2]
    return SquadPrediction(
        text="" if score_diff > null_score_diff_threshold else chosen[0], nbest=nbest_json,
        score_diff=score_diff, best_text=chosen[0], best_score=chosen[1] + chosen[2],
        start_char=chosen[3], end_char=chosen[4], null_score=null.score)


def _no_context_prediction(version_2_with_negative: bool) -> SquadPrediction:
    """The answer of a question whose context has no tokens (the reader skips these)."""
    return SquadPrediction(
        text="", nbest=[collections.OrderedDict(
            text="", probability=1.0, start_logit=0.0, end_logit=0.0)],
        score_diff=0.0 if version_2_with_negative else None, best_text="",
        best_score=0.0, start_char=-1, end_char=-1,
        null_score=0.0 if version_2_with_negative else None)


def postprocess_predictions(examples, features, results, n_best_size: int = 20,
                            max_answer_length: int = 30, do_lower_case: bool = True,
                            version_2_with_negative: bool = False,
                            null_score_diff_threshold: float = 0.0,
                            verbose_logging: bool = False) -> Dict[str, SquadPrediction]:
    """google's `write_predictions`, returning qas_id → `SquadPrediction`.

    Args:
        results: unique_id → (start_logits, end_logits), sequences of floats
            over the window's `max_seq_length` positions.
    """
    example_index_to_features = collections.defaultdict(list)
    for feature in features:
        example_index_to_features[feature.example_index].append(feature)

    predictions = collections.OrderedDict()
    for example_index, example in enumerate(examples):
        example_features = example_index_to_features[example_index]
        if not example_features:
            predictions[example.qas_id] = _no_context_prediction(version_2_with_negative)
            continue
        prelim_predictions, null = _prelim_predictions(
            example_features, results, n_best_size, max_answer_length, version_2_with_negative)
        nbest = _nbest(example, example_features, prelim_predictions, null, n_best_size,
                       do_lower_case, version_2_with_negative, verbose_logging)
        predictions[example.qas_id] = _choose(nbest, null, version_2_with_negative,
                                              null_score_diff_threshold)
    return predictions


def apply_threshold(predictions: Dict[str, SquadPrediction], threshold: float) -> dict:
    """v2.0: qas_id → answer with a new null-score-difference threshold."""
    return {qid: ("" if p.score_diff is not None and p.score_diff > threshold else p.best_text)
            for qid, p in predictions.items()}


def write_prediction_files(predictions: Dict[str, SquadPrediction], predictions_file: str,
                           nbest_file: str, null_odds_file: str | None = None,
                           answers: dict | None = None) -> None:
    """Writes google's three files where the caller says (the run directory
    names them): the answers (`answers`, default each prediction's text), the
    n-best lists, and for v2.0 (`null_odds_file`) the null-score differences."""
    answers = answers if answers is not None else {q: p.text for q, p in predictions.items()}
    io.atomic_write(predictions_file, json.dumps(answers, indent=4, ensure_ascii=False) + "\n")
    io.atomic_write(nbest_file, json.dumps(
        {q: p.nbest for q, p in predictions.items()}, indent=4, ensure_ascii=False) + "\n")
    if null_odds_file is not None:
        io.atomic_write(null_odds_file, json.dumps(
            {q: p.score_diff for q, p in predictions.items()}, indent=4) + "\n")
