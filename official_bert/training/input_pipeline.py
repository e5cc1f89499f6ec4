"""tf.data input pipelines: TFRecord files → dicts of batched features for the models.

(The fine-tuning tasks' in-memory features are `fine_tuning_input`'s, whose names
this module re-exports.)

Pre-training (`pretraining_dataset`)
------------------------------------
Reads the files of `data_prep/create_pretraining_data.py` or of
google-research/bert's generator (same features) and yields batches of

    input_word_ids       int32   [batch, seq_length]   (file feature `input_ids`)
    input_mask           int32   [batch, seq_length]
    input_type_ids       int32   [batch, seq_length]   (file feature `segment_ids`)
    masked_lm_positions  int32   [batch, max_predictions_per_seq]
    masked_lm_ids        int32   [batch, max_predictions_per_seq]
    masked_lm_weights    float32 [batch, max_predictions_per_seq]
    next_sentence_labels int32   [batch, 1]            (1 = B is a random span)

Two kinds of file, told apart by their features (every file is checked):

* static: masked when written (`masked_lm_*` present) — parsed as they are;
* dynamic: unmasked pairs (`--dynamic_masking`; no `masked_lm_*`) — masked
  here, per batch, fresh every epoch, with the generator's statistics: the
  number of masked positions is `masked_lm_prob` × the maskable tokens (not
  [CLS]/[SEP]/padding) with unbiased random rounding, at least 1, at most
  `max_predictions_per_seq`; each is [MASK] 80%, a random ordinary token 10%,
  unchanged 10%. With `word_start_mask` in the files, whole-word masking
  (google's greedy: words in random order, skipping words that no longer fit).

`dynamic_masking=True` also re-masks static files (their original tokens are
restored from `masked_lm_ids` first); `False` refuses dynamic files.

The pipeline: the files (sharded per input pipeline with `input_context` when
there are enough of them, otherwise records are sharded), shuffled and
repeated when training, read in parallel with `interleave`, records shuffled,
batched with `drop_remainder`, parsed (and masked) per batch in parallel,
prefetched. Gzip files are detected. With a `seed` the order and the masks
are deterministic.

N-gram masking (`max_ngram_size` > 1, masking at read time): spans of up to
that many whole words (with `word_start_mask`) or pieces, length n ∝ 1/n
(`masking.choose_ngrams`, the generator's `choose_ngrams` in the graph).

Raw text (`text_config`, run_pretraining's `--input_format=text`): the
sentence-per-line corpus itself; the generator's own code makes static
instances on the fly (`text_records`), then the same shuffle, batching and
parsing as for files.

Length bucketing (`length_bucket_width`, run_pretraining's
`--length_bucket_width`): every instance is padded to `seq_length` in the
files, but a batch needs only its longest instance. The shuffled records are
grouped by their length rounded up to a multiple of the width (the bucket;
`tf.data.Dataset.group_by_window`), each batch is made of one bucket's records
(`batch_size` of them, so the global batch is exact) and cut to the bucket's
length. The length counted is the last real token's and the last masked
position's, so every `masked_lm_positions` entry stays inside the cut batch.
Dynamic masking masks the cut batch. The same records arrive, in another
order (a bucket's batch leaves when it is full); at most
`seq_length / width` shapes (each one a trace, and an XLA compilation under
`--jit_compile`).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import dataclasses
import itertools
import re

import tensorflow as tf

from data_prep import create_pretraining_data
from official_bert import file_sets, io
from official_bert.errors import BadFileError, UserError
from official_bert.text import tokenization
# The fine-tuning half (in-memory features): importable from here too, as the tasks do.
from official_bert.training.fine_tuning_input import (  # noqa: F401  (re-exported)
    bucketed_length, numpy_dataset, split_into_micro_batches)
from official_bert.training.masking import mask_batch

STATIC_FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                   "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
DYNAMIC_FEATURES = ("input_ids", "input_mask", "segment_ids", "next_sentence_labels")
WORD_START_FEATURE = "word_start_mask"
# The file features with one value per token, cut to the batch's length by bucketing.
SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", WORD_START_FEATURE)


def _compression(path: str) -> str:
    with io.open_file(path, "rb") as f:
        return "GZIP" if f.read(2) == b"\x1f\x8b" else ""


def tf_error_text(error: BaseException) -> str:
    """TensorFlow's message without its op and function-node decorations."""
    text = str(getattr(error, "message", None) or error).strip()
    text = text.splitlines()[0] if text else type(error).__name__
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[Op:[^\]]*\].*$", "", text)
    return text.replace("' failed with", " failed with").strip()[:200]


