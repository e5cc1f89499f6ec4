"""The serving contract (issue 23), tested as a serving engineer would, for every task:
classification, SQuAD v1.1 and v2.0, multiple choice, NER, the plain encoder and the
pre-training (masked LM) model.

One tiny random model per task is exported once (module fixture) with
`official_bert.serving`; then, per task:

* the TF Serving layout: one integer version directory, nothing staged left behind,
  the vocabulary asset, the warm-up file, an existing version never overwritten;
* `saved_model_cli show --all` lists both signatures, `saved_model_cli run` runs
  `serve_ids` (TF1 session loading, as TF Serving does; the tensorflow-text ops
  registered, as in TF Serving's model server);
* a fresh Python process that cannot import this project (only tensorflow and
  tensorflow_text) feeds raw text to `serving_default` and ids to `serve_ids`, and
  gets what the Keras model and the project's Python preprocessing give;
* the warm-up file parses (PredictionLog records, byte for byte those of the
  tensorflow-serving-api protos) and its requests run through their signatures;

and across tasks: the input checks (a non-vector string input, a batch above
`max_batch_size`, in the graph so that TF Serving's C++ feed cannot skip them),
the ids-only copy for servers without the text ops, the TF-Hub-style pair
(`bert export-encoder`) fine-tuned by a Keras 3 model in a fresh process, and the
TFLite / ONNX files of the ids signature against TensorFlow.
"""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from support import REPO_ROOT, WITHOUT_THE_PROJECT, processes
from tools.kit.serving_exports import (CONTEXTS, ENCODER_TEXT, LABELS, NER_MAX_BATCH, NER_TEXT,
                                       SEQ, TEXT_A, TEXT_B, VOCAB, export_all)
from tools.kit.serving_exports import pack as _pack
from tools.kit.serving_exports import random_encoder as _encoder
from tools.kit.serving_exports import scale_head as _scale
from official_bert.configs import ExportEncoderConfig

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
ENV.pop("PYTHONPATH", None)
ENV.pop("OFFICIAL_BERT_TRACEBACK", None)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    return export_all(tmp_path_factory.mktemp("serving"))


TASKS = ["classification", "regression", "squad_v1", "squad_v2", "multiple_choice", "ner",
         "encoder", "pretraining"]

# A fresh process in which the project cannot be imported: only tensorflow and
# tensorflow_text (the LOADER of tests/test_run_squad.py).
LOADER = WITHOUT_THE_PROJECT + textwrap.dedent("""
    import json
    sys.path = [p for p in sys.path if p not in ("", {repo!r})]  # the checkout too: no project
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry

    def unregistered_ops(path):
        saved = saved_model_pb2.SavedModel()
        with open(path + "/saved_model.pb", "rb") as f:
            saved.ParseFromString(f.read())
        graph = saved.meta_graphs[0].graph_def
        ops = {{n.op for n in graph.node}} | {{n.op for f in graph.library.function
                                             for n in f.node_def}}
        return sorted(op for op in ops if op_def_registry.get(op) is None)

    calls = json.load(open(sys.argv[1]))
    text_ops = {{name: unregistered_ops(call["dir"]) for name, call in calls.items()}}
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    def decode(value):
        if isinstance(value, bytes):
            return value.decode()
        return [decode(x) for x in value] if isinstance(value, list) else value

    def plain(value):
        value = value.numpy()
        return decode(value.tolist() if hasattr(value, "tolist") else value)

    results = {{}}
    for name, call in calls.items():
        loaded = tf.saved_model.load(call["dir"])
        out = {{}}
        for signature, inputs in call["signatures"].items():
            feed = {{k: tf.constant(v, tf.string if k not in ("input_word_ids", "input_mask",
                                                           "input_type_ids") else tf.int32)
                    for k, v in inputs.items()}}
            try:
                out[signature] = {{k: plain(v) for k, v in
                                  loaded.signatures[signature](**feed).items()}}
            except tf.errors.InvalidArgumentError as e:
                out[signature] = {{"error": e.message}}
        out["metadata"] = {{k: plain(v) for k, v in loaded.metadata().items()}}
        out["text_ops"] = text_ops[name]
        out["warmup"] = []
        for signature, inputs in call.get("warmup", []):  # TF Serving's replay
            outputs = loaded.signatures[signature](**{{
                k: tf.constant(value, tf.string if dtype == "string" else tf.int32)
                for k, (dtype, value) in inputs.items()}})
            out["warmup"].append([signature, sorted(outputs),
                                  sorted({{int(v.shape[0]) for v in outputs.values()}})])
        results[name] = out
    json.dump(results, open(sys.argv[2], "w"))
""")


def _warmup(path):
    """The warm-up file's requests as JSON: [signature, {input: [dtype, nested list]}]."""
    from official_bert.serving import base

    def plain(value):
        if value.dtype == object:
            return ["string", np.vectorize(lambda b: b.decode(), otypes=[object])(value).tolist()]
        return ["int32", value.tolist()]

    return [[name, {k: plain(v) for k, v in inputs.items()}]
            for name, inputs in base.read_warmup_requests(path)]


