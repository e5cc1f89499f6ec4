"""New tokens in a checkpoint: the rows of its weights that have one per token id.

BERT has two such weights: the word embeddings (`bert/embeddings/word_embeddings`,
[vocab_size, hidden]) and, in a checkpoint with the masked-LM head, its output bias
(`cls/predictions/output_bias`, [vocab_size]; the head's output matrix is the word
embeddings themselves, tied). `add_token_rows` gives each new token a row in both:
the mean of the rows of the word pieces the old vocabulary split it into, so that
the new token starts near what the model made of its pieces (the initialization of
"Fast Vocabulary Transfer", Gee et al. 2022) rather than at random, and the masked LM
scores it on the scale of its pieces.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
MLM_OUTPUT_BIAS = "cls/predictions/output_bias"
# The weights with one row per token id (first axis), in canonical names.
TOKEN_ROW_WEIGHTS = (WORD_EMBEDDINGS, MLM_OUTPUT_BIAS)


def add_token_rows(weights: Mapping[str, np.ndarray], vocab_size: int,
                   pieces: Mapping[int, Sequence[int]]) -> dict:
    """A copy of `weights` with new tokens' rows in `TOKEN_ROW_WEIGHTS`.

    Args:
        weights: canonical name → array (a `BertCheckpoint`'s weights).
        vocab_size: the new vocabulary's size: the weights grow to it (never shrink).
        pieces: new token id → the old ids of the pieces it was split into. An id
            below the old size (an [unusedN] slot) has its row overwritten; every id
            from the old size up to `vocab_size` must be here (no row is left unset).

    Each new row is the mean of the old rows of its pieces, computed in float64 and
    stored in the weight's own dtype; every other row is unchanged.
    """
    old_size = int(np.shape(weights[WORD_EMBEDDINGS])[0])
    if vocab_size < old_size:
        raise ValueError(f"vocab_size={vocab_size} is below the checkpoint's {old_size} rows")
    unset = sorted(set(range(old_size, vocab_size)) - set(pieces))
    if unset:
        raise ValueError(f"new rows {unset[:5]} have no pieces to start from")
    for token_id, piece_ids in pieces.items():
        if not piece_ids or not all(0 <= i < old_size for i in piece_ids):
            raise ValueError(f"token {token_id}: pieces {list(piece_ids)} are not old ids")
    out = dict(weights)
    for name in TOKEN_ROW_WEIGHTS:
        if name in weights:
            out[name] = _with_rows(np.asarray(weights[name]), name, old_size, vocab_size, pieces)
    return out


def _with_rows(old: np.ndarray, name: str, old_size: int, vocab_size: int,
               pieces: Mapping[int, Sequence[int]]) -> np.ndarray:
    if old.shape[0] != old_size:
        raise ValueError(f"{name} has {old.shape[0]} rows, the word embeddings {old_size}")
    new = np.zeros((vocab_size,) + old.shape[1:], old.dtype)
    new[:old_size] = old
    for token_id, piece_ids in pieces.items():
        new[token_id] = old[list(piece_ids)].astype(np.float64).mean(axis=0).astype(old.dtype)
    return new
