"""`bert extend-vocab` (data_prep/extend_vocab.py, checkpoints/vocabulary.py,
official_bert/vocab_extension.py): which words are added and where, the new rows (the mean of
the old pieces'), the Hugging Face directory it writes, fine-tuning and the TF Serving export on
it, the real all-MiniLM-L6-v2, and one-line errors with nothing written."""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import time

import numpy as np
import pytest

from data_prep import extend_vocab as ev
from official_bert.errors import UserError
from official_bert.configs import ExtendVocabConfig
from support import REPO_ROOT, processes, tiny_config
from test_run_classifier import run, write_sst2

# A tiny vocabulary with two [unused] slots; the domain words are split into pieces.
VOCAB = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
         "the", "a", "movie", "film", "is", "was", "very", "good", "bad", "great", "dull",
         "cine", "##ma", "##tic", "block", "##buster", "##s", ",", ".", "!"]
# cinematic: cine ##ma ##tic; blockbuster: block ##buster; cinema: cine ##ma; zzz: [UNK].
CORPUS = ("cinematic " * 5 + "blockbuster " * 4 + "cinema " * 3 + "film " * 10 + "zzz " * 10
          + "good " * 2).split()


def extend_vocab(config):
    """The command's job, in process (TensorFlow is imported on first use)."""
    from official_bert import vocab_extension

    return vocab_extension.extend_vocab(config)


def corpus_file(path):
    lines = [" ".join(CORPUS[i:i + 6]) for i in range(0, len(CORPUS), 6)]
    path.write_text("\n".join(lines) + "\n")
    return path


# === Which words, and where (no TensorFlow) ===


def test_the_most_frequent_split_words_fill_unused_slots_then_are_appended():
    counts = {word: CORPUS.count(word) for word in set(CORPUS)}
    plan = ev.plan_extension(counts, VOCAB, num_new_tokens=3, min_count=3)
    # film (one piece), zzz ([UNK]) and good (2 < min_count) never qualify.
    assert [(t.token, t.id, t.count, t.pieces) for t in plan.new_tokens] == [
        ("cinematic", 1, 5, ("cine", "##ma", "##tic")),
        ("blockbuster", 2, 4, ("block", "##buster")),
        ("cinema", len(VOCAB), 3, ("cine", "##ma"))]
    assert plan.new_tokens[0].piece_ids == (18, 19, 20)
    assert plan.vocab == (VOCAB[:1] + ["cinematic", "blockbuster"] + VOCAB[3:] + ["cinema"])
    assert plan.in_unused_slots == 2 and plan.candidates == 3
    # 34 words: 5*3 + 4*2 + 3*2 + 10 + 10 + 2 = 51 tokens before, one a word after.
    assert plan.tokens_per_word == pytest.approx((51 / 34, 1.0))
    # At most --num_new_tokens, the most frequent first; --min_count bounds them.
    fewer = ev.plan_extension(counts, VOCAB, num_new_tokens=1, min_count=3)
    assert [t.token for t in fewer.new_tokens] == ["cinematic"] and fewer.candidates == 3
    strict = ev.plan_extension(counts, VOCAB, num_new_tokens=10, min_count=5)
    assert [t.token for t in strict.new_tokens] == ["cinematic"] and strict.candidates == 1


def test_a_new_token_that_would_make_a_word_unknown_is_left_out(caplog):
    # "abx" (ab ##x) would be matched first in "abxq" (ab ##xq), leaving "q": no "##q".
    vocab = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "ab", "##x",
             "##xq", "cd", "##e"]
    counts = {"abx": 9, "cde": 5, "abxq": 1}
    with caplog.at_level(logging.WARNING):
        plan = ev.plan_extension(counts, vocab, num_new_tokens=5, min_count=2)
    assert [t.token for t in plan.new_tokens] == ["cde"]
    assert "left out 1 word(s)" in caplog.text and "abx" in caplog.text
    assert ev.split_words(["abxq"], plan.vocab) == {"abxq": ["ab", "##xq"]}


