"""run_squad.py end to end on a tiny file, the SavedModel round trip, bad input."""

import json
import os
import shutil
import sys
import textwrap

import pytest

from support import WITHOUT_THE_PROJECT, processes
from data_prep import squad

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("the man went to store and bought a gallon of milk john smith leader was "
         "japanese electronics industry is largest in world who what when born cafe "
         "one two three four five six seven eight nine ten").split()
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "(", ")", "-", ".", ",", "'", "s",
          "?", "##s", "18", "##95", "1943", "ca", "##fe"] + WORDS)

LONG = ("The man went to the store and bought a gallon of milk. John Smith (1895-1943) was "
        "the leader.  Café  John's  japanese\telectronics industry is the largest in the world. ")
CONTEXTS = [LONG * 2, "Cafe\u0301 leader was John Smith's man, one two three.",
            "Who went to the store? The man\u00a0went,  one  two."]


def squad_file(path, version_2=False):
    qas = [
        [("a1", "who bought milk?", "The man"), ("a2", "when was smith born?", "1895"),
         ("a3", "what industry?", "electronics industry")],
        [("b1", "who was the leader?", "John Smith"), ("b2", "what?", "Cafe\u0301")],
        [("c1", "who went to the store?", "The man")],
    ]
    paragraphs = []
    for context, questions in zip(CONTEXTS, qas):
        items = [{"id": qid, "question": q,
                  "answers": [{"text": a, "answer_start": context.index(a)}]}
                 for qid, q, a in questions]
        if version_2:
            items.append({"id": f"x{len(paragraphs)}", "question": "when did the zebra go?",
                          "answers": [], "is_impossible": True})
        paragraphs.append({"context": context, "qas": items})
    path.write_text(json.dumps({"version": "2.0" if version_2 else "1.1",
                                "data": [{"title": "t", "paragraphs": paragraphs}]}),
                    encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("squad"))


def make_tiny_checkpoint(root):
    """Writes a random tiny encoder (H=16, seed 3) with the SQuAD words' vocabulary to
    `root`/ckpt; returns `root`."""
    import keras

    from official_bert import checkpoints
    from official_bert.modeling.configs import BertConfig
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs

    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    keras.utils.set_random_seed(3)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=64)
    encoder = BertEncoder.from_bert_config(config)
    encoder(dummy_inputs())
    checkpoints.save_checkpoint(encoder, str(root / "ckpt"), vocab_file=str(vocab))
    return root


def run_cli(*args, expect_rc=0):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("OFFICIAL_BERT_TRACEBACK", None)
    proc = processes.run([sys.executable, os.path.join(REPO, "run_squad.py"), *args],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == expect_rc, proc.stderr[-3000:]
    return proc


COMMON = ["--max_seq_length=32", "--doc_stride=8", "--max_query_length=8", "--n_best_size=10",
          "--max_answer_length=10", "--log_steps=2"]

LOADER = WITHOUT_THE_PROJECT + textwrap.dedent("""
    import json
    sys.path = [p for p in sys.path if p not in ("", {repo!r})]  # the checkout too: no project
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops)
    serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
    data = json.load(open(sys.argv[2]))
    for qas_id, question, context in json.load(open(sys.argv[3])):
        out = serve(question=tf.constant([question]), context=tf.constant([context]))
        data[qas_id] = {{k: (v.numpy()[0].decode() if v.dtype == tf.string
                            else v.numpy()[0].item()) for k, v in out.items()}}
    json.dump(data, open(sys.argv[2], "w"))
""")


def train_tiny_squad(root):
    """The run every test of a fine-tuned span labeler reads: run_squad.py trained,
    predicted and exported under `root` (conftest's session fixture `squad_run`)."""
    ckpt = make_tiny_checkpoint(root) / "ckpt"
    data = squad_file(root / "tiny.json")
    out = root / "out"
    proc = run_cli("--do_train", "--do_predict", f"--init_checkpoint={ckpt}",
                   f"--train_file={data}", f"--predict_file={data}", f"--output_dir={out}",
                   "--train_batch_size=4", "--num_train_epochs=2",
                   f"--export_dir={out / 'export'}", *COMMON)
    return dict(data=data, out=out, log=proc.stderr)


def test_train_predict_export_round_trip(squad_run, tmp_path):
    data, out = squad_run["data"], squad_run["out"]
    assert "Num split examples" in squad_run["log"]
    predictions = json.loads((out / "predictions.json").read_text(encoding="utf-8"))
    nbest = json.loads((out / "nbest_predictions.json").read_text(encoding="utf-8"))
    results = json.loads((out / "eval_results.json").read_text())
    assert set(predictions) == {"a1", "a2", "a3", "b1", "b2", "c1"} == set(nbest)
    assert set(results) >= {"exact_match", "f1"} and results["total"] == 6
    assert not (out / "null_odds.json").exists()
    assert all(len(v) <= 10 for v in nbest.values())

    # The SavedModel, loaded without the project, answers as the Python post-processing.
    questions = [(qa["id"], qa["question"], p["context"])
                 for p in json.loads(open(data).read())["data"][0]["paragraphs"]
                 for qa in p["qas"]]
    (tmp_path / "q.json").write_text(json.dumps(questions), encoding="utf-8")
    (tmp_path / "loader.py").write_text(LOADER.format(repo=REPO))
    (tmp_path / "a.json").write_text("{}")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)
    [version] = list((out / "export").iterdir())  # TF Serving's layout: one version
    proc = processes.run([sys.executable, str(tmp_path / "loader.py"), str(version),
                          str(tmp_path / "a.json"), str(tmp_path / "q.json")],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path),
                         timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    for qas_id, _, context in questions:
        got, want = served[qas_id], predictions[qas_id]
        if want == "empty" and nbest[qas_id][0]["start_logit"] == 0.0:
            assert got["answer"] == "" and got["start_char"] == -1  # no legal span
            continue
        # The export cuts the context itself (its white space); Python joins words.
        assert got["answer"] == context[got["start_char"]:got["end_char"]]
        assert " ".join(squad.split_doc_tokens(got["answer"])[0]) == want, qas_id
        top = nbest[qas_id][0]
        assert got["score"] == pytest.approx(top["start_logit"] + top["end_logit"], abs=1e-4)


