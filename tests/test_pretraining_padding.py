"""Less padding in pre-training (issue 26, item 2).

(a) Length bucketing at read time (`pretraining_dataset(length_bucket_width=...)`,
run_pretraining's --length_bucket_width): the bucketed batches hold exactly
the instances of the unbucketed stream, each batch is cut to its bucket's
length, masked positions are kept, static and dynamic files, per-replica
batches exact, consecutive batches of one length for gradient accumulation,
deterministic for a seed.

(b) Full-sentence packing (create_pretraining_data --packing=full_sentences):
the instances are the corpus' token stream in order (each pass once), a
[SEP] exactly at the document boundaries inside an instance, no padding but
in a pass's last instance, [SEP] never masked; run_pretraining trains the
masked LM alone on such data and refuses a mix.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_prep.create_pretraining_data import PretrainingDataConfig, create_pretraining_data
from official_bert.errors import UserError
from official_bert.training import input_pipeline
from test_pretraining_input import synthetic_corpus, synthetic_vocab
from official_bert.configs import RunConfig
from support import processes

REPO = pathlib.Path(__file__).resolve().parents[1]
CLS, SEP, MASK = 101, 102, 103
WIDTH = 16


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Sentence-pair files at length 64 (short_seq_prob=0.5: many lengths),
    static and dynamic, and the vocabulary."""
    tmp = tmp_path_factory.mktemp("padding")
    vocab, tokens = synthetic_vocab(tmp / "vocab.txt")
    corpus = synthetic_corpus(tmp / "corpus.txt", n_docs=20)
    out = {"root": tmp, "vocab": str(vocab), "tokens": tokens, "corpus": corpus}
    for name, dynamic in (("static", False), ("dynamic", True)):
        path = str(tmp / f"{name}.tfrecord")
        create_pretraining_data(str(corpus), path, str(vocab), PretrainingDataConfig(
            dupe_factor=2, max_seq_length=64, max_predictions_per_seq=10, short_seq_prob=0.5,
            dynamic_masking=dynamic), num_workers=1, progress_seconds=0, log=None)
        out[name] = path
    return out


def batches(path, width, batch_size=8, training=False, seed=None, take=None, **kwargs):
    d = input_pipeline.pretraining_dataset(
        path, 64, 10, batch_size, is_training=training, seed=seed, length_bucket_width=width,
        drop_remainder=training, vocab_file=kwargs.pop("vocab_file", None), **kwargs)
    return [{k: v.numpy() for k, v in b.items()} for b in (d.take(take) if take else d)]


def rows(batch_list):
    """Each instance as a hashable tuple: its real tokens and its masked-LM features."""
    out = []
    for b in batch_list:
        for i in range(len(b["input_mask"])):
            n = int(b["input_mask"][i].sum())
            out.append((tuple(b["input_word_ids"][i, :n]), tuple(b["input_type_ids"][i, :n]),
                        tuple(b["masked_lm_positions"][i]), tuple(b["masked_lm_ids"][i]),
                        tuple(b["masked_lm_weights"][i]), int(b["next_sentence_labels"][i, 0])))
    return out


def used_length(b):
    """Per row: 1 + the last real token or masked position."""
    last_token = b["input_mask"].shape[1] - np.argmax(b["input_mask"][:, ::-1], axis=1)
    last_masked = np.max(np.where(b["masked_lm_weights"] > 0, b["masked_lm_positions"] + 1, 0),
                         axis=1)
    return np.maximum(last_token, last_masked)


def test_bucketed_batches_hold_the_same_instances_cut_to_their_bucket(data):
    plain = batches(data["static"], 0)
    bucketed = batches(data["static"], WIDTH)
    assert all(b["input_word_ids"].shape[1] == 64 for b in plain)
    # The same multiset of instances, masked-LM features included (so the
    # masked positions and their labels are preserved).
    assert collections.Counter(rows(bucketed)) == collections.Counter(rows(plain))
    lengths = collections.Counter()
    for b in bucketed:
        length = b["input_word_ids"].shape[1]
        lengths[length] += 1
        assert length % WIDTH == 0
        for key in ("input_mask", "input_type_ids"):
            assert b[key].shape[1] == length
        used = used_length(b)
        # Every row of a batch is in the batch's bucket: (length - WIDTH, length].
        assert np.all(used <= length) and np.all(used > length - WIDTH), (used, length)
        real = b["masked_lm_weights"] > 0
        assert np.all(b["masked_lm_positions"][real] < length)
    assert len(lengths) >= 3  # several buckets are used
    padded = sum(b["input_mask"].size - b["input_mask"].sum() for b in bucketed)
    assert padded < sum(b["input_mask"].size - b["input_mask"].sum() for b in plain) / 2