def test_token_rows_are_the_mean_of_the_old_pieces_rows():
    from official_bert import checkpoints

    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(6, 3)).astype(np.float32)
    bias = rng.normal(size=6).astype(np.float32)
    other = rng.normal(size=(4, 3))
    weights = {"bert/embeddings/word_embeddings": embeddings,
               "cls/predictions/output_bias": bias, "bert/pooler/dense/kernel": other}
    new = checkpoints.add_token_rows(weights, 8, {1: [2, 3], 6: [0, 4, 5], 7: [3]})
    expected = embeddings.copy()
    expected[1] = (embeddings[2] + embeddings[3]) / 2
    expected = np.concatenate([expected, [embeddings[[0, 4, 5]].mean(0), embeddings[3]]])
    np.testing.assert_allclose(new["bert/embeddings/word_embeddings"], expected, rtol=1e-6)
    np.testing.assert_allclose(new["cls/predictions/output_bias"], np.concatenate(
        [[bias[0], (bias[2] + bias[3]) / 2], bias[2:], [bias[[0, 4, 5]].mean(), bias[3]]]),
        rtol=1e-6)
    assert new["bert/pooler/dense/kernel"] is other
    assert new["bert/embeddings/word_embeddings"].dtype == np.float32
    np.testing.assert_array_equal(weights["bert/embeddings/word_embeddings"], embeddings)
    with pytest.raises(ValueError, match=r"new rows \[7\] have no pieces"):
        checkpoints.add_token_rows(weights, 8, {6: [0]})
    with pytest.raises(ValueError, match="are not old ids"):
        checkpoints.add_token_rows(weights, 7, {6: [6]})


# === The checkpoint: a tiny model built here ===


def make_tiny_checkpoint(directory):
    """google-research/bert's TF1 files of a tiny encoder with the pre-training heads."""
    from official_bert import checkpoints
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs

    config = tiny_config(vocab_size=len(VOCAB))
    encoder = BertEncoder.from_bert_config(config)
    encoder(dummy_inputs())
    rng = np.random.default_rng(1)
    hidden = config.hidden_size
    heads = {"cls/predictions/transform/dense/kernel": rng.normal(size=(hidden, hidden)),
             "cls/predictions/transform/dense/bias": rng.normal(size=hidden),
             "cls/predictions/transform/LayerNorm/gamma": rng.normal(size=hidden),
             "cls/predictions/transform/LayerNorm/beta": rng.normal(size=hidden),
             "cls/predictions/output_bias": rng.normal(size=len(VOCAB)),
             "cls/seq_relationship/output_weights": rng.normal(size=(2, hidden)),
             "cls/seq_relationship/output_bias": rng.normal(size=2)}
    vocab_file = directory.parent / "tiny_vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n")
    checkpoints.export_google(encoder, str(directory), str(vocab_file), heads,
                              exact_gelu_as="gelu_exact")
    return directory


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
    root = tmp_path_factory.mktemp("extend")
    ckpt = make_tiny_checkpoint(root / "google")
    out = root / "extended"
    summary = extend_vocab(ExtendVocabConfig(
        init_checkpoint=str(ckpt / "bert_model.ckpt"), input_file=[str(corpus_file(
            root / "domain.txt"))], output_dir=str(out), num_new_tokens=3, min_count=3))
    return dict(root=root, ckpt=ckpt, out=out, summary=summary)


