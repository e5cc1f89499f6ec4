r"""Which of a domain's words to add to a vocabulary, and at which ids.

A public checkpoint's WordPiece vocabulary splits a domain's own words into
pieces ("electroencephalography" → electro ##ence ##pha ##log ##raphy): longer
sequences, and a meaning the model has to assemble from pieces each time.
`plan_extension` takes a corpus's word counts (as BERT's basic tokenizer makes
them, with the checkpoint's casing: `build_vocab.count_words`) and chooses the
most frequent words, seen at least `min_count` times, that the vocabulary splits
into two or more pieces, at most `num_new_tokens` of them; `place_tokens` puts
them first into the vocabulary's [unusedN] slots (in id order), then appends the
rest. Every old id keeps its token.

WordPiece matches the longest token first, and a new token is a whole word (no
"##"), so only words that begin with a new token can split differently. A new
token after which such a word could no longer be split (it would become [UNK])
is left out, so the extension never makes a word of the corpus unknown.

The checkpoint side (each new token's rows: the mean of its old pieces') is
`official_bert.checkpoints.add_token_rows`; the job that reads the model and
writes the new checkpoint directory is `official_bert.vocab_extension`, run by
`bert extend-vocab` (`official_bert/commands/extend_vocab.py`).
"""
from __future__ import annotations

import dataclasses
import logging
import re
from typing import Mapping, Sequence

from official_bert.text.tokenization import UNK_TOKEN, WordpieceTokenizer, vocab_from_list

_log = logging.getLogger(__name__)

UNUSED = re.compile(r"\[unused\d*\]")


@dataclasses.dataclass(frozen=True)
class NewToken:
    """One added word: its id in the new vocabulary, its count in the corpus,
    and the pieces (and their old ids) the old vocabulary split it into."""

    token: str
    id: int
    count: int
    pieces: tuple[str, ...]
    piece_ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Extension:
    """The new vocabulary and what it adds.

    Attributes:
        vocab: the new vocabulary, in id order (the old ids unchanged).
        new_tokens: the added words, most frequent first.
        in_unused_slots: how many of them took an [unusedN] slot (the rest were appended).
        candidates: the corpus's words seen at least min_count times that the old
            vocabulary splits into 2 or more pieces.
        tokens_per_word: the corpus's WordPiece tokens per word, (old, new).
    """

    vocab: list
    new_tokens: list
    in_unused_slots: int
    candidates: int
    tokens_per_word: tuple


def split_words(words, vocab: Sequence[str]) -> dict:
    """word → its WordPiece pieces under `vocab` ([UNK] for a word it cannot cover)."""
    tokenizer = WordpieceTokenizer(vocab_from_list(vocab))
    return {word: tokenizer.tokenize(word) for word in words}


def place_tokens(vocab: Sequence[str], words: Sequence[str]) -> tuple[list, list]:
    """(the new vocabulary, each word's id): the words in `vocab`'s [unusedN]
    slots in id order, the rest appended; every other id is unchanged."""
    new_vocab = list(vocab)
    slots = iter([i for i, token in enumerate(vocab) if UNUSED.fullmatch(token)])
    ids = []
    for word in words:
        token_id = next(slots, None)
        if token_id is None:
            token_id = len(new_vocab)
            new_vocab.append(word)
        else:
            new_vocab[token_id] = word
        ids.append(token_id)
    return new_vocab, ids


def plan_extension(counts: Mapping[str, int], vocab: Sequence[str], num_new_tokens: int,
                   min_count: int) -> Extension:
    """The words to add to `vocab` from the corpus's word `counts`, and where."""
    old_split = split_words(counts, vocab)
    candidates = sorted((word for word, count in counts.items()
                         if count >= min_count and len(old_split[word]) >= 2),
                        key=lambda word: (-counts[word], word))
    chosen = candidates[:num_new_tokens]
    while True:
        new_vocab, ids = place_tokens(vocab, chosen)
        new_split = split_words(counts, new_vocab)
        breaking = _tokens_that_make_words_unknown(old_split, new_split, set(chosen))
        if not breaking:
            break
        _log.warning("left out %d word(s) after which a longer word could not be split any "
                     "more: %s", len(breaking), ", ".join(sorted(breaking)[:10]))
        chosen = [word for word in chosen if word not in breaking]
    old_ids = {token: i for i, token in enumerate(vocab)}
    new_tokens = [NewToken(word, token_id, counts[word], tuple(old_split[word]),
                           tuple(old_ids[piece] for piece in old_split[word]))
                  for word, token_id in zip(chosen, ids)]
    total = sum(counts.values())
    per_word = tuple(sum(counts[w] * len(split[w]) for w in counts) / total
                     for split in (old_split, new_split))
    return Extension(new_vocab, new_tokens, sum(t.id < len(vocab) for t in new_tokens),
                     len(candidates), per_word)


def _tokens_that_make_words_unknown(old_split, new_split, new_tokens: set) -> set:
    """The new tokens that a word now starts with and can no longer be split
    after (it was covered by the old vocabulary, is [UNK] under the new one)."""
    breaking = set()
    for word, pieces in new_split.items():
        if pieces == [UNK_TOKEN] and old_split[word] != [UNK_TOKEN]:
            prefixes = [word[:n] for n in range(len(word), 0, -1) if word[:n] in new_tokens]
            breaking.add(prefixes[0])  # the longest: the one WordPiece matched first
    return breaking