def scan_records(path: str) -> tuple[int, str | None]:
    """(records read, what is wrong or None): reads the whole file, as
    training would, to find a truncated or corrupt record."""
    count = 0
    try:
        for _ in tf.data.TFRecordDataset(path, compression_type=_compression(path),
                                         buffer_size=1 << 20):
            count += 1
    except tf.errors.OpError as e:
        return count, tf_error_text(e)
    return count, None


def find_bad_file(files) -> BadFileError | None:
    """The first of `files` with a truncated or corrupt record, as a
    `BadFileError` naming it and the record, or None. For the error path
    (a `DataLossError` while training): every file is read to the end."""
    for path in files:
        count, problem = scan_records(path)
        if problem is not None:
            return BadFileError(path, f"is truncated or corrupt: {problem}", record=count)
    return None


def inspect_file(path: str) -> tuple[str, dict[str, tuple[str, int]]]:
    """(compression, {feature: (kind, length)}) from the first record of `path`."""
    compression = _compression(path)
    try:
        records = list(tf.data.TFRecordDataset(path, compression_type=compression).take(1))
    except tf.errors.OpError as e:
        raise BadFileError(path, f"is not a readable TFRecord file ({tf_error_text(e)})",
                           record=0) from None
    if not records:
        raise BadFileError(path, "holds no records")
    try:
        example = tf.train.Example.FromString(records[0].numpy())
    except Exception as e:  # noqa: BLE001 - google.protobuf.message.DecodeError
        if type(e).__name__ != "DecodeError":
            raise
        raise BadFileError(path, f"holds records that are not tf.train.Example protos ({e})",
                           record=0, fix="pass TFRecords of pre-training examples") from None
    features = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        values = getattr(feature, kind).value if kind else []
        features[name] = ({"int64_list": "int64", "float_list": "float",
                           "bytes_list": "bytes"}.get(kind, "none"), len(values))
    return compression, features


def _feature_form(name, seq_length, max_predictions_per_seq) -> tuple:
    """(kind, length) of a pre-training feature as google-research/bert writes it:
    what a file is checked against and what its records are parsed with."""
    kind = "float" if name == "masked_lm_weights" else "int64"
    length = (1 if name == "next_sentence_labels" else
              max_predictions_per_seq if name.startswith("masked_lm_") else seq_length)
    return kind, length


def _check_features(path, features, seq_length, max_predictions_per_seq) -> bool:
    """Validates one file's features; returns whether it is static (masked)."""
    static = any(name.startswith("masked_lm_") for name in features)
    required = STATIC_FEATURES if static else DYNAMIC_FEATURES
    for name in required:
        if name not in features:
            kind = "static (masked)" if static else "dynamic (unmasked)"
            raise BadFileError(path, f"has no feature {name!r} (a {kind} pre-training "
                               f"file needs {', '.join(required)})", record=0)
        kind, length = features[name]
        want_kind, want_length = _feature_form(name, seq_length, max_predictions_per_seq)
        if kind != want_kind:
            raise BadFileError(path, f"has the feature {name!r} as {kind}, expected {want_kind}",
                               record=0)
        if length != want_length:
            what = ("max_predictions_per_seq" if name.startswith("masked_lm_") else
                    "seq_length" if want_length != 1 else "1 value")
            raise BadFileError(path, f"has {length} values in the feature {name!r}, but "
                               f"{what}={want_length} was asked for", record=0,
                               fix=f"pass the --{'max_' if what == 'seq_length' else ''}"
                                   f"{what} the file was made with"
                               if want_length != 1 else None)
    if WORD_START_FEATURE in features and features[WORD_START_FEATURE][1] != seq_length:
        raise BadFileError(path, f"has {features[WORD_START_FEATURE][1]} values in the feature "
                           f"{WORD_START_FEATURE!r}, expected {seq_length}", record=0)
    return static


