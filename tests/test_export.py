"""official_bert/serving/classification.py: the classifier SavedModel in TF Serving's layout,
loaded in a fresh process without this project (probabilities equal the Keras model's, in-graph
ids equal FullTokenizer's; `serving_default`, `serve_ids` and `preprocess`), run by
`saved_model_cli run` (TF1 session loading, as TF Serving), the single-sentence export
refusing text_b, and `ClassifierPredictor` splitting a long list by the export's batch limit.
The contract every task shares is tests/test_serving.py's."""

import json
import os
import sys

import numpy as np
import pytest

from support import processes, tiny_config
from tools.kit.serving_exports import pack, scale_head

VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a man woman walk ##s ##ed ##ing is in park cafe "
         "good bad movie very . , ! ? he she it was un ##believ ##able").split()
LABELS = ["contradiction", "entailment", "neutral"]
TEXT_A = ["The man walked in the Café!", "UNBELIEVABLE movie???",
          "she walks , he walking very very very very very very very very far",
          "Zebras\tjump", ""]
TEXT_B = ["a woman is in the park.", "it was very good", "he walked .", "bad", "the man"]
SEQ_LENGTH = 12
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH="", CUDA_VISIBLE_DEVICES="")


def build_classifier(num_classes, seed, center_on=None):
    import keras

    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from official_bert.modeling.heads import BertClassifier

    keras.utils.set_random_seed(seed)
    encoder = BertEncoder.from_bert_config(tiny_config(vocab_size=len(VOCAB)))
    model = BertClassifier(encoder, num_classes)
    model(dummy_inputs())
    scale_head(model.classifier, seed)  # so that the classes differ visibly
    if center_on is not None:
        # A random encoder's pooled vectors hardly differ; centering the logits over
        # these inputs makes the predicted class differ between them.
        logits = model(center_on, training=False).numpy()
        model.classifier.bias.assign(-logits.mean(axis=0))
    return model


def packed_with_full_tokenizer(tokenizer, texts_a, texts_b=None):
    """The ids the Python preprocessing makes (the export's in-graph ones must equal them)."""
    return pack(tokenizer, texts_a, texts_b, seq=SEQ_LENGTH)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from official_bert.serving import classification as export
    from official_bert.text import tokenization

    root = tmp_path_factory.mktemp("export")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=True)

    pair_ids = packed_with_full_tokenizer(tokenizer, TEXT_A, TEXT_B)
    pair_model = build_classifier(len(LABELS), seed=1, center_on=pair_ids)
    pair_probabilities = np.asarray(
        __import__("tensorflow").nn.softmax(pair_model(pair_ids, training=False)))
    pair_dir = root / "pair"
    first = export.export_classifier(pair_model, str(vocab), True, SEQ_LENGTH, LABELS, True,
                                     str(pair_dir))

    return dict(root=root, vocab=vocab, tokenizer=tokenizer, pair_dir=pair_dir, first=first,
                pair_ids=pair_ids, pair_probabilities=pair_probabilities)


def test_tf_serving_layout(exported):
    from official_bert.errors import UserError
    from official_bert.serving import versions

    version = os.path.basename(exported["first"])
    assert version.isdigit() and int(version) >= 1_700_000_000  # seconds since the epoch
    assert os.path.exists(os.path.join(exported["first"], "saved_model.pb"))
    assert os.listdir(exported["pair_dir"]) == [version]  # no staging directory left behind
    assert versions.latest_version_dir(str(exported["pair_dir"])) == exported["first"]
    # The next export is served after this one; an existing version is never overwritten.
    assert int(os.path.basename(versions.version_dir(str(exported["pair_dir"])))) > int(version)
    with pytest.raises(UserError, match="never overwrites"):
        versions.version_dir(str(exported["pair_dir"]), int(version))