@pytest.fixture(scope="module")
def served(exports, tmp_path_factory):
    """Every export called in one fresh process without the project: raw text,
    ids, and the warm-up file's requests replayed."""
    tmp = tmp_path_factory.mktemp("fresh")
    calls = {}
    for name, case in exports.items():
        calls[name] = {"dir": case["dir"], "signatures": {
            "serving_default": case["text"],
            "serve_ids": {k: np.asarray(v).tolist() for k, v in case["ids"].items()}},
            "warmup": _warmup(case["dir"])}
    calls["ner_over_limit"] = {"dir": exports["ner"]["dir"], "signatures": {
        "serving_default": {"text": ["a b"] * (NER_MAX_BATCH + 1)}}}
    (tmp / "calls.json").write_text(json.dumps(calls), encoding="utf-8")
    (tmp / "loader.py").write_text(LOADER.format(repo=str(REPO_ROOT)))
    result = subprocess.run([sys.executable, str(tmp / "loader.py"), str(tmp / "calls.json"),
                             str(tmp / "out.json")], cwd=str(tmp), env=ENV,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads((tmp / "out.json").read_text(encoding="utf-8"))


# --- layout ---------------------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_tf_serving_layout(exports, task):
    from official_bert.errors import UserError
    from official_bert.serving import versions

    path = exports[task]["dir"]
    parent, version = os.path.split(path)
    assert version.isdigit() and int(version) >= 1_700_000_000  # seconds since the epoch
    assert os.listdir(parent) == [version]  # no staging directory left behind
    assert set(os.listdir(path)) >= {"saved_model.pb", "variables", "assets", "assets.extra"}
    assert os.listdir(os.path.join(path, "assets")) == ["vocab.txt"]
    vocab = open(os.path.join(path, "assets", "vocab.txt"), encoding="utf-8").read()
    assert vocab.splitlines() == VOCAB
    assert versions.latest_version_dir(parent) == path
    # The next export is served after this one; an existing version is never overwritten.
    assert int(os.path.basename(versions.version_dir(parent))) > int(version)
    with pytest.raises(UserError, match="never overwrites"):
        versions.version_dir(parent, int(version))


@pytest.mark.parametrize("task", TASKS)
def test_export_stores_each_weight_once(exports, task):
    """The SavedModel's checkpoint holds the model's weights once: its float
    variables add up to the model's parameter count (a Keras wrapper variable saved
    beside the tf.Variable it wraps would double it, `base.Untracked`). Besides
    them only bookkeeping: the object graph and the dropout layers' int64 seeds."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(os.path.join(exports[task]["dir"], "variables",
                                                   "variables"))
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    size = {name: int(np.prod(shape)) for name, shape in shapes.items()}
    weights = sum(n for name, n in size.items() if dtypes[name].is_floating)
    params = exports[task]["params"]
    assert weights == params
    assert {dtypes[name] for name in size if not dtypes[name].is_floating} <= {tf.int64,
                                                                                  tf.string}
    assert sum(size.values()) <= 1.01 * params


TEXT_OPS = ["NormalizeUTF8", "RegexSplitWithOffsets", "WordpieceTokenizeWithOffsets"]


@pytest.mark.parametrize("task", TASKS)
def test_only_the_text_ops_tf_serving_links(served, task):
    """The graph's ops that plain TensorFlow lacks (found in the fresh process before
    tensorflow_text is imported) are three long-standing tensorflow-text ops, which
    TF Serving's model server links; docs/serve.md names them."""
    assert served[task]["text_ops"] == TEXT_OPS


# --- saved_model_cli (TF1 session loading, as TF Serving) -------------------------------

SAVED_MODEL_CLI = textwrap.dedent("""
    import contextlib, io, json, sys
    import tensorflow_text  # noqa: F401  (the text ops, which TF Serving's server links)
    from tensorflow.python.tools import saved_model_cli
    for args in json.loads(sys.argv[1]):
        sys.argv = ["saved_model_cli"] + args
        out = io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out):
            try:
                saved_model_cli.main()
            except SystemExit as e:
                code = e.code or 0
        print(json.dumps({"args": args, "code": code, "stdout": out.getvalue()}))
""")


def _input_exprs(ids):
    return ";".join(f"{k}={np.asarray(v).tolist()}" for k, v in ids.items())


@pytest.fixture(scope="module")
def saved_model_cli(exports, tmp_path_factory):
    """task → (`saved_model_cli show --all`, `run --signature_def serve_ids` on the
    first two rows, the run's --outdir), both in one process (its `main`, once per
    command line)."""
    tmp = tmp_path_factory.mktemp("cli")
    done = {}

    def run(task):
        if task not in done:
            path = exports[task]["dir"]
            ids = {k: np.asarray(v)[:2] for k, v in exports[task]["ids"].items()}
            commands = [["show", "--dir", path, "--all"],
                        ["run", "--dir", path, "--tag_set", "serve", "--signature_def",
                         "serve_ids", "--input_exprs", _input_exprs(ids), "--outdir",
                         str(tmp / task), "--overwrite"]]
            result = processes.run(
                [sys.executable, "-c", SAVED_MODEL_CLI, json.dumps(commands)], cwd=str(tmp),
                env=ENV, capture_output=True, text=True, timeout=600)
            assert result.returncode == 0, result.stderr[-4000:]
            show, ran = [json.loads(line) for line in result.stdout.splitlines()
                         if line.startswith("{")]
            done[task] = (show, ran, tmp / task)
        return done[task]

    return run


# The main task and the most intricate graph in the default run; all in the slow one.
CLI_TASKS = ["classification", "squad_v2"] + [
    pytest.param(task, marks=pytest.mark.slow) for task in TASKS
    if task not in ("classification", "squad_v2")]


@pytest.mark.parametrize("task", CLI_TASKS)
def test_saved_model_cli_show_and_run(served, saved_model_cli, task):
    show, ran, outdir = saved_model_cli(task)
    assert show["code"] == 0, show
    assert "signature_def['serving_default']" in show["stdout"]
    assert "signature_def['serve_ids']" in show["stdout"]
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        assert f"inputs['{name}'] tensor_info:" in show["stdout"]
    assert ran["code"] == 0, ran
    # The TF1 session's answers are those of tf.saved_model.load (the fresh process).
    expected = served[task]["serve_ids"]
    for key, value in expected.items():
        got = np.load(outdir / f"{key}.npy", allow_pickle=True)
        if got.dtype == object:
            assert [x.decode() for x in got.ravel()] == list(np.ravel(value[:2])), key
        else:
            np.testing.assert_allclose(got, np.asarray(value)[:2], atol=1e-5, err_msg=key)


# --- a fresh process without the project, against the checkpoint's predictions ---------


def test_regression_served(exports, served):
    """num_classes=1: `score` (the raw output) is the only output, from raw text
    (a single-sentence export: text_a only) and from ids."""
    expected = exports["regression"]["expected"]["score"]
    # A random encoder's pooled vectors hardly differ, but the scores differ between
    # the texts by far more than the tolerance: a wrong row would be caught.
    assert np.ptp(expected) > 100 * 1e-5
    for signature in ("serving_default", "serve_ids"):
        out = served["regression"][signature]
        assert sorted(out) == ["score"]
        np.testing.assert_allclose(out["score"], expected, atol=1e-5)
    metadata = served["regression"]["metadata"]
    assert metadata["labels"] == [] and metadata["pair"] is False
    assert metadata["text_inputs"] == ["text_a"]


def test_classification_served(exports, served):
    expected = exports["classification"]["expected"]
    for signature in ("serving_default", "serve_ids"):
        out = served["classification"][signature]
        np.testing.assert_allclose(out["probabilities"], expected["probabilities"], atol=1e-5)
        assert out["label"] == expected["label"]
    assert len(set(expected["label"])) > 1  # the label check could fail
    metadata = served["classification"]["metadata"]
    assert metadata["labels"] == LABELS and metadata["pair"] is True
    assert metadata["task"] == "classification" and metadata["seq_length"] == SEQ