def test_the_new_checkpoint_directory(extended):
    from official_bert import checkpoints

    out = extended["out"]
    assert sorted(os.listdir(out)) == [".official_bert.outputs.json",  # what it published
                                       "config.json", "model.safetensors",
                                       "tokenizer_config.json", "vocab.txt",
                                       "vocab_extension.tsv"]
    new_vocab = VOCAB[:1] + ["cinematic", "blockbuster"] + VOCAB[3:] + ["cinema"]
    assert (out / "vocab.txt").read_text() == "\n".join(new_vocab) + "\n"
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_size"] == len(VOCAB) + 1
    assert config["architectures"] == ["BertForPreTraining"]
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is True
    assert (out / "vocab_extension.tsv").read_text().splitlines() == [
        "token\tid\tcount\told_pieces", "cinematic\t1\t5\tcine ##ma ##tic",
        "blockbuster\t2\t4\tblock ##buster", f"cinema\t{len(VOCAB)}\t3\tcine ##ma"]
    summary = extended["summary"]
    assert (summary["new_tokens"], summary["in_unused_slots"], summary["appended"]) == (3, 2, 1)
    assert summary["vocab_size"] == (len(VOCAB), len(VOCAB) + 1)
    assert summary["mlm_output_bias"] is True

    # BertForPreTraining's names and layouts ([out, in] matrices; the decoder is tied).
    from safetensors.numpy import load_file

    tensors = load_file(str(out / "model.safetensors"))
    hidden = tiny_config().hidden_size
    assert {name: tensors[name].shape for name in tensors if not name.startswith("bert.")} == {
        "cls.predictions.transform.dense.weight": (hidden, hidden),
        "cls.predictions.transform.dense.bias": (hidden,),
        "cls.predictions.transform.LayerNorm.weight": (hidden,),
        "cls.predictions.transform.LayerNorm.bias": (hidden,),
        "cls.predictions.bias": (len(VOCAB) + 1,),
        "cls.seq_relationship.weight": (2, hidden), "cls.seq_relationship.bias": (2,)}
    assert tensors["bert.embeddings.word_embeddings.weight"].shape == (len(VOCAB) + 1, hidden)
    old = checkpoints.read_checkpoint(str(extended["ckpt"] / "bert_model.ckpt"))
    new = checkpoints.read_checkpoint(str(out))
    np.testing.assert_array_equal(
        tensors["cls.predictions.transform.dense.weight"],
        old.weights["cls/predictions/transform/dense/kernel"].T)
    assert new.kind == checkpoints.HUGGINGFACE and sorted(new.weights) == sorted(old.weights)
    rows = {1: [18, 19, 20], 2: [21, 22], len(VOCAB): [18, 19]}
    for name in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
        before, after = old.weights[name], new.weights[name]
        assert after.shape[0] == len(VOCAB) + 1
        kept = [i for i in range(len(VOCAB)) if i not in rows]
        np.testing.assert_array_equal(after[kept], before[kept], err_msg=name)
        for token_id, pieces in rows.items():
            np.testing.assert_allclose(after[token_id], before[pieces].mean(axis=0),
                                       rtol=1e-6, err_msg=name)
    for name in old.weights:
        if name not in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
            np.testing.assert_array_equal(new.weights[name], old.weights[name], err_msg=name)


def test_continued_pre_training_starts_from_the_extended_heads(extended):
    """The pre-training model reads both heads back, the masked LM over the grown vocabulary
    with the new tokens' output bias (the mean of their pieces')."""
    import tensorflow as tf

    from official_bert import checkpoints
    from official_bert.modeling.heads import BertPretrainer

    encoder, checkpoint = checkpoints.load_encoder(str(extended["out"]))
    pretrainer = BertPretrainer(encoder)
    assert pretrainer.load_head_weights(checkpoint).heads == ["masked_lm", "next_sentence"]
    bias = pretrainer.head_weights()["cls/predictions/output_bias"]
    old = checkpoints.read_checkpoint(str(extended["ckpt"] / "bert_model.ckpt"))
    old_bias = old.weights["cls/predictions/output_bias"]
    assert bias.shape == (len(VOCAB) + 1,)
    np.testing.assert_allclose(bias[len(VOCAB)], old_bias[[18, 19]].mean(), rtol=1e-6)
    outputs = pretrainer({"input_word_ids": tf.constant([[4, 1, len(VOCAB), 5]]),
                          "input_mask": tf.ones([1, 4], tf.int32),
                          "input_type_ids": tf.zeros([1, 4], tf.int32),
                          "masked_lm_positions": tf.constant([[1, 2]])})
    assert outputs["masked_lm_logits"].shape == (1, 2, len(VOCAB) + 1)


