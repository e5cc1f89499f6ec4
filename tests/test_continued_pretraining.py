"""Continued pre-training from any BERT checkpoint, task-adaptive pre-training on a
fine-tuning file's own text, and the masked-LM unigram baseline (issue 34, items 3 and 5).

* A fine-tuning file as a corpus (`data_prep.task_text`): CoNLL sentences and
  table rows become documents of google's corpus format, known text in, known
  text out; bad files and flags are one line.
* The real all-MiniLM-L6-v2, which ships without a masked-LM head: its
  encoder is loaded unchanged, the head's output is its word-embedding matrix
  (the same variable, equal to the safetensors file's), the transform and bias
  start fresh and the log says so; the logits are recomputed in numpy from the
  file's embeddings. A fresh head starts at chance: the step-0 masked-LM loss
  is within [ln V - 0.5, ln V + 1.5] (measured 10.64 on the inaugural
  addresses, 11.1 on tweets; ln V = 10.33), since MiniLM was distilled and
  trained as a sentence encoder, never as a masked LM, so its last layer is
  not aligned with its input embeddings (even an identity transform gives
  11.02, accuracy 4.8%). Then run_pretraining trains from it on a CoNLL file.
* `masked_lm_unigram_baseline` against its definition, computed from the
  TFRecords themselves; and a table's text trains the masked LM alone.
"""

import json
import logging
import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_prep import task_text
from official_bert.errors import BadFileError, UserError
from test_run_pretraining import CONFIG, SCRIPT, read_results

MLM_LINE = ("Masked-LM head: output tied to the word embeddings; transform and bias initialized "
            "fresh (the checkpoint has no masked-LM head)")

# Two tweets of WNUT-17's layout (word<TAB>tag, a whitespace-only line between sentences).
CONLL = ("@paulwalk\tO\nIt\tO\n's\tO\nthe\tO\nview\tO\nfrom\tO\nwhere\tO\nI\tO\n'm\tO\n"
         "living\tO\n.\tO\nEmpire\tB-location\nState\tI-location\nBuilding\tI-location\n.\tO\n"
         "\t\nFrom\tO\nGreen\tO\nNewsfeed\tO\n:\tO\nthe\tO\ndeadline\tO\nis\tO\nnear\tO\n.\tO\n")


def run(*args):
    """run_pretraining.py in a subprocess (no wrapper: masked-LM-only runs have no
    next-sentence figures); its progress is read from the log."""
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
                       PYTHONPATH=str(pathlib.Path(SCRIPT).parent))
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], env=environment,
                          capture_output=True, text=True, timeout=600)


def logged_steps(stderr):
    """step → its progress line's figures (name → value)."""
    steps = {}
    for step, figures in re.findall(r"step (\d+)/\d+: (.*)", stderr):
        steps[int(step)] = {k: float(v) for k, v in re.findall(r"(\w+) = ([-\d.e+]+)", figures)}
    return steps


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


# === A fine-tuning file's text as a corpus ===


def test_conll_sentences_and_table_rows_become_documents(tmp_path):
    conll = write(tmp_path / "train.conll", "-DOCSTART- O\n\n" + CONLL)
    assert task_text.documents(conll, "conll") == [
        ["@paulwalk It 's the view from where I 'm living . Empire State Building ."],
        ["From Green Newsfeed : the deadline is near ."]]
    tsv = write(tmp_path / "train.tsv", "sentence\tlabel\nit 's a charming journey .\t1\n"
                " \t0\nbleak   and desperate\t0\n")
    assert task_text.documents(tsv, "table", ["sentence"]) == [
        ["it 's a charming journey ."], ["bleak and desperate"]]  # the blank text is dropped
    # A pair task's two texts are one document; a quoted line break stays in one line.
    csv = write(tmp_path / "pairs.csv", 'sentence1,sentence2,label\n"A cat\nsat.",A dog ran.,1\n')
    assert task_text.documents(csv, "table", ["sentence1", "sentence2"]) == [
        ["A cat sat.", "A dog ran."]]
    jsonl = write(tmp_path / "rows.jsonl", '{"text": "no label here"}\n')
    assert task_text.documents(jsonl, "table", ["text"]) == [["no label here"]]

    corpus = tmp_path / "corpus.txt"
    counts = task_text.write_corpus([conll], "conll", [], str(corpus))
    assert counts == {"documents": 2, "sentences": 2}
    assert corpus.read_text(encoding="utf-8") == (
        "@paulwalk It 's the view from where I 'm living . Empire State Building .\n\n"
        "From Green Newsfeed : the deadline is near .\n")