@pytest.mark.parametrize("task", ["squad_v1", "squad_v2"])
def test_squad_served(exports, served, task):
    case, out = exports[task], served[task]["serving_default"]
    assert out["start_char"][-1] == -1 and out["answer"][-1] == ""  # empty context
    compared = 0
    for i, p in case["expected"]["predictions"].items():
        context = CONTEXTS[i]
        assert (out["start_char"][i], out["end_char"][i]) == (p.start_char, p.end_char)
        assert out["score"][i] == pytest.approx(p.best_score, abs=1e-4)
        assert out["start_logit"][i] + out["end_logit"][i] == pytest.approx(p.best_score,
                                                                            abs=1e-4)
        best = context[p.start_char:p.end_char]
        if task == "squad_v2":
            assert out["best_answer"][i] == best
            assert out["score_diff"][i] == pytest.approx(p.score_diff, abs=1e-4)
            # The tuned threshold is baked in: the same no-answer decisions.
            assert out["is_impossible"][i] == (p.text == "")
            assert out["answer"][i] == ("" if p.text == "" else best)
        else:
            assert out["answer"][i] == best
        compared += 1
    assert compared == 3
    if task == "squad_v2":
        assert 0 < sum(out["is_impossible"][:3]) < 3  # the threshold decides both ways
        assert served[task]["metadata"]["null_score_diff_threshold"] == pytest.approx(
            case["expected"]["threshold"])
    ids_out = served[task]["serve_ids"]
    np.testing.assert_allclose(ids_out["start_logits"], case["expected"]["start_logits"],
                               atol=1e-5)
    np.testing.assert_allclose(ids_out["end_logits"], case["expected"]["end_logits"], atol=1e-5)
    mask = np.asarray(case["ids"]["input_mask"])
    types = np.asarray(case["ids"]["input_type_ids"])
    for row, (start, end) in enumerate(zip(ids_out["start_index"], ids_out["end_index"])):
        length = mask[row].sum()
        if start >= 0:  # inside the context (type 1, before the last [SEP])
            assert types[row, start] == 1 and start <= end < length - 1


@pytest.mark.slow
def test_squad_v2_run_exports_its_tuned_threshold(tmp_path):
    """`run_squad.py --version_2_with_negative --tune_threshold --do_predict
    --export_dir` on a tiny run: the export's no-answer decisions are made with the
    threshold the run tuned (eval_results.json), so the served answers are
    predictions.json's (which the run wrote with that threshold)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from data_prep import squad
    from official_bert import checkpoints
    from test_run_squad import COMMON, run_cli, squad_file

    checkpoints.save_checkpoint(_encoder(9), str(tmp_path / "ckpt"),
                                vocab_file=_vocab_file(tmp_path))
    data = squad_file(tmp_path / "v2.json", version_2=True)
    out = tmp_path / "out"
    run_cli("--do_train", "--max_train_examples=2", "--train_batch_size=2",
            f"--train_file={data}", "--do_predict", "--version_2_with_negative",
            "--tune_threshold", f"--init_checkpoint={tmp_path / 'ckpt'}",
            f"--predict_file={data}", f"--output_dir={out}",
            f"--export_dir={tmp_path / 'export'}", "--export_version=1", *COMMON)
    threshold = json.loads((out / "eval_results.json").read_text())["tuned_threshold"]
    predictions = json.loads((out / "predictions.json").read_text(encoding="utf-8"))
    odds = json.loads((out / "null_odds.json").read_text())
    loaded = tf.saved_model.load(str(tmp_path / "export" / "1"))
    assert float(loaded.metadata()["null_score_diff_threshold"]) == pytest.approx(threshold,
                                                                                 abs=1e-6)
    questions = [(qa["id"], qa["question"], p["context"])
                 for p in json.loads(open(data).read())["data"][0]["paragraphs"]
                 for qa in p["qas"]]
    served = {k: v.numpy() for k, v in loaded.signatures["serving_default"](
        question=tf.constant([q for _, q, _ in questions]),
        context=tf.constant([c for _, _, c in questions])).items()}
    nbest = json.loads((out / "nbest_predictions.json").read_text(encoding="utf-8"))
    compared = 0
    for i, (qas_id, _, _) in enumerate(questions):
        assert served["score_diff"][i] == pytest.approx(odds[qas_id], abs=1e-4), qas_id
        impossible = bool(served["is_impossible"][i])
        assert impossible == (served["score_diff"][i] > threshold), qas_id
        best = served["best_answer"][i].decode()
        assert " ".join(squad.split_doc_tokens(best)[0]) == next(
            e["text"] for e in nbest[qas_id] if e["text"]), qas_id
        if abs(odds[qas_id] - threshold) < 1e-4:
            continue  # the question the threshold was tuned on: float rounding decides
        assert impossible == (predictions[qas_id] == ""), qas_id
        compared += 1
    assert compared >= len(questions) - 1
    # The decisions are the tuned threshold's, not the default 0.0's.
    assert any(served["is_impossible"][i] and odds[q] <= 0.0
               for i, (q, _, _) in enumerate(questions))


def test_multiple_choice_served(exports, served):
    expected = exports["multiple_choice"]["expected"]
    for signature in ("serving_default", "serve_ids"):
        out = served["multiple_choice"][signature]
        np.testing.assert_allclose(out["probabilities"], expected["probabilities"], atol=1e-5)
        np.testing.assert_allclose(out["logits"], expected["logits"], atol=1e-5)
        assert out["choice"] == expected["logits"].argmax(axis=1).tolist()


def test_ner_served(exports, served):
    expected = exports["ner"]["expected"]
    out = served["ner"]["serving_default"]
    assert out["num_words"] == [len(t.split()) for t in NER_TEXT]
    for i, text in enumerate(NER_TEXT):
        n = len(text.split())
        assert out["words"][i][:n] == text.split()
        assert out["tags"][i][:n] == expected["tags"][i]  # aligned to the words
        assert all(t == "" for t in out["tags"][i][n:])
    assert len({t for tags in expected["tags"] for t in tags}) > 1
    assert served["ner"]["serve_ids"]["tags"] == expected["token_tags"]


def test_encoder_served(exports, served):
    expected = exports["encoder"]["expected"]
    for signature in ("serving_default", "serve_ids"):
        out = served["encoder"][signature]
        np.testing.assert_allclose(out["pooled_output"], expected["pooled_output"], atol=1e-5)
        sequence = np.asarray(out["sequence_output"])
        mask = expected["ids"]["input_mask"]
        for row in range(len(ENCODER_TEXT)):
            n = mask[row].sum()
            np.testing.assert_allclose(sequence[row, :n], expected["sequence_output"][row, :n],
                                       atol=1e-5)
    text = served["encoder"]["serving_default"]
    width = len(text["input_word_ids"][0])
    np.testing.assert_array_equal(text["input_word_ids"],
                                  expected["ids"]["input_word_ids"][:, :width])


def _xla_functions(version_dir):
    """Names of the SavedModel's functions marked for XLA compilation."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(version_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    library = proto.meta_graphs[0].graph_def.library
    return [f.signature.name for f in library.function
            if f.attr.get("_XlaMustCompile") and f.attr["_XlaMustCompile"].b]


