"""SQuAD v1.1 / v2.0: JSON → examples → windowed features, and logits → answers.

The pipeline is google-research/bert's `run_squad.py`, step for step:

* `read_squad_examples`: the context is split on white space into "doc tokens"
  (words), each character knows its word (`char_to_word_offset`); a training
  answer's character span becomes a word span, and the example is skipped (and
  counted) when the answer text cannot be found there. Each word also keeps its
  character span in the context, so answers can be cut from the original text.
* `convert_examples_to_features`: the question is cut to `max_query_length`
  WordPieces, the context's WordPieces are split into windows of
  `max_seq_length - len(query) - 3` tokens every `doc_stride` tokens, each token
  is marked in the window where it has the most context
  (`check_is_max_context`), answers are tightened by `improve_answer_span`,
  and a training window without the answer (or a v2.0 impossible question) is
  labelled (0, 0), the `[CLS]` position.
* `postprocess_predictions`: google's `write_predictions`: the n-best start and
  end logits of every window, legal spans only, the text recovered from the
  context by `get_final_text`, and for v2.0 the null score (minimum over the
  windows of start[CLS] + end[CLS]) against the best non-null span.

Bad input: malformed JSON or a wrong structure raises `SquadFormatError` naming
the place in the file (`data[3].paragraphs[0].qas[2].answers[0].answer_start`),
and so does a question id used twice (predictions are keyed by id: both places
are named); answers that do not match their offsets and empty contexts are
skipped, counted in `ReadStats` and logged.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from typing import Dict, List, Optional

from absl import logging

from official_bert import io
from official_bert.errors import BadFileError, UserError
from official_bert.text import tokenization


class SquadFormatError(BadFileError):
    """The SQuAD file is not valid JSON or does not have SQuAD's structure."""


# Characters that separate SQuAD's "doc tokens" (google's `is_whitespace`).
DOC_WHITESPACE = (" ", "\t", "\r", "\n", "\u202f")


def is_whitespace(c: str) -> bool:
    return c in DOC_WHITESPACE


@dataclasses.dataclass
class SquadExample:
    """One question about one context.

    `doc_tokens` are the context's white-space separated words and
    `word_spans[i]` = (first char, last char + 1) of word i in `context_text`.
    `start_position` / `end_position` are word indexes of the training answer
    (-1 for an impossible question, None at prediction time).
    """

    qas_id: str
    question_text: str
    context_text: str
    doc_tokens: List[str]
    word_spans: List[tuple]
    orig_answer_text: Optional[str] = None
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


@dataclasses.dataclass
class InputFeatures:
    """One window of one example, as the model sees it."""

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: List[str]
    token_to_orig_map: Dict[int, int]
    token_is_max_context: Dict[int, bool]
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


@dataclasses.dataclass
class ReadStats:
    """What `read_squad_examples` read and what it skipped."""

    questions: int = 0
    examples: int = 0
    answer_mismatch: int = 0  # answer text not found at its offset (skipped)
    empty_context: int = 0  # questions of paragraphs with an empty context (skipped)
    impossible: int = 0


# ---------------------------------------------------------------------------
# Reading.


def _expect(value, kind, where, path):
    if not isinstance(value, kind):
        names = {list: "a list", dict: "an object", str: "a string", int: "an integer"}
        want = names.get(kind, getattr(kind, "__name__", str(kind)))
        got = {list: "a list", dict: "an object", str: "a string", int: "an integer",
               float: "a number", bool: "a boolean", type(None): "null"}.get(
            type(value), type(value).__name__)
        raise SquadFormatError(path, f"has {got} at {where}, where {want} belongs")
    return value


def _field(obj, key, kind, where, path):
    if key not in obj:
        raise SquadFormatError(path, f"has no {key!r} field in {where}")
    return _expect(obj[key], kind, key if where == "the top level" else f"{where}.{key}", path)


def load_squad_json(input_file) -> list:
    """Reads a SQuAD file and returns its `data` list (structure checked)."""
    dataset = io.read_json(input_file, SquadFormatError, what="a SQuAD JSON file")
    _expect(dataset, dict, "the top level", input_file)
    return _field(dataset, "data", list, "the top level", input_file)