def test_bad_files_and_flags_are_one_line(tmp_path):
    tsv = write(tmp_path / "train.tsv", "sentence\tlabel\nfine .\t1\n")
    with pytest.raises(BadFileError, match=r"train.tsv line 1 has a header without .*'text' "
                       r"\(columns: sentence, label\)"):
        task_text.documents(tsv, "table", ["text"])
    with pytest.raises(BadFileError, match="empty.conll holds no sentences"):
        task_text.documents(write(tmp_path / "empty.conll", "\n\n"), "conll")
    with pytest.raises(BadFileError, match="blank.tsv holds no text; check the file"):
        task_text.documents(write(tmp_path / "blank.tsv", "sentence\tlabel\n \t1\n"), "table",
                            ["sentence"])
    assert task_text.text_columns(" sentence1, sentence2 ", "table") == ["sentence1",
                                                                         "sentence2"]
    with pytest.raises(UserError, match="--input_format=table needs --text_column"):
        task_text.text_columns(None, "table")
    with pytest.raises(UserError, match="needs --text_column.*got 'a,b,c'"):
        task_text.text_columns("a,b,c", "table")
    with pytest.raises(UserError, match="--text_column is for --input_format=table; "
                       "--input_format=conll does not use it"):
        task_text.text_columns("sentence", "conll")


@pytest.mark.parametrize("config_flags,run_flags,message", [
    (dict(input_format="table"), {}, "--input_format=table needs --text_column"),
    (dict(input_format="conll", text_column="x"), {}, "--text_column is for --input_format=table"),
    (dict(input_format="conll", dynamic_masking=True), {},
     "--dynamic_masking is for TFRecords: with --input_format=conll"),
    (dict(input_format="table", text_column="s"), dict(distribution_strategy="tpu"),
     "--input_format=table makes the instances in Python"),
    (dict(input_format="tsv"), {}, "--input_format=tsv is unknown: .* conll or table"),
])
def test_task_text_flags_refused_before_reading(tmp_path, config_flags, run_flags, message):
    from official_bert.tasks import pretraining
    from official_bert.configs import RunConfig

    config = pretraining.PretrainingConfig(input_file=write(tmp_path / "t.conll", CONLL),
                                           **config_flags)
    with pytest.raises(UserError, match=message):
        pretraining.PretrainingTask.check_flags(
            config, RunConfig(do_train=True, num_train_steps=10, **run_flags))


@pytest.mark.parametrize("input_format,text_column", [("conll", None), ("table", "sentence")])
def test_a_directory_as_input_file_is_named_as_one(tmp_path, input_format, text_column):
    # (it said "no file matches" the directory's name)
    from official_bert.tasks import pretraining
    from official_bert.configs import RunConfig

    (tmp_path / "data").mkdir()
    write(tmp_path / "data" / "train.txt", CONLL)
    config = pretraining.PretrainingConfig(input_file=str(tmp_path / "data"),
                                           input_format=input_format, text_column=text_column)
    with pytest.raises(UserError, match=r"^--input_file: .*/data is a directory: give the files "
                                        r"in it, by name or with a glob such as .*/data/\*"):
        pretraining.PretrainingTask.check_flags(config, RunConfig(do_train=True,
                                                                  num_train_steps=10))


def test_a_fine_tuning_file_trains_the_masked_lm_alone(tmp_path):
    from official_bert.tasks import pretraining
    from official_bert.configs import RunConfig

    config = pretraining.PretrainingConfig(input_file=write(tmp_path / "t.conll", CONLL),
                                           input_format="conll")
    task = pretraining.PretrainingTask(config, RunConfig(do_train=True, num_train_steps=10))
    assert task.text and task.task_text == "conll" and not task.next_sentence


# === all-MiniLM-L6-v2: a checkpoint without a masked-LM head ===