@pytest.mark.slow  # 10 s or more here
def test_encoder_export_with_xla_answers_as_without(tmp_path):
    # jit_compile=True (ExportModule): the model's call is one XLA function in the
    # SavedModel, and both signatures answer as the plain export does.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from official_bert.serving import encoder as encoder_serving
    from official_bert.text import tokenization

    encoder = _encoder(5)
    plain = encoder_serving.export_encoder(encoder, VOCAB, True, SEQ, str(tmp_path / "plain"))
    xla = encoder_serving.export_encoder(encoder, VOCAB, True, SEQ, str(tmp_path / "xla"),
                                         jit_compile=True)
    assert _xla_functions(xla) and not _xla_functions(plain)
    ids = _pack(tokenization.FullTokenizer(_vocab_file(tmp_path), True), ENCODER_TEXT)
    answers = []
    for version in (plain, xla):
        loaded = tf.saved_model.load(version)
        answers.append((loaded.signatures["serve_ids"](**{k: tf.constant(v)
                                                          for k, v in ids.items()}),
                        loaded.signatures["serving_default"](text=tf.constant(ENCODER_TEXT))))
    for signature in (0, 1):
        for key in ("pooled_output", "sequence_output"):
            expected = answers[0][signature][key].numpy()
            assert np.abs(expected).max() > 0.1
            np.testing.assert_allclose(answers[1][signature][key].numpy(), expected, atol=1e-5)


def _vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    return str(path)


def test_pretraining_served(exports, served):
    expected = exports["pretraining"]["expected"]
    for signature in ("serving_default", "serve_ids"):
        out = served["pretraining"][signature]
        assert out["num_masks"] == [len(p) for p in expected["positions"]]
        np.testing.assert_allclose(out["next_sentence_probabilities"], expected["next_sentence"],
                                   atol=1e-5)
        for row, positions in enumerate(expected["positions"]):
            assert out["masked_lm_positions"][row][:len(positions)] == [int(p) for p in positions]
            for m in range(len(positions)):
                probabilities = expected["probabilities"][row, m]
                best = np.argsort(-probabilities, kind="stable")[:5]
                assert out["top_ids"][row][m] == best.tolist()
                np.testing.assert_allclose(out["top_probabilities"][row][m],
                                           probabilities[best], atol=1e-5)
                assert out["top_tokens"][row][m] == [VOCAB[i] for i in best]
            assert all(i == -1 for m in out["top_ids"][row][len(positions):] for i in m)


# --- input checks -------------------------------------------------------------------------


def test_batch_above_the_limit_is_refused(served):
    error = served["ner_over_limit"]["serving_default"]["error"]
    assert f"max_batch_size ({NER_MAX_BATCH})" in error
    assert f"send at most {NER_MAX_BATCH} per request" in error


def test_non_vector_string_input_is_refused(exports):
    """TF Serving feeds tensors to the graph without checking them against the
    signature; the checks in the graph refuse a [batch, 1] column, a 2 x 2 matrix
    (as many rows as text_b has strings, so only the rank is wrong) or a scalar. The
    TF1 session's C-level feed (as TF Serving's) is used, not Python's, which would
    refuse the shape itself."""
    import tensorflow as tf

    path = exports["classification"]["dir"]
    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        signature = meta_graph.signature_def["serving_default"]
        feeds = {name: graph.get_tensor_by_name(info.name)
                 for name, info in signature.inputs.items()}
        fetch = graph.get_tensor_by_name(signature.outputs["probabilities"].name)

        def run(text_a, text_b):
            values = {feeds["text_a"]: np.asarray(text_a, object),
                      feeds["text_b"]: np.asarray(text_b, object)}
            return session._call_tf_sessionrun(  # TF Serving's path: no Python shape check
                None, {t._as_tf_output(): v for t, v in values.items()},
                [fetch._as_tf_output()], [], None)

        assert np.asarray(run(["a movie"], ["good"])[0]).shape == (1, 3)
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"text_a must be a vector of strings \[batch\]"):
            run([["a movie"], ["a film"]], ["good", "bad"])
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"text_a must be a vector of strings \[batch\].* rank\] \[2\]"):
            run([["a movie", "a film"], ["good", "bad"]], ["good", "bad"])
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"text_b must be a vector of strings \[batch\]"):
            run(["a movie"], "good")
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="text_a and text_b must hold the same number of examples"):
            run(["a movie", "a film"], ["good"])
    # Through tf.saved_model.load (TF2) too, which does not check the shape either.
    signature = tf.saved_model.load(path).signatures["serving_default"]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"text_a must be a vector of strings \[batch\]"):
        signature(text_a=tf.constant([["a"]]), text_b=tf.constant(["b"]))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"text_a must be a vector of strings \[batch\]"):
        signature(text_a=tf.constant([["a", "b"], ["c", "d"]]), text_b=tf.constant(["e", "f"]))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"text_b must be a vector of strings \[batch\]"):
        signature(text_a=tf.constant(["a"]), text_b=tf.constant("b"))


# --- warm-up ----------------------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_warmup_requests_replay(exports, served, task):
    """The warm-up file parses as PredictionLog records and each request runs
    through its signature (replayed in the fresh process), as TF Serving does."""
    from official_bert.serving import base

    requests = base.read_warmup_requests(exports[task]["dir"])
    assert [name for name, _ in requests] == ["serving_default", "serve_ids"] * 2
    limit = NER_MAX_BATCH if task == "ner" else base.MAX_BATCH_SIZE
    sizes = [min(b, limit) for b in base.WARMUP_BATCH_SIZES for _ in range(2)]
    assert [len(next(iter(inputs.values()))) for _, inputs in requests] == sizes
    replayed = served[task]["warmup"]
    assert [r[0] for r in replayed] == [name for name, _ in requests]
    for (name, outputs, batches), size in zip(replayed, sizes):
        assert outputs == sorted(served[task][name])  # every output of the signature
        assert batches == [size], (name, batches)


