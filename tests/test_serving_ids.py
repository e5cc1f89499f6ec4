"""Every export checks the values of `serve_ids`' inputs in the graph (issue 36).

The model gathers embedding rows by `input_word_ids` and `input_type_ids`; an id
outside its table is no error there (on CPU a negative id wraps around: -7 read
row vocab_size - 7; on a GPU an id past the table reads zeros). The checks in
`base.ExportModule`, which every task's `serve_ids` passes through, refuse a
word id outside [0, vocab_size), a type id outside [0, type_vocab_size) and a
mask other than 0 or 1, with a message that names the input, its range and the
request's smallest and largest value: the error text a TF Serving client reads.

Tiny random exports (tools/kit/serving_exports.py's model): the encoder
([batch, seq] ids), a multiple-choice model ([batch, choices, seq]) and the
ids-only copy of the encoder (which keeps the checks: they are in serve_ids'
graph) are called in a fresh process that cannot import this project (only
tensorflow and tensorflow_text), and once
through a TF1 session's C feed, as TF Serving's model server feeds a graph. A
valid request, the largest valid ids included, answers what the Keras model
does.
"""

import json
import re
import sys

import numpy as np
import pytest

from support import REPO_ROOT, WITHOUT_THE_PROJECT, processes
from tools.kit.serving_exports import SEQ, VOCAB, pack, random_encoder
from test_serving import ENV

# A fresh process in which the project cannot be imported: only tensorflow and
# tensorflow_text; each request to serve_ids, its outputs or its error text.
LOADER = WITHOUT_THE_PROJECT + f"""
sys.path = [p for p in sys.path if p not in ("", {str(REPO_ROOT)!r})]
import json
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

results, loaded = {{}}, {{}}
for name, call in json.load(open(sys.argv[1])).items():
    if call["dir"] not in loaded:
        loaded[call["dir"]] = tf.saved_model.load(call["dir"]).signatures["serve_ids"]
    try:
        out = loaded[call["dir"]](**{{k: tf.constant(v, tf.int32) for k, v in call["ids"].items()}})
        results[name] = {{k: v.numpy().tolist() for k, v in out.items()}}
    except tf.errors.InvalidArgumentError as e:
        results[name] = {{"error": e.message}}
json.dump(results, open(sys.argv[2], "w"))
"""

VOCAB_SIZE = len(VOCAB)
TEXTS = ["a very good movie !", "the film was awful"]
PAIRS = ["the man walked", "she sat down"]

WORD_RANGE = (rf"input_word_ids must be in \[0, {VOCAB_SIZE}\) \(vocab_size: ids of the "
              r"vocabulary, line i of assets/vocab.txt is id i\); the smallest and largest "
              r"input_word_ids of the request:\] ")
TYPE_RANGE = (r"input_type_ids must be in \[0, 2\) \(type_vocab_size: segment ids, 0 for the "
              r"first text, 1 for the second\); the smallest and largest input_type_ids of the "
              r"request:\] ")
MASK_RANGE = (r"input_mask must be 0 or 1 \(1 for a token, 0 for padding\); the smallest and "
              r"largest input_mask of the request:\] ")