FRESH = r"""
import json, sys
sys.modules["official_bert"] = None  # the SavedModel must not need this project
sys.modules["data_prep"] = None
import tensorflow as tf, tensorflow_text  # noqa: F401  (registers the WordPiece ops)
args = json.loads(sys.argv[1])
out = {}
pair = tf.saved_model.load(args["pair"])
serve = pair.signatures["serving_default"]
result = serve(text_a=tf.constant(args["a"]), text_b=tf.constant(args["b"]))
out["pair_probabilities"] = result["probabilities"].numpy().tolist()
out["pair_labels"] = [x.decode() for x in result["label"].numpy().tolist()]
ids = pair.signatures["preprocess"](text_a=tf.constant(args["a"]), text_b=tf.constant(args["b"]))
out["pair_ids"] = {k: v.numpy().tolist() for k, v in ids.items()}
from_ids = pair.signatures["serve_ids"](**{k: tf.constant(v, tf.int32) for k, v in args["ids"].items()})
out["from_ids"] = from_ids["probabilities"].numpy().tolist()
decode = lambda x: x.decode() if isinstance(x, bytes) else [decode(y) for y in x]
out["metadata"] = {k: (v.numpy().tolist() if v.dtype != tf.string else
                       decode(v.numpy().tolist() if v.shape.rank else v.numpy()))
                   for k, v in pair.metadata().items()}
print(json.dumps(out))
"""


def test_fresh_process_without_the_project(exported):
    args = {"pair": exported["first"], "a": TEXT_A, "b": TEXT_B,
            "ids": {k: v.tolist() for k, v in exported["pair_ids"].items()}}
    result = processes.run([sys.executable, "-c", FRESH, json.dumps(args)], cwd="/tmp",
                           env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])

    # In-graph tokenization and packing: FullTokenizer's ids, truncation included.
    for key, value in exported["pair_ids"].items():
        assert out["pair_ids"][key] == value.tolist(), key
    assert exported["pair_ids"]["input_mask"][2].sum() == SEQ_LENGTH  # truncated pair

    np.testing.assert_allclose(out["pair_probabilities"], exported["pair_probabilities"], atol=1e-5)
    np.testing.assert_allclose(out["from_ids"], exported["pair_probabilities"], atol=1e-5)
    expected_labels = [LABELS[i] for i in np.argmax(exported["pair_probabilities"], axis=1)]
    assert out["pair_labels"] == expected_labels
    assert len(set(expected_labels)) > 1  # the check above could fail
    assert out["metadata"] == {"labels": LABELS, "seq_length": SEQ_LENGTH, "lower_case": True,
                               "pair": True, "task": "classification", "max_batch_size": 256,
                               "text_inputs": ["text_a", "text_b"]}


SAVED_MODEL_CLI = ("import sys, tensorflow_text; "
                   "from tensorflow.python.tools.saved_model_cli import main; "
                   "sys.argv[0] = 'saved_model_cli'; sys.exit(main())")


