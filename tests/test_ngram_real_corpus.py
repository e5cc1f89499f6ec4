"""N-gram masking's 1/n law on real text: the generator's own instances of the
bundled sample corpus (real words, real word-piece splits, real [SEP] breaks).

`choose_ngrams` is run again on each instance's whole-word units with the
generator's budget (15% of the instance, at most 20), and every chosen span is
replayed in order: a span counts when, just before it was drawn, a span of
every length 1..3 still fitted (inside one segment, within the budget left,
overlapping nothing). For those the drawn n must follow 1/n exactly (chi-square
at p = 0.001), and the same counts must fail the uniform law (so the check can
fail). With all-MiniLM-L6-v2's vocabulary: 39,101 spans, 34,736 of them drawn
while every length fitted, 18,888 / 9,429 / 6,419 of 1 / 2 / 3 words (1/n:
18,947 / 9,474 / 6,316; chi-square 2.08, uniform 7,313).
tests/test_ngram_masking.py checks the same law on synthetic units.
"""

from __future__ import annotations

import pathlib
import random

import numpy as np

from data_prep import pretraining_instances as pi
from test_create_pretraining_data import (  # noqa: F401 - fixtures
    SEP, corpus, gen, google_feature_spec, read_records, restore_originals, vocab)
from test_ngram_masking import CHI2_CRITICAL, chi_square, zipf

MAX_N = 3


def word_units(ids, is_continuation):
    """The generator's whole-word units of `[CLS] A [SEP] B [SEP]`: a "##" piece
    joins the piece before it, never across [CLS]/[SEP]."""
    first_sep, last_sep = np.flatnonzero(ids == SEP)[:2]
    units = []
    for start, end in ((1, first_sep), (first_sep + 1, last_sep)):
        for position in range(start, end):
            if is_continuation[ids[position]] and position > start:
                units[-1].append(position)
            else:
                units.append([position])
    return units


def every_length_fits(units, taken, used, budget):
    def fits(start, n):
        span = units[start: start + n]
        return (all(b[0] == a[-1] + 1 for a, b in zip(span, span[1:]))
                and used + sum(map(len, span)) <= budget and not any(taken[start: start + n]))

    return all(any(fits(start, n) for start in range(len(units) - n + 1))
               for n in range(1, MAX_N + 1))


def test_span_lengths_on_the_real_corpus_follow_one_over_n(tmp_path, corpus, vocab):
    out, _ = gen(tmp_path, corpus, vocab, workers=1, dupe_factor=1, max_ngram_size=MAX_N,
                 do_whole_word_mask=True)
    data = read_records(out, google_feature_spec(128, 20))
    tokens = pathlib.Path(vocab).read_text(encoding="utf-8").split("\n")
    is_continuation = np.array([t.startswith("##") for t in tokens])
    originals = restore_originals(data)
    rng = random.Random(0)
    counts, all_spans = [0] * MAX_N, 0
    for _ in range(4):  # four draws on each of the corpus's instances
        for ids, mask in zip(originals, data["input_mask"]):
            ids = ids[: int(mask.sum())]
            units = word_units(ids, is_continuation)
            budget = min(20, max(1, round(len(ids) * 0.15)))
            taken, used = [False] * len(units), 0
            for start, n in pi.choose_ngrams(units, budget, MAX_N, rng):
                if every_length_fits(units, taken, used, budget):
                    counts[n - 1] += 1
                all_spans += 1
                taken[start: start + n] = [True] * n
                used += sum(len(unit) for unit in units[start: start + n])
    assert sum(counts) > 3000 and sum(counts) < all_spans  # the end of the budget is left out
    assert chi_square(counts, zipf(MAX_N)) < CHI2_CRITICAL[MAX_N - 1], counts
    assert chi_square(counts, [1 / MAX_N] * MAX_N) > 10 * CHI2_CRITICAL[MAX_N - 1], counts
