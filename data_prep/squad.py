"""SQuAD v1.1 / v2.0: JSON → examples → windowed features.

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
* `squad_postprocessing.postprocess_predictions` (logits → answers): google's
  `write_predictions`.

Bad input: malformed JSON or a wrong structure raises `SquadFormatError` naming
the place in the file (`data[3].paragraphs[0].qas[2].answers[0].answer_start`),
and so does a question id used twice (predictions are keyed by id: both places
are named); answers that do not match their offsets and empty contexts are
skipped, counted in `ReadStats` and logged. `split_by_article` cuts a file in
two (`bert squad-split`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
from typing import Dict, List, Optional

from absl import logging

from official_bert import io, outputs
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


def _question_id(qa, qwhere, input_file, seen_ids: dict) -> str:
    """The question's id, refused when missing or used twice (`seen_ids`: id → where)."""
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
    return qas_id


def _training_answer(qa, qwhere, input_file, context: str, doc_tokens, char_to_word_offset,
                     is_impossible: bool, version_2_with_negative: bool, stats: ReadStats):
    """(answer text, first word, last word) of a training question: its first
    answer, ("", -1, -1) for an impossible one, None when the answer is not
    where its offset points (skipped, counted in `stats`)."""
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
    if is_impossible:
        return "", -1, -1
    answer = _expect(answers[0], dict, f"{qwhere}.answers[0]", input_file)
    awhere = f"{qwhere}.answers[0]"
    orig_answer_text = _field(answer, "text", str, awhere, input_file)
    answer_offset = _field(answer, "answer_start", int, awhere, input_file)
    answer_length = len(orig_answer_text)
    end_char = answer_offset + answer_length - 1
    if answer_length == 0 or answer_offset < 0 or end_char >= len(context):
        stats.answer_mismatch += 1
        logging.warning("%s: %s: answer_start %d is outside the context; skipped",
                        input_file, awhere, answer_offset)
        return None
    start_position = char_to_word_offset[answer_offset]
    end_position = char_to_word_offset[end_char]
    # Only add answers where the text can be exactly recovered from the
    # document. If this CAN'T happen it's likely due to weird Unicode
    # stuff so we will just skip the example.
    #
    # Note that this means for training mode, every example is NOT
    # guaranteed to be preserved.
    actual_text = " ".join(doc_tokens[max(start_position, 0):end_position + 1])
    cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(orig_answer_text))
    if start_position < 0 or actual_text.find(cleaned_answer_text) == -1:
        stats.answer_mismatch += 1
        logging.warning("%s: %s: could not find answer %r at its offset (found %r); skipped",
                        input_file, awhere, cleaned_answer_text, actual_text)
        return None
    return orig_answer_text, start_position, end_position


def _paragraph_examples(paragraph, pwhere, input_file, is_training: bool,
                        version_2_with_negative: bool, stats: ReadStats,
                        seen_ids: dict) -> List[SquadExample]:
    """The examples of one paragraph's questions (none for an empty context)."""
    _expect(paragraph, dict, pwhere, input_file)
    context = _field(paragraph, "context", str, pwhere, input_file)
    qas = _field(paragraph, "qas", list, pwhere, input_file)
    doc_tokens, char_to_word_offset, word_spans = split_doc_tokens(context)
    if not doc_tokens:
        stats.questions += len(qas)
        stats.empty_context += len(qas)
        logging.warning("%s: %s.context is empty; skipping its %d question(s)",
                        input_file, pwhere, len(qas))
        return []
    examples = []
    for q, qa in enumerate(qas):
        qwhere = f"{pwhere}.qas[{q}]"
        _expect(qa, dict, qwhere, input_file)
        stats.questions += 1
        qas_id = _question_id(qa, qwhere, input_file, seen_ids)
        question_text = _field(qa, "question", str, qwhere, input_file)
        is_impossible = bool(qa.get("is_impossible", False))
        start_position = end_position = orig_answer_text = None
        if is_training:
            answer = _training_answer(qa, qwhere, input_file, context, doc_tokens,
                                      char_to_word_offset, is_impossible,
                                      version_2_with_negative, stats)
            if answer is None:
                continue
            orig_answer_text, start_position, end_position = answer
        if is_impossible:
            stats.impossible += 1
        examples.append(SquadExample(
            qas_id=qas_id, question_text=question_text, context_text=context,
            doc_tokens=doc_tokens, word_spans=word_spans,
            orig_answer_text=orig_answer_text, start_position=start_position,
            end_position=end_position, is_impossible=is_impossible))
    return examples


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
            examples += _paragraph_examples(paragraph, f"{where}.paragraphs[{p}]", input_file,
                                            is_training, version_2_with_negative, stats,
                                            seen_ids)
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