def _gelu(x):
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def test_minilm_gets_a_fresh_masked_lm_head_tied_to_its_embeddings(minilm_dir, minilm_encoder,
                                                                   tmp_path, caplog):
    from safetensors.numpy import load_file

    from data_prep.configs import PretrainingDataConfig
    from official_bert import checkpoints
    from official_bert.modeling.heads import PRETRAINING_INPUTS
    from official_bert.tasks import pretraining
    from official_bert.training import input_pipeline

    checkpoint = checkpoints.read_checkpoint(str(minilm_dir))
    task = pretraining.PretrainingTask(pretraining.PretrainingConfig(input_format="conll"),
                                       bert_config=checkpoint.config)
    model = task.build_model()
    with caplog.at_level("INFO", logger="absl"):
        report = task.initialize(model, checkpoint)
    messages = [r.getMessage() for r in caplog.records]
    assert MLM_LINE in messages
    assert "Next-sentence head: not used (the data has no sentence pairs: masked LM only)" \
        in messages
    assert report.heads == []

    # The encoder is MiniLM's, unchanged; the output projection is its embedding matrix.
    assert len(model.encoder.weights) == len(minilm_encoder.weights)
    for ours, theirs in zip(model.encoder.weights, minilm_encoder.weights):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=ours.path)
    embeddings = load_file(str(minilm_dir / "model.safetensors"))[
        "embeddings.word_embeddings.weight"]
    assert model.mlm_output_embeddings is model.encoder.word_embeddings
    np.testing.assert_array_equal(np.asarray(model.mlm_output_embeddings), embeddings)
    # The fresh parts: google's truncated normal (std 0.88 x 0.02), LayerNorm 1/0, bias 0.
    head = model.head_weights()
    kernel = head["cls/predictions/transform/dense/kernel"]
    assert abs(kernel.std() - 0.88 * 0.02) < 0.001 and abs(kernel).max() <= 0.04 + 1e-6
    for name, value in (("transform/dense/bias", 0.0), ("transform/LayerNorm/gamma", 1.0),
                        ("transform/LayerNorm/beta", 0.0), ("output_bias", 0.0)):
        assert np.all(head[f"cls/predictions/{name}"] == value), name

    # A batch of real text (two tweets, full-sentence packing, 15% masked).
    corpus = tmp_path / "tweets.txt"
    tweets = write(tmp_path / "t.conll", "\n".join([CONLL] * 3))
    task_text.write_corpus([tweets], "conll", [], str(corpus))
    batch = next(iter(input_pipeline.pretraining_dataset(
        str(corpus), 32, 5, 4, is_training=False, vocab_file=str(minilm_dir / "vocab.txt"),
        text_config=PretrainingDataConfig(packing="full_sentences", dupe_factor=1))))
    logits = model({k: batch[k] for k in PRETRAINING_INPUTS})["masked_lm_logits"].numpy()
    # The same logits in numpy, from the file's embedding matrix.
    sequence = model.encoder({k: batch[k] for k in PRETRAINING_INPUTS[:3]})[
        "sequence_output"].numpy()
    gathered = np.take_along_axis(sequence, batch["masked_lm_positions"].numpy()[..., None], 1)
    h = _gelu(gathered @ kernel + head["cls/predictions/transform/dense/bias"])
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(logits, h @ embeddings.T, atol=2e-3)

    labels, weights = batch["masked_lm_ids"].numpy(), batch["masked_lm_weights"].numpy()
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits).numpy()
    loss = float((xent * weights).sum() / weights.sum())
    chance = math.log(checkpoint.config.vocab_size)
    assert chance - 0.5 < loss < chance + 1.5, (loss, chance)  # a fresh head: at chance


