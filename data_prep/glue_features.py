"""Sentence(-pair) classification examples (`glue.InputExample`) → the model's inputs.

Features (`convert_examples`): `[CLS] a [SEP] (b [SEP])`, truncated longest
first (google's `_truncate_seq_pair`), as int32 numpy arrays
`input_word_ids`, `input_mask`, `input_type_ids` [n, max_seq_length], `label`
(int32 class id, or float32 score) and `example_index` (file order). Documents
longer than the model are cut into windows instead (`convert_examples_windows`).
`cached_features` stores the features as TFRecords in a cache directory under
a name that hashes the examples, the vocabulary and the settings, and re-uses
them when nothing changed.
"""

from __future__ import annotations

import hashlib
import json
from typing import List, Optional, Sequence, Tuple

import numpy as np

from data_prep.glue import GlueFormatError, InputExample
from official_bert import io
from official_bert.text import tokenization


def label_ids(examples: Sequence[InputExample], labels: Optional[Sequence[str]]) -> np.ndarray:
    """Class ids (int32) in `labels` order, or float32 scores when `labels` is None."""
    if labels is None:
        return np.array([e.label if e.label is not None else 0.0 for e in examples], np.float32)
    mapping = {label: i for i, label in enumerate(labels)}
    ids = []
    for e in examples:
        if e.label is None:
            ids.append(0)
        elif e.label not in mapping:
            raise GlueFormatError(None, f"line {e.line} has the unknown label {e.label!r}",
                                  fix=f"the labels are {', '.join(labels)}")
        else:
            ids.append(mapping[e.label])
    return np.array(ids, np.int32)


def convert_examples(examples: Sequence[InputExample], tokenizer, max_seq_length: int,
                     labels: Optional[Sequence[str]]) -> dict:
    """Packs every example (none dropped) into int32 arrays; see the module docstring.

    Args:
        tokenizer: a `FullTokenizer`, or a `fast_tokenization.CachedTokenizer`
            (same ids, faster on large sets).
        labels: the label list (None for regression).
    """
    ids_of = getattr(tokenizer, "ids", None) or (
        lambda text: tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)))
    vocab = tokenizer.vocab
    cls, sep = vocab[tokenization.CLS_TOKEN], vocab[tokenization.SEP_TOKEN]
    pad = vocab.get(tokenization.PAD_TOKEN, 0)
    n = len(examples)
    word_ids = np.full((n, max_seq_length), pad, np.int32)
    mask = np.zeros((n, max_seq_length), np.int32)
    type_ids = np.zeros((n, max_seq_length), np.int32)
    for i, example in enumerate(examples):
        a = ids_of(example.text_a)
        b = ids_of(example.text_b) if example.text_b is not None else None
        items, input_mask, segments = tokenization.pack_tokens(
            a, b, max_seq_length, cls=cls, sep=sep, pad=pad)
        word_ids[i], mask[i], type_ids[i] = items, input_mask, segments
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids,
            "label": label_ids(examples, labels),
            "example_index": np.arange(n, dtype=np.int32)}


