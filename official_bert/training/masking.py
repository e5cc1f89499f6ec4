"""Masking pre-training batches in the graph, as the static generator masks.

`mask_batch` is dynamic masking (`input_pipeline.pretraining_dataset` with
`dynamic_masking`): per row, `masked_lm_prob` × the maskable tokens (not
[CLS]/[SEP]/padding) with unbiased random rounding, at least 1, at most
`max_predictions_per_seq`; each chosen position is [MASK] 80%, a random
ordinary token 10%, unchanged 10%; whole words with `word_starts`, n-gram
spans with `max_ngram_size` > 1 (`choose_ngrams`). Every draw is a stateless
random op of the given seed, so the masks are reproducible.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf


def choose_ngrams(candidates, unit_starts, k, max_ngram_size: int, seed, max_spans: int):
    """In-graph `data_prep.pretraining_instances.choose_ngrams`, per row of a batch.

    Units are runs of positions, each begun where `unit_starts` is 1 (whole
    words, or every position for word pieces); a unit is maskable when it
    holds `candidates` (so [CLS]/[SEP]/padding split spans). Each of
    `max_spans` rounds draws n ∝ 1/n among the lengths with a span that still
    fits (free units, at most the `k` tokens left), then a random such span
    (fixed random scores per length and start: the first fitting one in a
    random order, as the generator's shuffled lists). Rows with nothing left
    to mask skip the round.

    Args:
      candidates: bool [B, L], the maskable positions.
      unit_starts: int/bool [B, L], 1 where a unit begins.
      k: int32 [B], the most tokens to mask per row.
      max_ngram_size: the longest span, in units.
      seed: a stateless seed (int [2]).
      max_spans: rounds (`max_predictions_per_seq` suffices: a span has ≥ 1 token).

    Returns:
      (chosen: bool [B, L] the masked positions, span_sizes: int32 [B,
      max_spans] the chosen spans' lengths in order, 0 where a round chose none).
    """
    N = max_ngram_size
    batch = tf.shape(candidates)[0]
    length = tf.shape(candidates)[1]
    unit_id = tf.maximum(tf.cumsum(tf.cast(unit_starts, tf.int32), axis=1) - 1, 0)
    rows = tf.range(batch)[:, None] * length
    pieces = tf.reshape(tf.math.unsorted_segment_sum(
        tf.cast(candidates, tf.int32), unit_id + rows, batch * length), [batch, length])
    is_unit = pieces > 0

    def shift(x, j):  # x[:, u + j], zero-filled past the end
        return tf.concat([x[:, j:], tf.zeros_like(x[:, :j])], axis=1) if j else x

    seeds = tf.random.experimental.stateless_split(seed, num=max_spans + 1)
    scores = tf.random.stateless_uniform([batch, N, length], seeds[0])
    log_weights = tf.math.log(1.0 / tf.range(1, N + 1, dtype=tf.float32))[None, :]
    shifted_pieces = [shift(pieces, j) for j in range(N)]
    taken = tf.zeros([batch, length], tf.bool)
    remaining = tf.cast(k, tf.int32)
    sizes = []
    for i in range(max_spans):
        free = is_unit & ~taken
        run, cost, fits = free, tf.zeros_like(pieces), []
        for n in range(1, N + 1):  # fits[n-1][b, u]: units u..u+n-1 free and within budget
            if n > 1:
                run = run & shift(free, n - 1)
            cost = cost + shifted_pieces[n - 1]
            fits.append(run & (cost <= remaining[:, None]))
        fits = tf.stack(fits, axis=1)  # [B, N, L]
        available = tf.reduce_any(fits, axis=2)  # [B, N]
        any_available = tf.reduce_any(available, axis=1)
        logits = tf.where(available, log_weights, -1e9)
        n_index = tf.random.stateless_categorical(logits, 1, seeds[i + 1],
                                                  dtype=tf.int32)[:, 0]
        span_fits = tf.gather(fits, n_index, batch_dims=1)  # [B, L]
        span_scores = tf.gather(scores, n_index, batch_dims=1)
        start = tf.argmax(tf.where(span_fits, span_scores, -1.0), axis=1, output_type=tf.int32)
        units = tf.range(length)[None, :]
        span = ((units >= start[:, None]) & (units <= (start + n_index)[:, None])
                & any_available[:, None])
        taken |= span
        remaining -= tf.reduce_sum(tf.where(span, pieces, 0), axis=1)
        sizes.append(tf.where(any_available, n_index + 1, 0))
    chosen = candidates & tf.gather(taken, unit_id, batch_dims=1)
    return chosen, tf.stack(sizes, axis=1)


def mask_batch(input_ids, input_mask, seed, *, max_predictions_per_seq: int,
               masked_lm_prob: float, mask_token_id: int, random_token_ids,
               unmaskable_token_ids: Sequence[int], word_starts=None,
               max_ngram_size: int = 1):
    """Masks a batch of token ids (int32 [B, L]) the way the static generator does.

    Returns (masked input ids, masked_lm_positions, masked_lm_ids, masked_lm_weights).
    `seed`: a stateless seed (int [2]). `word_starts` (int [B, L], 1 where a
    word begins): mask whole words only. `max_ngram_size` > 1: spans of up to
    that many words (with `word_starts`) or pieces (`choose_ngrams`).
    """
    input_ids = tf.convert_to_tensor(input_ids, tf.int32)
    batch = tf.shape(input_ids)[0]
    length = tf.shape(input_ids)[1]
    P = max_predictions_per_seq
    seeds = tf.random.experimental.stateless_split(seed, num=5)
    candidates = tf.cast(input_mask, tf.bool)
    for token_id in unmaskable_token_ids:
        candidates &= tf.not_equal(input_ids, token_id)
    n = tf.reduce_sum(tf.cast(candidates, tf.float32), axis=1)
    # Unbiased random rounding: E[floor(x + u)] = x for u ~ U[0, 1).
    k = tf.floor(n * masked_lm_prob + tf.random.stateless_uniform([batch], seeds[0]))
    k = tf.cast(tf.clip_by_value(k, 1.0, tf.minimum(float(P), tf.maximum(n, 1.0))), tf.int32)
    scores = tf.random.stateless_uniform(tf.shape(input_ids), seeds[1])
    if max_ngram_size > 1:
        units = tf.ones_like(input_ids) if word_starts is None else word_starts
        chosen, _ = choose_ngrams(candidates, units, k, max_ngram_size, seeds[4], P)
    elif word_starts is None:
        # The k candidates with the lowest random scores.
        keyed = tf.where(candidates, scores, 2.0)
        order = tf.argsort(keyed, axis=1, stable=True)
        ranks = tf.argsort(order, axis=1, stable=True)
        chosen = candidates & (ranks < k[:, None])
    else:
        word_starts = tf.cast(word_starts, tf.int32)
        word_id = tf.maximum(tf.cumsum(word_starts, axis=1) - 1, 0)  # [B, L]
        rows = tf.range(batch)[:, None] * length
        lengths = tf.math.unsorted_segment_sum(
            tf.cast(candidates, tf.int32), word_id + rows, batch * length)
        lengths = tf.reshape(lengths, [batch, length])  # pieces per word
        is_word = lengths > 0
        taken = tf.zeros([batch, length], tf.bool)
        remaining = k
        for _ in range(P):  # google's greedy: words in random order, skip what does not fit
            eligible = is_word & ~taken & (lengths <= remaining[:, None])
            best = tf.argmax(tf.where(eligible, scores, -1.0), axis=1, output_type=tf.int32)
            any_eligible = tf.reduce_any(eligible, axis=1)
            pick = tf.one_hot(best, length, on_value=True, off_value=False) & any_eligible[:, None]
            taken |= pick
            remaining -= tf.where(any_eligible, tf.gather(lengths, best, batch_dims=1), 0)
        chosen = candidates & tf.gather(taken, word_id, batch_dims=1)
    # Chosen positions in ascending order, then padding.
    key = tf.where(chosen, 0, length) + tf.range(length)[None, :]
    positions = tf.argsort(key, axis=1, stable=True)[:, :P]
    weights = tf.gather(chosen, positions, batch_dims=1)
    positions = tf.where(weights, positions, 0)
    labels = tf.where(weights, tf.gather(input_ids, positions, batch_dims=1), 0)
    # 80% [MASK], 10% a random ordinary token, 10% unchanged.
    u = tf.random.stateless_uniform(tf.shape(input_ids), seeds[2])
    random_token_ids = tf.constant(random_token_ids, tf.int32)
    random_ids = tf.gather(random_token_ids, tf.random.stateless_uniform(
        tf.shape(input_ids), seeds[3], maxval=tf.shape(random_token_ids)[0], dtype=tf.int32))
    masked_ids = tf.where(chosen & (u < 0.8), mask_token_id, input_ids)
    masked_ids = tf.where(chosen & (u >= 0.9), random_ids, masked_ids)
    if P > 0:
        pad = tf.maximum(P - tf.shape(positions)[1], 0)
        positions = tf.pad(positions, [[0, 0], [0, pad]])
        labels = tf.pad(labels, [[0, 0], [0, pad]])
        weights = tf.pad(weights, [[0, 0], [0, pad]])
    return masked_ids, positions, labels, tf.cast(weights, tf.float32)