# A minute or more on 2 cores: MiniLM's 30,522 x 384 embeddings and their Adam state.
@pytest.mark.slow
def test_run_pretraining_continues_minilm_on_a_conll_file(minilm_dir, tmp_path):
    from official_bert import checkpoints

    train = write(tmp_path / "train.conll", "\n".join([CONLL] * 4))
    dev = write(tmp_path / "dev.conll", CONLL)
    out = tmp_path / "tapt"
    result = run("--input_format=conll", f"--input_file={train}", f"--eval_input_file={dev}",
                 f"--init_checkpoint={minilm_dir}", "--max_seq_length=32",
                 "--max_predictions_per_seq=5", "--train_batch_size=4", "--num_train_steps=2",
                 "--num_warmup_steps=0", "--learning_rate=1e-4", "--log_steps=1", "--do_train",
                 "--do_eval", "--eval_batch_size=4", "--max_eval_steps=2", f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert MLM_LINE in result.stderr
    assert "Next-sentence head: not used" in result.stderr
    assert f"--input_file: 8 sentences from {train}" in result.stderr
    steps = logged_steps(result.stderr)
    assert sorted(steps) == [1, 2] and "next_sentence_loss" not in steps[1]
    assert 0 <= steps[2]["masked_lm_unigram_baseline"] <= 1
    evaluated = read_results(out / "eval_results.txt")
    assert set(evaluated) == {"global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                              "masked_lm_unigram_baseline"}
    assert 0 <= evaluated["masked_lm_unigram_baseline"] <= 1
    # The run directory is a checkpoint with the trained masked-LM head and MiniLM's casing.
    trained = checkpoints.read_checkpoint(str(out))
    start = checkpoints.read_checkpoint(str(minilm_dir))
    assert "cls/predictions/transform/dense/kernel" in trained.weights
    name = "bert/embeddings/word_embeddings"
    assert not np.array_equal(trained.weights[name], start.weights[name])
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is True


# === The unigram baseline, and a table's text ===


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from test_pretraining_input import synthetic_corpus, synthetic_vocab

    root = tmp_path_factory.mktemp("continued")
    synthetic_vocab(root / "vocab.txt")
    synthetic_corpus(root / "corpus.txt", n_docs=20)
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    return root


def tiny_args(root, out, *extra):
    return (f"--bert_config_file={root}/bert_config.json", f"--vocab_file={root}/vocab.txt",
            "--max_seq_length=32", "--max_predictions_per_seq=5", "--train_batch_size=8",
            "--num_train_steps=2", "--num_warmup_steps=0", "--log_steps=1", "--do_train",
            "--do_eval", "--eval_batch_size=8", f"--output_dir={out}", *extra)


@pytest.mark.slow  # 10 s or more here
def test_the_unigram_baseline_is_the_most_frequent_masked_tokens_share(tiny):
    from data_prep.configs import PretrainingDataConfig
    from data_prep.create_pretraining_data import create_pretraining_data

    records = tiny / "static.tfrecord"
    create_pretraining_data(str(tiny / "corpus.txt"), str(records), str(tiny / "vocab.txt"),
                            PretrainingDataConfig(dupe_factor=1, max_seq_length=32,
                                                  max_predictions_per_seq=5),
                            num_workers=1, progress_seconds=0, log=None)
    # Every masked position of the file, read here with tf.data directly.
    spec = {"masked_lm_ids": tf.io.FixedLenFeature([5], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([5], tf.float32)}
    labels = []
    for record in tf.data.TFRecordDataset(str(records)):
        example = tf.io.parse_single_example(record, spec)
        masked = example["masked_lm_weights"].numpy() > 0
        labels.extend(example["masked_lm_ids"].numpy()[masked])
    assert len(labels) < 20_000  # so the baseline's sample is the whole file
    counts = np.bincount(labels)
    share = counts.max() / len(labels)
    assert sorted(counts)[-1] > sorted(counts)[-2]  # one most frequent token ("."), no tie

    out = tiny / "static_run"
    result = run(*tiny_args(tiny, out, f"--input_file={records}", "--max_eval_steps=1000"))
    assert result.returncode == 0, result.stderr[-3000:]
    # Evaluated on every record once: the baseline is the top token's share of the file.
    evaluated = read_results(out / "eval_results.txt")
    assert evaluated["masked_lm_unigram_baseline"] == pytest.approx(share, rel=1e-6)
    assert evaluated["masked_lm_accuracy"] <= 1 and "next_sentence_accuracy" in evaluated
    vocab = (tiny / "vocab.txt").read_text().split("\n")
    assert (f"always predicting {vocab[int(counts.argmax())]!r}, the most frequent of the "
            f"training data's first {len(labels)} masked tokens ({100 * share:.1f}% of them)"
            in result.stderr)
    steps = logged_steps(result.stderr)
    assert sorted(steps) == [1, 2] and 0 <= steps[2]["masked_lm_unigram_baseline"] <= 1
    assert "evaluates on the training data, which overstates" in result.stderr


@pytest.mark.slow  # 10 s or more here
def test_run_pretraining_reads_a_tables_text_column(tiny, tmp_path):
    rows = [line for line in (tiny / "corpus.txt").read_text().splitlines() if line.strip()]
    train = write(tmp_path / "train.tsv", "label\tsentence\n" + "".join(
        f"{i % 2}\t{row}\n" for i, row in enumerate(rows[:60])))
    dev = write(tmp_path / "dev.tsv", "label\tsentence\n" + "".join(
        f"{i % 2}\t{row}\n" for i, row in enumerate(rows[60:80])))
    out = tmp_path / "out"
    result = run(*tiny_args(tiny, out, "--input_format=table", "--text_column=sentence",
                            f"--input_file={train}", f"--eval_input_file={dev}",
                            "--max_eval_steps=2"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"--input_file: 60 rows (60 texts) from {train}" in result.stderr
    assert f"--eval_input_file: 20 rows (20 texts) from {dev}" in result.stderr
    assert "evaluates on the training data" not in result.stderr
    evaluated = read_results(out / "eval_results.txt")
    assert set(evaluated) == {"global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                              "masked_lm_unigram_baseline"}
    assert os.path.exists(out / "ckpt-2.index")
    bad = run(*tiny_args(tiny, tmp_path / "bad", "--input_format=table", "--text_column=text",
                         f"--input_file={train}"))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert [line for line in bad.stderr.splitlines()
            if str(train) in line and "header without" in line], bad.stderr[-2000:]
    assert not (tmp_path / "bad").exists() or not list((tmp_path / "bad").glob("ckpt-*"))


def test_the_quickstart_says_what_its_pretraining_figures_mean(tmp_path):
    from official_bert.commands import quickstart as qs

    results = {"masked_lm_accuracy": 0.084, "masked_lm_unigram_baseline": 0.038,
               "next_sentence_accuracy": 0.504, "global_step": 300.0}
    entry = qs.pretrain_summary(tmp_path / "pretrain", results)
    assert entry["masked_lm_unigram_baseline"] == 0.038
    assert qs.summary_lines({"pretrain": entry}, ["pretrain"], {}) == [
        f"  pre-trained tiny BERT   {tmp_path / 'pretrain'}  (masked-LM acc 0.084 vs 0.038 for "
        f"always guessing the most frequent token, next-sentence acc 0.504: {qs.NSP_NOTE})"]
    assert "28 speeches" in qs.NSP_NOTE and "random one" in qs.NSP_NOTE


@pytest.mark.slow  # two runs: about 15 s here
def test_fine_tuning_from_a_checkpoint_adapted_to_its_own_text_trains_at_its_length(
        tmp_path, caplog):
    """Task-adaptive pre-training then fine-tuning: the second step, from the first's
    directory on the same training file, trains at the first's length unless
    --max_seq_length is given (the two steps cannot disagree); on another file, or
    from another kind of run, the flag's default stands."""
    from support import fault_kit as kit
    from official_bert.configs import NerConfig, PretrainRunConfig, RunConfig
    from official_bert.run_directory import RunDirectory
    from official_bert.tasks import pretraining, runner
    from official_bert.tasks.ner import NerTask

    world = kit.World(tmp_path / "world").build(pretraining_data=False)
    conll = world.path("conll", "train.txt")
    adapted = tmp_path / "adapted"
    runner.run_task(pretraining.PretrainingTask,
        pretraining.PretrainingConfig(input_file=str(conll), input_format="conll",
                                      max_predictions_per_seq=3),
        PretrainRunConfig(output_dir=str(adapted), init_checkpoint=str(world.ckpt),
                          max_seq_length=16, train_batch_size=2, num_train_steps=1,
                          num_warmup_steps=0, log_steps=1, do_train=True))

    def checked(train_file, **settings):
        config = NerConfig(train_file=str(train_file))
        run = RunConfig(output_dir=str(tmp_path / "ner"), init_checkpoint=str(adapted),
                        do_train=True, **settings)
        # (step 1: the length decided once, before the task exists)
        return runner._check_flags(NerTask, config, run, RunDirectory(run.output_dir)
                                   ).max_seq_length

    with caplog.at_level(logging.INFO, logger="absl"):
        assert checked(conll) == 16
    assert f"--max_seq_length=16: the length {adapted} was pre-trained with on this task's " \
           "training text" in caplog.text
    assert checked(conll, max_seq_length=32, given=frozenset({"max_seq_length"})) == 32
    other = world.path("conll", "dev.txt")
    assert checked(other) == RunConfig().max_seq_length
