"""WordPiece tokenization for BERT, in pure Python (google-research/bert's API).

`FullTokenizer(vocab_file, do_lower_case)` = `BasicTokenizer` (clean, split CJK,
lower-case and strip accents when uncased, split punctuation) followed by
`WordpieceTokenizer` (greedy longest-match-first against the vocabulary).

The ids match Hugging Face's `BertTokenizer` (the Python port of Google's
`tokenization.py`), which differs from Google's file in three places that this
module follows:

* control characters are every Unicode category starting with "C" (Cc, Cf, Co
  private use, Cn unassigned), not only Cc and Cf;
* the text is NFC-normalized before it is split, so a decomposed "é" of a cased
  model is found in the vocabulary as the composed character;
* lower-casing maps each character on its own, so a word-final capital sigma
  becomes "σ" (Python's `str.lower` would give the final form "ς").

One deliberate difference from Hugging Face: literal special tokens in the text
("[MASK]", "[SEP]", ...) are split like any other text, as Google does, so user
text can never forge a separator. `official_bert.text.text_layers` implements the
same rules in TensorFlow ops; tests hold both faces to identical ids.

Also here: the host-side packing of one or two segments into
`[CLS] A [SEP] B [SEP]` (`truncate_seq_pair`, `pack_tokens`), and two checks
that `do_lower_case` fits the checkpoint name and the vocabulary.
"""

from __future__ import annotations

import collections
import os
import re
import unicodedata
from typing import Hashable, Iterable, List, Optional, Sequence, Tuple, TypeVar

from absl import logging

from official_bert import inputs, io
from official_bert.errors import BadFileError, UserError

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)

# Words longer than this many characters (after basic tokenization) become a
# single [UNK] without being looked up, as in Google's and Hugging Face's code.
MAX_INPUT_CHARS_PER_WORD = 100

T = TypeVar("T")


class VocabError(BadFileError):
    """The vocabulary file is missing, empty or lacks a required token."""


class VocabFileNotFoundError(VocabError, FileNotFoundError):
    """The vocabulary file does not exist (catchable as either base class)."""

    def __init__(self, path, problem: str | None = None, **kwargs):
        VocabError.__init__(self, path, problem, **kwargs)


# ---------------------------------------------------------------------------
# Text helpers.


def convert_to_unicode(text) -> str:
    """Returns `text` as `str`, decoding UTF-8 bytes (invalid bytes dropped)."""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "ignore")
    raise TypeError(f"Unsupported string type: {type(text).__name__}")


def printable_text(text) -> str:
    """Returns `text` as a `str` suitable for printing or logging."""
    return convert_to_unicode(text)


def whitespace_tokenize(text: str) -> List[str]:
    """Strips `text` and splits it on runs of whitespace."""
    text = text.strip()
    if not text:
        return []
    return text.split()


def _is_whitespace(char: str) -> bool:
    """Whether `char` is a whitespace character."""
    # \t, \n and \r are technically control characters but we treat them as
    # whitespace since they are generally considered as such.
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    """Whether `char` is a control character (removed from the text)."""
    # These are technically control characters but we count them as whitespace
    # characters.
    if char in ("\t", "\n", "\r"):
        return False
    # Google's code tests only Cc and Cf; Hugging Face's (the reference for the
    # ids) also drops Co (private use), Cn (unassigned) and Cs (surrogates).
    return unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    """Whether `char` is a punctuation character (split into its own token)."""
    cp = ord(char)
    # We treat all non-letter/number ASCII as punctuation. Characters such as
    # "^", "$", and "`" are not in the Unicode Punctuation class but we treat
    # them as punctuation anyways, for consistency.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


# The "CJK Unified Ideographs" blocks, whose characters become single tokens.
# Note that the CJK Unicode block is NOT all Japanese and Korean characters,
# despite its name. The modern Korean Hangul alphabet is a different block, as
# is Japanese Hiragana and Katakana. Those alphabets are used to write
# space-separated words, so they are not treated specially and handled like
# all of the other languages.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_chinese_char(cp: int) -> bool:
    """Whether code point `cp` is a CJK ideograph (see `CJK_RANGES`)."""
    if cp < 0x3400:  # fast path: everything below the first block
        return False
    for lo, hi in CJK_RANGES:
        if lo <= cp <= hi:
            return True
    return False