def window_spans(num_tokens: int, window: int, stride: int,
                 max_windows: Optional[int] = None) -> List[Tuple[int, int]]:
    """(start, length) of each window over `num_tokens` tokens: starts 0,
    stride, 2 stride, ... until a window reaches the end (at least one window),
    the first `max_windows` of them. A stride longer than the window is the
    window (google's run_squad.py rule: no token is skipped).

    Example:
    >>> window_spans(10, 4, 3)
    [(0, 4), (3, 4), (6, 4)]
    """
    stride = min(stride, window)
    count = 1 + -(-max(num_tokens - window, 0) // stride)
    if max_windows:
        count = min(count, max_windows)
    return [(k * stride, min(window, num_tokens - k * stride)) for k in range(count)]


def convert_examples_windows(examples: Sequence[InputExample], tokenizer, max_seq_length: int,
                             labels: Optional[Sequence[str]], doc_stride: int,
                             max_windows: int) -> Tuple[dict, int]:
    """`convert_examples` for documents longer than the model (single-text tasks).

    Each text's tokens are cut into windows of `max_seq_length - 2` every
    `doc_stride` (`window_spans`), each packed `[CLS] window [SEP]`. The id
    arrays are [n, windows, max_seq_length], `windows` the most any example
    needs (at most `max_windows`); an example's rows past its last window are
    all 0 (the model skips them: `BertClassifier`).

    Returns:
        (the arrays, as `convert_examples`'s; how many examples had more
        windows than `max_windows`, their tails not read).
    """
    ids_of = getattr(tokenizer, "ids", None) or (
        lambda text: tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)))
    vocab = tokenizer.vocab
    cls, sep = vocab[tokenization.CLS_TOKEN], vocab[tokenization.SEP_TOKEN]
    pad = vocab.get(tokenization.PAD_TOKEN, 0)
    window = max_seq_length - 2
    tokens = [ids_of(example.text_a) for example in examples]
    spans = [window_spans(len(t), window, doc_stride) for t in tokens]
    cut = sum(len(s) > max_windows for s in spans)
    spans = [s[:max_windows] for s in spans]
    n, width = len(examples), max(map(len, spans), default=1)
    word_ids = np.full((n, width, max_seq_length), pad, np.int32)
    mask = np.zeros((n, width, max_seq_length), np.int32)
    for i, (ids, example_spans) in enumerate(zip(tokens, spans)):
        for w, (start, length) in enumerate(example_spans):
            word_ids[i, w, :length + 2] = [cls] + list(ids[start:start + length]) + [sep]
            mask[i, w, :length + 2] = 1
    return {"input_word_ids": word_ids, "input_mask": mask,
            "input_type_ids": np.zeros_like(mask), "label": label_ids(examples, labels),
            "example_index": np.arange(n, dtype=np.int32)}, cut


CACHE_VERSION = 1


def _file_digest(path: str) -> str:
    digest = hashlib.sha1()
    with io.open_file(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_key(examples: Sequence[InputExample], vocab_file: str, do_lower_case: bool,
              max_seq_length: int, labels: Optional[Sequence[str]]) -> str:
    """A hash of everything the features depend on."""
    digest = hashlib.sha1()
    settings = dict(version=CACHE_VERSION, vocab=_file_digest(vocab_file),
                    do_lower_case=bool(do_lower_case), max_seq_length=int(max_seq_length),
                    labels=list(labels) if labels is not None else None)
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for e in examples:
        digest.update(json.dumps([e.text_a, e.text_b, e.label]).encode("utf-8"))
    return digest.hexdigest()[:16]


def write_feature_cache(path: str, arrays: dict) -> None:
    """TFRecords of the features (ids and segments without padding), written
    under a temporary name and renamed: a file with the final name is complete."""
    from data_prep import tfrecord_io

    varints = {}

    def packed(values):
        out = []
        for v in values:
            v = int(v)
            encoded = varints.get(v)
            if encoded is None:
                encoded = varints[v] = tfrecord_io.varint(v)
            out.append(encoded)
        return b"".join(out)

    regression = arrays["label"].dtype.kind == "f"
    lengths = arrays["input_mask"].sum(axis=1)
    entry, int64 = tfrecord_io.feature_entry, tfrecord_io.int64_feature
    with tfrecord_io.TFRecordWriter(path) as writer:
        for i in range(len(lengths)):
            n = int(lengths[i])
            label = arrays["label"][i]
            entries = [
                entry("input_word_ids", int64(packed(arrays["input_word_ids"][i, :n]))),
                entry("input_type_ids", int64(packed(arrays["input_type_ids"][i, :n]))),
                entry("example_index", int64(packed([arrays["example_index"][i]]))),
                entry("label", tfrecord_io.float_feature(np.float32(label).tobytes())
                      if regression else int64(packed([label]))),
            ]
            writer.write(tfrecord_io.example(entries))
        writer.commit()


def read_feature_cache(path: str, max_seq_length: int, regression: bool, pad_id: int = 0) -> dict:
    """The arrays `write_feature_cache` stored, padded to `max_seq_length` again."""
    import tensorflow as tf

    spec = {
        "input_word_ids": tf.io.RaggedFeature(tf.int64),
        "input_type_ids": tf.io.RaggedFeature(tf.int64),
        "example_index": tf.io.FixedLenFeature([], tf.int64),
        "label": tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64),
    }
    parts = {k: [] for k in ("input_word_ids", "input_mask", "input_type_ids", "label",
                             "example_index")}
    dataset = tf.data.TFRecordDataset(path).batch(4096).map(lambda s: tf.io.parse_example(s, spec))
    for batch in dataset:
        ids = batch["input_word_ids"]
        shape = [None, max_seq_length]
        parts["input_word_ids"].append(ids.to_tensor(pad_id, shape=shape).numpy())
        parts["input_mask"].append(tf.ones_like(ids).to_tensor(0, shape=shape).numpy())
        parts["input_type_ids"].append(batch["input_type_ids"].to_tensor(0, shape=shape).numpy())
        parts["label"].append(batch["label"].numpy())
        parts["example_index"].append(batch["example_index"].numpy())
    if not parts["label"]:
        raise ValueError(f"feature cache {path} is empty; delete it")
    out = {k: np.concatenate(v) for k, v in parts.items()}
    for key in ("input_word_ids", "input_mask", "input_type_ids", "example_index"):
        out[key] = out[key].astype(np.int32)
    out["label"] = out["label"].astype(np.float32 if regression else np.int32)
    return out