def split_doc_tokens(context: str):
    """google's white-space split: (doc_tokens, char_to_word_offset, word_spans).

    Linear in the context's length (google's builds each word by appending a
    character at a time, quadratic in the length of a word)."""
    char_to_word_offset, word_spans = [], []
    prev_is_whitespace = True
    for i, c in enumerate(context):
        if is_whitespace(c):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                word_spans.append([i, i + 1])
            else:
                word_spans[-1][1] = i + 1
            prev_is_whitespace = False
        char_to_word_offset.append(len(word_spans) - 1)
    doc_tokens = [context[start:end] for start, end in word_spans]
    return doc_tokens, char_to_word_offset, [tuple(s) for s in word_spans]


def read_squad_examples(input_file, is_training: bool,
                        version_2_with_negative: bool = False,
                        stats: ReadStats | None = None) -> List[SquadExample]:
    """Reads a SQuAD JSON file into `SquadExample`s.

    Training questions take their first answer. Skipped (counted in `stats`,
    logged): answers whose text is not where `answer_start` points, and
    questions of empty contexts.
    """
    stats = stats if stats is not None else ReadStats()
    data = load_squad_json(input_file)
    examples = []
    seen_ids = {}  # qas_id → where it was first seen
    for a, article in enumerate(data):
        where = f"data[{a}]"
        _expect(article, dict, where, input_file)
        paragraphs = _field(article, "paragraphs", list, where, input_file)
        for p, paragraph in enumerate(paragraphs):
            pwhere = f"{where}.paragraphs[{p}]"
            _expect(paragraph, dict, pwhere, input_file)
            context = _field(paragraph, "context", str, pwhere, input_file)
            qas = _field(paragraph, "qas", list, pwhere, input_file)
            doc_tokens, char_to_word_offset, word_spans = split_doc_tokens(context)
            if not doc_tokens:
                stats.questions += len(qas)
                stats.empty_context += len(qas)
                logging.warning("%s: %s.context is empty; skipping its %d question(s)",
                                input_file, pwhere, len(qas))
                continue
            for q, qa in enumerate(qas):
                qwhere = f"{pwhere}.qas[{q}]"
                _expect(qa, dict, qwhere, input_file)
                stats.questions += 1
                qas_id = qa.get("id")
                if not isinstance(qas_id, (str, int)) or isinstance(qas_id, bool):
                    raise SquadFormatError(input_file, f"has no string 'id' field in {qwhere}")
                qas_id = str(qas_id)
                if qas_id in seen_ids:
                    raise SquadFormatError(
                        input_file, f"uses the question id {qas_id!r} twice: at "
                        f"{seen_ids[qas_id]} and at {qwhere}",
                        fix="give every question its own id (predictions are keyed by id, "
                            "so one would overwrite the other)")
                seen_ids[qas_id] = qwhere
                question_text = _field(qa, "question", str, qwhere, input_file)
                is_impossible = bool(qa.get("is_impossible", False))
                start_position = end_position = orig_answer_text = None
                if is_training:
                    if is_impossible and not version_2_with_negative:
                        raise SquadFormatError(
                            input_file, f"has is_impossible true at {qwhere}",
                            fix="pass --version_2_with_negative to train on SQuAD 2.0 data")
                    answers = _field(qa, "answers", list, qwhere, input_file)
                    if not is_impossible and not answers:
                        raise SquadFormatError(
                            input_file, f"has no answers at {qwhere}.answers",
                            fix="a training question needs an answer (or is_impossible with "
                                "--version_2_with_negative)")
                    if not is_impossible:
                        answer = _expect(answers[0], dict, f"{qwhere}.answers[0]", input_file)
                        awhere = f"{qwhere}.answers[0]"
                        orig_answer_text = _field(answer, "text", str, awhere, input_file)
                        answer_offset = _field(answer, "answer_start", int, awhere, input_file)
                        answer_length = len(orig_answer_text)
                        end_char = answer_offset + answer_length - 1
                        if (answer_length == 0 or answer_offset < 0
                                or end_char >= len(context)):
                            stats.answer_mismatch += 1
                            logging.warning("%s: %s: answer_start %d is outside the context; "
                                            "skipped", input_file, awhere, answer_offset)
                            continue
                        start_position = char_to_word_offset[answer_offset]
                        end_position = char_to_word_offset[end_char]
                        # Only add answers where the text can be exactly recovered from the
                        # document. If this CAN'T happen it's likely due to weird Unicode
                        # stuff so we will just skip the example.
                        #
                        # Note that this means for training mode, every example is NOT
                        # guaranteed to be preserved.
                        actual_text = " ".join(doc_tokens[max(start_position, 0):end_position + 1])
                        cleaned_answer_text = " ".join(
                            tokenization.whitespace_tokenize(orig_answer_text))
                        if start_position < 0 or actual_text.find(cleaned_answer_text) == -1:
                            stats.answer_mismatch += 1
                            logging.warning("%s: %s: could not find answer %r at its offset "
                                            "(found %r); skipped", input_file, awhere,
                                            cleaned_answer_text, actual_text)
                            continue
                    else:
                        start_position = end_position = -1
                        orig_answer_text = ""
                if is_impossible:
                    stats.impossible += 1
                examples.append(SquadExample(
                    qas_id=qas_id, question_text=question_text, context_text=context,
                    doc_tokens=doc_tokens, word_spans=word_spans,
                    orig_answer_text=orig_answer_text, start_position=start_position,
                    end_position=end_position, is_impossible=is_impossible))
    stats.examples = len(examples)
    if stats.answer_mismatch or stats.empty_context:
        logging.warning("%s: skipped %d question(s) whose answer does not match its offset "
                        "and %d of empty contexts (of %d)", input_file, stats.answer_mismatch,
                        stats.empty_context, stats.questions)
    if not examples:
        raise SquadFormatError(input_file, f"holds no usable question "
                               f"({stats.questions} read, {stats.answer_mismatch} answer "
                               f"mismatches, {stats.empty_context} in empty contexts)")
    return examples


