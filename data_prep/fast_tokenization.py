"""A cached front end to `official_bert.text.tokenization.FullTokenizer` for bulk text.

`FullTokenizer.tokenize(text)` works character by character in Python; on a
corpus it is the slowest step of data generation. Its output is, however, a
concatenation of independent per-word results: BERT's basic tokenizer first
cleans the text (drops control characters, turns every space character into
" ", puts spaces around CJK ideographs) and splits on whitespace, and every
later step (lower-casing, accent stripping, punctuation splitting, WordPiece)
works inside one whitespace-separated chunk. So

    tokenize(text) == sum(tokenize(chunk) for chunk in clean(text).split())

and the per-chunk result can be cached: natural text repeats its words, and
the cache answers most of them with one dict look-up. A chunk that misses and
is printable ASCII is split into words by one regex (the basic tokenizer only
lower-cases such a chunk and splits off each non-alphanumeric character), and
words have a second cache, so only new words reach `FullTokenizer`. `clean` is a
`str.translate` table built from the tokenizer module's own character classes
(`_is_control`, `_is_whitespace`, `_is_chinese_char`) when it has them.

The cache is bounded (`cache_size` chunks; it is cleared when full), so memory
does not grow with the corpus. As a safety net the first `verify_lines` lines
are also tokenized the slow way; on any difference the fast path is switched
off (with a warning) and every line goes through `FullTokenizer` itself.
"""

from __future__ import annotations

import logging
import re
import unicodedata

from official_bert.text import tokenization

_log = logging.getLogger(__name__)

# Words of a printable-ASCII chunk: runs of letters/digits, and every other
# character on its own (BERT counts all non-alphanumeric ASCII as punctuation).
_ASCII_WORDS = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]").findall


def _is_control(char):
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_whitespace(char):
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_chinese_char(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F
            or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


class _BasicCleanTable(dict):
    """`str.translate` table: BERT's `_clean_text` + `_tokenize_chinese_chars`."""

    def __init__(self, is_control, is_whitespace, is_chinese_char):
        super().__init__()
        self._is_control = is_control
        self._is_whitespace = is_whitespace
        self._is_chinese_char = is_chinese_char

    def __missing__(self, cp):
        char = chr(cp)
        if cp == 0 or cp == 0xFFFD or self._is_control(char):
            value = ""
        elif self._is_whitespace(char):
            value = " "
        elif self._is_chinese_char(cp):
            value = f" {char} "
        else:
            value = char
        self[cp] = value
        return value


def _clean_table():
    is_control = getattr(tokenization, "_is_control", _is_control)
    is_whitespace = getattr(tokenization, "_is_whitespace", _is_whitespace)
    basic = getattr(tokenization, "BasicTokenizer", None)
    is_chinese = getattr(tokenization, "_is_chinese_char", _is_chinese_char)
    if basic is not None and hasattr(basic, "_is_chinese_char"):
        try:
            instance = basic(do_lower_case=True)
            instance._is_chinese_char(0x4E00)
            is_chinese = instance._is_chinese_char
        except Exception:  # a different constructor: keep our copy of the rule
            pass
    return _BasicCleanTable(is_control, is_whitespace, is_chinese)


class CachedTokenizer:
    """`FullTokenizer` with a per-chunk cache: `ids(text)` and `basic_tokens(text)`.

    Attributes mirror the wrapped tokenizer's: `vocab` (token → id),
    `inv_vocab`, `tokenizer` (the `FullTokenizer` itself).
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True,
                 cache_size: int = 250_000, verify_lines: int = 200):
        self.tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file,
                                                    do_lower_case=do_lower_case)
        self.vocab = self.tokenizer.vocab
        self.inv_vocab = self.tokenizer.inv_vocab
        self.do_lower_case = do_lower_case
        self.cache_size = cache_size
        self._clean = _clean_table()
        self._ids_cache: dict[str, tuple[int, ...]] = {}
        self._word_cache: dict[str, tuple[int, ...]] = {}
        wordpiece = getattr(self.tokenizer, "wordpiece_tokenizer", None)
        self._wordpiece = wordpiece.tokenize if wordpiece is not None else self.tokenizer.tokenize
        self._verify_left = verify_lines
        self.fast_path = True

    def _slow_ids(self, text: str) -> list[int]:
        return self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(text))

    def _chunk_ids(self, chunk: str) -> tuple[int, ...]:
        """Ids of one cleaned whitespace-free chunk (a cache miss)."""
        if not chunk.isascii():
            return tuple(self._slow_ids(chunk))
        # Printable ASCII: the basic tokenizer only lower-cases (uncased) and
        # splits off every non-alphanumeric character; words are cached too.
        if self.do_lower_case:
            chunk = chunk.lower()
        cache = self._word_cache
        ids: list[int] = []
        for word in _ASCII_WORDS(chunk):
            word_ids = cache.get(word)
            if word_ids is None:
                # A basic token already: only WordPiece is left to do.
                word_ids = tuple(self.tokenizer.convert_tokens_to_ids(self._wordpiece(word)))
                if len(cache) >= self.cache_size:
                    cache.clear()
                cache[word] = word_ids
            ids.extend(word_ids)
        return tuple(ids)

    def _fast_ids(self, text: str) -> list[int]:
        if not (text.isascii() and text.isprintable()):
            text = text.translate(self._clean)
        cache = self._ids_cache
        out: list[int] = []
        for chunk in text.split():
            ids = cache.get(chunk)
            if ids is None:
                ids = self._chunk_ids(chunk)
                if len(cache) >= self.cache_size:
                    cache.clear()
                cache[chunk] = ids
            out.extend(ids)
        return out

    def ids(self, text: str) -> list[int]:
        """Token ids of `text`, exactly `convert_tokens_to_ids(tokenize(text))`."""
        if not self.fast_path:
            return self._slow_ids(text)
        if self._verify_left > 0:
            self._verify_left -= 1
            fast, slow = self._fast_ids(text), self._slow_ids(text)
            if fast != slow:
                _log.warning("cached tokenization differs from FullTokenizer on %r; "
                             "using FullTokenizer for every line (slower)", text[:80])
                self.fast_path = False
                self._ids_cache.clear()
                self._word_cache.clear()
            return slow
        return self._fast_ids(text)


class CachedBasicTokenizer:
    """BERT's basic tokenizer (clean, lower/strip accents, split punctuation), cached.

    `tokens(text)` equals `BasicTokenizer(do_lower_case).tokenize(text)`; used to
    count words for vocabulary learning.
    """

    def __init__(self, do_lower_case: bool = True, cache_size: int = 250_000):
        self.basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
        self.cache_size = cache_size
        self._clean = _clean_table()
        self._cache: dict[str, tuple[str, ...]] = {}

    def tokens(self, text: str) -> list[str]:
        if not (text.isascii() and text.isprintable()):
            text = text.translate(self._clean)
        cache = self._cache
        out: list[str] = []
        for chunk in text.split():
            words = cache.get(chunk)
            if words is None:
                words = tuple(self.basic.tokenize(chunk))
                if len(cache) >= self.cache_size:
                    cache.clear()
                cache[chunk] = words
            out.extend(words)
        return out