@pytest.mark.slow  # 10 s or more here
def test_fine_tuning_and_its_export_use_the_extended_vocabulary(extended):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the export's tokenizer ops)

    new_vocab = (extended["out"] / "vocab.txt").read_text()
    train = (["a cinematic blockbuster", "dull cinema", "great cinematic film", "bad film"],
             [1, 0, 1, 0])
    data = write_sst2(extended["root"] / "sst", train, train)
    run_dir, export = extended["root"] / "run", extended["root"] / "export"
    result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={data}",
                 f"--init_checkpoint={extended['out']}", "--do_train", "--max_seq_length=8",
                 "--train_batch_size=2", "--num_train_epochs=1", f"--output_dir={run_dir}",
                 f"--export_dir={export}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run_dir / "vocab.txt").read_text() == new_vocab
    [version] = os.listdir(export)
    assert (export / version / "assets" / "vocab.txt").read_text() == new_vocab
    # The export's own tokenizer: each added word is one token, at its new id.
    loaded = tf.saved_model.load(str(export / version))
    ids = loaded.preprocess(tf.constant(["cinematic blockbuster cinema"]))["input_word_ids"]
    assert ids.numpy()[0, :5].tolist() == [VOCAB.index("[CLS]"), 1, 2, len(VOCAB),
                                           VOCAB.index("[SEP]")]


# === The real all-MiniLM-L6-v2 ===


def test_minilm_a_domain_term_becomes_one_token(minilm_dir, tmp_path):
    from official_bert import checkpoints
    from official_bert.text import tokenization

    corpus = tmp_path / "eeg.txt"
    corpus.write_text("The electroencephalography of the patient was normal.\n" * 12
                      + "Electroencephalography helps.\n" * 3)
    out = tmp_path / "minilm_eeg"
    summary = extend_vocab(ExtendVocabConfig(
        init_checkpoint=str(minilm_dir), input_file=[str(corpus)], output_dir=str(out),
        num_new_tokens=5, min_count=10))
    assert summary["new_tokens"] == 1 and summary["vocab_size"] == (30522, 30522)
    old_tokenizer = tokenization.FullTokenizer(str(minilm_dir / "vocab.txt"), True)
    pieces = old_tokenizer.tokenize("electroencephalography")
    assert len(pieces) >= 3
    new_tokenizer = tokenization.FullTokenizer(str(out / "vocab.txt"), True)
    assert new_tokenizer.tokenize("Electroencephalography") == ["electroencephalography"]
    [token_id] = new_tokenizer.convert_tokens_to_ids(["electroencephalography"])
    assert old_tokenizer.inv_vocab[token_id] == "[unused0]"
    old = checkpoints.read_checkpoint(str(minilm_dir))
    encoder, new = checkpoints.load_encoder(str(out))
    embeddings = new.weights["bert/embeddings/word_embeddings"]
    piece_rows = old.weights["bert/embeddings/word_embeddings"][
        old_tokenizer.convert_tokens_to_ids(pieces)]
    # The mean in float64, stored as float32: exactly.
    np.testing.assert_array_equal(embeddings[token_id],
                                  piece_rows.astype(np.float64).mean(axis=0).astype(np.float32))
    np.testing.assert_array_equal(np.delete(embeddings, token_id, axis=0), np.delete(
        old.weights["bert/embeddings/word_embeddings"], token_id, axis=0))
    assert new.do_lower_case is True and encoder.config.vocab_size == 30522


# === Errors: one line, nothing written ===


