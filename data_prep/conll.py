"""CoNLL files → sentences → WordPiece windows for token classification, and back.

Layouts read by `read_conll`: one token a line, columns separated by tabs or
spaces, the tag in the last column, a blank (or whitespace-only) line between
sentences, `-DOCSTART-` lines skipped:

* CoNLL-2003: 4 columns `word POS chunk NER`, IOB1 tags;
* WNUT-17: 2 columns `word<TAB>tag`, BIO tags;
* a 1-column file (words only) for prediction without gold tags.

Every file keeps one column count; another count is an error naming the file
and line. Tags are converted to BIO (`ner_metrics.to_bio`), the scheme used
inside the project; predictions are converted back to the file's scheme when
written.

Alignment (the BERT paper's NER set-up): each word is WordPiece-tokenized on
its own; its first sub-token carries the word's label, the other sub-tokens get
label id -1 and are ignored by the loss and by prediction. A sentence longer
than `max_seq_length - 2` sub-tokens is split into overlapping windows of
sub-tokens (`window_stride` apart); each word is *owned* by the one window in
which its first sub-token has the most context on both sides, and only there
is it labelled and predicted. No word is ever dropped.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence

import numpy as np

from official_bert import io
from official_bert.errors import BadFileError, UserError
from official_bert.metrics import ner as ner_metrics

DOCSTART = "-DOCSTART-"
IGNORE = -1


class ConllFormatError(BadFileError):
    """A CoNLL file is malformed; the message names the file and line."""


@dataclasses.dataclass
class Sentence:
    """One sentence: words, BIO tags (None without gold) and the raw columns.

    `columns[i]` is the i-th token line split into columns (all of them, the
    tag included), for writing predictions back beside the gold.
    `line_numbers[i]` is that line's 1-based number in the file.
    """

    words: List[str]
    tags: Optional[List[str]]
    columns: List[List[str]]
    line_numbers: List[int]
    path: str = ""


@dataclasses.dataclass
class ConllFile:
    sentences: List[Sentence]
    num_columns: int
    scheme: str  # the file's tag scheme: "bio" or "iob1" ("bio" without tags)
    path: str

    @property
    def has_tags(self) -> bool:
        return self.num_columns >= 2


def _split_columns(line: str) -> List[str]:
    if "\t" in line:
        return line.split("\t")
    return line.split(" ")


def read_conll(path: str, scheme: str = "auto") -> ConllFile:
    """Reads a CoNLL file; tags come back in BIO.

    Args:
        path: the file.
        scheme: "auto" (detect), "iob1" or "bio": the file's tag scheme.
    """
    if not io.exists(path):
        raise ConllFormatError(path, io.missing(path), fix="check the file name")
    if io.isdir(path):
        raise ConllFormatError(path, "is a directory, not a CoNLL file")
    sentences, num_columns = [], None
    words, columns, numbers = [], [], []

    def flush():
        if words:
            sentences.append(Sentence(list(words), None, list(columns), list(numbers), path))
            words.clear(), columns.clear(), numbers.clear()

    with io.open_file(path, "rb") as f:
        for number, raw in enumerate(io.text_lines(f), start=1):  # a BOM is dropped
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise ConllFormatError(
                    path, f"is not UTF-8 ({e.reason} at byte {e.start} of the line)",
                    line=number, fix="convert the file to UTF-8") from None
            if not line.strip():
                flush()
                continue
            parts = _split_columns(line.strip("\r\n"))
            if parts[0] == DOCSTART:
                flush()
                continue
            if num_columns is None:
                num_columns = len(parts)
            if len(parts) != num_columns or any(p == "" for p in parts):
                raise ConllFormatError(
                    path, f"has {len([p for p in parts if p])} columns ({line[:200]!r}), "
                    f"expected {num_columns} like the file's first token line", line=number)
            words.append(parts[0])
            columns.append(parts)
            numbers.append(number)
    flush()
    if not sentences:
        raise ConllFormatError(path, "holds no sentences")
    if num_columns >= 2:
        raw_tags = [[c[-1] for c in s.columns] for s in sentences]
        for sentence, tags in zip(sentences, raw_tags):
            for tag, number in zip(tags, sentence.line_numbers):
                prefix, type_ = ner_metrics.split_tag(tag)
                if tag != ner_metrics.OUTSIDE and (tag[:2] not in ("B-", "I-") or not type_):
                    raise ConllFormatError(
                        path, f"has the tag {tag!r}, neither O nor B-<type> / I-<type>",
                        line=number)
        detected = ner_metrics.detect_scheme(raw_tags)
        if scheme == "auto":
            scheme = detected
        elif scheme not in (ner_metrics.BIO, ner_metrics.IOB1):
            raise UserError(f"tag scheme {scheme!r} is unknown; use auto, bio or iob1")
        for sentence, tags in zip(sentences, raw_tags):
            sentence.tags = ner_metrics.to_bio(tags)
    else:
        scheme = ner_metrics.BIO if scheme == "auto" else scheme
    return ConllFile(sentences, num_columns, scheme, path)


def label_list_from(sentences: Sequence[Sentence]) -> List[str]:
    """"O" then B-/I- of every entity type seen, types sorted."""
    types = sorted({ner_metrics.split_tag(t)[1] for s in sentences for t in s.tags or ()} - {""})
    labels = [ner_metrics.OUTSIDE]
    for type_ in types:
        labels += [f"B-{type_}", f"I-{type_}"]
    return labels


def check_tags(conll: ConllFile, label_list: Sequence[str]) -> None:
    """Raises naming the file and line of the first tag the model cannot predict."""
    known = set(label_list)
    for sentence in conll.sentences:
        for tag, number in zip(sentence.tags or (), sentence.line_numbers):
            if tag not in known:
                raise ConllFormatError(
                    conll.path, f"has the tag {tag!r} (entity type "
                    f"{ner_metrics.split_tag(tag)[1]!r}), which is not among the model's "
                    f"labels ({', '.join(label_list)})", line=number)


# === Alignment ===


def tokenize_words(words: Sequence[str], tokenizer, unk_token: str = "[UNK]"):
    """WordPiece-tokenizes each word on its own.

    Returns:
        (tokens, word_index, is_first): flat sub-tokens, the word each came
        from, and whether it is its word's first sub-token. A word the
        tokenizer drops entirely (e.g. a lone control character) becomes
        `unk_token`, so every word has a first sub-token.
    """
    tokens, word_index, is_first = [], [], []
    for i, word in enumerate(words):
        pieces = tokenizer.tokenize(word) or [unk_token]
        tokens.extend(pieces)
        word_index.extend([i] * len(pieces))
        is_first.extend([True] + [False] * (len(pieces) - 1))
    return tokens, word_index, is_first


def window_starts(num_tokens: int, window: int, stride: int) -> List[int]:
    """Starts of windows of `window` tokens, `stride` apart, covering all."""
    if window <= 0 or stride <= 0:
        raise UserError(f"window ({window}) and --window_stride ({stride}) must be positive")
    if stride > window:
        raise UserError(f"--window_stride {stride} is longer than the window {window}: "
                        "tokens between windows would be lost")
    starts = [0]
    while starts[-1] + window < num_tokens:
        starts.append(starts[-1] + stride)
    return starts


def owner_windows(num_tokens: int, starts: Sequence[int], window: int) -> List[int]:
    """For each token position, the window in which it has the most context
    (min of left and right context; the earlier window on ties)."""
    owners = []
    for p in range(num_tokens):
        best, best_score = None, None
        for w, start in enumerate(starts):
            end = min(start + window, num_tokens)
            if start <= p < end:
                score = min(p - start, end - 1 - p)
                if best_score is None or score > best_score:
                    best, best_score = w, score
        owners.append(best)
    return owners


@dataclasses.dataclass
class Window:
    sentence_index: int
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    label_ids: List[int]  # -1 where not labelled / not owned
    word_index: List[int]  # the word of each owned first sub-token, else -1
    tokens: List[str]


def sentence_windows(sentence_index, words, tags, tokenizer, label_map, max_seq_length,
                     stride=None) -> List[Window]:
    """The packed windows of one sentence (usually one)."""
    tokens, word_index, is_first = tokenize_words(words, tokenizer)
    window = max_seq_length - 2
    if window <= 0:
        raise UserError(f"--max_seq_length={max_seq_length} leaves no room for [CLS] and "
                        "[SEP]")
    stride = stride or max(window // 2, 1)
    stride = min(stride, window)
    starts = window_starts(len(tokens), window, stride)
    owners = owner_windows(len(tokens), starts, window)
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    out = []
    for w, start in enumerate(starts):
        end = min(start + window, len(tokens))
        piece = tokens[start:end]
        ids = [cls_id] + tokenizer.convert_tokens_to_ids(piece) + [sep_id]
        labels, words_at = [IGNORE], [IGNORE]
        for p in range(start, end):
            if is_first[p] and owners[p] == w:
                words_at.append(word_index[p])
                labels.append(label_map[tags[word_index[p]]] if tags is not None else 0)
            else:
                words_at.append(IGNORE)
                labels.append(IGNORE)
        labels.append(IGNORE)
        words_at.append(IGNORE)
        pad = max_seq_length - len(ids)
        out.append(Window(
            sentence_index, ids + [0] * pad, [1] * len(ids) + [0] * pad, [0] * max_seq_length,
            labels + [IGNORE] * pad, words_at + [IGNORE] * pad,
            ["[CLS]"] + piece + ["[SEP]"]))
    return out


def convert_sentences(sentences: Sequence[Sentence], tokenizer, label_list, max_seq_length,
                      stride=None) -> List[Window]:
    label_map = {label: i for i, label in enumerate(label_list)}
    windows = []
    for i, sentence in enumerate(sentences):
        windows.extend(sentence_windows(i, sentence.words, sentence.tags, tokenizer, label_map,
                                        max_seq_length, stride))
    return windows


def windows_to_arrays(windows: Sequence[Window]) -> dict:
    return {
        "input_word_ids": np.asarray([w.input_ids for w in windows], np.int32),
        "input_mask": np.asarray([w.input_mask for w in windows], np.int32),
        "input_type_ids": np.asarray([w.segment_ids for w in windows], np.int32),
        "label_ids": np.asarray([w.label_ids for w in windows], np.int32),
    }


def word_predictions(windows: Sequence[Window], predicted_ids, num_sentences, sentence_lengths):
    """Inverse of the alignment: per-window predicted label ids [windows, seq]
    → per-sentence lists of per-word label ids (each word exactly once)."""
    out = [[None] * n for n in sentence_lengths[:num_sentences]]
    for window, ids in zip(windows, predicted_ids):
        for position, word in enumerate(window.word_index):
            if word != IGNORE:
                out[window.sentence_index][word] = int(ids[position])
    for s, words in enumerate(out):
        missing = [i for i, v in enumerate(words) if v is None]
        if missing:
            raise AssertionError(f"sentence {s}: words {missing} got no prediction")
    return out


# === Writing ===


def write_predictions(path: str, conll: ConllFile, predicted_tags: Sequence[Sequence[str]],
                      scheme: Optional[str] = None) -> None:
    """Writes the file's columns with the predicted tag appended as the last
    column (conlleval's `word ... gold predicted` layout), in the file's tag
    scheme, one blank line between sentences."""
    scheme = scheme or conll.scheme
    lines = []
    for sentence, tags in zip(conll.sentences, predicted_tags):
        tags = ner_metrics.convert_scheme(tags, scheme)
        for columns, tag in zip(sentence.columns, tags):
            lines.append(" ".join(columns + [tag]))
        lines.append("")
    io.atomic_write(path, "\n".join(lines) + "\n")