def test_dynamic_masking_masks_the_cut_batch_deterministically(data):
    spec = {"input_ids": tf.io.FixedLenFeature([64], tf.int64),
            "input_mask": tf.io.FixedLenFeature([64], tf.int64)}
    file_rows = set()
    for record in tf.data.TFRecordDataset(data["dynamic"]):
        r = tf.io.parse_single_example(record, spec)
        file_rows.add(tuple(r["input_ids"].numpy()[:int(r["input_mask"].numpy().sum())]))
    first = batches(data["dynamic"], WIDTH, training=True, seed=7, take=12,
                    vocab_file=data["vocab"])
    again = batches(data["dynamic"], WIDTH, training=True, seed=7, take=12,
                    vocab_file=data["vocab"])
    for a, b in zip(first, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    for b in first:
        length = b["input_word_ids"].shape[1]
        assert b["input_word_ids"].shape == (8, length) and length % WIDTH == 0
        used = used_length(b)
        assert np.all(used > length - WIDTH)
        ids = b["input_word_ids"].copy()
        for i in range(8):
            real = b["masked_lm_weights"][i] > 0
            positions = b["masked_lm_positions"][i][real]
            assert real.sum() >= 1 and np.all(positions < used[i])
            assert np.all(b["input_mask"][i][positions] == 1)
            ids[i, positions] = b["masked_lm_ids"][i][real]
            assert not np.isin(ids[i, positions], [CLS, SEP]).any()
            n = int(b["input_mask"][i].sum())
            assert tuple(ids[i, :n]) in file_rows  # the original instance, unmasked


def test_per_replica_batches_are_exact_and_accumulation_gets_one_length(data):
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                         num_replicas_in_sync=2)
    got = batches(data["static"], WIDTH, batch_size=16, training=True, seed=1, take=20,
                  input_context=context, bucket_batches=2)
    assert all(b["input_word_ids"].shape[0] == 8 for b in got)
    lengths = [b["input_word_ids"].shape[1] for b in got]
    assert lengths[0::2] == lengths[1::2]  # consecutive pairs from one bucket
    with pytest.raises(UserError, match="length_bucket_width"):
        batches(data["static"], -1)


def run_pretraining(*args):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
                       PYTHONPATH=str(REPO))
    return processes.run([sys.executable, str(REPO / "run_pretraining.py"), *map(str, args)],
                         cwd=str(REPO), env=environment, capture_output=True, text=True,
                         timeout=300)


TINY = dict(vocab_size=760, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=64, type_vocab_size=2)


# --- (b) full-sentence packing ------------------------------------------------------