# One request as the official protos serialize it (tensorflow-serving-api 2.21.0:
# PredictionLog(predict_log=PredictLog(request=PredictRequest(model_spec=ModelSpec(
# name="bert", signature_name="serving_default"), inputs=...))).SerializeToString(
# deterministic=True), the inputs' TensorProtos from tf.make_tensor_proto).
GOLDEN_INPUTS = {"text_b": np.asarray([b"a film", "caf\u00e9".encode()], object),
                 "input_ids": np.asarray([[101, 300], [102, 0]], np.int32)}
GOLDEN_RECORD = (
    "326b0a690a170a04626572741a0f73657276696e675f64656661756c74122b0a09696e7075745f69647312"
    "1e0803120812020802120208022210650000002c010000660000000000000012210a06746578745f621217"
    "08071204120208024206612066696c6d4205636166c3a9")


def test_warmup_record_is_the_official_encoding():
    """Known answer: the encoder writes the bytes tensorflow-serving-api's protos
    write (recorded once with them), and the decoder reads them back."""
    from official_bert.serving import prediction_log

    record = prediction_log.encode("serving_default", GOLDEN_INPUTS, model_name="bert")
    assert record.hex() == GOLDEN_RECORD
    name, signature, inputs = prediction_log.decode(bytes.fromhex(GOLDEN_RECORD))
    assert (name, signature) == ("bert", "serving_default")
    assert sorted(inputs) == ["input_ids", "text_b"]
    assert inputs["input_ids"].dtype == np.int32
    np.testing.assert_array_equal(inputs["input_ids"], GOLDEN_INPUTS["input_ids"])
    assert inputs["text_b"].tolist() == GOLDEN_INPUTS["text_b"].tolist()
    # Without a model name, ModelSpec holds the signature name alone (field 3).
    assert prediction_log.encode("serve_ids", {}).hex() == \
        "320f0a0d0a0b1a0973657276655f696473"
    with pytest.raises(prediction_log.DecodeError, match="runs past the end"):
        prediction_log.decode(bytes.fromhex(GOLDEN_RECORD)[:-3])


def test_warmup_file_without_the_serving_api(tmp_path, monkeypatch):
    """The warm-up file is written and read with tensorflow_serving not importable;
    a record that is not a PredictionLog request is a BadFileError naming it."""
    import tensorflow as tf

    from official_bert.errors import BadFileError
    from official_bert.serving import base

    for name in [n for n in sys.modules if n.split(".")[0] == "tensorflow_serving"] + [
            "tensorflow_serving"]:
        monkeypatch.setitem(sys.modules, name, None)
    path = base.write_warmup_requests(str(tmp_path), [("serving_default", GOLDEN_INPUTS),
                                                      ("serve_ids", {"ids": np.eye(2)})])
    assert path == str(tmp_path / "assets.extra" / base.WARMUP_FILE)
    (first, inputs), (second, ids) = base.read_warmup_requests(str(tmp_path))
    assert (first, second) == ("serving_default", "serve_ids")
    assert inputs["text_b"].tolist() == GOLDEN_INPUTS["text_b"].tolist()
    np.testing.assert_array_equal(ids["ids"], np.eye(2))
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(bytes.fromhex(GOLDEN_RECORD))
        writer.write(b"\x0a\x03abc")  # field 1 (log_metadata): no predict_log
    with pytest.raises(BadFileError, match=r"tf_serving_warmup_requests record 1 is not a "
                                           r"warm-up request"):
        base.read_warmup_requests(str(tmp_path))


def test_warmup_file_parses_with_the_official_protos(exports):
    """Where tensorflow-serving-api is installed, its PredictionLog parses every
    record of an export's warm-up file into the requests `read_warmup_requests` gives."""
    prediction_log_pb2 = pytest.importorskip(
        "tensorflow_serving.apis.prediction_log_pb2",
        reason="tensorflow-serving-api is not installed (pip install -e '.[serving]'); "
               "test_warmup_record_is_the_official_encoding checks the bytes without it")
    import tensorflow as tf

    from official_bert.serving import base

    path = exports["multiple_choice"]["dir"]
    ours = base.read_warmup_requests(path)
    records = list(tf.data.TFRecordDataset(
        os.path.join(path, "assets.extra", base.WARMUP_FILE)).as_numpy_iterator())
    assert len(records) == len(ours) == 4
    for record, (signature, inputs) in zip(records, ours):
        request = prediction_log_pb2.PredictionLog.FromString(record).predict_log.request
        assert request.model_spec.signature_name == signature
        assert sorted(request.inputs) == sorted(inputs)
        for key, value in request.inputs.items():
            np.testing.assert_array_equal(tf.make_ndarray(value), inputs[key])


# --- the ids-only copy (`bert export-ids-only`), for binaries without the text ops -------