def _context_tokens(example, tokenizer, is_training: bool):
    """The context's WordPieces: (token → word index, the tokens, the training
    answer's first and last token: -1 for an impossible question, None at
    prediction time)."""
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
    return tok_to_orig_index, all_doc_tokens, tok_start_position, tok_end_position


def _window_tokens(query_tokens, doc_span, doc_span_index, all_doc_tokens, tok_to_orig_index,
                   max_context):
    """`[CLS] query [SEP] window [SEP]`: (tokens, segment ids, position → word
    index, position → whether this window is its "max context" one)."""
    tokens = [tokenization.CLS_TOKEN, *query_tokens, tokenization.SEP_TOKEN]
    segment_ids = [0] * len(tokens)
    token_to_orig_map, token_is_max_context = {}, {}
    for i in range(doc_span.length):
        split_token_index = doc_span.start + i
        token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]
        token_is_max_context[len(tokens)] = max_context[split_token_index] == doc_span_index
        tokens.append(all_doc_tokens[split_token_index])
        segment_ids.append(1)
    tokens.append(tokenization.SEP_TOKEN)
    segment_ids.append(1)
    return tokens, segment_ids, token_to_orig_map, token_is_max_context


def _window_labels(example, doc_span, tok_start_position, tok_end_position,
                   num_query_tokens: int, is_training: bool, stats: FeatureStats):
    """The window's (start, end) label: the answer's positions in it, (0, 0)
    (the [CLS] position) when the window lacks it or the question has none;
    (None, None) at prediction time."""
    if not is_training:
        return None, None
    if example.is_impossible:
        return 0, 0
    # For training, if our document chunk does not contain an annotation
    # we throw it out, since there is nothing to predict.
    # (google labels such a window (0, 0), the [CLS] position.)
    doc_start = doc_span.start
    doc_end = doc_span.start + doc_span.length - 1
    if not (doc_start <= tok_start_position and tok_end_position <= doc_end):
        stats.windows_without_answer += 1
        return 0, 0
    doc_offset = num_query_tokens + 2
    return (tok_start_position - doc_start + doc_offset,
            tok_end_position - doc_start + doc_offset)


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
        tok_to_orig_index, all_doc_tokens, tok_start, tok_end = _context_tokens(
            example, tokenizer, is_training)
        # The -3 accounts for [CLS], [SEP] and [SEP]
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
        doc_spans = doc_spans_for(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
        max_context = max_context_spans(doc_spans, len(all_doc_tokens))
        for doc_span_index, doc_span in enumerate(doc_spans):
            tokens, segment_ids, token_to_orig_map, token_is_max_context = _window_tokens(
                query_tokens, doc_span, doc_span_index, all_doc_tokens, tok_to_orig_index,
                max_context)
            input_ids = [cls_id] + tokenizer.convert_tokens_to_ids(tokens[1:-1]) + [sep_id]
            input_mask = [1] * len(input_ids)
            padding = max_seq_length - len(input_ids)
            input_ids += [0] * padding
            input_mask += [0] * padding
            segment_ids += [0] * padding
            start_position, end_position = _window_labels(
                example, doc_span, tok_start, tok_end, len(query_tokens), is_training, stats)
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


def split_by_article(input_file, train_file, dev_file, num_train_articles: int) -> tuple:
    """Writes the first `num_train_articles` articles of a SQuAD file to
    `train_file` and the rest to `dev_file`; returns the question counts."""
    io.refuse_output_over_input({"--train_output": train_file, "--dev_output": dev_file},
                                {"input_file": input_file})
    if io.same_path(train_file, dev_file):
        raise UserError(f"--train_output and --dev_output are one file ({train_file})")
    outputs.ensure_checked(train_file, "--train_output", outputs.FILE)
    outputs.ensure_checked(dev_file, "--dev_output", outputs.FILE)
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