@pytest.mark.slow  # 10 s or more here
def test_v2_predict_writes_null_odds_and_tunes(tiny_checkpoint, tmp_path):
    data = squad_file(tmp_path / "v2.json", version_2=True)
    out = tmp_path / "out"
    run_cli("--do_train", "--max_train_examples=2", "--train_batch_size=2", f"--train_file={data}",
            "--do_predict", "--version_2_with_negative", "--tune_threshold",
            f"--init_checkpoint={tiny_checkpoint / 'ckpt'}", f"--predict_file={data}",
            f"--output_dir={out}", *COMMON)
    odds = json.loads((out / "null_odds.json").read_text())
    predictions = json.loads((out / "predictions.json").read_text(encoding="utf-8"))
    results = json.loads((out / "eval_results.json").read_text())
    assert set(odds) == set(predictions) and len(odds) == 9
    for key in ("HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_f1",
                "best_f1_thresh", "tuned_threshold", "tuned_f1"):
        assert key in results
    assert results["HasAns_total"] == 6 and results["NoAns_total"] == 3
    # The tuned threshold reproduces the best F1 when applied.
    assert results["tuned_f1"] == pytest.approx(results["best_f1"])
    threshold = results["tuned_threshold"]
    # predictions.json holds the answers decided with the tuned threshold.
    assert all(predictions[q] == "" for q in predictions if odds[q] > threshold)


@pytest.mark.slow  # 10 s or more here
def test_prediction_cut_to_each_batch_keeps_the_answers(tiny_checkpoint, tmp_path):
    # Windows sorted by length and each batch cut to its longest (the default)
    # give the n-best lists of full-length batches.
    data = squad_file(tmp_path / "v2.json", version_2=True)
    trained = tmp_path / "trained"
    run_cli("--do_train", "--version_2_with_negative", "--max_train_examples=2",
            f"--init_checkpoint={tiny_checkpoint / 'ckpt'}", f"--train_file={data}",
            f"--output_dir={trained}", "--train_batch_size=2", *COMMON, "--max_seq_length=64")
    outputs = {}
    for flag in ("--dynamic_padding", "--nodynamic_padding"):
        out = tmp_path / flag.strip("-")
        shutil.copytree(trained, out)
        proc = run_cli("--do_predict", "--version_2_with_negative", f"--predict_file={data}",
                       f"--output_dir={out}", "--predict_batch_size=2", flag, *COMMON,
                       "--max_seq_length=64")
        outputs[flag] = (json.loads((out / "nbest_predictions.json").read_text(encoding="utf-8")),
                         json.loads((out / "null_odds.json").read_text()), proc.stderr)
    (cut, cut_odds, log), (full, full_odds, _) = outputs.values()
    computed = float(log.split("Dynamic padding: ")[1].split("%")[0])
    assert computed < 100.0  # some batches were cut
    assert set(cut) == set(full)
    for qas_id in full:
        assert [c["text"] for c in cut[qas_id]] == [c["text"] for c in full[qas_id]], qas_id
        for a, b in zip(cut[qas_id], full[qas_id]):
            assert a["start_logit"] == pytest.approx(b["start_logit"], abs=1e-4)
            assert a["end_logit"] == pytest.approx(b["end_logit"], abs=1e-4)
        assert cut_odds[qas_id] == pytest.approx(full_odds[qas_id], abs=1e-4)