def _lower(text: str) -> str:
    """Lower-cases character by character, as Hugging Face's tokenizer does.

    `str.lower` applies Unicode's context-dependent Final_Sigma rule (a capital
    sigma at the end of a word becomes "ς"); Hugging Face lower-cases each
    character on its own, so every capital sigma becomes "σ". This is the only
    context-dependent mapping of the default (locale-free) lower-casing.
    """
    return text.replace("\u03a3", "\u03c3").lower()


# ---------------------------------------------------------------------------
# Vocabulary.


def load_vocab_list(vocab_file) -> List[str]:
    """Reads a vocabulary file into its list of tokens, in line order.

    Surrounding whitespace is stripped from each line (as in Google's code);
    the id of a token is its line number, counted from 0. A byte-order mark at
    the start of the file is not part of the first token (`io.read_text`).
    Blank lines at the end are dropped (they shift no id); a blank or
    whitespace-only line before a token is refused (`check_no_blank_lines`).
    Every path that reads a vocabulary comes here: the model's files, the
    in-graph tokenizer's asset, the data tools. Paths with a scheme
    (`gs://...`, `ram://...`) are read through `tf.io.gfile` (`official_bert.io`).

    Raises:
        VocabFileNotFoundError: the file does not exist.
        VocabError: the file holds no token, a blank line before a token, a
            token twice (`check_unique`), NUL bytes, or (while a command runs)
            other content than the command read at its start
            (`inputs.same_as_first_read`).
        official_bert.errors.BadFileError: the file is not UTF-8 (its line named).
    """
    vocab_file = os.fspath(vocab_file)
    if not io.isfile(vocab_file):
        raise VocabFileNotFoundError(vocab_file, io.missing(vocab_file) if not io.exists(vocab_file)
                                     else "is not a file", fix=_missing_vocab_fix())
    text = io.read_text(vocab_file)
    inputs.same_as_first_read(vocab_file, text)  # (an export's copy is the model's vocabulary)
    # Split on "\n" only: str.splitlines() would also split inside a token
    # holding an exotic line separator (U+2028, \x85, ...) and shift the ids.
    lines = text.split("\n")
    if "\0" in text:
        raise VocabError(vocab_file, "holds NUL bytes (a part of the file that was never "
                         "written: a crash, or a copy cut short)",
                         line=next(i for i, line in enumerate(lines, 1) if "\0" in line),
                         fix="use the vocab.txt the checkpoint was trained with")
    tokens = [line.strip() for line in lines]
    while tokens and not tokens[-1]:
        tokens.pop()  # the newline that ends the last line, and blank lines after it
    if not tokens:
        raise VocabError(vocab_file, "holds no token (it is empty)",
                         fix="use the vocab.txt the checkpoint was trained with")
    check_no_blank_lines(tokens, vocab_file)
    check_unique(tokens, vocab_file)
    return tokens


def check_no_blank_lines(tokens: Sequence[str], vocab_file) -> None:
    """`VocabError` for a blank or whitespace-only line among the tokens.

    No real vocabulary has one (Google's and Hugging Face's list a token on
    every line; WordPiece never emits whitespace), so one is an edit: a line
    inserted by hand or by a tool, and every token after it has an id one
    higher than the checkpoint's embedding row for it, silently.
    """
    for index, token in enumerate(tokens):
        if not token:
            raise VocabError(os.fspath(vocab_file), "is blank (or only white space), before "
                             f"the token {tokens[index + 1]!r}: every token after it would "
                             "get the next token's id", line=index + 1,
                             fix="delete the line (a vocabulary has one token on every line; "
                             "use the vocab.txt the checkpoint was trained with)")


