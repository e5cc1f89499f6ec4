"""Documents longer than the model (`run_classifier.py --long_document=windows`):
the windows (known answers), the pooling, the model on [batch, windows, seq],
the SavedModel making the same windows in the graph and answering as the
checkpoint does, the flags' errors, and a synthetic task whose label is a
keyword at the end of long documents: truncation scores chance, windows learn it."""

import os
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_config
from data_prep import glue
from official_bert.errors import UserError
from official_bert.modeling.heads import BertClassifier, pool_window_logits
from official_bert.text.text_layers import PACKED_KEYS
from official_bert.text.tokenization import FullTokenizer

FILLER = [f"w{i}" for i in range(20)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "alpha", "beta"] + FILLER
PAD, CLS, SEP = 0, 2, 3


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return str(path)


def test_window_spans():
    assert glue.window_spans(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert glue.window_spans(10, 4, 4) == [(0, 4), (4, 4), (8, 2)]
    assert glue.window_spans(4, 4, 2) == [(0, 4)]  # fits: one window
    assert glue.window_spans(0, 4, 2) == [(0, 0)]  # empty text: [CLS] [SEP]
    assert glue.window_spans(11, 4, 2, max_windows=2) == [(0, 4), (2, 4)]
    assert glue.window_spans(10, 4, 9) == [(0, 4), (4, 4), (8, 2)]  # stride = window


def test_convert_examples_windows(vocab_file):
    tokenizer = FullTokenizer(vocab_file)
    examples = [glue.InputExample("a", "w0 w1 w2 w3 w4 alpha", label="alpha"),
                glue.InputExample("b", "beta", label="beta"),
                glue.InputExample("c", " ".join(FILLER[:12]), label="alpha")]
    arrays, cut = glue.convert_examples_windows(examples, tokenizer, 6, ["alpha", "beta"],
                                                doc_stride=3, max_windows=3)
    w = [VOCAB.index(f"w{i}") for i in range(12)]
    alpha, beta = VOCAB.index("alpha"), VOCAB.index("beta")
    np.testing.assert_array_equal(arrays["input_word_ids"], [
        [[CLS, *w[0:4], SEP], [CLS, w[3], w[4], alpha, SEP, PAD], [PAD] * 6],
        [[CLS, beta, SEP, PAD, PAD, PAD], [PAD] * 6, [PAD] * 6],
        [[CLS, *w[0:4], SEP], [CLS, *w[3:7], SEP], [CLS, *w[6:10], SEP]],  # w10, w11 cut
    ])
    np.testing.assert_array_equal(arrays["input_mask"], arrays["input_word_ids"] != PAD)
    assert not arrays["input_type_ids"].any()
    np.testing.assert_array_equal(arrays["label"], [0, 1, 0])
    assert cut == 1  # the third needs 4 windows


def test_pooling_and_the_model_on_windows():
    logits = tf.constant([[1.0, -1.0], [3.0, 2.0], [0.5, 0.0]])
    document = tf.constant([0, 0, 1])
    np.testing.assert_allclose(pool_window_logits(logits, document, 2, "mean"),
                               [[2.0, 0.5], [0.5, 0.0]])
    np.testing.assert_allclose(pool_window_logits(logits, document, 2, "max"),
                               [[3.0, 2.0], [0.5, 0.0]])
    from official_bert.modeling.encoder import BertEncoder

    rng = np.random.default_rng(0)
    ids = rng.integers(5, 27, size=(2, 3, 8)).astype(np.int32)
    mask = np.ones_like(ids)
    ids[1, 1:], mask[1, 1:] = 0, 0  # document 1 has one window
    mask[0, 2, 5:] = 0
    inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
    for pooling, reduce in (("mean", np.mean), ("max", np.max)):
        tf.keras.utils.set_random_seed(1)
        model = BertClassifier(BertEncoder.from_bert_config(tiny_config(vocab_size=len(VOCAB))),
                               3, window_pooling=pooling)
        pooled = model(inputs).numpy()
        windows = model({k: v.reshape(6, 8) for k, v in inputs.items()}).numpy().reshape(2, 3, 3)
        np.testing.assert_allclose(pooled[0], reduce(windows[0], axis=0), atol=1e-6)
        np.testing.assert_allclose(pooled[1], windows[1, 0], atol=1e-6)  # padding skipped


def test_export_makes_the_same_windows_and_answers(vocab_file, tmp_path):
    """The SavedModel's in-graph windows give the probabilities the model
    gives on the Python windows (`convert_examples_windows`), from raw text
    and from serve_ids; `metadata()` records the settings."""
    import tensorflow_text  # noqa: F401

    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from official_bert.serving.classification import export_classifier

    tf.keras.utils.set_random_seed(3)
    model = BertClassifier(BertEncoder.from_bert_config(tiny_config(vocab_size=len(VOCAB))), 2,
                           window_pooling="max")
    model(dummy_inputs())
    windows = {"doc_stride": 5, "max_windows": 4, "window_pooling": "max"}
    path = export_classifier(model, vocab_file, True, 10, ["alpha", "beta"], False,
                             str(tmp_path / "export"), version=1, windows=windows)
    rng = random.Random(0)
    texts = ["", "alpha", "W3 w4 beta"] + [
        " ".join(rng.choice(FILLER + ["alpha", "beta"]) for _ in range(rng.randint(5, 40)))
        for _ in range(9)]
    examples = [glue.InputExample(str(i), t) for i, t in enumerate(texts)]
    arrays, cut = glue.convert_examples_windows(examples, FullTokenizer(vocab_file), 10,
                                                ["alpha", "beta"], windows["doc_stride"], 4)
    assert cut > 0  # some texts have more than 4 windows: both cut them alike
    expected = tf.nn.softmax(model({k: arrays[k] for k in PACKED_KEYS})).numpy()
    loaded = tf.saved_model.load(path)
    served = loaded.signatures["serving_default"](text_a=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
    assert [b.decode() for b in served["label"].numpy()] == [
        ["alpha", "beta"][k] for k in expected.argmax(1)]
    by_ids = loaded.signatures["serve_ids"](**{k: tf.constant(arrays[k]) for k in
                                              PACKED_KEYS})
    np.testing.assert_allclose(by_ids["probabilities"].numpy(), expected, atol=1e-5)
    metadata = loaded.metadata()
    assert metadata["long_document"].numpy() == b"windows"
    assert int(metadata["doc_stride"]) == 5 and int(metadata["max_windows"]) == 4
    assert metadata["window_pooling"].numpy() == b"max"


@pytest.mark.parametrize("flags,message", [
    (dict(long_document="windows", doc_stride=0), "--doc_stride must be positive, got 0"),
    (dict(long_document="windows", doc_stride=8, max_windows=0), "--max_windows must be positive"),
    (dict(long_document="pages"), "--long_document='pages': use truncate"),
    (dict(long_document="windows", doc_stride=8, task_name="mrpc"), "mrpc is a pair task"),
])
def test_flag_errors(flags, message):
    from official_bert.tasks import base, classification

    values = dict(task_name="custom", text_a_column="text")
    values.update(flags)
    task = classification.ClassificationTask(classification.ClassificationConfig(**values),
                                             base.RunConfig(output_dir="x", max_seq_length=16))
    with pytest.raises(UserError, match=re.escape(message)):
        task.check_flags()


def test_a_trained_run_keeps_its_window_flags(tmp_path):
    """A run trained with windows is not evaluated or exported without them
    (nor with other ones), nor a truncating run with them."""
    import json

    from official_bert.tasks import base, classification

    saved = {"labels": ["alpha", "beta"], "long_document": "windows", "doc_stride": 14,
             "window_pooling": "max", "max_windows": 16}
    (tmp_path / "checkpoint").write_text("")  # a trained run directory
    for flags, trained, message in [
        (dict(), saved, "trained with --long_document=windows --doc_stride=14 "
                        "--window_pooling=max --max_windows=16; pass the same flags"),
        (dict(long_document="windows", doc_stride=14, window_pooling="mean"), saved,
         "--window_pooling=max"),
        (dict(long_document="windows"), {"labels": ["alpha", "beta"]},
         "trained with --long_document=truncate; pass the same flags"),
    ]:
        (tmp_path / "classifier_config.json").write_text(json.dumps(trained))
        task = classification.ClassificationTask(
            classification.ClassificationConfig(task_name="custom", text_a_column="text",
                                                labels=["alpha", "beta"], **flags),
            base.RunConfig(output_dir=str(tmp_path), max_seq_length=16))
        task.check_flags()
        with pytest.raises(UserError, match=re.escape(message)):
            task._settle_labels()
    task = classification.ClassificationTask(
        classification.ClassificationConfig(task_name="custom", text_a_column="text",
                                            labels=["alpha", "beta"], long_document="windows",
                                            doc_stride=14, window_pooling="max"),
        base.RunConfig(output_dir=str(tmp_path), max_seq_length=16))
    (tmp_path / "classifier_config.json").write_text(json.dumps(saved))
    task.check_flags()
    task._settle_labels()  # the same flags: accepted


# === A task only windows can learn ===


def keyword_documents(n, seed):
    """20-40 random filler words, then the label's keyword as the last word:
    the first 14 tokens say nothing about the label."""
    r = random.Random(seed)
    rows = []
    for i in range(n):
        label = ["alpha", "beta"][i % 2]
        rows.append((" ".join(r.choice(FILLER) for _ in range(r.randint(20, 40))) + " " + label,
                     label))
    return rows


def train(data, out, long_document, pooling="max", export_dir=None):
    from official_bert.tasks import base, classification

    config = classification.ClassificationConfig(
        task_name="custom", data_dir=str(data), text_a_column="text",
        long_document=long_document, doc_stride=14, window_pooling=pooling)
    run = base.RunConfig(
        output_dir=str(out), do_train=True, do_eval=True, do_predict=True,
        bert_config_file=str(data / "bert_config.json"), vocab_file=str(data / "vocab.txt"),
        max_seq_length=16, train_batch_size=16, learning_rate=5e-3, num_train_epochs=10,
        log_steps=40, export_dir=export_dir and str(export_dir))
    return base.run(classification.ClassificationTask(config, run))


@pytest.mark.slow  # two trainings of 80 steps (about 40 s on one core)
def test_windows_learn_what_truncation_cannot_see(tmp_path):
    import tensorflow_text  # noqa: F401

    from official_bert.serving.classification import ClassifierPredictor

    data = tmp_path / "data"
    data.mkdir()
    for name, n, seed in (("train", 128, 1), ("dev", 64, 2), ("test", 16, 3)):
        (data / f"{name}.tsv").write_text("text\tlabel\n" + "".join(
            f"{t}\t{label}\n" for t, label in keyword_documents(n, seed)))
    (data / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (data / "bert_config.json").write_text(tiny_config(vocab_size=len(VOCAB)).to_json_string())

    truncated = train(data, tmp_path / "truncate", "truncate")
    assert truncated["eval_accuracy"] <= 0.6  # chance: the keyword is never in the first 16
    export = tmp_path / "export"
    windows = train(data, tmp_path / "windows", "windows", export_dir=export)
    assert windows["eval_accuracy"] >= 0.95

    # The export, from raw text, answers as the checkpoint did (test_results.tsv).
    texts = [t for t, _ in keyword_documents(16, 3)]
    expected = np.loadtxt(tmp_path / "windows" / "test_results.tsv", delimiter="\t")
    [version] = os.listdir(export)
    served = tf.saved_model.load(str(export / version)).signatures["serving_default"](
        text_a=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
    # So does `bert predict`'s predictor on the run directory (its checkpoint).
    from_run = ClassifierPredictor(str(tmp_path / "windows")).predict(texts)
    np.testing.assert_allclose(from_run["probabilities"], expected, atol=1e-5)
    assert [label.decode() for label in from_run["label"]] == [
        label for _, label in keyword_documents(16, 3)]
