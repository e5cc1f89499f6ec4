"""Pre-training straight from raw text: run_pretraining --input_format=text.

The instances come from the generator's own code (`worker_records`), so the
known answer is the generator's output itself: the first pass over the
corpus is, record for record, the file `create_pretraining_data
--dupe_factor=1` writes with as many workers as input pipelines (only the
order differs; the sample corpus's instances fit the generator's shuffle
buffer, which would otherwise draw from the same random source). Over later passes the statistics (next sentence 50/50,
15% masked, 80/10/10, tokens per instance) match the generator's summary to
within 5 standard deviations of the counts, and the masks are new. Then
run_pretraining trains and evaluates from a text file, a restart resumes
exactly (slow), and bad text is one line naming the file and line.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import tensorflow as tf

from data_prep import pretraining_corpus
from data_prep.configs import PretrainingDataConfig
from official_bert.errors import BadFileError, UserError
from official_bert.training import input_pipeline
from test_create_pretraining_data import (  # noqa: F401 - fixtures
    corpus, gen, google_feature_spec, mask_stats, read_records, vocab)
from test_pretraining_input import collect
from test_run_pretraining import CONFIG, read_results, results, run
from official_bert.configs import RunConfig


def records(dataset):
    return [r.numpy() for r in dataset]


@pytest.mark.parametrize("workers", [1, 2])
def test_first_pass_is_the_generators_output(tmp_path, corpus, vocab, workers):
    out, summary = gen(tmp_path, corpus, vocab, workers=workers, dupe_factor=1)
    assert summary["num_workers"] == workers
    written = records(tf.data.TFRecordDataset(out))
    config = PretrainingDataConfig(dupe_factor=1)
    made = []
    for pipeline in range(workers):
        made += records(input_pipeline.text_records(
            [str(corpus)], str(vocab), config, pipeline, workers, is_training=False))
    assert len(made) == summary["instances"] > 500
    assert sorted(made) == sorted(written)


def test_statistics_over_passes_match_the_generator(tmp_path, corpus, vocab):
    _, summary = gen(tmp_path, corpus, vocab, workers=1, dupe_factor=3)
    first = records(input_pipeline.text_records([str(corpus)], str(vocab),
                                                PretrainingDataConfig(), is_training=False))
    stream = input_pipeline.text_records([str(corpus)], str(vocab), PretrainingDataConfig())
    passes = records(stream.take(3 * len(first)))
    assert not set(passes[len(first):]) & set(first)  # new pairs and masks every pass
    # The reader's batches (shuffled, parsed) of those three passes.
    data = collect(input_pipeline.pretraining_dataset(
        str(corpus), 128, 20, batch_size=90, seed=1, vocab_file=str(vocab),
        text_config=PretrainingDataConfig()), 3 * len(first) // 90)
    data["input_ids"] = data["input_word_ids"]
    n = len(data["input_ids"])
    masked_fraction, as_mask, as_random, kept = mask_stats(data)
    masked = int((data["masked_lm_weights"] > 0).sum())
    nsp = float(data["next_sentence_labels"].mean())
    tokens = float(data["input_mask"].sum(1).mean())
    assert abs(nsp - summary["next_sentence_random_fraction"]) < 5 * math.sqrt(0.5 / n)
    assert abs(nsp - 0.5) < 5 * math.sqrt(0.25 / n)
    assert abs(masked_fraction - 0.15) < 5 * 0.5 * math.sqrt(n) / (masked / masked_fraction)
    for got, p in ((as_mask, 0.8), (as_random, 0.1), (kept, 0.1)):
        assert abs(got - p) < 5 * math.sqrt(p * (1 - p) / masked), (got, p)
    lengths = data["input_mask"].sum(1)
    assert abs(tokens - summary["tokens_per_instance"]) < 5 * lengths.std() / math.sqrt(n) + 1


def test_text_corpus_checks(tmp_path, vocab):
    good = tmp_path / "good.txt"
    good.write_text("one a.\ntwo b.\n\nthree c.\nfour d.\n", encoding="utf-8")
    pretraining_corpus.check_text_corpus([str(good)], str(vocab))
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"one a.\ntwo b.\n\nthree \xff c.\nfour d.\n")
    with pytest.raises(BadFileError, match=r"bad.txt.*line 4.*not UTF-8"):
        pretraining_corpus.check_text_corpus([str(bad)], str(vocab))
    single = tmp_path / "single.txt"
    single.write_text("one a.\ntwo b.\n", encoding="utf-8")
    with pytest.raises(BadFileError, match="holds 1 document"):
        pretraining_corpus.check_text_corpus([str(single)], str(vocab))
    with pytest.raises(UserError, match="--input_format=text needs --vocab_file"):
        input_pipeline.pretraining_dataset(str(good), 32, 5, 4, text_config=PretrainingDataConfig())


@pytest.mark.parametrize("run_flags,config_flags,message", [
    (dict(distribution_strategy="tpu"), {}, "--input_format=text makes the instances in Python"),
    ({}, dict(dynamic_masking=True), "--dynamic_masking is for TFRecords"),
    ({}, dict(max_ngram_size=0), "--max_ngram_size must be at least 1"),
    ({}, dict(input_format="csv"), "--input_format=csv is unknown"),
])
def test_text_mode_flags_refused_before_reading(tmp_path, run_flags, config_flags, message):
    from official_bert.tasks import pretraining

    config = pretraining.PretrainingConfig(input_file=str(tmp_path / "corpus.txt"),
                                           **dict(dict(input_format="text"), **config_flags))
    run = RunConfig(do_train=True, num_train_steps=10, **run_flags)
    with pytest.raises(UserError, match=message):
        pretraining.PretrainingTask.check_flags(config, run)


@pytest.fixture(scope="module")
def text_data(tmp_path_factory):
    import json

    from test_pretraining_input import synthetic_corpus, synthetic_vocab

    root = tmp_path_factory.mktemp("text_pretraining")
    synthetic_vocab(root / "vocab.txt")
    synthetic_corpus(root / "corpus.txt", n_docs=20)
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    return root


def text_args(root, output_dir, *extra):
    return ("--input_format=text", f"--input_file={root}/corpus.txt",
            f"--bert_config_file={root}/bert_config.json", f"--vocab_file={root}/vocab.txt",
            "--max_seq_length=32", "--max_predictions_per_seq=5", "--train_batch_size=8",
            "--num_train_steps=6", "--num_warmup_steps=1", "--save_checkpoints_steps=2",
            "--log_steps=1", "--learning_rate=5e-3", "--do_train", "--do_eval",
            "--eval_batch_size=8", "--max_eval_steps=2", "--do_whole_word_mask",
            "--max_ngram_size=2", f"--output_dir={output_dir}", *extra)


@pytest.fixture(scope="module")
def text_run(text_data):
    out = text_data / "run"
    result = run(*text_args(text_data, out))
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(out=out, results=results(result.stdout), stderr=result.stderr)


def test_run_pretraining_trains_from_text(text_run):
    losses = text_run["results"]
    assert sorted(losses) == list(range(1, 7))
    assert all(np.isfinite(v[0]) for v in losses.values())
    assert "instances made on the fly" in text_run["stderr"]
    evaluated = read_results(text_run["out"] / "eval_results.txt")
    assert evaluated["global_step"] == 6
    assert 0 <= evaluated["next_sentence_accuracy"] <= 1
    assert (text_run["out"] / "ckpt-6.index").exists()
    assert (text_run["out"] / "tokenizer_config.json").exists()


def test_bad_text_is_one_line_before_training(text_data, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes((text_data / "corpus.txt").read_bytes() + b"\n\nw1 w2 \xfe .\nw3 .\n")
    args = [a if not a.startswith("--input_file=") else f"--input_file={bad}"
            for a in text_args(text_data, tmp_path / "out")]
    result = run(*args)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    line = [x for x in result.stderr.splitlines() if "not UTF-8" in x]
    assert line and str(bad) in line[0] and "line" in line[0], result.stderr[-2000:]
    assert not list((tmp_path / "out").glob("ckpt-*"))


@pytest.mark.slow
def test_restart_resumes_text_input_exactly(text_run, text_data):
    out = text_data / "killed"
    killed = run(*text_args(text_data, out), kill_at=3)
    assert killed.returncode == -9, killed.stderr[-3000:]
    resumed = run(*text_args(text_data, out))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = results(resumed.stdout)
    assert sorted(after) == [3, 4, 5, 6]  # from the checkpoint of step 2
    for step in after:
        assert abs(after[step][0] - text_run["results"][step][0]) <= 1e-6, (step, after)


def test_text_input_runs_on_several_input_pipelines(tmp_path, corpus, vocab):
    # Each pipeline makes the instances of its own documents (as the
    # generator's workers): together, every instance once.
    config = PretrainingDataConfig(dupe_factor=1)
    shares = [set(records(input_pipeline.text_records([str(corpus)], str(vocab), config, i, 3,
                                                      is_training=False))) for i in range(3)]
    assert all(shares) and not (shares[0] & shares[1] or shares[1] & shares[2])
    options = tf.distribute.InputOptions()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    dataset = strategy.distribute_datasets_from_function(
        lambda context: input_pipeline.pretraining_dataset(
            str(corpus), 128, 20, batch_size=8, seed=2, vocab_file=str(vocab),
            text_config=config, input_context=context, shuffle_buffer_size=100), options)
    batch = next(iter(dataset))
    assert batch["input_word_ids"].shape == (8, 128)
    assert os.path.exists(str(corpus))


def test_a_two_sentence_file_makes_its_first_batch_without_thousands_of_passes(
        tmp_path, vocab, monkeypatch):
    """A task's small file (two sentences: one instance a pass) used to be passed
    over 10,000 times before the first batch: the shuffle buffer filled first, and
    each pass remade the record encoder's varint tables. Now the buffer holds
    about one pass's instances and the tables are made once: the first batch of
    8 needs a few hundred passes (the generator hands records over in chunks of
    256), each reusing the tables."""
    from data_prep import create_pretraining_data, pretraining_records

    corpus = tmp_path / "two.txt"
    corpus.write_text("EU rejects German call to boycott British lamb .\n\n"
                      "Peter Blackburn went home .\n")
    passes = []
    worker_records = create_pretraining_data.worker_records

    def counted(*args, **kwargs):
        passes.append(1)
        return worker_records(*args, **kwargs)

    monkeypatch.setattr(create_pretraining_data, "worker_records", counted)
    pretraining_records.varints.cache_clear()
    config = PretrainingDataConfig(max_seq_length=64, max_predictions_per_seq=10,
                                   packing="full_sentences")
    dataset = input_pipeline.pretraining_dataset(
        str(corpus), 64, 10, 8, True, vocab_file=str(vocab), text_config=config, seed=1)
    batch = next(iter(dataset))
    assert batch["input_word_ids"].shape[0] == 8
    assert 8 <= len(passes) <= 600
    assert pretraining_records.varints.cache_info().misses == 2  # the ids' and lengths'