def _requests(ids):
    """name → (ids of the request, the message it must fail with or None)."""

    def changed(key, value, where=(0,)):
        out = {k: np.array(v) for k, v in ids.items()}
        out[key][where + (1,)] = value  # position 1: a real token of the first example
        return out

    largest = changed("input_word_ids", VOCAB_SIZE - 1)
    largest["input_type_ids"][..., 1] = 1
    return {
        "valid": (ids, None),
        "largest_valid": (largest, None),
        "negative_word_id": (changed("input_word_ids", -7), WORD_RANGE + r"\[-7\] \[\d+\]"),
        "word_id_vocab_size": (changed("input_word_ids", VOCAB_SIZE),
                               WORD_RANGE + rf"\[0\] \[{VOCAB_SIZE}\]"),
        "type_id_type_vocab_size": (changed("input_type_ids", 2), TYPE_RANGE + r"\[0\] \[2\]"),
        "negative_type_id": (changed("input_type_ids", -1), TYPE_RANGE + r"\[-1\] \[\d\]"),
        "mask_2": (changed("input_mask", 2), MASK_RANGE + r"\[0\] \[2\]"),
        # (was a strided-slice error that names no input)
        "zero_length": ({k: np.asarray(v)[..., :0] for k, v in ids.items()},
                        r"input_word_ids must be at least one token long \(\[CLS\] at least: "
                        r"the model reads its vector\); length:\] \[0\]"),
    }


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    import tensorflow as tf

    from official_bert.modeling import heads
    from official_bert.serving import base, encoder as encoder_serving, multiple_choice
    from official_bert.text import tokenization

    root = tmp_path_factory.mktemp("serving_ids")
    vocab_file = root / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
    ids = pack(tokenizer, TEXTS, PAIRS)

    def model_outputs(model, inputs, keys):
        out = model({k: tf.constant(v) for k, v in inputs.items()}, training=False)
        return {k: out[k].numpy() for k in keys} if isinstance(out, dict) else out.numpy()

    encoder = random_encoder(5)
    encoder_dir = encoder_serving.export_encoder(encoder, str(vocab_file), True, SEQ,
                                                 str(root / "encoder"))
    choice_ids = {k: np.stack([v, v[::-1]], axis=1) for k, v in ids.items()}  # 2 choices
    chooser = heads.BertMultipleChoice(random_encoder(3))
    chooser(choice_ids)
    cases = {
        "encoder": dict(dir=encoder_dir, ids=ids, model=lambda x: model_outputs(
            encoder, x, ("pooled_output", "sequence_output"))),
        "multiple_choice": dict(
            dir=multiple_choice.export_multiple_choice(chooser, str(vocab_file), True, SEQ,
                                                       str(root / "multiple_choice")),
            ids=choice_ids, model=lambda x: {"logits": model_outputs(chooser, x, None)}),
        "ids_only": dict(dir=base.export_ids_only(encoder_dir, str(root / "ids_only")),
                         ids=ids, model=lambda x: model_outputs(
                             encoder, x, ("pooled_output", "sequence_output"))),
    }
    for case in cases.values():
        case["requests"] = _requests(case["ids"])
    return cases


@pytest.fixture(scope="module")
def served(exports, tmp_path_factory):
    """Every request, in one fresh process that cannot import the project."""
    tmp = tmp_path_factory.mktemp("fresh_ids")
    calls = {f"{task}/{name}": {"dir": case["dir"], "ids": {
        k: np.asarray(v).tolist() for k, v in request.items()}}
        for task, case in exports.items() for name, (request, _) in case["requests"].items()}
    (tmp / "calls.json").write_text(json.dumps(calls), encoding="utf-8")
    (tmp / "loader.py").write_text(LOADER)
    result = processes.run([sys.executable, str(tmp / "loader.py"), str(tmp / "calls.json"),
                            str(tmp / "out.json")], cwd=str(tmp), env=ENV,
                           capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads((tmp / "out.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("task", ["encoder", "multiple_choice", "ids_only"])
def test_ids_outside_their_tables_are_refused_with_a_readable_message(exports, served, task):
    for name, (_, message) in exports[task]["requests"].items():
        if message is None:
            continue
        out = served[f"{task}/{name}"]
        assert "error" in out, f"{task}/{name} answered: {sorted(out)}"
        assert re.search(r"assertion failed: \[" + message, out["error"]), (name, out["error"])
        # One check fails, the one of the input that is wrong.
        assert out["error"].count("must be") == 1, out["error"]


@pytest.mark.parametrize("task", ["encoder", "multiple_choice", "ids_only"])
def test_valid_requests_answer_as_the_model(exports, served, task):
    case = exports[task]
    for name in ("valid", "largest_valid"):
        request, _ = case["requests"][name]
        out = served[f"{task}/{name}"]
        assert "error" not in out, out.get("error")
        for key, expected in case["model"](request).items():
            np.testing.assert_allclose(np.asarray(out[key]), expected, atol=1e-5)


def test_the_message_reaches_a_tf_serving_feed(exports):
    """Through a TF1 session's C-level feed, as TF Serving's model server runs
    the graph (tests/test_serving.py's test_non_vector_string_input_is_refused)."""
    import tensorflow as tf

    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"],
                                                          exports["encoder"]["dir"])
        signature = meta_graph.signature_def["serve_ids"]
        feeds = {name: graph.get_tensor_by_name(info.name)
                 for name, info in signature.inputs.items()}
        fetch = graph.get_tensor_by_name(signature.outputs["pooled_output"].name)

        def run(name):
            request, _ = exports["encoder"]["requests"][name]
            return session._call_tf_sessionrun(  # TF Serving's path: no Python checks
                None, {feeds[k]._as_tf_output(): np.asarray(v, np.int32)
                       for k, v in request.items()}, [fetch._as_tf_output()], [], None)

        assert np.asarray(run("valid")[0]).shape == (len(TEXTS), 16)
        for name in ("negative_word_id", "word_id_vocab_size", "type_id_type_vocab_size",
                     "mask_2", "zero_length"):
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=exports["encoder"]["requests"][name][1]):
                run(name)