def test_saved_model_cli_run(exported, tmp_path):
    """`saved_model_cli run` loads with a TF1 session, as TF Serving does (with the
    tensorflow-text ops registered, as in TF Serving's build)."""
    a = json.dumps(TEXT_A[:2])
    b = json.dumps(TEXT_B[:2])
    result = processes.run(
        [sys.executable, "-c", SAVED_MODEL_CLI, "run", "--dir", exported["first"],
         "--tag_set", "serve", "--signature_def", "serving_default",
         "--input_exprs", f"text_a={a};text_b={b}", "--outdir", str(tmp_path)],
        cwd="/tmp", env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    probabilities = np.load(tmp_path / "probabilities.npy")
    np.testing.assert_allclose(probabilities, exported["pair_probabilities"][:2], atol=1e-5)
    labels = [x.decode() for x in np.load(tmp_path / "label.npy", allow_pickle=True)]
    assert labels == [LABELS[i] for i in np.argmax(probabilities, axis=1)]


def test_single_sentence_model_takes_text_a_only(exported):
    import tensorflow as tf

    from official_bert.serving import classification as export

    model = build_classifier(2, seed=2)
    module = export.ClassifierServing(model, VOCAB, True, SEQ_LENGTH, ["neg", "pos"], pair=False)
    assert [spec.name for spec in module.serve.input_signature] == ["text_a"]
    ids = module.preprocess(text_a=tf.constant(TEXT_A))
    expected_ids = packed_with_full_tokenizer(exported["tokenizer"], TEXT_A)
    for key, value in expected_ids.items():
        np.testing.assert_array_equal(ids[key].numpy(), value)
    out = module.serve(text_a=tf.constant(TEXT_A))
    expected = tf.nn.softmax(model(expected_ids, training=False)).numpy()
    np.testing.assert_allclose(out["probabilities"].numpy(), expected, atol=1e-5)
    with pytest.raises(TypeError, match="text_b"):
        module.serve(text_a=tf.constant(TEXT_A), text_b=tf.constant(TEXT_B))


def test_regression_outputs_a_score(exported):
    from official_bert.serving import classification as export

    model = build_classifier(1, seed=3)
    module = export.ClassifierServing(model, VOCAB, True, SEQ_LENGTH, None, pair=True)
    out = module.serve_token_ids(exported["pair_ids"])
    assert set(out) == {"score"}
    expected = model(exported["pair_ids"], training=False).numpy()[:, 0]
    np.testing.assert_allclose(out["score"].numpy(), expected, atol=1e-6)


def test_label_count_must_match_the_model(exported, tmp_path):
    from official_bert.serving import classification as export

    model = build_classifier(2, seed=4)
    with pytest.raises(ValueError, match="2 outputs but 3 label"):
        export.export_classifier(model, str(exported["vocab"]), True, SEQ_LENGTH, LABELS, True,
                                 str(tmp_path / "bad"))


@pytest.mark.slow  # 10 s or more here
def test_serving_cuts_common_padding_and_keeps_the_outputs(exported, tmp_path):
    # Packed to 32 (the tiny model's positions), these texts need at most 16:
    # serving_default runs the model on 16 columns and must give the full-length model's answer.
    import tensorflow as tf

    from official_bert.serving import classification as export
    from official_bert.text import text_layers
    from official_bert.text.tokenization import FullTokenizer

    global SEQ_LENGTH
    texts_a, texts_b = [TEXT_A[1], TEXT_A[3]], [TEXT_B[1], TEXT_B[3]]
    saved, SEQ_LENGTH = SEQ_LENGTH, 32
    try:
        ids = packed_with_full_tokenizer(exported["tokenizer"], texts_a, texts_b)
    finally:
        SEQ_LENGTH = saved
    assert isinstance(exported["tokenizer"], FullTokenizer)
    trimmed = text_layers.trim_padding({k: tf.constant(v) for k, v in ids.items()})
    longest = int(ids["input_mask"].sum(axis=1).max())
    assert trimmed["input_mask"].shape == (2, -(-longest // 16) * 16) and longest <= 16
    assert int(tf.reduce_sum(trimmed["input_mask"])) == int(ids["input_mask"].sum())
    model = build_classifier(len(LABELS), seed=2, center_on=ids)
    expected = tf.nn.softmax(model(ids, training=False)).numpy()
    directory = export.export_classifier(model, str(exported["vocab"]), True, 32, LABELS, True,
                                         str(tmp_path / "long"))
    serve = tf.saved_model.load(directory).signatures["serving_default"]
    got = serve(text_a=tf.constant(texts_a), text_b=tf.constant(texts_b))
    np.testing.assert_allclose(got["probabilities"].numpy(), expected, atol=1e-5)


@pytest.mark.slow  # 10 s or more here
def test_predictor_splits_by_the_batch_limit(exported, tmp_path):
    """ClassifierPredictor calls the export with at most its max_batch_size texts."""
    from official_bert.serving import classification as export

    model = build_classifier(len(LABELS), seed=5, center_on=exported["pair_ids"])
    directory = export.export_classifier(model, str(exported["vocab"]), True, SEQ_LENGTH,
                                         LABELS, True, str(tmp_path / "small"), version=1,
                                         max_batch_size=2)
    predictor = export.ClassifierPredictor(directory)
    assert predictor.max_batch_size == 2
    out = predictor.predict(TEXT_A, TEXT_B)  # 5 texts: calls of 2, 2 and 1
    np.testing.assert_allclose(
        out["probabilities"],
        __import__("tensorflow").nn.softmax(model(exported["pair_ids"], training=False)),
        atol=1e-5)