# ---------------------------------------------------------------------------
# Windowing.


DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def doc_spans_for(num_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> List[DocSpan]:
    """The sliding windows over `num_tokens` context tokens."""
    # We can have documents that are longer than the maximum sequence length.
    # To deal with this we do a sliding window approach, where we take chunks
    # of the up to our max length with a stride of `doc_stride`.
    doc_spans = []
    start_offset = 0
    while start_offset < num_tokens:
        length = min(num_tokens - start_offset, max_tokens_for_doc)
        doc_spans.append(DocSpan(start=start_offset, length=length))
        if start_offset + length == num_tokens:
            break
        start_offset += min(length, doc_stride)
    return doc_spans


def max_context_spans(doc_spans, num_tokens: int) -> List[Optional[int]]:
    """For every token position, the index of its "max context" span
    (`check_is_max_context` for all positions at once).

    Each span scores only its own positions, so the work is the total length
    of the spans (the context's length times the overlap), where calling
    `check_is_max_context` for every position of every span costs positions
    x spans: quadratic in the context's length (a 100k-character context took
    minutes). Ties go to the earlier span, as there.
    """
    best_score: List[Optional[float]] = [None] * num_tokens
    best: List[Optional[int]] = [None] * num_tokens
    for span_index, doc_span in enumerate(doc_spans):
        end = doc_span.start + doc_span.length - 1
        bonus = 0.01 * doc_span.length
        for position in range(doc_span.start, end + 1):
            score = min(position - doc_span.start, end - position) + bonus
            if best_score[position] is None or score > best_score[position]:
                best_score[position] = score
                best[position] = span_index
    return best


def check_is_max_context(doc_spans, cur_span_index, position) -> bool:
    """Check if this is the 'max context' doc span for the token."""
    # Because of the sliding window approach taken to scoring documents, a single
    # token can appear in multiple documents. E.g.
    #  Doc: the man went to the store and bought a gallon of milk
    #  Span A: the man went to the
    #  Span B: to the store and bought
    #  Span C: and bought a gallon of
    #  ...
    #
    # Now the word 'bought' will have two scores from spans B and C. We only
    # want to consider the score with "maximum context", which we define as
    # the *minimum* of its left and right context (the *sum* of left and
    # right context will always be the same, of course).
    #
    # In the example the maximum context for 'bought' would be span C since
    # it has 1 left context and 3 right context, while span B has 4 left context
    # and 0 right context.
    best_score = None
    best_span_index = None
    for span_index, doc_span in enumerate(doc_spans):
        end = doc_span.start + doc_span.length - 1
        if position < doc_span.start or position > end:
            continue
        num_left_context = position - doc_span.start
        num_right_context = end - position
        score = min(num_left_context, num_right_context) + 0.01 * doc_span.length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


def improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """Returns tokenized answer spans that better match the annotated answer."""
    # The SQuAD annotations are character based. We first project them to
    # whitespace-tokenized words. But then after WordPiece tokenization, we can
    # often find a "better match". For example:
    #
    #   Question: What year was John Smith born?
    #   Context: The leader was John Smith (1895-1943).
    #   Answer: 1895
    #
    # The original whitespace-tokenized answer will be "(1895-1943).". However
    # after tokenization, our tokens will be "( 1895 - 1943 ) .". So we can match
    # the exact answer, 1895.
    #
    # However, this is not always possible. Consider the following:
    #
    #   Question: What country is the top exporter of electornics?
    #   Context: The Japanese electronics industry is the lagest in the world.
    #   Answer: Japan
    #
    # In this case, the annotator chose "Japan" as a character sub-span of
    # the word "Japanese". Since our WordPiece tokenizer does not split
    # "Japanese", we just use "Japanese" as the annotation. This is fairly rare
    # in SQuAD, but does happen.
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            text_span = " ".join(doc_tokens[new_start:new_end + 1])
            if text_span == tok_answer_text:
                return new_start, new_end
    return input_start, input_end


@dataclasses.dataclass
class FeatureStats:
    examples: int = 0
    features: int = 0
    windows_without_answer: int = 0  # training windows labelled (0, 0)


def convert_examples_to_features(examples, tokenizer, max_seq_length: int, doc_stride: int,
                                 max_query_length: int, is_training: bool,
                                 stats: FeatureStats | None = None) -> List[InputFeatures]:
    """Windows every example; returns the `InputFeatures` in order."""
    if max_seq_length <= max_query_length + 3:
        raise UserError(f"--max_seq_length ({max_seq_length}) must be greater than "
                        f"--max_query_length ({max_query_length}) + 3")
    if doc_stride <= 0:
        raise UserError(f"--doc_stride must be positive, got {doc_stride}")
    stats = stats if stats is not None else FeatureStats()
    cls_id, sep_id = tokenizer.vocab[tokenization.CLS_TOKEN], tokenizer.vocab[tokenization.SEP_TOKEN]
    features = []
    unique_id = 1000000000
    for example_index, example in enumerate(examples):
        query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]

        tok_to_orig_index, orig_to_tok_index, all_doc_tokens = [], [], []
        for i, token in enumerate(example.doc_tokens):
            orig_to_tok_index.append(len(all_doc_tokens))
            for sub_token in tokenizer.tokenize(token):
                tok_to_orig_index.append(i)
                all_doc_tokens.append(sub_token)

        tok_start_position = tok_end_position = None
        if is_training and example.is_impossible:
            tok_start_position = tok_end_position = -1
        if is_training and not example.is_impossible:
            tok_start_position = orig_to_tok_index[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                tok_end_position = orig_to_tok_index[example.end_position + 1] - 1
            else:
                tok_end_position = len(all_doc_tokens) - 1
            tok_start_position, tok_end_position = improve_answer_span(
                all_doc_tokens, tok_start_position, tok_end_position, tokenizer,
                example.orig_answer_text)

        # The -3 accounts for [CLS], [SEP] and [SEP]
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
        doc_spans = doc_spans_for(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
        max_context = max_context_spans(doc_spans, len(all_doc_tokens))

        for doc_span_index, doc_span in enumerate(doc_spans):
            tokens = [tokenization.CLS_TOKEN, *query_tokens, tokenization.SEP_TOKEN]
            segment_ids = [0] * len(tokens)
            token_to_orig_map, token_is_max_context = {}, {}
            for i in range(doc_span.length):
                split_token_index = doc_span.start + i
                token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]
                token_is_max_context[len(tokens)] = (
                    max_context[split_token_index] == doc_span_index)
                tokens.append(all_doc_tokens[split_token_index])
                segment_ids.append(1)
            tokens.append(tokenization.SEP_TOKEN)
            segment_ids.append(1)
            input_ids = [cls_id] + tokenizer.convert_tokens_to_ids(tokens[1:-1]) + [sep_id]
            input_mask = [1] * len(input_ids)
            padding = max_seq_length - len(input_ids)
            input_ids += [0] * padding
            input_mask += [0] * padding
            segment_ids += [0] * padding

            start_position = end_position = None
            if is_training and not example.is_impossible:
                # For training, if our document chunk does not contain an annotation
                # we throw it out, since there is nothing to predict.
                # (google labels such a window (0, 0), the [CLS] position.)
                doc_start = doc_span.start
                doc_end = doc_span.start + doc_span.length - 1
                if not (doc_start <= tok_start_position and tok_end_position <= doc_end):
                    start_position = end_position = 0
                    stats.windows_without_answer += 1
                else:
                    doc_offset = len(query_tokens) + 2
                    start_position = tok_start_position - doc_start + doc_offset
                    end_position = tok_end_position - doc_start + doc_offset
            if is_training and example.is_impossible:
                start_position = end_position = 0

            features.append(InputFeatures(
                unique_id=unique_id, example_index=example_index,
                doc_span_index=doc_span_index, tokens=tokens,
                token_to_orig_map=token_to_orig_map,
                token_is_max_context=token_is_max_context,
                input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                start_position=start_position, end_position=end_position,
                is_impossible=example.is_impossible))
            unique_id += 1
    stats.examples += len(examples)
    stats.features += len(features)
    return features


def features_to_arrays(features, is_training: bool) -> dict:
    """The features as a dict of numpy arrays (the model's inputs, + labels)."""
    import numpy as np

    arrays = {
        "unique_ids": np.array([f.unique_id for f in features], np.int64),
        "input_word_ids": np.array([f.input_ids for f in features], np.int32),
        "input_mask": np.array([f.input_mask for f in features], np.int32),
        "input_type_ids": np.array([f.segment_ids for f in features], np.int32),
    }
    if is_training:
        arrays["start_positions"] = np.array([f.start_position for f in features], np.int32)
        arrays["end_positions"] = np.array([f.end_position for f in features], np.int32)
    return arrays


# ---------------------------------------------------------------------------
# Post-processing.


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
        if not example_features:  # no context tokens (the reader skips these)
            predictions[example.qas_id] = SquadPrediction(
                text="", nbest=[collections.OrderedDict(
                    text="", probability=1.0, start_logit=0.0, end_logit=0.0)],
                score_diff=0.0 if version_2_with_negative else None, best_text="",
                best_score=0.0, start_char=-1, end_char=-1,
                null_score=0.0 if version_2_with_negative else None)
            continue
        prelim_predictions = []
        # keep track of the minimum score of null start+end of position 0
        score_null = 1000000  # large and positive
        min_null_feature_index = 0  # the paragraph slice with min null score
        null_start_logit = null_end_logit = 0.0
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
                if feature_null_score < score_null:
                    score_null = feature_null_score
                    min_null_feature_index = feature_index
                    null_start_logit = start_logits[0]
                    null_end_logit = end_logits[0]
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
                    prelim_predictions.append(PrelimPrediction(
                        feature_index, start_index, end_index,
                        start_logits[start_index], end_logits[end_index]))
        if version_2_with_negative:
            prelim_predictions.append(PrelimPrediction(
                min_null_feature_index, 0, 0, null_start_logit, null_end_logit))
        prelim_predictions.sort(key=lambda x: x.start_logit + x.end_logit, reverse=True)

        seen_predictions = {}
        nbest = []  # (text, start_logit, end_logit, start_char, end_char)
        for pred in prelim_predictions:
            if len(nbest) >= n_best_size:
                break
            feature = example_features[pred.feature_index]
            if pred.start_index > 0:  # this is a non-null prediction
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
                if final_text in seen_predictions:
                    continue
                seen_predictions[final_text] = True
                start_char, end_char = _context_char_span(
                    example, orig_doc_start, orig_doc_end, sub_start, sub_end)
            else:
                final_text = ""
                seen_predictions[final_text] = True
                start_char = end_char = -1
            nbest.append((final_text, pred.start_logit, pred.end_logit, start_char, end_char))

        # if we didn't include the empty option in the n-best, include it
        if version_2_with_negative and "" not in seen_predictions:
            nbest.append(("", null_start_logit, null_end_logit, -1, -1))
        # In very rare edge cases we could have no valid predictions. So we
        # just create a nonce prediction in this case to avoid failure.
        if not nbest:
            nbest.append(("empty", 0.0, 0.0, -1, -1))

        best_non_null = next((e for e in nbest if e[0]), None)
        probs = _compute_softmax([e[1] + e[2] for e in nbest])
        nbest_json = [collections.OrderedDict(
            text=e[0], probability=p, start_logit=e[1], end_logit=e[2])
            for e, p in zip(nbest, probs)]

        score_diff = None
        if not version_2_with_negative:
            text = nbest[0][0]
            chosen = nbest[0]
        else:
            if best_non_null is None:  # only the null answer: google would crash here
                best_non_null = ("", 0.0, 0.0, -1, -1)
            # predict "" iff the null score - the score of best non-null > threshold
            score_diff = score_null - best_non_null[1] - best_non_null[2]
            text = "" if score_diff > null_score_diff_threshold else best_non_null[0]
            chosen = best_non_null
        predictions[example.qas_id] = SquadPrediction(
            text=text, nbest=nbest_json, score_diff=score_diff,
            best_text=chosen[0], best_score=chosen[1] + chosen[2],
            start_char=chosen[3], end_char=chosen[4],
            null_score=score_null if version_2_with_negative else None)
    return predictions


def apply_threshold(predictions: Dict[str, SquadPrediction], threshold: float) -> dict:
    """v2.0: qas_id → answer with a new null-score-difference threshold."""
    return {qid: ("" if p.score_diff is not None and p.score_diff > threshold else p.best_text)
            for qid, p in predictions.items()}


def write_prediction_files(predictions: Dict[str, SquadPrediction], output_dir,
                           version_2_with_negative: bool, answers: dict | None = None) -> dict:
    """Writes predictions.json, nbest_predictions.json (and null_odds.json)."""
    answers = answers if answers is not None else {q: p.text for q, p in predictions.items()}
    paths = {"predictions": io.join(output_dir, "predictions.json"),
             "nbest": io.join(output_dir, "nbest_predictions.json")}
    io.atomic_write(paths["predictions"], json.dumps(answers, indent=4, ensure_ascii=False) + "\n")
    io.atomic_write(paths["nbest"], json.dumps(
        {q: p.nbest for q, p in predictions.items()}, indent=4, ensure_ascii=False) + "\n")
    if version_2_with_negative:
        paths["null_odds"] = io.join(output_dir, "null_odds.json")
        io.atomic_write(paths["null_odds"], json.dumps(
            {q: p.score_diff for q, p in predictions.items()}, indent=4) + "\n")
    return paths


def split_by_article(input_file, train_file, dev_file, num_train_articles: int) -> tuple:
    """Writes the first `num_train_articles` articles of a SQuAD file to
    `train_file` and the rest to `dev_file`; returns the question counts."""
    io.refuse_output_over_input({"--train_output": train_file, "--dev_output": dev_file},
                                {"input_file": input_file})
    if io.same_path(train_file, dev_file):
        raise UserError(f"--train_output and --dev_output are one file ({train_file})")
    data = load_squad_json(input_file)  # checks the file first: errors name the place
    version = io.read_json(input_file, SquadFormatError).get("version", "")
    if not 0 < num_train_articles < len(data):
        raise UserError(f"--num_train_articles={num_train_articles}: {input_file} has "
                        f"{len(data)} articles; the training part needs at least 1 and the dev "
                        "part too")
    counts = []
    for path, part in ((train_file, data[:num_train_articles]),
                       (dev_file, data[num_train_articles:])):
        io.atomic_write(path, json.dumps({"version": version, "data": part},
                                         ensure_ascii=False) + "\n")
        counts.append(sum(len(p["qas"]) for a in part for p in a["paragraphs"]))
    return tuple(counts)


# --------------------------------------------------------------------------
# `python -m data_prep.squad`: split a SQuAD file into train and dev by article
# --------------------------------------------------------------------------


def _define_flags():
    from absl import flags

    flags.DEFINE_string("input_file", None, "SQuAD JSON (v1.1 or v2.0) to split.")
    flags.DEFINE_string("train_output", None, "Where the first articles go.")
    flags.DEFINE_string("dev_output", None, "Where the remaining articles go.")
    flags.DEFINE_integer("num_train_articles", None,
                         "How many articles (from the start) form the training part.")
    flags.mark_flags_as_required(["input_file", "train_output", "dev_output",
                                  "num_train_articles"])


def main(argv):
    """Splits by article, so no context is shared between the two parts."""
    from official_bert import app

    app.refuse_arguments(argv)
    from absl import flags

    FLAGS = flags.FLAGS
    train, dev = split_by_article(FLAGS.input_file, FLAGS.train_output, FLAGS.dev_output,
                                  FLAGS.num_train_articles)
    print(f"wrote {FLAGS.train_output} ({train} questions) and {FLAGS.dev_output} "
          f"({dev} questions)")


def entry(argv=None):
    """Console entry point (`bert squad-split` and `python -m data_prep.squad`)."""
    from official_bert import app

    _define_flags()
    app.run(main, argv)


if __name__ == "__main__":
    entry()