def load_vocab(vocab_file) -> "collections.OrderedDict[str, int]":
    """Loads a vocabulary file (one token per line) into an OrderedDict.

    Maps each token to its line number (see `load_vocab_list`).
    """
    tokens = load_vocab_list(vocab_file)  # checked: each token once
    return collections.OrderedDict(zip(tokens, range(len(tokens))))


def vocab_from_list(tokens: Iterable[str]) -> "collections.OrderedDict[str, int]":
    """Maps tokens to their positions; `VocabError` for a token listed twice
    (`check_unique`)."""
    tokens = list(tokens)
    check_unique(tokens)
    return collections.OrderedDict((token, index) for index, token in enumerate(tokens))


def check_unique(tokens: Sequence[str], vocab_file=None) -> None:
    """`VocabError` when a token appears twice: the vocabulary would give it two
    ids, and a lookup silently takes one (Google's code: the later line).

    Names the token and both places: the lines of `vocab_file` when the tokens
    were read from it, else the ids. Empty tokens may repeat in a list given in
    code (a file's blank lines are refused first, `check_no_blank_lines`): no
    word is ever looked up as the empty token.
    Google's and Hugging Face's vocabularies list every token once (the
    `[unusedN]` slots are all distinct).
    """
    first: dict = {}
    for index, token in enumerate(tokens):
        if not token:
            continue
        seen = first.setdefault(token, index)
        if seen == index:
            continue
        fix = ("delete one of them: a vocabulary lists each token once (use the vocab.txt the "
               "checkpoint was trained with)")
        if vocab_file is None:
            raise VocabError(f"The vocabulary has the token {token!r} twice, at ids {seen} and "
                             f"{index}; {fix}")
        raise VocabError(os.fspath(vocab_file), f"has the token {token!r} twice, on lines "
                         f"{seen + 1} and {index + 1}", fix=fix)


def _missing_vocab_fix() -> str:
    return ("pass the vocab.txt that ships with the checkpoint (one WordPiece token per line, "
            "e.g. uncased_L-12_H-768_A-12/vocab.txt), or build one with `bert build-vocab`")