def cached_features(examples: Sequence[InputExample], tokenizer, vocab_file: str,
                    do_lower_case: bool, max_seq_length: int, labels: Optional[Sequence[str]],
                    cache_dir: Optional[str], split: str, log=None) -> dict:
    """`convert_examples`, re-used from `cache_dir/<split>-<hash>.tf_record`
    when the examples, vocabulary and settings are unchanged (no cache when
    `cache_dir` is None)."""
    log = log or (lambda *args: None)
    if cache_dir is None:
        return convert_examples(examples, tokenizer, max_seq_length, labels)
    io.makedirs(cache_dir)
    key = cache_key(examples, vocab_file, do_lower_case, max_seq_length, labels)
    safe_split = "".join(c if c.isalnum() or c in "-_" else "_" for c in split)
    path = io.join(cache_dir, f"{safe_split}-{key}.tf_record")
    pad_id = tokenizer.vocab.get(tokenization.PAD_TOKEN, 0)
    if io.exists(path):
        log("Using cached %s features %s", split, path)
        try:
            arrays = read_feature_cache(path, max_seq_length, labels is None, pad_id)
        except Exception as e:  # noqa: BLE001 - tf.errors.DataLossError and the like
            if type(e).__module__.split(".")[0] != "tensorflow" and not isinstance(e, ValueError):
                raise
            log("Cached features %s are unreadable (%s): converting again", path,
                str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            arrays = {"label": ()}
        if len(arrays["label"]) == len(examples):
            return arrays
        log("Cached features %s hold %d examples, not %d: converting again",
            path, len(arrays["label"]), len(examples))
    arrays = convert_examples(examples, tokenizer, max_seq_length, labels)
    write_feature_cache(path, arrays)
    log("Wrote %s features of %d examples to %s", split, len(examples), path)
    return arrays


def truncated_fraction(arrays: dict) -> float:
    """Share of examples that filled the whole sequence (likely truncated)."""
    return float(np.mean(arrays["input_mask"][:, -1] == 1)) if len(arrays["input_mask"]) else 0.0

