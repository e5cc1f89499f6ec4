"""In-graph BERT text preprocessing on tensorflow-text, for raw-string models.

* `BertTokenizerLayer`: strings [batch] -> ragged ids [batch, (tokens)], the
  same ids as `tokenization.FullTokenizer` (tested on 4,698 real texts).
* `BertPackInputs`: one or two ragged id segments -> `[CLS] A [SEP] B [SEP]`,
  truncated longest-first like `tokenization.truncate_seq_pair`, padded.
* `BertPreprocessor`: both, raw text (a and optional b) -> the encoder's dict.

Why not tensorflow-text's `BertTokenizer`: its `lower_case` applies NFKC case
folding (full-width "Ａ" becomes "a", "ﬁ" becomes "fi", "ß" becomes "ss"),
turns only Cc/Cf controls into spaces (Python deletes every C* character,
joining "a\\x00b" into one word), counts `max_bytes_per_word` in bytes (Python
counts characters), and uses RE2's and ICU's Unicode tables, which are older
than Python's (ICU lower-cases 40 Unicode-14 letters differently). Here every
character class (controls, whitespace, CJK, punctuation, non-spacing marks)
and the lower-case mapping are generated from Python's `unicodedata`, i.e.
from the very predicates `tokenization.py` applies, and only the NFC/NFD
normalizations come from ICU (they agree with Python on every assigned code
point). The generated tables are baked into a SavedModel as constants.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import unicodedata
from typing import List, Sequence, Union

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from official_bert.errors import UserError
from official_bert.text import tokenization


# ---------------------------------------------------------------------------
# Unicode tables generated from Python's unicodedata.


@dataclasses.dataclass(frozen=True)
class _UnicodeTables:
    control: str  # RE2 class: characters `BasicTokenizer` deletes
    whitespace: str  # RE2 class: characters that separate words
    cjk: str  # RE2 class: CJK ideographs, each its own word
    mark: str  # RE2 class: non-spacing marks (Mn), stripped when uncased
    punctuation: str  # RE2 class: characters split off as their own token
    lower_from: tuple  # code points whose lower case is one other code point
    lower_to: tuple


def _re2_class(ranges) -> str:
    parts = []
    for lo, hi in ranges:
        parts.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return "[" + "".join(parts) + "]"


def _ranges(code_points) -> list:
    ranges = []
    for cp in code_points:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ranges


@functools.lru_cache(maxsize=None)
def unicode_tables() -> _UnicodeTables:
    """Scans every code point once (about a second), then caches the tables."""
    control, whitespace, mark, punctuation = [], [], [], []
    lower_from, lower_to = [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # surrogates cannot occur in valid UTF-8
        char = chr(cp)
        if cp == 0 or cp == 0xFFFD or tokenization._is_control(char):
            control.append(cp)
            continue
        # Python's str.split() (used by whitespace_tokenize) also splits on
        # U+2028/U+2029, which are neither Zs nor control characters.
        if tokenization._is_whitespace(char) or char.isspace():
            whitespace.append(cp)
        if unicodedata.category(char) == "Mn":
            mark.append(cp)
        if tokenization._is_punctuation(char):
            punctuation.append(cp)
        lower = char.lower()
        if lower != char and len(lower) == 1:
            lower_from.append(cp)
            lower_to.append(ord(lower))
    return _UnicodeTables(
        control=_re2_class(_ranges(control)),
        whitespace=_re2_class(_ranges(whitespace)),
        cjk=_re2_class(tokenization.CJK_RANGES),
        mark=_re2_class(_ranges(mark)),
        punctuation=_re2_class(_ranges(punctuation)),
        lower_from=tuple(lower_from),
        lower_to=tuple(lower_to),
    )


# The only code point whose lower case is longer than one code point (in the
# default, locale-free mapping): "İ" -> "i" + COMBINING DOT ABOVE.
_MULTI_CHAR_LOWER = (("\u0130", "i\u0307"),)


def _lower_table(tables: _UnicodeTables) -> tf.lookup.StaticHashTable:
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(tables.lower_from, tf.int32),
            tf.constant(tables.lower_to, tf.int32),
        ),
        default_value=-1,
    )


def _lower_utf8(text: tf.Tensor, table: tf.lookup.StaticHashTable) -> tf.Tensor:
    """Lower-cases each character on its own, exactly as Python's `str.lower`.

    `tf.strings.lower(encoding="utf-8")` would use ICU's (older) tables and
    apply the context-dependent final-sigma rule, which Hugging Face's
    tokenizer (the reference) does not.
    """
    for upper, lower in _MULTI_CHAR_LOWER:
        text = tf.strings.regex_replace(text, upper, lower)
    chars = tf.strings.unicode_decode(text, "UTF-8")

    def lower_flat(code_points):
        mapped = table.lookup(code_points)
        return tf.where(mapped >= 0, mapped, code_points)

    chars = tf.ragged.map_flat_values(lower_flat, chars)
    return tf.strings.unicode_encode(chars, "UTF-8")


def basic_tokenize(text: tf.Tensor, lower_case: bool, lower_table=None):
    """In-graph `tokenization.BasicTokenizer`: strings [batch] -> ragged words.

    Args:
        text: tf.string tensor [batch].
        lower_case: bool. Lower-case and strip accents.
        lower_table: the lower-case lookup table (made here when None; pass
            one from a layer so that it is tracked and saved).

    Returns:
        tf.string RaggedTensor [batch, (words)].
    """
    tables = unicode_tables()
    # Invalid UTF-8 bytes are dropped, as convert_to_unicode's
    # bytes.decode("utf-8", "ignore") does.
    text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")
    # The order follows BasicTokenizer.tokenize step by step: clean, space out
    # CJK, NFC, then (uncased) lower-case, NFD and strip Mn, then split.
    text = tf.strings.regex_replace(text, tables.control, "")
    text = tf.strings.regex_replace(text, tables.whitespace, " ")
    text = tf.strings.regex_replace(text, tables.cjk, " \\0 ")
    text = tf_text.normalize_utf8(text, "NFC")
    if lower_case:
        if lower_table is None:
            lower_table = _lower_table(tables)
        text = _lower_utf8(text, lower_table)
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, tables.mark, "")
    # Split on spaces (dropped) and punctuation (kept as words); empty words,
    # e.g. a word made only of accents, are dropped as Python drops them.
    return tf_text.regex_split(
        text,
        delim_regex_pattern=f" +|{tables.punctuation}",
        keep_delim_regex_pattern=tables.punctuation,
    )


# ---------------------------------------------------------------------------
# Tokenizer layer.


def _vocab_list(vocab) -> List[str]:
    if isinstance(vocab, (str, bytes)) or hasattr(vocab, "__fspath__"):
        return tokenization.load_vocab_list(vocab)
    vocab = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in vocab]
    if not vocab:
        raise tokenization.VocabError("The vocabulary is empty.")
    return vocab


@keras.saving.register_keras_serializable(package="official_bert")
class BertTokenizerLayer(keras.layers.Layer):
    """Raw strings to WordPiece ids, in the graph; same ids as `FullTokenizer`.

    Args:
        vocab: path of a vocabulary file (one token per line), or the list of
            tokens (the id of a token is its position). Stored as a list in
            the config, so a saved model needs no file.
        lower_case: bool. True for uncased models (lower-case, strip accents).
            A warning is logged when the vocabulary looks like the other casing.
        max_input_chars_per_word: int. Longer words become `unknown_token`.
        unknown_token: str. Token for words no pieces cover; must be in vocab.
        suffix_indicator: str. Prefix of word-continuation pieces.
        **kwargs: standard `keras.layers.Layer` arguments (`name`, ...).

    Call args:
        inputs: tf.string tensor [batch] (or [batch, 1], or a scalar).

    Returns:
        int32 RaggedTensor [batch, (tokens)] ([(tokens)] for a scalar).

    Example:
    >>> tokenizer = BertTokenizerLayer("uncased_L-12_H-768_A-12/vocab.txt")
    >>> tokenizer(tf.constant(["Unaffable!"])).to_list()
    [[14477, 20961, 3468, 999]]
    """

    def __init__(
        self,
        vocab: Union[str, Sequence[str]],
        lower_case: bool = True,
        max_input_chars_per_word: int = tokenization.MAX_INPUT_CHARS_PER_WORD,
        unknown_token: str = tokenization.UNK_TOKEN,
        suffix_indicator: str = "##",
        **kwargs,
    ):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self._vocab = _vocab_list(vocab)
        self.lower_case = bool(lower_case)
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self.unknown_token = unknown_token
        self.suffix_indicator = suffix_indicator
        # Same mapping as load_vocab (a token listed twice is refused there).
        self.token_to_id = dict(tokenization.vocab_from_list(self._vocab))
        if unknown_token not in self.token_to_id:
            if isinstance(vocab, (str, bytes)) or hasattr(vocab, "__fspath__"):  # (name it)
                raise tokenization.VocabError(
                    os.fsdecode(vocab), f"has no {unknown_token} token, which WordPiece emits "
                    "for unknown words", fix="add it to the vocabulary")
            raise tokenization.VocabError(
                f"The vocabulary has no {unknown_token} token, which WordPiece "
                "emits for unknown words; add it to the vocabulary."
            )
        tokenization.validate_case_matches_vocab(self._vocab, self.lower_case)

        self._lower_table = _lower_table(unicode_tables()) if self.lower_case else None
        keys = list(self.token_to_id)
        self._vocab_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys, tf.string),
                tf.constant([self.token_to_id[k] for k in keys], tf.int64),
            ),
            default_value=-1,
        )
        # Pieces longer than the longest vocabulary entry cannot match, so the
        # search may start there (an optimization; bytes >= characters).
        longest = max(
            len(t[len(suffix_indicator):].encode("utf-8"))
            if t.startswith(suffix_indicator)
            else len(t.encode("utf-8"))
            for t in keys
        )
        self._wordpiece = tf_text.WordpieceTokenizer(
            self._vocab_table,
            suffix_indicator=suffix_indicator,
            # The limit is applied in characters in call(); this byte limit
            # only has to let every word of up to that many characters through.
            max_bytes_per_word=4 * self.max_input_chars_per_word,
            max_chars_per_token=max(longest, 1),
            token_out_type=tf.int64,
            unknown_token=unknown_token,
            split_unknown_characters=False,
        )

    @property
    def vocabulary(self) -> List[str]:
        return list(self._vocab)

    @property
    def vocabulary_size(self) -> int:
        return len(self._vocab)

    def token_id(self, token: str) -> int:
        """The id of `token`; VocabError when the vocabulary lacks it."""
        if token not in self.token_to_id:
            raise tokenization.VocabError(f"The vocabulary has no {token} token.")
        return self.token_to_id[token]

    def call(self, inputs):
        text = tf.convert_to_tensor(inputs, tf.string)
        scalar = text.shape.rank == 0
        if scalar:
            text = text[tf.newaxis]
        elif text.shape.rank == 2:
            text = tf.squeeze(text, axis=-1)
        words = basic_tokenize(text, self.lower_case, self._lower_table)
        # Words over the limit (in characters, as Python counts them) become
        # the unknown token itself, which WordPiece then maps to its id.
        too_long = (
            tf.strings.length(words.flat_values, unit="UTF8_CHAR")
            > self.max_input_chars_per_word
        )
        words = words.with_flat_values(
            tf.where(too_long, self.unknown_token, words.flat_values)
        )
        ids = self._wordpiece.tokenize(words)  # [batch, (words), (pieces)]
        ids = tf.cast(ids.merge_dims(-2, -1), tf.int32)
        return ids[0] if scalar else ids

    def build(self, input_shape=None):
        self.built = True  # no weights: the tables are built in __init__

    def compute_output_spec(self, inputs):
        rank = len(inputs.shape)
        shape = (None,) if rank == 0 else (inputs.shape[0], None)
        return keras.KerasTensor(shape, dtype="int32", ragged=True)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab=list(self._vocab),
            lower_case=self.lower_case,
            max_input_chars_per_word=self.max_input_chars_per_word,
            unknown_token=self.unknown_token,
            suffix_indicator=self.suffix_indicator,
        )
        return config


# ---------------------------------------------------------------------------
# Packer.


def _as_ragged(segment) -> tf.RaggedTensor:
    if not isinstance(segment, tf.RaggedTensor):
        segment = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(segment))
    if segment.ragged_rank > 1:  # e.g. [batch, (words), (pieces)]
        segment = segment.merge_dims(1, -1)
    return tf.cast(segment, tf.int32)


def _trim_rows(rt: tf.RaggedTensor, lengths: tf.Tensor) -> tf.RaggedTensor:
    """Keeps the first `lengths[i]` items of row i."""
    positions = tf.ragged.range(tf.cast(rt.row_lengths(), tf.int32))
    return tf.ragged.boolean_mask(rt, positions < lengths[:, tf.newaxis])


def longest_first_lengths(len_a, len_b, max_num_tokens):
    """Lengths `tokenization.truncate_seq_pair` leaves, in closed form.

    Popping from the longer segment (from B on ties) first cuts the longer one
    down to the shorter one's length; from there the pops alternate, B first,
    so A ends with ceil(m/2) and B with floor(m/2) of the m tokens allowed.
    """
    half_up = (max_num_tokens + 1) // 2
    new_a = tf.minimum(len_a, tf.maximum(half_up, max_num_tokens - len_b))
    new_b = tf.minimum(len_b, max_num_tokens - new_a)
    return new_a, new_b


PACKED_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def trim_padding(packed: dict, multiple: int = 16, keys=None) -> dict:
    """Cuts the padding columns every row of a packed batch has in common.

    Serving packs each request to the fine-tuning `max_seq_length`, but a batch
    of short texts needs only its longest row: the encoder costs about linear
    (attention quadratic) in the length, so a 20-token request at length 32
    instead of 128 runs about 4x faster. Training batches of short texts gain
    the same way (`runner.numpy_dataset`). The length is rounded up to a
    `multiple` to keep the number of distinct shapes (graph specializations,
    XLA compilations) small; outputs are unchanged, since padding is masked out
    of attention and of every loss.

    Args:
        packed: dict of [..., seq_length] tensors with "input_mask" (1 for the
            tokens, then 0 for the padding), e.g. [batch, seq_length] or
            [batch, num_choices, seq_length].
        multiple: int. The kept length is a multiple of this (or the full length).
        keys: the keys of `packed` to cut (default: all); others pass unchanged.

    Example:
    >>> packed = {"input_mask": tf.constant([[1, 1, 0, 0] + [0] * 28])}
    >>> trim_padding(packed, multiple=8)["input_mask"].shape
    TensorShape([1, 8])
    """
    mask = packed["input_mask"]
    length = trimmed_length(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1),
                            tf.shape(mask)[-1], multiple)
    keys = packed.keys() if keys is None else keys
    return {key: value[..., :length] if key in keys else value
            for key, value in packed.items()}


def trimmed_length(lengths, full, multiple: int = 16):
    """The length `trim_padding` cuts a batch to: its longest row (`lengths`,
    any shape, tokens per row), rounded up to `multiple`, at most `full`; at
    least `multiple` (or `full`) for an empty batch or empty rows.

    Example:
    >>> int(trimmed_length(tf.constant([3, 17, 5]), 128))
    32
    """
    lengths = tf.reshape(tf.cast(lengths, tf.int32), [-1])
    longest = tf.reduce_max(tf.concat([lengths, [1]], 0))
    return tf.minimum(tf.cast(full, tf.int32), (longest + multiple - 1) // multiple * multiple)


def _packed_spec(inputs, seq_length):
    first = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
    # One KerasTensor per key: a functional model tells outputs apart by the
    # tensor object, so a shared spec would wire all three to the same value.
    return {
        key: keras.KerasTensor((first.shape[0], seq_length), dtype="int32")
        for key in PACKED_KEYS
    }


@keras.saving.register_keras_serializable(package="official_bert")
class BertPackInputs(keras.layers.Layer):
    """Packs one or two id segments into BERT's `[CLS] A [SEP] B [SEP]` inputs.

    Truncation is google-research/bert's: one segment keeps its first
    `seq_length - 2` ids; a pair is cut to `seq_length - 3` ids by popping
    from the longer segment, from B when they are equal
    (`tokenization.truncate_seq_pair`).

    Args:
        seq_length: int. Length of every output row.
        start_of_sequence_id: int. Id of "[CLS]".
        end_of_segment_id: int. Id of "[SEP]".
        padding_id: int. Id used to pad `input_word_ids`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call args:
        inputs: a RaggedTensor [batch, (ids)], or a list of one or two.

    Returns:
        dict of int32 [batch, seq_length] tensors: `input_word_ids`,
        `input_mask` (1 on real tokens) and `input_type_ids` (0 for [CLS], A
        and its [SEP]; 1 for B and its [SEP]; 0 on padding).

    Example:
    >>> packer = BertPackInputs(seq_length=6)
    >>> a = tf.ragged.constant([[7, 8, 9]])
    >>> packer([a, tf.ragged.constant([[5]])])["input_word_ids"].numpy()
    array([[101,   7,   8, 102,   5, 102]], dtype=int32)
    """

    def __init__(
        self,
        seq_length: int,
        start_of_sequence_id: int = 101,
        end_of_segment_id: int = 102,
        padding_id: int = 0,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        if seq_length < 3:
            raise UserError(f"--max_seq_length={seq_length} (the packed length) leaves no room "
                            "for [CLS] A [SEP] B [SEP]")
        self.seq_length = int(seq_length)
        self.start_of_sequence_id = int(start_of_sequence_id)
        self.end_of_segment_id = int(end_of_segment_id)
        self.padding_id = int(padding_id)

    def call(self, inputs):
        if isinstance(inputs, (list, tuple)):
            segments = [_as_ragged(s) for s in inputs]
        else:
            segments = [_as_ragged(inputs)]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"BertPackInputs takes 1 or 2 segments, got {len(segments)}")
        a = segments[0]
        batch = a.nrows(out_type=tf.int32)
        len_a = tf.cast(a.row_lengths(), tf.int32)
        if len(segments) == 1:
            a = _trim_rows(a, tf.minimum(len_a, self.seq_length - 2))
            b = None
        else:
            b = segments[1]
            new_a, new_b = longest_first_lengths(
                len_a, tf.cast(b.row_lengths(), tf.int32), self.seq_length - 3
            )
            a, b = _trim_rows(a, new_a), _trim_rows(b, new_b)

        def column(value):
            return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], value))

        cls, sep = column(self.start_of_sequence_id), column(self.end_of_segment_id)
        pieces, types = [cls, a, sep], [column(0), tf.zeros_like(a), column(0)]
        if b is not None:
            pieces += [b, sep]
            types += [tf.ones_like(b), column(1)]
        word_ids = tf.concat(pieces, axis=1)
        type_ids = tf.concat(types, axis=1)
        shape = [None, self.seq_length]
        return {
            "input_word_ids": word_ids.to_tensor(self.padding_id, shape=shape),
            "input_mask": tf.ones_like(word_ids).to_tensor(0, shape=shape),
            "input_type_ids": type_ids.to_tensor(0, shape=shape),
        }

    def build(self, input_shape=None):
        self.built = True  # no weights

    def compute_output_spec(self, inputs):
        return _packed_spec(inputs, self.seq_length)

    def get_config(self):
        config = super().get_config()
        config.update(
            seq_length=self.seq_length,
            start_of_sequence_id=self.start_of_sequence_id,
            end_of_segment_id=self.end_of_segment_id,
            padding_id=self.padding_id,
        )
        return config


# ---------------------------------------------------------------------------
# Tokenizer + packer.


@keras.saving.register_keras_serializable(package="official_bert")
class BertPreprocessor(keras.layers.Layer):
    """Raw text (one or two segments) to the encoder's dict of int32 inputs.

    Args:
        vocab: vocabulary file path or list of tokens (see `BertTokenizerLayer`).
        lower_case: bool. True for uncased models.
        seq_length: int. Length of every output row.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call args:
        inputs: tf.string tensor [batch], or a list of one or two of them
            (text a, text b).

    Returns:
        dict of int32 [batch, seq_length]: `input_word_ids`, `input_mask`,
        `input_type_ids`, as `BertPackInputs` builds them.

    Example:
    >>> preprocessor = BertPreprocessor("vocab.txt", seq_length=128)
    >>> inputs = preprocessor([tf.constant(["Who?"]), tf.constant(["Me."])])
    >>> outputs = encoder(inputs)
    """

    def __init__(
        self,
        vocab: Union[str, Sequence[str]],
        lower_case: bool = True,
        seq_length: int = 128,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self.tokenizer = BertTokenizerLayer(vocab, lower_case=lower_case, name="tokenizer")
        self.packer = BertPackInputs(
            seq_length,
            start_of_sequence_id=self.tokenizer.token_id(tokenization.CLS_TOKEN),
            end_of_segment_id=self.tokenizer.token_id(tokenization.SEP_TOKEN),
            padding_id=self.tokenizer.token_to_id.get(tokenization.PAD_TOKEN, 0),
            name="packer",
        )

    def call(self, inputs):
        texts = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        return self.packer([self.tokenizer(t) for t in texts])

    def build(self, input_shape=None):
        self.tokenizer.build(None)
        self.packer.build(None)
        self.built = True

    def compute_output_spec(self, inputs):
        return _packed_spec(inputs, self.packer.seq_length)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab=self.tokenizer.vocabulary,
            lower_case=self.tokenizer.lower_case,
            seq_length=self.packer.seq_length,
        )
        return config