def convert_by_vocab(vocab, items: Iterable) -> list:
    """Maps each item through `vocab` (tokens to ids, or ids to tokens)."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens: Iterable[str]) -> List[int]:
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids: Iterable[int]) -> List[str]:
    return convert_by_vocab(inv_vocab, ids)


# ---------------------------------------------------------------------------
# Case checks.

# Google's released checkpoints (and Hugging Face's names for them), which the
# casing of `do_lower_case` must match.
_UNCASED_MODELS = frozenset(
    [
        "uncased_L-24_H-1024_A-16",
        "uncased_L-12_H-768_A-12",
        "multilingual_L-12_H-768_A-12",
        "chinese_L-12_H-768_A-12",
        "wwm_uncased_L-24_H-1024_A-16",
        "bert-base-uncased",
        "bert-large-uncased",
        "bert-base-multilingual-uncased",
        "bert-base-chinese",
    ]
)
_CASED_MODELS = frozenset(
    [
        "cased_L-12_H-768_A-12",
        "cased_L-24_H-1024_A-16",
        "multi_cased_L-12_H-768_A-12",
        "wwm_cased_L-24_H-1024_A-16",
        "bert-base-cased",
        "bert-large-cased",
        "bert-base-multilingual-cased",
    ]
)


def validate_case_matches_checkpoint(do_lower_case: bool, init_checkpoint) -> None:
    """Raises ValueError when `do_lower_case` contradicts a known checkpoint.

    The casing is not stored in `bert_config.json`, so, as Google's code does,
    it is inferred from the directory name of one of Google's released models
    (`.../uncased_L-12_H-768_A-12/bert_model.ckpt`). Unknown names pass.
    """
    if not init_checkpoint:
        return
    path = os.fspath(init_checkpoint)
    m = re.match(r"^.*?([A-Za-z0-9_.-]+)/bert_model\.ckpt", path)
    model_name = m.group(1) if m else os.path.basename(path.rstrip("/"))
    if model_name in _UNCASED_MODELS and not do_lower_case:
        actual_flag, case_name, opposite_flag = "False", "uncased", "True"
    elif model_name in _CASED_MODELS and do_lower_case:
        actual_flag, case_name, opposite_flag = "True", "cased", "False"
    else:
        return
    raise UserError(
        f"You passed in `do_lower_case={actual_flag}` with "
        f"`init_checkpoint={path}`. However, `{model_name}` seems to be a "
        f"{case_name} model, so you should pass in "
        f"`do_lower_case={opposite_flag}` so that the fine-tuning matches how "
        "the model was pre-trained. If this error is wrong, rename the "
        "checkpoint directory."
    )


def infer_vocab_casing(vocab: Iterable[str]) -> Optional[bool]:
    """Guesses from the tokens whether a vocabulary is cased.

    Returns True for a cased vocabulary (capitalized words are common), False
    for an uncased one (no, or a stray few, tokens with capitals) and None when
    it cannot tell (no cased letters at all, e.g. a Chinese vocabulary).
    Bracketed special tokens ("[CLS]", "[unused0]") are ignored.
    """
    with_upper = with_lower = 0
    for token in vocab:
        if token.startswith("[") and token.endswith("]"):
            continue
        if token.startswith("##"):
            token = token[2:]
        if token.isascii():  # the same test, in C: only A-Z change under lower()
            if token != token.lower():
                with_upper += 1
            elif token != token.upper():
                with_lower += 1
        elif any(c.isupper() for c in token):
            with_upper += 1
        elif any(c.islower() for c in token):
            with_lower += 1
    total = with_upper + with_lower
    if total == 0:
        return None
    # Uncased vocabularies still hold a few capitals that lower-casing does not
    # map away (e.g. "ℝ"); a cased English one has ~10% capitalized tokens.
    return with_upper > max(1, 0.01 * total)


def validate_case_matches_vocab(vocab: Iterable[str], do_lower_case: bool) -> bool:
    """Logs a warning when `do_lower_case` disagrees with the vocabulary.

    An uncased vocabulary used with `do_lower_case=False` maps every
    capitalized word to [UNK] or odd pieces; a cased one used with
    `do_lower_case=True` never sees its capitalized tokens.

    Returns:
        False when a mismatch was found (and warned about), else True.
    """
    cased = infer_vocab_casing(vocab)
    if cased is None or cased != bool(do_lower_case):
        return True
    if cased:
        logging.warning(
            "do_lower_case=True but the vocabulary looks cased (it holds many "
            "capitalized tokens): pass do_lower_case=False, as the model was "
            "pre-trained."
        )
    else:
        logging.warning(
            "do_lower_case=False but the vocabulary looks uncased (no "
            "capitalized tokens): pass do_lower_case=True, or capitalized words "
            "will become [UNK] or odd pieces."
        )
    return False


# ---------------------------------------------------------------------------
# Tokenizers.


class BasicTokenizer:
    """Splits text into words: cleaning, CJK, casing, accents, punctuation.

    Args:
        do_lower_case: bool. Lower-case the text and strip accents (NFD, then
            drop the non-spacing marks, Unicode category Mn).

    Example:
    >>> BasicTokenizer(do_lower_case=True).tokenize("Héllo, 北京!")
    ['hello', ',', '北', '京', '!']
    """

    def __init__(self, do_lower_case: bool = True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text) -> List[str]:
        """Tokenizes a piece of text into words and punctuation."""
        text = convert_to_unicode(text)
        text = self._clean_text(text)
        # This was added on November 1st, 2018 for the multilingual and Chinese
        # models. This is also applied to the English models now, but it
        # doesn't matter since the English models were not trained on any
        # Chinese data and generally don't have any Chinese data in them (there
        # are Chinese characters in the vocabulary because Wikipedia does have
        # some Chinese words in the English Wikipedia.).
        if not text.isascii():
            text = self._tokenize_chinese_chars(text)
            # Hugging Face: a composed and a decomposed "é" should be the same
            # token. (No-op for the uncased path, which decomposes with NFD.)
            text = unicodedata.normalize("NFC", text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = _lower(token)
                if not token.isascii():
                    token = self._run_strip_accents(token)
            split_tokens.extend(self._run_split_on_punc(token))
        return whitespace_tokenize(" ".join(split_tokens))

    def _run_strip_accents(self, text: str) -> str:
        """Strips accents: NFD, then drops the non-spacing marks (Mn)."""
        text = unicodedata.normalize("NFD", text)
        return "".join(c for c in text if unicodedata.category(c) != "Mn")

    def _run_split_on_punc(self, text: str) -> List[str]:
        """Splits punctuation characters off into tokens of their own."""
        output = []
        start_new_word = True
        for char in text:
            if _is_punctuation(char):
                output.append(char)
                start_new_word = True
            else:
                if start_new_word:
                    output.append("")
                start_new_word = False
                output[-1] += char
        return output

    def _tokenize_chinese_chars(self, text: str) -> str:
        """Adds whitespace around any CJK character."""
        output = []
        for char in text:
            if _is_chinese_char(ord(char)):
                output.extend((" ", char, " "))
            else:
                output.append(char)
        return "".join(output)

    def _clean_text(self, text: str) -> str:
        """Drops invalid and control characters; whitespace becomes " "."""
        output = []
        for char in text:
            if "!" <= char <= "~":  # fast path: printable ASCII is kept
                output.append(char)
                continue
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or _is_control(char):
                continue
            output.append(" " if _is_whitespace(char) else char)
        return "".join(output)


class WordpieceTokenizer:
    """Splits words into word pieces, greedy longest-match-first.

    Args:
        vocab: mapping or set of the vocabulary's tokens.
        unk_token: str. Emitted for a word that cannot be covered by pieces.
        max_input_chars_per_word: int. Longer words become `unk_token`.

    Example:
    >>> WordpieceTokenizer({"un", "##aff", "##able"}).tokenize("unaffable")
    ['un', '##aff', '##able']
    """

    def __init__(
        self,
        vocab,
        unk_token: str = UNK_TOKEN,
        max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
    ):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text) -> List[str]:
        """Tokenizes whitespace-separated words into word pieces.

        For example, "unaffable" becomes ["un", "##aff", "##able"]. A word that
        has a character no piece covers becomes a single `unk_token` (the
        whole word, not just that character).
        """
        output_tokens = []
        for token in whitespace_tokenize(convert_to_unicode(text)):
            if len(token) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue
            sub_tokens = []
            start = 0
            while start < len(token):
                end = len(token)
                cur_substr = None
                while start < end:
                    substr = token[start:end]
                    if start > 0:
                        substr = "##" + substr
                    if substr in self.vocab:
                        cur_substr = substr
                        break
                    end -= 1
                if cur_substr is None:
                    sub_tokens = None
                    break
                sub_tokens.append(cur_substr)
                start = end
            if sub_tokens is None:
                output_tokens.append(self.unk_token)
            else:
                output_tokens.extend(sub_tokens)
        return output_tokens


class FullTokenizer:
    """End-to-end tokenization: `BasicTokenizer`, then `WordpieceTokenizer`.

    Args:
        vocab_file: path to the vocabulary (one token per line).
        do_lower_case: bool. True for uncased models. A warning is logged when
            the vocabulary looks like the other casing.

    Example:
    >>> tokenizer = FullTokenizer("uncased_L-12_H-768_A-12/vocab.txt")
    >>> tokenizer.tokenize("Unaffable!")
    ['una', '##ffa', '##ble', '!']
    >>> tokenizer.convert_tokens_to_ids(["[CLS]", "!"])
    [101, 999]

    Raises:
        VocabFileNotFoundError: `vocab_file` does not exist.
        VocabError: the vocabulary lacks "[UNK]".
    """

    def __init__(self, vocab_file, do_lower_case: bool = True):
        self.vocab = load_vocab(vocab_file)
        if UNK_TOKEN not in self.vocab:
            raise VocabError(
                vocab_file, f"has no {UNK_TOKEN} token, which WordPiece emits for unknown "
                "words", fix=f"add it (BERT's vocabularies hold {', '.join(SPECIAL_TOKENS)} "
                "near the top)")
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        validate_case_matches_vocab(self.vocab, do_lower_case)

    def tokenize(self, text) -> List[str]:
        split_tokens = []
        for token in self.basic_tokenizer.tokenize(text):
            split_tokens.extend(self.wordpiece_tokenizer.tokenize(token))
        return split_tokens

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
        return convert_by_vocab(self.inv_vocab, ids)

    def encode(
        self, text_a, text_b=None, max_seq_length: int = 128
    ) -> Tuple[List[int], List[int], List[int]]:
        """Tokenizes and packs one or two texts, as `pack_tokens` describes.

        Returns:
            `(input_ids, input_mask, segment_ids)`, each `max_seq_length` long;
            padding ids are 0 (BERT's "[PAD]").
        """
        ids_a = self.convert_tokens_to_ids(self.tokenize(text_a))
        ids_b = None
        if text_b is not None:
            ids_b = self.convert_tokens_to_ids(self.tokenize(text_b))
        return pack_tokens(
            ids_a,
            ids_b,
            max_seq_length,
            cls=self.vocab[CLS_TOKEN],
            sep=self.vocab[SEP_TOKEN],
            pad=0,
        )


# ---------------------------------------------------------------------------
# Packing one or two segments into [CLS] A [SEP] (B [SEP]).


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int) -> None:
    """Truncates a pair of sequences in place to at most `max_num_tokens`.

    This is a simple heuristic which will always truncate the longer sequence
    one token at a time. This makes more sense than truncating an equal percent
    of tokens from each, since if one sequence is very short then each token
    that's truncated likely contains more information than a longer sequence.
    Ties pop from `tokens_b`. `text_layers.BertPackInputs` computes the same
    lengths in closed form.
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def pack_tokens(
    tokens_a: Sequence[T],
    tokens_b: Optional[Sequence[T]] = None,
    max_seq_length: int = 128,
    *,
    cls: Hashable = CLS_TOKEN,
    sep: Hashable = SEP_TOKEN,
    pad: Hashable = PAD_TOKEN,
) -> Tuple[List[T], List[int], List[int]]:
    """Builds `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated and padded.

    Works on tokens or on ids (pass `cls`/`sep`/`pad` of the same kind). A
    single segment keeps its first `max_seq_length - 2` items; a pair is cut
    by `truncate_seq_pair` to `max_seq_length - 3`. The inputs are not changed.

    Args:
        tokens_a: the first segment.
        tokens_b: the optional second segment.
        max_seq_length: int. Length of every returned list.
        cls, sep, pad: the items that start, end segments and pad.

    Returns:
        `(items, input_mask, segment_ids)`: `input_mask` is 1 on real items,
        0 on padding; `segment_ids` is 0 on [CLS], A and its [SEP], 1 on B and
        its [SEP], 0 on padding.

    Example:
    >>> pack_tokens(["a", "b", "c"], ["d"], 6)
    (['[CLS]', 'a', 'b', '[SEP]', 'd', '[SEP]'], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1])
    """
    tokens_a = list(tokens_a)
    if tokens_b is None:
        if max_seq_length < 2:
            raise UserError(f"--max_seq_length={max_seq_length} leaves no room for [CLS] and "
                            "[SEP]")
        tokens_a = tokens_a[: max_seq_length - 2]
        tokens_b = []
        items = [cls, *tokens_a, sep]
    else:
        if max_seq_length < 3:
            raise UserError(f"--max_seq_length={max_seq_length} leaves no room for [CLS] A "
                            "[SEP] B [SEP]")
        tokens_b = list(tokens_b)
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
        items = [cls, *tokens_a, sep, *tokens_b, sep]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(items) - len(tokens_a) - 2)
    input_mask = [1] * len(items)
    padding = max_seq_length - len(items)
    return (
        items + [pad] * padding,
        input_mask + [0] * padding,
        segment_ids + [0] * padding,
    )