def packed(data, tmp_path, name, **config):
    path = str(tmp_path / f"{name}.tfrecord")
    summary = create_pretraining_data(str(data["corpus"]), path, data["vocab"],
                                      PretrainingDataConfig(
                                          max_seq_length=32, max_predictions_per_seq=5,
                                          packing="full_sentences", shuffle_buffer_size=1,
                                          **config), num_workers=1, progress_seconds=0, log=None)
    spec = {"input_ids": tf.io.FixedLenFeature([32], tf.int64),
            "input_mask": tf.io.FixedLenFeature([32], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([32], tf.int64),
            "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
    if not config.get("dynamic_masking"):
        spec.update(masked_lm_positions=tf.io.FixedLenFeature([5], tf.int64),
                    masked_lm_ids=tf.io.FixedLenFeature([5], tf.int64),
                    masked_lm_weights=tf.io.FixedLenFeature([5], tf.float32))
    records = [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
               for r in tf.data.TFRecordDataset(path)]
    return path, summary, records


def corpus_documents(data):
    """The corpus as documents of token ids, as the generator tokenizes it."""
    from data_prep.fast_tokenization import CachedTokenizer

    tokenizer = CachedTokenizer(data["vocab"], do_lower_case=True)
    text = pathlib.Path(data["corpus"]).read_text(encoding="utf-8")
    return [[i for line in doc.splitlines() for i in tokenizer.ids(line.strip())]
            for doc in text.split("\n\n") if doc.strip()]


def test_packer_known_answers():
    from data_prep.pretraining_instances import FullSentencePacker

    packer = FullSentencePacker(5, sep_id=SEP)
    # A [SEP] between documents inside an instance; a sentence split at an instance's end.
    assert packer.add([[1, 2], [3]]) == []
    assert packer.add([[4, 5, 6, 7]]) == [[1, 2, 3, SEP, 4]]
    assert packer.add([[8]]) == [[5, 6, 7, SEP, 8]]
    # A boundary that falls between two instances gets no [SEP] (the closing one marks it).
    assert packer.add([[9, 10, 11, 12, 13]]) == [[9, 10, 11, 12, 13]]
    assert packer.add([[14, 15, 16, 17]]) == []
    # A separator that fills the last place ends the instance.
    assert packer.add([[18]]) == [[14, 15, 16, 17, SEP]]
    assert packer.finish() == [[18]] and packer.finish() == []


def test_one_sentence_documents_are_packed(tmp_path, data):
    corpus = tmp_path / "short.txt"
    corpus.write_text("w1 w2 w3 .\n\nw4 w5 .\n\nw6 .\n", encoding="utf-8")
    path = str(tmp_path / "short.tfrecord")
    summary = create_pretraining_data(str(corpus), path, data["vocab"], PretrainingDataConfig(
        max_seq_length=8, max_predictions_per_seq=2, dupe_factor=1, packing="full_sentences",
        dynamic_masking=True), num_workers=1, progress_seconds=0, log=None)
    assert summary["instances"] == 2 and summary["documents_one_sentence"] == 0
    ids = [list(tf.io.parse_single_example(r, {"input_ids": tf.io.FixedLenFeature(
        [8], tf.int64)})["input_ids"].numpy()) for r in tf.data.TFRecordDataset(path)]
    w = {t: i for i, t in enumerate(data["tokens"])}
    assert sorted(ids) == sorted([
        [CLS, w["w1"], w["w2"], w["w3"], w["."], SEP, w["w4"], SEP],
        [CLS, w["w5"], w["."], SEP, w["w6"], w["."], SEP, 0]])
    # One document is enough (there is no next sentence to draw).
    one = tmp_path / "one.txt"
    one.write_text("w1 w2 .\n", encoding="utf-8")
    assert create_pretraining_data(str(one), str(tmp_path / "one.tfrecord"), data["vocab"],
                                   PretrainingDataConfig(max_seq_length=8, dupe_factor=1,
                                                         max_predictions_per_seq=2,
                                                         packing="full_sentences"),
                                   num_workers=1, progress_seconds=0, log=None)["instances"] == 1


def contents(records, dynamic):
    """Each instance's tokens between [CLS] and the closing [SEP], masks undone;
    checks the layout and that no [SEP] or [CLS] was masked."""
    out = []
    for r in records:
        ids = r["input_ids"].copy()
        if not dynamic:
            real = r["masked_lm_weights"] > 0
            assert not np.isin(r["masked_lm_ids"][real], [SEP, CLS]).any()
            ids[r["masked_lm_positions"][real]] = r["masked_lm_ids"][real]
        n = int(r["input_mask"].sum())
        assert ids[0] == CLS and ids[n - 1] == SEP and not ids[n:].any()
        assert not r["segment_ids"].any() and r["next_sentence_labels"][0] == 0
        out.append(list(ids[1:n - 1]))
    return out


@pytest.mark.parametrize("dynamic", [False, True])
def test_full_sentences_are_the_corpus_stream_in_order(data, tmp_path, dynamic):
    documents = corpus_documents(data)
    path, summary, records = packed(data, tmp_path, f"packed{dynamic}", dupe_factor=1,
                                    dynamic_masking=dynamic, do_whole_word_mask=dynamic)
    assert summary["packing"] == "full_sentences" and not summary["next_sentence_prediction"]
    assert summary["config"]["packing"] == "full_sentences"
    instances = contents(records, dynamic)
    # Every instance is full (32 - [CLS] - [SEP]) but the last one.
    assert all(len(c) == 30 for c in instances[:-1]) and 0 < len(instances[-1]) <= 30
    assert summary["padding_fraction"] == (30 - len(instances[-1])) / (32 * len(instances))
    # Without their [SEP]s the instances are the corpus' tokens in order (none
    # lost, none repeated), and every [SEP] inside one is a document boundary.
    text, seps = [], []
    for content in instances:
        for token in content:
            if token == SEP:
                seps.append(len(text))
            else:
                text.append(token)
    assert text == [t for doc in documents for t in doc]
    boundaries = set(np.cumsum([len(doc) for doc in documents])[:-1].tolist())
    assert set(seps) <= boundaries and len(seps) == len(set(seps)) and len(seps) > 5
    # A boundary with no [SEP] falls between two instances (the closing [SEP] marks it).
    ends = set(np.cumsum([len(c) - c.count(SEP) for c in instances]).tolist())
    assert boundaries - set(seps) <= ends
    if dynamic:  # each of dupe_factor passes holds the stream once
        _, _, twice = packed(data, tmp_path, "packed_twice", dupe_factor=2,
                             dynamic_masking=True)
        count = collections.Counter(map(tuple, contents(twice, True)))
        assert count == collections.Counter({k: 2 * v for k, v in
                                             collections.Counter(map(tuple, instances)).items()})


def test_the_task_turns_next_sentence_off_for_packed_data_and_refuses_a_mix(data, tmp_path):
    from official_bert.modeling.configs import BertConfig
    from official_bert.tasks import pretraining

    path, _, _ = packed(data, tmp_path, "packed", dupe_factor=1)
    pairs = str(tmp_path / "pairs.tfrecord")
    create_pretraining_data(str(data["corpus"]), pairs, data["vocab"], PretrainingDataConfig(
        max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1), num_workers=1,
        progress_seconds=0, log=None)

    def task(input_file, eval_input_file=None, width=0, **run):
        run = RunConfig(output_dir=str(tmp_path / "run"), max_seq_length=32,
                             do_train=True, num_train_steps=10, num_warmup_steps=1, **run)
        config = pretraining.PretrainingConfig(
            input_file=input_file, eval_input_file=eval_input_file, max_predictions_per_seq=5,
            length_bucket_width=width)
        pretraining.PretrainingTask.check_flags(config, run)
        return pretraining.PretrainingTask(config, run, bert_config=BertConfig(**TINY))

    assert task(pairs).next_sentence and not task(path).next_sentence
    with pytest.raises(UserError, match=f"^{path} was made with --packing=full_sentences "
                       f"\\(no next-sentence pairs\\) but {pairs} with sentence pairs"):
        task(pairs, eval_input_file=path)
    with pytest.raises(UserError, match="between 0 \\(off\\) and --max_seq_length=32, got 33"):
        task(pairs, width=33)
    with pytest.raises(UserError, match="TPU"):
        task(pairs, width=8, distribution_strategy="tpu")

    # The loss is the masked LM's alone, its metrics only; the next-sentence
    # head's gradients are zero (defined: the same variables are trained).
    t = task(path)
    model = t.build_model()
    features = next(iter(input_pipeline.pretraining_dataset(path, 32, 5, 4, is_training=False)))
    normalizers = t.loss_normalizers(features)
    with tf.GradientTape() as tape:
        loss, metrics = t.loss_and_metrics(model, features, normalizers, training=False)
    assert set(metrics) == {"masked_lm_accuracy", "masked_lm_loss"}
    mlm_sum, weights = (float(v) for v in metrics["masked_lm_loss"])
    assert float(loss) == pytest.approx(mlm_sum / weights, rel=1e-6)
    grads = dict(zip([v.path for v in model.trainable_variables],
                     tape.gradient(loss, model.trainable_variables)))
    nsp = [name for name in grads if "next_sentence" in name]
    assert nsp and all(grads[n] is not None and not np.any(grads[n]) for n in nsp)
    assert all(g is not None for g in grads.values())


TINY = dict(vocab_size=760, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=64, type_vocab_size=2)


def run_pretraining(*args):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
                       PYTHONPATH=str(REPO))
    return processes.run([sys.executable, str(REPO / "run_pretraining.py"), *map(str, args)],
                         cwd=str(REPO), env=environment, capture_output=True, text=True,
                         timeout=600)


@pytest.mark.slow
def test_run_pretraining_on_packed_data_with_length_buckets_on_two_replicas(data, tmp_path):
    """Both at once, end to end: packed data (NSP off), bucketed batches, the
    mirrored strategy over 2 logical CPUs with gradient accumulation."""
    path, _, _ = packed(data, tmp_path, "packed", dupe_factor=1)
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(TINY, max_position_embeddings=32)))
    result = run_pretraining(
        f"--input_file={path}", f"--bert_config_file={tmp_path}/bert_config.json",
        f"--vocab_file={data['vocab']}", "--max_seq_length=32", "--max_predictions_per_seq=5",
        "--do_train", "--do_eval", "--train_batch_size=8", "--eval_batch_size=4",
        "--num_train_steps=4", "--num_warmup_steps=1", "--max_eval_steps=2",
        "--length_bucket_width=8", "--distribution_strategy=mirrored", "--num_cpu_devices=2",
        "--gradient_accumulation_steps=2", "--log_steps=2", f"--output_dir={tmp_path}/run")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--packing=full_sentences (no next-sentence pairs): training the masked LM only" \
        in result.stderr
    keys = {line.split(" = ")[0] for line in
            (tmp_path / "run" / "eval_results.txt").read_text().splitlines()}
    assert {"masked_lm_accuracy", "masked_lm_loss", "loss"} <= keys
    assert not any(k.startswith("next_sentence") for k in keys)