def test_bad_inputs(tiny_checkpoint, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [{"paragraphs": [{"context": "a", "qas": [\n{"id": 1,}]}]}]}')
    proc = run_cli("--do_predict", f"--init_checkpoint={tiny_checkpoint / 'ckpt'}",
                   f"--predict_file={broken}", f"--output_dir={tmp_path / 'o'}", *COMMON,
                   expect_rc=1)
    assert "error: " in proc.stderr and "broken.json line 2 is not valid JSON" in proc.stderr
    proc = run_cli(f"--init_checkpoint={tiny_checkpoint / 'ckpt'}",
                   f"--output_dir={tmp_path / 'o'}", expect_rc=1)
    assert "nothing to do: set --do_train" in proc.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"data": [{"paragraphs": [{"context": "a b", "qas": [
        {"id": "x", "question": "q", "answers": [{"text": "a", "answer_start": None}]}]}]}]}))
    proc = run_cli("--do_train", f"--init_checkpoint={tiny_checkpoint / 'ckpt'}",
                   f"--train_file={wrong}", f"--output_dir={tmp_path / 'o'}", *COMMON,
                   expect_rc=1)
    assert ("null at data[0].paragraphs[0].qas[0].answers[0].answer_start, where an integer "
            "belongs") in proc.stderr


def test_split_by_article_command(tmp_path):
    # Three articles: the first two train, the last is dev; no article in both.
    articles = []
    for t in range(3):
        squad_file(tmp_path / "one.json", version_2=t == 2)
        article = json.loads((tmp_path / "one.json").read_text(encoding="utf-8"))["data"][0]
        article["title"] = f"article {t}"
        articles.append(article)
    source = tmp_path / "all.json"
    source.write_text(json.dumps({"version": "2.0", "data": articles}), encoding="utf-8")
    # The output directory need not exist yet.
    train, dev = tmp_path / "split" / "train.json", tmp_path / "split" / "dev.json"
    result = processes.run(
        [sys.executable, "-m", "official_bert.commands.squad_split", f"--input_file={source}",
         f"--train_output={train}", f"--dev_output={dev}", "--num_train_articles=2"],
        cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"{train} (12 questions) and {dev} (9 questions)" in result.stdout
    titles = lambda p: [a["title"] for a in json.loads(p.read_text(encoding="utf-8"))["data"]]
    assert titles(train) == ["article 0", "article 1"] and titles(dev) == ["article 2"]
    assert json.loads(dev.read_text(encoding="utf-8"))["version"] == "2.0"
    bad = processes.run(
        [sys.executable, "-m", "official_bert.commands.squad_split", f"--input_file={source}",
         f"--train_output={train}", f"--dev_output={dev}", "--num_train_articles=3"],
        cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1] == (
        f"error: --num_train_articles=3: {source} has 3 articles; the training part needs at "
        "least 1 and the dev part too")


def test_fine_tuned_run_as_init_checkpoint_keeps_its_head(tiny_checkpoint, squad_run, tmp_path):
    data, out = squad_run["data"], squad_run["out"]
    again = tmp_path / "again"
    proc = run_cli("--do_predict", f"--init_checkpoint={out}", f"--predict_file={data}",
                   f"--output_dir={again}", *COMMON)
    assert "and the task head" in proc.stderr
    assert "Task head: restored cls/squad/output_weights (2, 16) from the checkpoint" in proc.stderr
    for name in ("predictions.json", "nbest_predictions.json", "eval_results.json"):
        assert (again / name).read_text() == (out / name).read_text(), name
    # The pre-trained encoder alone has no span head: predicting with it is refused.
    proc = run_cli("--do_predict", f"--init_checkpoint={tiny_checkpoint / 'ckpt'}",
                   f"--predict_file={data}", f"--output_dir={tmp_path / 'random'}", *COMMON,
                   expect_rc=1)
    assert f"--init_checkpoint {tiny_checkpoint / 'ckpt'} holds an encoder only" in proc.stderr
    assert "would use a random head" in proc.stderr and "Traceback" not in proc.stderr