def bert(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return processes.run([sys.executable, "-m", "official_bert.commands.cli", "extend-vocab", *args],
                         cwd=REPO_ROOT, env=env, timeout=300)


def test_command_line_errors_are_one_line_and_write_nothing(extended, tmp_path):
    ckpt = extended["ckpt"] / "bert_model.ckpt"
    corpus = corpus_file(tmp_path / "domain.txt")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    good = [f"--init_checkpoint={ckpt}", f"--input_file={corpus}", "--min_count=3"]
    cases = [
        ([*good, f"--output_dir={extended['ckpt']}"], "is --init_checkpoint"),
        ([*good, f"--output_dir={tmp_path / 'busy'}"], "is not empty"),
        ([*good, f"--output_dir={corpus}"], "--output_dir is --input_file"),
        ([*good, f"--output_dir={tmp_path / 'busy' / 'keep.txt'}"], "is a file, not a directory"),
        ([*good, f"--output_dir={tmp_path / 'new'}", "--num_new_tokens=0"],
         "--num_new_tokens=0 must be at least 1"),
        ([*good, f"--output_dir={tmp_path / 'new'}", "--min_count=100"],
         "nothing to add; lower --min_count"),
        ([f"--init_checkpoint={ckpt}", f"--input_file={tmp_path / 'nope.txt'}",
          f"--output_dir={tmp_path / 'new'}"], "nope.txt"),
        ([f"--input_file={corpus}", f"--output_dir={tmp_path / 'new'}"],
         "--init_checkpoint is required"),
    ]
    for args, message in cases:
        result = bert(*args)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert result.returncode == 1 and len(errors) == 1, (args, result.stderr[-2000:])
        assert message in errors[0], (args, errors[0])
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["keep.txt"]
    assert sorted(os.listdir(extended["ckpt"])) == [
        ".official_bert.outputs.json", "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "vocab.txt"]


def test_two_extensions_into_one_directory_at_once_end_with_one_output_and_one_line(
        extended, tmp_path):
    """Issue 44: both exited 0 and one output was lost.

    Each racer reads its corpus from its own named pipe, which it opens after
    the output policy's claim: the test's open of a pipe's writing end returns
    once its racer has claimed, so both have claimed before either can read a
    word, let alone publish (without the pipes a slow machine may run them one
    after the other, and a second run rightly replaces the first's output)."""
    text = corpus_file(tmp_path / "domain.txt").read_text()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    pipes = [tmp_path / f"corpus{i}.fifo" for i in range(2)]
    racers = []
    for pipe in pipes:
        os.mkfifo(pipe)
        racers.append(processes.start(
            [sys.executable, "-m", "official_bert.commands.cli", "extend-vocab",
             f"--init_checkpoint={extended['ckpt'] / 'bert_model.ckpt'}", f"--input_file={pipe}",
             f"--output_dir={tmp_path / 'out'}", "--num_new_tokens=2", "--min_count=3"],
            cwd=REPO_ROOT, env=env))
    writers = [open_when_read(pipe, racer) for pipe, racer in zip(pipes, racers)]
    for writer in writers:
        with writer:
            writer.write(text)
    ended = sorted((racer.wait(300), racer.communicate()[1]) for racer in racers)
    assert [code for code, _ in ended] == [0, 1], ended
    lost = ended[1][1].decode() if isinstance(ended[1][1], bytes) else ended[1][1]
    assert "Traceback" not in lost and len(
        [line for line in lost.splitlines() if line.startswith("error:")]) == 1, lost
    assert (tmp_path / "out" / "model.safetensors").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def open_when_read(pipe, racer, timeout=120):
    """The named pipe's writing end, once `racer` has opened it to read (a
    plain open would wait for ever on a racer that ended first)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.fdopen(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK), "w")
        except OSError as e:  # ENXIO: nobody reads it yet
            if e.errno != errno.ENXIO:
                raise
        assert racer.poll() is None, racer.communicate()
        assert time.monotonic() < deadline, f"{pipe} was never opened"
        time.sleep(0.05)


def test_command_line_writes_and_reports(extended, tmp_path):
    corpus = corpus_file(tmp_path / "domain.txt")
    result = bert(f"--init_checkpoint={extended['ckpt'] / 'bert_model.ckpt'}",
                  f"--input_file={corpus}", f"--output_dir={tmp_path / 'out'}",
                  "--num_new_tokens=2", "--min_count=3")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (f"wrote {tmp_path / 'out'}: 2 new tokens of the 3 words that qualify (2 in "
            f"[unusedN] slots, 0 appended; vocab_size {len(VOCAB)} -> {len(VOCAB)}; masked-LM "
            "output bias extended)") in result.stderr
    # 51 tokens for 34 words; cinematic saves 2 tokens 5 times, blockbuster 1 token 4 times.
    assert f"1.500 -> {(51 - 2 * 5 - 4) / 34:.3f} WordPiece tokens per word" in result.stderr
    assert "cinematic (5x, was cine ##ma ##tic); blockbuster (4x, was block ##buster)" in (
        result.stderr)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left
    with pytest.raises(UserError, match="--input_file is required"):
        extend_vocab(ExtendVocabConfig(init_checkpoint="x", output_dir="y"))