@pytest.fixture(scope="module")
def ids_only(exports, tmp_path_factory):
    """`bert export-ids-only` on the classifier's TF Serving directory (its latest
    version), run as a user runs it; returns the copy's version directory."""
    tmp = tmp_path_factory.mktemp("ids_only")
    source = os.path.dirname(exports["classification"]["dir"])
    result = processes.run(
        [sys.executable, "-m", "official_bert.commands.cli", "export-ids-only",
         f"--saved_model={source}", f"--export_dir={tmp / 'ids'}", "--export_version=7"],
        cwd=str(REPO_ROOT), env=dict(ENV, PYTHONPATH=str(REPO_ROOT)), capture_output=True,
        text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    path = str(tmp / "ids" / "7")
    assert result.stdout.strip().splitlines()[-1] == f"serving\t{path}"
    return path


def test_ids_only_copy_loads_without_tensorflow_text(exports, ids_only, tmp_path):
    from official_bert.serving import base

    path = ids_only
    assert os.listdir(os.path.dirname(path)) == ["7"]  # nothing staged left behind
    vocab = open(os.path.join(path, "assets", "vocab.txt"), encoding="utf-8").read()
    assert vocab.splitlines() == VOCAB  # for the clients, which tokenize themselves
    ids = exports["classification"]["ids"]
    script = textwrap.dedent(f"""
        import json, sys
        sys.modules["tensorflow_text"] = None  # a server without the text ops
        import tensorflow as tf
        loaded = tf.saved_model.load({path!r})
        out = loaded.signatures["serving_default"](**{{k: tf.constant(v) for k, v in
                                                       json.loads(sys.argv[1]).items()}})
        print(json.dumps(out["probabilities"].numpy().tolist()))
    """)
    result = subprocess.run([sys.executable, "-c", script,
                             json.dumps({k: v.tolist() for k, v in ids.items()})],
                            cwd=str(tmp_path), env=ENV, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose(json.loads(result.stdout.strip().splitlines()[-1]),
                               exports["classification"]["expected"]["probabilities"],
                               atol=1e-5)
    assert [name for name, _ in base.read_warmup_requests(path)] == \
        ["serve_ids", "serve_ids", "serving_default", "serving_default"]


def test_export_ids_only_refuses_bad_input(exports, tmp_path):
    """One clear error before anything is loaded or written: a path that is not an
    export, a copy into the source's own TF Serving directory (the copy would be
    served as the raw-text model's newest version) or into its version."""
    from official_bert.commands import export_ids_only
    from official_bert.errors import UserError

    version = exports["classification"]["dir"]
    source = os.path.dirname(version)
    with pytest.raises(UserError, match=r"--saved_model=.*absent is not an export"):
        export_ids_only.export(str(tmp_path / "absent"), str(tmp_path / "ids"))
    for target in (source, version, os.path.join(version, "ids")):
        with pytest.raises(UserError, match="--saved_model's own directory"):
            export_ids_only.export(source, target)
    with pytest.raises(UserError, match="--export_dir is required"):
        export_ids_only.export(source, None)
    with pytest.raises(UserError, match="--export_version must be positive"):
        export_ids_only.export(source, str(tmp_path / "ids"), 0)
    assert os.listdir(source) == [os.path.basename(version)]
    assert not os.path.exists(tmp_path / "ids")
    # A copy of the export whose saved_model.pb was cut short: named, nothing written.
    damaged = tmp_path / "damaged" / "1"
    shutil.copytree(version, damaged)
    graph = damaged / "saved_model.pb"
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    with pytest.raises(UserError, match=f"{re.escape(str(graph))} is truncated or corrupt"):
        export_ids_only.export(str(damaged.parent), str(tmp_path / "ids"))
    assert not os.path.exists(tmp_path / "ids")


def test_version_on_an_object_store_gets_saved_model_pb_last(ids_only, monkeypatch):
    """On a file system with a scheme (here TensorFlow's ram://), where a directory
    is renamed file by file, the version directory appears without saved_model.pb,
    which comes last, alone: a polling server cannot load half a version."""
    import tensorflow as tf

    from official_bert import io
    from official_bert.serving import base

    renames, rename = [], io.rename

    def recording(source, destination, overwrite=False):
        renames.append((source, destination,
                        tf.io.gfile.exists(io.join(source, "saved_model.pb"))))
        rename(source, destination, overwrite)

    monkeypatch.setattr(io, "rename", recording)
    path = base.export_ids_only(ids_only, "ram://ids_only_copy", version=3)
    assert path == "ram://ids_only_copy/3"
    assert [destination for _, destination, _ in renames][1:] == [
        path, path + "/saved_model.pb"]
    assert renames[1][2] is False  # the directory moved without its saved_model.pb
    assert tf.io.gfile.listdir("ram://ids_only_copy") == ["3"]  # nothing staged left
    assert {"saved_model.pb", "variables", "assets.extra"} <= set(tf.io.gfile.listdir(path))
    assert list(tf.saved_model.load(path).signatures) == ["serving_default", "serve_ids"]


# --- the real `saved_model_cli` binary ---------------------------------------------------


def _real_saved_model_cli(*args, cwd):
    binary = shutil.which("saved_model_cli")
    if binary is None:
        pytest.skip("the saved_model_cli binary is not on PATH")
    return subprocess.run([binary, *args], cwd=str(cwd), env=ENV, capture_output=True,
                          text=True, timeout=300)


def test_real_saved_model_cli_shows_any_export(exports, tmp_path):
    """The binary as installed (no tensorflow_text imported) reads any export's
    signatures: `show` does not load the graph's ops."""
    result = _real_saved_model_cli("show", "--dir", exports["squad_v2"]["dir"], "--all",
                                   cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    for signature in ("serving_default", "serve_ids"):
        assert f"signature_def['{signature}']:" in result.stdout
    for name in ("question", "context", "input_word_ids", "input_mask", "input_type_ids",
                 "is_impossible", "start_logits"):
        assert f"['{name}'] tensor_info:" in result.stdout, name


@pytest.mark.slow  # 10 s or more here
def test_real_saved_model_cli_runs_the_ids_only_copy(exports, served, ids_only, tmp_path):
    """`saved_model_cli run` as installed cannot load the raw export (its graph has
    the tensorflow-text ops, which the binary does not register, even for serve_ids);
    it runs `bert export-ids-only`'s copy and answers as the full export's serve_ids."""
    ids = {k: np.asarray(v)[:2] for k, v in exports["classification"]["ids"].items()}
    flags = ["--tag_set", "serve", "--signature_def", "serve_ids",
             "--input_exprs", _input_exprs(ids), "--outdir", str(tmp_path / "out")]
    result = _real_saved_model_cli("run", "--dir", ids_only, *flags, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = served["classification"]["serve_ids"]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "probabilities.npy"),
                               np.asarray(expected["probabilities"])[:2], atol=1e-6)
    labels = np.load(tmp_path / "out" / "label.npy", allow_pickle=True)
    assert [x.decode() for x in labels] == expected["label"][:2]
    raw = _real_saved_model_cli("run", "--dir", exports["classification"]["dir"], *flags,
                                cwd=tmp_path)
    assert raw.returncode != 0
    assert "Op type not registered 'NormalizeUTF8'" in raw.stderr


# --- the TF-Hub-style pair (`bert export-encoder`), and the edge formats -----------------


def _edge_extra():
    try:
        import onnxruntime  # noqa: F401
        import tf2onnx  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def encoder_export(tmp_path_factory):
    """`bert export-encoder` (its `export`) on a tiny checkpoint: the pair and the TF
    Serving encoder; and an encoder SavedModel with a masked-LM head (`encoder.mlm`)."""
    import tensorflow as tf

    from official_bert import checkpoints
    from official_bert.modeling import heads
    from official_bert.serving import encoder as encoder_serving
    from official_bert.serving import hub
    from official_bert.text import tokenization

    root = tmp_path_factory.mktemp("encoder_export")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    encoder = _encoder(7)
    checkpoints.save_checkpoint(encoder, str(root / "ckpt"), vocab_file=str(vocab))
    written = encoder_serving.export_checkpoint(ExportEncoderConfig(
        init_checkpoint=str(root / "ckpt"), output_dir=str(root / "out"),
        export_dir=str(root / "serving"), export_version=3, max_seq_length=SEQ))
    pretrainer = heads.BertPretrainer(encoder)
    pretrainer._ensure_built()
    _scale(pretrainer.mlm_transform, 7)
    mlm_dir = hub.export_encoder(encoder, str(root / "with_mlm"), pretrainer)

    tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
    ids = _pack(tokenizer, TEXT_A[:4])
    pair_ids = _pack(tokenizer, TEXT_A[:4], TEXT_B[:4], seq=12)
    out = encoder(ids, training=False)
    positions = np.asarray([[1, 2], [3, 1], [2, 2], [1, 4]], np.int32)
    mlm = pretrainer({**ids, "masked_lm_positions": positions}, training=False)
    return dict(root=root, written=written, mlm_dir=mlm_dir, ids=ids, pair_ids=pair_ids,
                positions=positions, expected={
                    "pooled_output": out["pooled_output"].numpy(),
                    "sequence_output": out["sequence_output"].numpy(),
                    "encoder_outputs": [x.numpy() for x in out["encoder_outputs"]],
                    "mlm_logits": mlm["masked_lm_logits"].numpy()},
                tf_version=tf.__version__)


HUB_USER = WITHOUT_THE_PROJECT + textwrap.dedent("""
    import json
    import numpy as np
    import keras
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the preprocessor's ops)

    args = json.loads(sys.argv[1])
    preprocessor = tf.saved_model.load(args["preprocessor"])
    encoder = tf.saved_model.load(args["encoder"])
    texts = tf.constant(args["texts_a"])
    out = {"ids": {k: v.numpy().tolist() for k, v in preprocessor(texts).items()}}
    segments = [preprocessor.tokenize(texts), preprocessor.tokenize(tf.constant(args["texts_b"]))]
    out["pair_ids"] = {k: v.numpy().tolist() for k, v in
                       preprocessor.bert_pack_inputs(segments, seq_length=12).items()}
    out["vocab_file"] = open(preprocessor.vocab_file.asset_path.numpy().decode()).read()
    out["do_lower_case"] = bool(preprocessor.do_lower_case.numpy())
    encoded = encoder({k: tf.constant(v) for k, v in out["ids"].items()})
    out["encoded"] = {"pooled_output": encoded["pooled_output"].numpy().tolist(),
                      "sequence_output": encoded["sequence_output"].numpy().tolist(),
                      "encoder_outputs": [x.numpy().tolist() for x in encoded["encoder_outputs"]]}
    out["has_mlm"] = hasattr(encoder, "mlm")

    class HubEncoder(keras.layers.Layer):
        # A Keras 3 layer calling the loaded encoder; its variables are the loaded ones.
        def __init__(self, loaded, **kwargs):
            super().__init__(**kwargs)
            self.loaded = loaded

        def call(self, inputs, training=False):
            return self.loaded(inputs, training=training)["pooled_output"]

    keras.utils.set_random_seed(0)
    inputs = {k: keras.Input((None,), dtype="int32", name=k)
              for k in ("input_word_ids", "input_mask", "input_type_ids")}
    layer = HubEncoder(encoder)
    model = keras.Model(inputs, keras.layers.Dense(2, name="classifier")(layer(inputs)))
    batch = {k: np.asarray(v, np.int32) for k, v in out["ids"].items()}
    labels = np.asarray([1, 0, 1, 0])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.Adam(1e-3)
    variables = model.trainable_weights + list(encoder.trainable_variables)
    before = encoder.trainable_variables[0].numpy().copy()
    before_loss = float(loss_fn(labels, model(batch, training=False)))
    with tf.GradientTape() as tape:  # one fine-tuning step, dropout on
        loss = loss_fn(labels, model(batch, training=True))
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(grads, variables))
    losses = [before_loss, float(loss_fn(labels, model(batch, training=False)))]
    out["fine_tune"] = {"losses": losses, "none_gradients": sum(g is None for g in grads),
                        "variables": len(variables),
                        "encoder_moved": float(np.abs(encoder.trainable_variables[0].numpy()
                                                      - before).max())}
    mlm = tf.saved_model.load(args["mlm_encoder"]).mlm
    mlm_out = mlm({**{k: tf.constant(v) for k, v in args["ids"].items()},
                   "masked_lm_positions": tf.constant(args["positions"])})
    out["mlm_logits"] = mlm_out["mlm_logits"].numpy().tolist()
    serving = tf.saved_model.load(args["serving"]).signatures  # --export_dir's version
    served_ids = serving["serve_ids"](**{k: tf.constant(v) for k, v in args["ids"].items()})
    out["serving"] = {
        "serve_ids": served_ids["pooled_output"].numpy().tolist(),
        "serving_default": serving["serving_default"](text=texts)["pooled_output"].numpy().tolist()}
    print(json.dumps(out))
""")


@pytest.mark.slow  # 10 s or more here
def test_hub_pair_in_a_fresh_keras_model(encoder_export):
    case = encoder_export
    written = case["written"]
    assert sorted(os.listdir(case["root"] / "out")) == ["encoder", "preprocessor"]
    assert written["serving"] == str(case["root"] / "serving" / "3")
    args = {"preprocessor": written["preprocessor"], "encoder": written["encoder"],
            "mlm_encoder": case["mlm_dir"], "serving": written["serving"],
            "texts_a": TEXT_A[:4], "texts_b": TEXT_B[:4],
            "ids": {k: v.tolist() for k, v in case["ids"].items()},
            "positions": case["positions"].tolist()}
    result = processes.run([sys.executable, "-c", HUB_USER, json.dumps(args)],
                           cwd=str(case["root"]), env=ENV, capture_output=True, text=True,
                           timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    # The preprocessor: FullTokenizer's ids, packed as the project packs them.
    for key, value in case["ids"].items():
        assert out["ids"][key] == value.tolist(), key
        assert out["pair_ids"][key] == case["pair_ids"][key].tolist(), key
    assert out["vocab_file"].splitlines() == VOCAB and out["do_lower_case"] is True
    # The encoder: the project's outputs to 1e-5.
    expected = case["expected"]
    for key in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(out["encoded"][key], expected[key], atol=1e-5, err_msg=key)
    for got, want in zip(out["encoded"]["encoder_outputs"], expected["encoder_outputs"]):
        np.testing.assert_allclose(got, want, atol=1e-5)
    # The TF Serving encoder (`--export_dir`), from the same checkpoint: raw text and ids.
    for signature in ("serving_default", "serve_ids"):
        np.testing.assert_allclose(out["serving"][signature], expected["pooled_output"],
                                   atol=1e-5, err_msg=signature)
    assert out["has_mlm"] is False  # the checkpoint has no masked-LM head
    np.testing.assert_allclose(out["mlm_logits"], expected["mlm_logits"], atol=1e-5)
    # A Keras 3 model around the loaded encoder fine-tunes: every variable gets a
    # gradient, the encoder's weights move, the loss falls.
    tune = out["fine_tune"]
    assert tune["none_gradients"] == 0 and tune["variables"] > 2
    assert tune["encoder_moved"] > 0
    assert tune["losses"][1] < tune["losses"][0]


def test_serving_dtype_is_checked_before_anything_is_written(tmp_path):
    from official_bert.errors import UserError
    from official_bert.serving import encoder as encoder_serving

    config = ExportEncoderConfig(
        init_checkpoint=str(tmp_path / "absent"), output_dir=str(tmp_path / "out"),
        serving_dtype="bfloat16")
    with pytest.raises(UserError, match="--serving_dtype needs --export_dir"):
        encoder_serving.export_checkpoint(config)
    with pytest.raises(UserError, match="--serving_dtype=float16: use one of float32, bfloat16"):
        encoder_serving.export_checkpoint(dataclasses.replace(
            config, serving_dtype="float16", export_dir=str(tmp_path / "serving")))
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "serving")


@pytest.mark.slow
def test_bfloat16_serving_export_stores_bfloat16_weights(encoder_export, tmp_path):
    """`bert export-encoder --serving_dtype=bfloat16`: the TF Serving export's
    matmul weights are bfloat16 variables (no float32 copy cast per request),
    LayerNorm's stay float32, and it answers as the float32 model to bfloat16's
    precision; without --export_dir the flag is refused."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from official_bert.errors import UserError
    from official_bert.serving import encoder as encoder_serving

    root = encoder_export["root"]
    config = ExportEncoderConfig(
        init_checkpoint=str(root / "ckpt"), output_dir=str(tmp_path / "out"),
        export_dir=str(tmp_path / "serving"), export_version=1, max_seq_length=SEQ,
        serving_dtype="bfloat16")
    version = encoder_serving.export_checkpoint(config)["serving"]
    loaded = tf.saved_model.load(version)
    signature = loaded.signatures["serve_ids"]
    dtypes = {v.name.split(":")[0]: v.dtype for v in signature.variables}
    kernels = [d for n, d in dtypes.items() if n.endswith("kernel")]
    norms = [d for n, d in dtypes.items() if "layer_norm" in n or "layernorm" in n.lower()]
    assert kernels and all(d == tf.bfloat16 for d in kernels)
    assert norms and all(d == tf.float32 for d in norms)
    ids = encoder_export["ids"]
    out = signature(**{k: tf.constant(v) for k, v in ids.items()})
    expected = encoder_export["expected"]
    assert out["sequence_output"].dtype == tf.float32
    np.testing.assert_allclose(out["pooled_output"].numpy(), expected["pooled_output"],
                               atol=0.05)
    assert np.abs(out["pooled_output"].numpy() - expected["pooled_output"]).max() > 0
    with pytest.raises(UserError, match="--serving_dtype needs --export_dir"):
        encoder_serving.export_checkpoint(dataclasses.replace(
            config, export_dir=None, output_dir=str(tmp_path / "out2")))


@pytest.mark.slow  # its fixture, an encoder export, takes 36 s here
def test_tflite_tensors_carry_the_names_tf_serving_serves(encoder_export, tmp_path):
    """TF Serving's TFLite runtime (`--prefer_tflite_model`, `model.tflite` in the version
    directory) ignores the flatbuffer's signatures and names `serving_default`'s inputs and
    outputs after the tensors, cutting the `:N` suffix (tflite_session.cc): each must be the
    signature's key, the two outputs distinct. The answers stay the encoder's."""
    from official_bert.serving import edge

    path = edge.to_tflite(str(encoder_export["root"] / "serving"), str(tmp_path / "model.tflite"))
    run = edge.tflite_runner(path)

    def served(details):
        return sorted(d["name"].split(":")[0] for d in details)

    assert served(run.interpreter.get_input_details()) == ["input_mask", "input_type_ids",
                                                           "input_word_ids"]
    assert served(run.interpreter.get_output_details()) == ["pooled_output", "sequence_output"]
    out = run(encoder_export["ids"])
    for key in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(out[key], encoder_export["expected"][key], atol=1e-4)


@pytest.mark.slow
def test_edge_formats_agree_with_tensorflow(encoder_export):
    """`bert export-encoder --edge_formats=tflite,onnx --quantize`: TFLite (fixed
    length) and ONNX (any length) agree with TensorFlow to 1e-4; the quantized
    variants run, within 0.1."""
    if not _edge_extra():
        pytest.skip("the edge extra is not installed (pip install -e '.[edge]': tf2onnx, "
                    "onnxruntime, ai-edge-litert)")
    from official_bert.serving import edge
    from official_bert.serving import encoder as encoder_serving

    root = encoder_export["root"]
    written = encoder_serving.export_checkpoint(ExportEncoderConfig(
        init_checkpoint=str(root / "ckpt"), output_dir=str(root / "edge"),
        max_seq_length=SEQ, edge_formats=["tflite", "onnx"], quantize=True))
    assert sorted(os.listdir(root / "edge")) == [
        "encoder", "encoder.onnx", "encoder.tflite", "encoder_dynamic_range.tflite",
        "encoder_int8.onnx", "preprocessor"]
    expected, ids = encoder_export["expected"], encoder_export["ids"]
    runners = {"tflite": edge.tflite_runner, "tflite_dynamic_range": edge.tflite_runner,
               "onnx": edge.onnx_runner, "onnx_int8": edge.onnx_runner}
    short = {k: v[:, :9] for k, v in ids.items()}  # ONNX: any length
    for name, runner in runners.items():
        run = runner(written[name])
        out = run(ids)  # TFLite: the fixed length SEQ
        exact = name in ("tflite", "onnx")
        tolerance = 1e-4 if exact else 0.1
        np.testing.assert_allclose(out["pooled_output"], expected["pooled_output"],
                                   atol=tolerance, err_msg=name)
        np.testing.assert_allclose(out["sequence_output"], expected["sequence_output"],
                                   atol=tolerance, err_msg=name)
        if name.startswith("onnx"):
            shorter = run(short)
            assert shorter["sequence_output"].shape == (4, 9, 16)
            mask = ids["input_mask"]
            for row in range(4):
                n = min(mask[row].sum(), 9)
                if mask[row].sum() <= 9:
                    np.testing.assert_allclose(shorter["sequence_output"][row, :n],
                                               expected["sequence_output"][row, :n],
                                               atol=tolerance, err_msg=name)