def _vocab_ids(vocab_file: str):
    """(vocab_size, mask_id, cls_id, sep_id, ordinary ids) from a vocabulary file."""
    vocab = tokenization.load_vocab(vocab_file)
    for token in ("[MASK]", "[CLS]", "[SEP]"):
        if token not in vocab:
            raise BadFileError(vocab_file, f"lacks the special token {token}, which dynamic "
                               "masking needs", fix="use the vocabulary the data was made with")
    ordinary = [i for t, i in vocab.items()
                if not (len(t) > 2 and t.startswith("[") and t.endswith("]"))]
    return (max(vocab.values()) + 1, vocab["[MASK]"], vocab["[CLS]"], vocab["[SEP]"],
            sorted(ordinary))


def _feature_spec(names, seq_length, max_predictions_per_seq) -> dict:
    """The `tf.io.parse_example` spec of the features `names`."""
    spec = {}
    for name in names:
        kind, length = _feature_form(name, seq_length, max_predictions_per_seq)
        spec[name] = tf.io.FixedLenFeature([length], tf.float32 if kind == "float" else tf.int64)
    return spec


def pretraining_dataset(
    file_patterns: str | Iterable[str], seq_length: int, max_predictions_per_seq: int,
    batch_size: int, is_training: bool = True, *,
    # Masking at read time.
    dynamic_masking: bool | None = None, vocab_file: str | None = None,
    vocab_size: int | None = None, mask_token_id: int = 103, cls_token_id: int = 101,
    sep_token_id: int = 102, random_token_ids: Sequence[int] | None = None,
    masked_lm_prob: float = 0.15, whole_word_masking: bool | None = None,
    max_ngram_size: int = 1,
    # Order and distribution.
    input_context: tf.distribute.InputContext | None = None, seed: int | None = None,
    shuffle_buffer_size: int = 10_000, cycle_length: int | None = None,
    # Batching, and raw text input.
    drop_remainder: bool = True, length_bucket_width: int = 0, bucket_batches: int = 1,
    text_config=None,
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of pre-training batches (see the module docstring).

    Args:
      file_patterns: comma-separated globs or `prefix@N` shards, or a list of
        them (`official_bert.file_sets.expand_paths`; no match is a `UserError`
        naming --input_file).
      seq_length, max_predictions_per_seq: the files' shapes (checked).
      batch_size: the global batch size; with `input_context` each input
        pipeline batches `input_context.get_per_replica_batch_size(batch_size)`.
      is_training: shuffle and repeat forever; otherwise one pass in file order.
      dynamic_masking: None = as the files are (static or dynamic); True =
        mask at read time (static files are unmasked first); False = static
        files only.
      vocab_file: for dynamic masking, where [MASK]/[CLS]/[SEP] ids, the
        vocabulary size and the ordinary tokens (random replacements) come
        from. Without it: `vocab_size`, the `*_token_id`s, and
        `random_token_ids` (default: every id except [PAD]=0, [CLS], [SEP],
        [MASK], [UNK]=100 and the 1..99 [unused] slots of Google's layout).
      whole_word_masking: None = when the files carry `word_start_mask`.
      input_context: a `tf.distribute.InputContext` (per-worker sharding).
      seed: makes file order, shuffling and masks deterministic.
      length_bucket_width: 0 = every batch is `seq_length` long; else batches
        of records of one length bucket (lengths rounded up to a multiple of
        this), each cut to its bucket's length (see the module docstring).
      bucket_batches: with bucketing, this many consecutive batches come from
        one bucket (gradient accumulation stacks them: they must have one
        length).
      max_ngram_size: dynamic masking masks spans of up to this many words
        or pieces (`masking.choose_ngrams`); > 1 needs masking at read time.
      text_config: a `PretrainingDataConfig`: `file_patterns` are raw text,
        the instances are made on the fly (`text_records`; needs `vocab_file`).
    """
    _check_sizes(seq_length, max_predictions_per_seq, batch_size, length_bucket_width,
                 bucket_batches)
    source = _Source.inspect(file_patterns, seq_length, max_predictions_per_seq, text_config,
                             vocab_file)
    masking = _read_time_masking(
        source, dynamic_masking, whole_word_masking, max_ngram_size, masked_lm_prob,
        max_predictions_per_seq,
        (vocab_file, vocab_size, mask_token_id, cls_token_id, sep_token_id, random_token_ids))
    per_replica_batch, num_pipelines, pipeline_id = _pipeline_share(input_context, batch_size)
    deterministic = seed is not None or not is_training
    local_seed = None if seed is None else seed + 1_000_003 * pipeline_id
    d = source.records(pipeline_id, num_pipelines, is_training, local_seed, cycle_length,
                       deterministic)
    if is_training:
        d = d.shuffle(source.shuffle_buffer(shuffle_buffer_size, seq_length, num_pipelines),
                      seed=local_seed, reshuffle_each_iteration=True)
    if length_bucket_width:
        d = _bucket_batches(d, per_replica_batch, length_bucket_width, seq_length,
                            max_predictions_per_seq, source.static, drop_remainder,
                            bucket_batches)
    else:
        d = d.batch(per_replica_batch, drop_remainder=drop_remainder)
    word_starts = masking is not None and masking.word_starts
    names = (STATIC_FEATURES if source.static else
             DYNAMIC_FEATURES + ((WORD_START_FEATURE,) if word_starts else ()))
    spec = _feature_spec(names, seq_length, max_predictions_per_seq)
    d = _model_inputs_of(d, _parser(spec, length_bucket_width), masking, source.static,
                         local_seed, deterministic)
    return d.prefetch(tf.data.AUTOTUNE)


# --- the steps of `pretraining_dataset` ---


def _check_sizes(seq_length, max_predictions_per_seq, batch_size, length_bucket_width,
                 bucket_batches) -> None:
    if seq_length < 1 or max_predictions_per_seq < 1 or batch_size < 1:
        raise UserError("--max_seq_length, --max_predictions_per_seq and the batch size must "
                        "be positive")
    if length_bucket_width < 0 or bucket_batches < 1:
        raise UserError(f"--length_bucket_width must be 0 (off) or positive, got "
                        f"{length_bucket_width}")


@dataclasses.dataclass
class _Source:
    """What `pretraining_dataset` reads: TFRecord files (each checked), or a
    raw text corpus whose instances the generator makes on the fly."""

    files: list
    compressions: list  # per TFRecord file
    static: bool  # masked records (text input makes static ones)
    word_starts_everywhere: bool  # every (dynamic) file has `word_start_mask`
    text_config: object = None  # a `PretrainingDataConfig` for raw text
    vocab_file: str | None = None

    @classmethod
    def inspect(cls, file_patterns, seq_length, max_predictions_per_seq, text_config,
                vocab_file) -> "_Source":
        files = file_sets.expand_paths(file_patterns, "input_file")
        if text_config is not None:  # raw text: the generator makes static (masked) records
            text_config = _text_config(text_config, vocab_file, seq_length,
                                       max_predictions_per_seq)
            return cls(files, [], True, False, text_config, vocab_file)
        compressions, kinds, word_start_files = [], [], 0
        for path in files:
            compression, features = inspect_file(path)
            compressions.append(compression)
            kinds.append(_check_features(path, features, seq_length, max_predictions_per_seq))
            word_start_files += WORD_START_FEATURE in features
        if len(set(kinds)) > 1:
            static = [f for f, s in zip(files, kinds) if s][:1]
            dynamic = [f for f, s in zip(files, kinds) if not s][:1]
            raise BadFileError(dynamic[0], f"holds dynamic (unmasked) pre-training data, but "
                               f"{static[0]} static (masked) data", fix="give files of one kind")
        static = kinds[0]
        return cls(files, compressions, static, not static and word_start_files == len(files))

    def shuffle_buffer(self, requested: int, seq_length: int, num_pipelines: int) -> int:
        """The records shuffled together: `requested`; for raw text, at most
        about one pass's instances (its bytes / 4 per token / `seq_length`).
        tf.data fills the whole buffer before the first batch, and a task's
        small file (a few sentences: an instance per pass) would be passed over
        10,000 times first; past one pass a buffer only holds the same
        documents again, masked otherwise."""
        if self.text_config is None:
            return requested
        passed = sum(io.size(path) for path in self.files) // max(num_pipelines, 1)
        return max(1, min(requested, passed // (4 * seq_length)))

    def records(self, pipeline_id, num_pipelines, is_training, local_seed, cycle_length,
                deterministic) -> tf.data.Dataset:
        """The serialized records of input pipeline `pipeline_id`."""
        if self.text_config is not None:
            return text_records(self.files, self.vocab_file, self.text_config, pipeline_id,
                                num_pipelines, is_training)
        return _file_records(self.files, self.compressions, pipeline_id, num_pipelines,
                             is_training, local_seed, cycle_length, deterministic)


def _text_config(text_config, vocab_file, seq_length, max_predictions_per_seq):
    """The generator's config for raw text input, with the reader's shapes."""
    if not vocab_file:
        raise UserError("--input_format=text needs --vocab_file (to tokenize the text)")
    text_config = dataclasses.replace(text_config, max_seq_length=seq_length,
                                      max_predictions_per_seq=max_predictions_per_seq)
    text_config.validate()
    return text_config


@dataclasses.dataclass(frozen=True)
class _ReadTimeMasking:
    """How batches are masked as they are read (`masking.mask_batch`)."""

    word_starts: bool  # whole words, from the files' `word_start_mask`
    mask_token_id: int
    cls_token_id: int
    sep_token_id: int
    random_token_ids: list
    masked_lm_prob: float
    max_predictions_per_seq: int
    max_ngram_size: int

    def mask(self, input_ids, parsed, seed):
        """(masked input ids, masked_lm_positions, masked_lm_ids, masked_lm_weights)."""
        return mask_batch(
            input_ids, parsed["input_mask"], seed,
            word_starts=parsed.get(WORD_START_FEATURE) if self.word_starts else None,
            max_predictions_per_seq=self.max_predictions_per_seq,
            masked_lm_prob=self.masked_lm_prob, mask_token_id=self.mask_token_id,
            random_token_ids=self.random_token_ids,
            unmaskable_token_ids=(self.cls_token_id, self.sep_token_id),
            max_ngram_size=self.max_ngram_size)


def _read_time_masking(source, dynamic_masking, whole_word_masking, max_ngram_size,
                       masked_lm_prob, max_predictions_per_seq, token_options,
                       ) -> _ReadTimeMasking | None:
    """How batches are masked as they are read; None: used as the files are.

    `dynamic_masking` None masks dynamic files only. `token_options`: the
    arguments of `_token_ids`.
    """
    first_file = source.files[0]
    if dynamic_masking is None:
        dynamic_masking = not source.static
    if not dynamic_masking and not source.static:
        raise BadFileError(first_file, "holds unmasked (dynamic) pre-training data",
                           fix="it needs dynamic masking (--dynamic_masking)")
    if max_ngram_size > 1 and not dynamic_masking and source.text_config is None:
        raise UserError(f"--max_ngram_size={max_ngram_size} masks at read time, but "
                        f"{first_file} is masked already: pass --dynamic_masking too, or make "
                        "the files with create_pretraining_data --max_ngram_size")
    if not dynamic_masking:
        return None
    if whole_word_masking and not source.word_starts_everywhere:
        raise BadFileError(first_file, f"lacks the feature {WORD_START_FEATURE!r} that "
                           "whole-word masking needs", fix="make the files with "
                           "create_pretraining_data.py --dynamic_masking "
                           "--do_whole_word_mask")
    word_starts = (source.word_starts_everywhere if whole_word_masking is None
                   else bool(whole_word_masking))
    return _ReadTimeMasking(word_starts, *_token_ids(*token_options),
                            masked_lm_prob=masked_lm_prob,
                            max_predictions_per_seq=max_predictions_per_seq,
                            max_ngram_size=max_ngram_size)


def _token_ids(vocab_file, vocab_size, mask_token_id, cls_token_id, sep_token_id,
               random_token_ids):
    """([MASK], [CLS] and [SEP] ids, the ids random replacements are drawn from):
    from `vocab_file` when given, else the arguments (random ids by default:
    every id but [PAD], [CLS], [SEP], [MASK], [UNK] and Google's [unused] slots)."""
    if vocab_file:
        vocab_size, mask_token_id, cls_token_id, sep_token_id, vocab_random = \
            _vocab_ids(vocab_file)
        if random_token_ids is None:
            random_token_ids = vocab_random
    if random_token_ids is None:
        if not vocab_size:
            raise UserError("dynamic masking needs --vocab_file (for the 10% random "
                            "replacement tokens)")
        excluded = {0, cls_token_id, sep_token_id, mask_token_id, 100, *range(1, 100)}
        random_token_ids = [i for i in range(vocab_size) if i not in excluded]
    random_token_ids = list(random_token_ids)
    if not random_token_ids:
        raise UserError("the vocabulary has no ordinary token to draw random "
                        "replacements from")
    return mask_token_id, cls_token_id, sep_token_id, random_token_ids


def _pipeline_share(input_context, batch_size):
    """(this input pipeline's batch size, the number of pipelines, its id)."""
    if input_context is None:
        return batch_size, 1, 0
    return (input_context.get_per_replica_batch_size(batch_size),
            input_context.num_input_pipelines, input_context.input_pipeline_id)


def _parser(spec, length_bucket_width):
    """Batch of serialized records → dict of int32 (and float32) tensors, cut
    to the bucket's length when bucketing."""

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        parsed = {name: (tf.cast(t, tf.int32) if t.dtype == tf.int64 else t)
                  for name, t in parsed.items()}
        if length_bucket_width:
            parsed = _cut_to_bucket(parsed, length_bucket_width)
        return parsed

    return parse


def _model_inputs_of(d, parse, masking, static, local_seed, deterministic):
    """Batches of serialized records → the model's inputs; masked afresh
    with `masking` (a new seed stream for every iteration, an epoch or a
    `repeat`: fresh masks, reproducible for a given seed)."""
    if masking is None:
        return d.map(lambda serialized: _model_inputs(parse(serialized)),
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)

    def parse_and_mask(serialized, seed_pair):
        p = parse(serialized)
        ids = _original_ids(p) if static else p["input_ids"]
        masked_ids, positions, labels, weights = masking.mask(ids, p, seed_pair)
        p.update(masked_lm_positions=positions, masked_lm_ids=labels,
                 masked_lm_weights=weights)
        return _model_inputs(p, masked_ids)

    seeds = tf.data.Dataset.random(seed=local_seed, rerandomize_each_iteration=True)
    seeds = seeds.batch(2, drop_remainder=True)
    d = tf.data.Dataset.zip((d, seeds))
    return d.map(parse_and_mask, num_parallel_calls=tf.data.AUTOTUNE,
                 deterministic=deterministic)


def _model_inputs(parsed, input_ids=None):
    """The batch under the model's names; `input_ids` replaces the file's."""
    return {
        "input_word_ids": parsed["input_ids"] if input_ids is None else input_ids,
        "input_mask": parsed["input_mask"],
        "input_type_ids": parsed["segment_ids"],
        "masked_lm_positions": parsed["masked_lm_positions"],
        "masked_lm_ids": parsed["masked_lm_ids"],
        "masked_lm_weights": parsed["masked_lm_weights"],
        "next_sentence_labels": parsed["next_sentence_labels"],
    }


def _original_ids(parsed):
    """A static batch's input ids with the masked tokens put back."""
    ids = parsed["input_ids"]
    rows = tf.range(tf.shape(ids)[0])[:, None] + tf.zeros_like(parsed["masked_lm_positions"])
    real = parsed["masked_lm_weights"] > 0
    index = tf.stack([tf.boolean_mask(rows, real),
                      tf.boolean_mask(parsed["masked_lm_positions"], real)], axis=1)
    return tf.tensor_scatter_nd_update(ids, index, tf.boolean_mask(parsed["masked_lm_ids"], real))


def _file_records(files, compressions, pipeline_id, num_pipelines, is_training, local_seed,
                  cycle_length, deterministic) -> tf.data.Dataset:
    """The serialized records of this input pipeline's share of TFRecord `files`."""
    d = tf.data.Dataset.from_tensor_slices((files, compressions))
    shard_records = num_pipelines > 1 and len(files) < num_pipelines
    if num_pipelines > 1 and not shard_records:
        d = d.shard(num_pipelines, pipeline_id)
    n_files = len(files) if shard_records else -(-len(files) // num_pipelines)
    if is_training:
        d = d.shuffle(max(n_files, 1), seed=local_seed, reshuffle_each_iteration=True)
        d = d.repeat()
    d = d.interleave(
        lambda path, compression: tf.data.TFRecordDataset(path, compression_type=compression),
        cycle_length=cycle_length or max(1, min(n_files, 8)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    if shard_records:
        d = d.shard(num_pipelines, pipeline_id)
    return d


def text_records(files: Sequence[str], vocab_file: str, config, pipeline_id: int = 0,
                 num_pipelines: int = 1, is_training: bool = True) -> tf.data.Dataset:
    """Serialized static instances made on the fly from a sentence-per-line corpus.

    run_pretraining's --input_format=text: `tf.data.Dataset.from_generator`
    over `data_prep.create_pretraining_data.stream_records`, i.e. the
    generator's own code (`worker_records`, `InstanceMaker`): the same pairs,
    next-sentence labels, masking and statistics as the files of
    `create_pretraining_data --dupe_factor=1`, new pairs and masks every pass.
    Input pipeline `pipeline_id` of `num_pipelines` makes the instances of its
    own documents (the generator's assignment of documents to workers, by
    bytes); training passes over the corpus forever (each pass in another
    file order), evaluation once in file order. Deterministic for
    `config.random_seed`.

    Args:
      files: the corpus files (one sentence per line, a blank line between documents).
      vocab_file: the WordPiece vocabulary.
      config: a `data_prep.configs.PretrainingDataConfig`.
      pipeline_id, num_pipelines: this input pipeline's share.
      is_training: passes forever with shuffled files, else one pass.
    """
    files = list(files)

    def chunks(size=256):
        # Records leave Python in chunks: one call into the generator per
        # record would cost more than making it.
        stream = create_pretraining_data.stream_records(
            files, vocab_file, config, pipeline_id, num_pipelines,
            passes=None if is_training else 1, shuffle_files=is_training)
        while chunk := list(itertools.islice(stream, size)):
            yield chunk

    return tf.data.Dataset.from_generator(
        chunks, output_signature=tf.TensorSpec([None], tf.string)).unbatch()


def _used_length(parsed):
    """Per record (int32 [batch]): 1 + the last position that must be kept,
    a real token (`input_mask`) or a masked-LM prediction."""
    mask = parsed["input_mask"]
    after = tf.range(1, tf.shape(mask)[1] + 1)[None, :]
    used = tf.reduce_max(tf.where(mask > 0, after, 0), axis=1)
    if "masked_lm_positions" in parsed:
        predicted = tf.where(parsed["masked_lm_weights"] > 0,
                             parsed["masked_lm_positions"] + 1, 0)
        used = tf.maximum(used, tf.reduce_max(predicted, axis=1))
    return tf.maximum(used, 1)


def _bucket_length(used, width, seq_length):
    """The length a record of `used` positions is cut to: `used` rounded up to
    a multiple of `width`, at most `seq_length` (`bucketed_length`'s rule)."""
    return tf.minimum(seq_length, (used + width - 1) // width * width)


def _cut_to_bucket(parsed, width):
    """Cuts a parsed batch's per-token features to its bucket's length."""
    seq_length = tf.shape(parsed["input_mask"])[1]
    length = _bucket_length(tf.reduce_max(_used_length(parsed)), width, seq_length)
    return {name: t[:, :length] if name in SEQUENCE_FEATURES else t
            for name, t in parsed.items()}


def _bucket_batches(d, batch_size, width, seq_length, max_predictions_per_seq, static,
                    drop_remainder, bucket_batches):
    """Serialized records → batches of serialized records of one length bucket.

    The lengths are parsed in chunks (cheap: `input_mask` and, for masked
    files, the masked positions), then `group_by_window` collects each bucket's
    records and lets `bucket_batches` batches out as soon as it has them; it
    is sequential, so the order is deterministic given the input's.
    """
    length_spec = {"input_mask": tf.io.FixedLenFeature([seq_length], tf.int64)}
    if static:
        length_spec["masked_lm_positions"] = tf.io.FixedLenFeature(
            [max_predictions_per_seq], tf.int64)
        length_spec["masked_lm_weights"] = tf.io.FixedLenFeature(
            [max_predictions_per_seq], tf.float32)

    def with_bucket(serialized):
        parsed = tf.io.parse_example(serialized, length_spec)
        parsed["input_mask"] = tf.cast(parsed["input_mask"], tf.int32)
        if static:
            parsed["masked_lm_positions"] = tf.cast(parsed["masked_lm_positions"], tf.int32)
        bucket = (_bucket_length(_used_length(parsed), width, seq_length) - 1) // width
        return serialized, tf.cast(bucket, tf.int64)

    d = d.batch(256).map(with_bucket, num_parallel_calls=tf.data.AUTOTUNE,
                         deterministic=True).unbatch()
    d = d.group_by_window(
        key_func=lambda serialized, bucket: bucket,
        reduce_func=lambda bucket, records: records.batch(batch_size,
                                                          drop_remainder=drop_remainder),
        window_size=batch_size * bucket_batches)
    return d.map(lambda serialized, bucket: serialized)
