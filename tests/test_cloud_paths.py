"""Every command on `ram://` (TensorFlow's in-memory file system, the
in-process stand-in for `gs://` through `tf.io.gfile`), where
tests/test_io.py does not already run it (data generation, pre-training,
run_classifier): run_squad, run_ner and run_swag (train, evaluate, predict,
export), `bert predict` from an export, `bert glue-submission`,
`bert export-encoder`, `bert build-vocab` and `bert prepare-corpus`, each with
every path on ram://. The commands that only work on local disk by nature
(`bert download`, `bert quickstart`) refuse a non-local --output_dir in one line.

ram:// lives inside one process, so one driver process runs every case in
turn (a case's failure is reported as that case's, the others go on); each
command's flags are dropped before the next one defines its own. Known
answers: the files each writes (and nothing hidden left), the same bytes as
the same command on local files where the output is deterministic, the
SavedModels loaded back from ram:// answering as the run or the checkpoint.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from support import processes
from test_glue_submission import HAND_MADE, fake_glue, hand_made_run, tsv
from test_io import PRELUDE, drive
from test_run_squad import COMMON as SQUAD_FLAGS
from test_run_squad import squad_file
from test_run_squad import tiny_checkpoint  # noqa: F401  (a fixture)
from test_run_swag import DATA as SWAG_DATA

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(REPO, "tests")

DRIVER = PRELUDE + r"""
import importlib, traceback

import numpy as np
from absl import flags as absl_flags

sys.path.insert(0, ARGS["tests"])  # a fresh process: the test modules and support it imports


def put_tree(local, remote):
    for root, _, names in os.walk(local):
        for name in names:
            path = os.path.join(root, name)
            put(path, remote + "/" + os.path.relpath(path, local).replace(os.sep, "/"))


def fresh(module=None):
    # Drops every flag a command defined (absl's stay), so that the next command
    # can define its own; re-imports `module`, a script that defines them on import.
    values = absl_flags.FLAGS
    for owner, defined in list(values.flags_by_module_dict().items()):
        if not owner.startswith("absl"):
            for flag in list(defined):  # (deleting takes it out of `defined`)
                if flag.name in values:
                    delattr(values, flag.name)
    values.unparse_flags()
    if module:
        sys.modules.pop(module, None)
        return importlib.import_module(module)


def hidden(directory):
    return [f for f in files(directory) if os.path.basename(f).startswith(".")]


def stdout_of(name, *argv):
    import contextlib, io as pyio
    buffer = pyio.StringIO()
    with contextlib.redirect_stdout(buffer):
        command(name, *argv)
    return buffer.getvalue()


def case_squad():
    run_squad = fresh("official_bert.commands.squad")
    put_tree(ARGS["squad_ckpt"], "ram://squad/ckpt")
    put(ARGS["squad_file"], "ram://squad/tiny.json")
    command("squad", "--do_train", "--do_predict", "--init_checkpoint=ram://squad/ckpt",
            "--train_file=ram://squad/tiny.json", "--predict_file=ram://squad/tiny.json",
            "--output_dir=ram://squad/out", "--export_dir=ram://squad/export",
            "--export_version=1", "--train_batch_size=4", "--num_train_epochs=1",
            *ARGS["squad_flags"])
    import tensorflow_text  # noqa: F401
    served = tf.saved_model.load("ram://squad/export/1").signatures["serving_default"](
        question=tf.constant(["who went to the store?"]),
        context=tf.constant(["Who went to the store? The man went, one two."]))
    return {"out": files("ram://squad/out"), "export": files("ram://squad/export"),
            "predictions": json.loads(io.read_text("ram://squad/out/predictions.json")),
            "eval": json.loads(io.read_text("ram://squad/out/eval_results.json")),
            "served": served["answer"].numpy()[0].decode(),
            "hidden": hidden("ram://squad/out") + hidden("ram://squad/export")}


def case_ner():
    run_ner = fresh("official_bert.commands.ner")
    put_tree(ARGS["ner_ckpt"], "ram://ner/ckpt")
    put(ARGS["ner_file"], "ram://ner/train.conll")
    command("ner", "--do_train", "--do_eval", "--do_predict",
            "--train_file=ram://ner/train.conll", "--eval_file=ram://ner/train.conll",
            "--predict_file=ram://ner/train.conll", "--init_checkpoint=ram://ner/ckpt",
            "--max_seq_length=8", "--train_batch_size=2", "--num_train_epochs=2",
            "--output_dir=ram://ner/out", "--export_dir=ram://ner/export", "--export_version=1")
    import tensorflow_text  # noqa: F401
    served = tf.saved_model.load("ram://ner/export/1").signatures["serving_default"](
        text=tf.constant(["the man walks in Paris"]))
    return {"out": files("ram://ner/out"), "export": files("ram://ner/export"),
            "eval": results("ram://ner/out/eval_results.txt"),
            "predicted_words": len([l for l in io.read_text(
                "ram://ner/out/test_predictions.conll").splitlines() if l.strip()]),
            "served_words": int(served["num_words"].numpy()[0]),
            "hidden": hidden("ram://ner/out") + hidden("ram://ner/export")}


def case_swag():
    run_swag = fresh("official_bert.commands.swag")
    put_tree(ARGS["ner_ckpt"], "ram://swag/ckpt")
    put(ARGS["swag_file"], "ram://swag/swag.csv")
    command("swag", "--do_train", "--do_eval", "--do_predict",
            "--train_file=ram://swag/swag.csv", "--eval_file=ram://swag/swag.csv",
            "--predict_file=ram://swag/swag.csv", "--init_checkpoint=ram://swag/ckpt",
            "--max_seq_length=16", "--train_batch_size=2", "--num_train_epochs=1",
            "--learning_rate=1e-3", "--output_dir=ram://swag/out",
            "--export_dir=ram://swag/export", "--export_version=1")
    import tensorflow_text  # noqa: F401
    served = tf.saved_model.load("ram://swag/export/1").signatures["serving_default"](
        context=tf.constant(["The man walks to the city.", "She went to New York."]),
        start=tf.constant(["He", ""]),
        endings=tf.constant([["sat down.", "went to paris.", "is on the man."],
                             ["he sat down.", "she sat down.", "the city."]]))
    return {"out": files("ram://swag/out"), "export": files("ram://swag/export"),
            "eval": results("ram://swag/out/eval_results.txt"),
            "test_results": io.read_text("ram://swag/out/test_results.tsv"),
            "served": served["probabilities"].numpy().tolist(),
            "hidden": hidden("ram://swag/out") + hidden("ram://swag/export")}


def case_predict():
    # `bert predict` reads the input file and the export from ram://; the model's own
    # probabilities on the same text, packed in Python, are the known answer.
    predict = fresh("official_bert.commands.predict")
    from support import tiny_config
    from test_run_classifier import DEV, VOCAB
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from official_bert.modeling.heads import BertClassifier
    from official_bert.serving.classification import export_classifier
    from official_bert.text import tokenization

    tf.keras.utils.set_random_seed(4)
    model = BertClassifier(BertEncoder.from_bert_config(tiny_config(vocab_size=len(VOCAB))), 2)
    model(dummy_inputs())
    io.atomic_write("ram://predict/vocab.txt", "\n".join(VOCAB) + "\n")
    export_classifier(model, "ram://predict/vocab.txt", True, 16, ["bad", "good"], False,
                      "ram://predict/export", version=1)
    io.atomic_write("ram://predict/in.txt", "\n".join(DEV) + "\n")
    printed = stdout_of("predict", "--model=ram://predict/export",
                        "--input_file=ram://predict/in.txt")
    tokenizer = tokenization.FullTokenizer("ram://predict/vocab.txt", do_lower_case=True)
    packed = [tokenization.pack_tokens(tokenizer.tokenize(text), None, 16) for text in DEV]
    inputs = {"input_word_ids": np.array([tokenizer.convert_tokens_to_ids(t)
                                          for t, _, _ in packed], np.int32),
              "input_mask": np.array([m for _, m, _ in packed], np.int32),
              "input_type_ids": np.array([s for _, _, s in packed], np.int32)}
    expected = tf.nn.softmax(model(inputs, training=False)).numpy()
    return {"printed": printed, "expected": expected.tolist(), "texts": DEV}


def case_glue_submission():
    from official_bert.commands import glue_submission

    fresh()
    put_tree(ARGS["glue_runs"], "ram://glue/runs")
    put_tree(ARGS["glue_data"], "ram://glue/data")
    printed = stdout_of("glue-submission", "--runs_dir=ram://glue/runs",
                        "--glue_dir=ram://glue/data", "--output_file=ram://glue/submission.zip")
    local = ARGS["local"] + "/submission.zip"
    glue_submission.make_submission(glue_submission.GlueSubmissionConfig(
        runs_dir=ARGS["glue_runs"], glue_dir=ARGS["glue_data"], output_file=local))
    with io.open_file("ram://glue/submission.zip", "rb") as f:
        written = f.read()
    return {"printed": printed, "same_as_local": written == open(local, "rb").read(),
            "files": files("ram://glue")}


def case_export_encoder():
    from official_bert import checkpoints
    from official_bert.commands import export_encoder
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from support import tiny_config
    from test_run_classifier import VOCAB

    fresh()
    tf.keras.utils.set_random_seed(5)
    io.atomic_write("ram://enc/vocab.txt", "\n".join(VOCAB) + "\n")
    encoder = BertEncoder.from_bert_config(tiny_config(vocab_size=len(VOCAB)))
    encoder(dummy_inputs())
    checkpoints.save_checkpoint(encoder, "ram://enc/ckpt", vocab_file="ram://enc/vocab.txt")
    printed = stdout_of("export-encoder", "--init_checkpoint=ram://enc/ckpt",
                        "--output_dir=ram://enc/hub", "--max_seq_length=16")
    import tensorflow_text  # noqa: F401
    preprocessor = tf.saved_model.load("ram://enc/hub/preprocessor")
    hub_encoder = tf.saved_model.load("ram://enc/hub/encoder")
    ids = preprocessor(tf.constant(["the movie was good", "a very bad film !"]))
    reloaded, _ = checkpoints.load_encoder("ram://enc/ckpt")
    return {"printed": printed, "files": files("ram://enc"),
            "pooled_diff": float(np.abs(hub_encoder(ids)["pooled_output"].numpy()
                                        - reloaded(ids)["pooled_output"].numpy()).max()),
            "pooled_vs_original": float(np.abs(reloaded(ids)["pooled_output"].numpy()
                                               - encoder(ids)["pooled_output"].numpy()).max()),
            "ids": ids["input_word_ids"].numpy().tolist()}


def case_prepare_corpus():
    from data_prep import prepare_corpus
    from official_bert.commands import prepare_corpus as prepare_corpus_command

    fresh()
    put_tree(ARGS["documents"], "ram://corpus/docs")
    command("prepare-corpus", "--input=ram://corpus/docs",
            "--output_file=ram://corpus/corpus.txt")
    local = ARGS["local"] + "/corpus.txt"
    prepare_corpus.prepare_corpus([ARGS["documents"]], local, prepare_corpus.CorpusOptions())
    return {"same_as_local": io.read_text("ram://corpus/corpus.txt") == io.read_text(local),
            "documents": json.loads(io.read_text(file_sets.sidecar_path(
                "ram://corpus/corpus.txt", "stats")))["documents"],
            "files": files("ram://corpus")}


def case_build_vocab():
    from data_prep import build_vocab
    from official_bert.commands import build_vocab as build_vocab_command

    fresh()
    put(ARGS["corpus"], "ram://vocab/corpus.txt")
    flags = ["--vocab_size=120", "--num_unused=5", "--lower_thresh=1"]
    command("build-vocab", "--input_file=ram://vocab/corpus.*",
            "--output_file=ram://vocab/out/vocab.txt", *flags)
    local = ARGS["local"] + "/vocab.txt"
    build_vocab.build_vocab([ARGS["corpus"]], local, vocab_size=120, num_unused=5,
                            lower_thresh=1)
    vocab = io.read_text("ram://vocab/out/vocab.txt")
    return {"same_as_local": vocab == io.read_text(local), "lines": len(vocab.splitlines()),
            "files": files("ram://vocab")}


import time

out = {}
for name in ARGS["cases"]:
    start = time.time()
    try:
        out[name] = globals()["case_" + name]()
    except BaseException:  # noqa: BLE001 - reported as this case's failure
        out[name] = {"error": traceback.format_exc()[-3000:]}
    out[name]["seconds"] = time.time() - start
print("JSON", json.dumps(out))
"""

# The fine-tuning runners (a training, evaluation, prediction and export each) and
# export-encoder (two SavedModels: 20 s of CPU alone) take 80 s of CPU together, so they
# are `slow`; the other commands about 20 s, with the one Python start each group pays.
TASKS = ["squad", "ner", "swag"]
SLOW = TASKS + ["export_encoder"]
COMMANDS = ["predict", "glue_submission", "prepare_corpus", "build_vocab"]

DOCUMENTS = {
    "a.txt": "The first document. It has two sentences.\n\nAnd a second paragraph here.",
    "b.txt": "Another document: one sentence only",
    "sub/c.txt": "Words in a folder. Cafe\u0301 and na\u00efve text! Is this three?",
}


@pytest.fixture(scope="module")
def slow_runs(tmp_path_factory, tiny_checkpoint):  # noqa: F811
    from test_run_ner import TRAIN as NER_TRAIN
    from test_run_ner import make_checkpoint as ner_checkpoint

    root = tmp_path_factory.mktemp("cloud_paths_tasks")
    (root / "train.conll").write_text(NER_TRAIN)
    (root / "swag.csv").write_text(SWAG_DATA)
    out, _ = drive(DRIVER, timeout=900, cases=SLOW, tests=TESTS,
                   squad_ckpt=str(tiny_checkpoint / "ckpt"),
                   squad_file=squad_file(root / "tiny.json"), squad_flags=SQUAD_FLAGS,
                   ner_ckpt=ner_checkpoint(str(root / "ner_ckpt")),
                   ner_file=str(root / "train.conll"), swag_file=str(root / "swag.csv"))
    return out


@pytest.fixture(scope="module")
def command_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cloud_paths_commands")
    (root / "local").mkdir()
    fake_glue(root / "glue")
    for task, predictions in HAND_MADE.items():
        hand_made_run(root / "runs", task, predictions)
    (root / "runs" / "mnli").mkdir()
    (root / "runs" / "mnli" / "classifier_config.json").write_text('{"task_name": "mnli"}')
    for name, first, n in (("MNLI-m.tsv", 100, 3), ("MNLI-mm.tsv", 200, 3), ("AX.tsv", 0, 6)):
        tsv(root / "runs" / "mnli" / name, ["index", "prediction"],
            [(first + k, ["neutral", "entailment", "contradiction"][k % 3]) for k in range(n)])
    for name, text in DOCUMENTS.items():
        (root / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / name).write_text(text, encoding="utf-8")
    corpus = root / "corpus.txt"
    corpus.write_text("".join(f"the {w} was {v} and the {v} {w} is here .\n"
                              for w in ("movie", "film", "book", "play", "song")
                              for v in ("good", "bad", "great", "dull")) * 3)
    out, _ = drive(DRIVER, timeout=900, cases=COMMANDS, tests=TESTS, local=str(root / "local"),
                   glue_runs=str(root / "runs"), glue_data=str(root / "glue"),
                   documents=str(root / "docs"), corpus=str(corpus))
    return out


@pytest.mark.slow  # three tiny fine-tuning runs and four exports: about 80 s of CPU
@pytest.mark.parametrize("name", SLOW)
def test_slow_command_on_ram(slow_runs, name):
    check(name, slow_runs[name])


@pytest.mark.parametrize("name", COMMANDS)
def test_command_on_ram(command_runs, name):
    check(name, command_runs[name])


def check(name, result):
    assert "error" not in result, result.get("error")
    if name in TASKS:
        assert result["hidden"] == []  # no lock, no temporaries left on ram://
        assert {"bert_config.json", "vocab.txt", "checkpoint"} <= set(result["out"])
        assert any(f.startswith("ckpt-") and f.endswith(".index") for f in result["out"])
        assert {"1/saved_model.pb", "1/variables/variables.index"} <= set(result["export"])
    if name == "squad":
        assert {"predictions.json", "nbest_predictions.json", "eval_results.json"} <= set(
            result["out"])
        assert set(result["predictions"]) == {"a1", "a2", "a3", "b1", "b2", "c1"}
        assert result["eval"]["total"] == 6
        # The export, loaded from ram://, answers with the context's own characters.
        assert result["served"] in "Who went to the store? The man went, one two."
    elif name == "ner":
        assert {"eval_results.txt", "eval_predictions.conll", "test_predictions.conll",
                "label_list.txt"} <= set(result["out"])
        assert float(result["eval"]["global_step"]) == 4  # 4 windows / batch 2 x 2 epochs
        assert result["predicted_words"] == 16 and result["served_words"] == 5
    elif name == "swag":
        assert result["eval"]["global_step"] == "2" and result["eval"]["num_examples"] == "4"
        # The export read from ram:// gives the run's own test probabilities.
        expected = np.loadtxt(result["test_results"].splitlines(), delimiter="\t")
        np.testing.assert_allclose(result["served"], expected[:2], atol=1e-5)
    elif name == "predict":
        header, *rows = [row.split("\t") for row in result["printed"].splitlines()]
        assert header == ["label", "p(bad)", "p(good)", "text"]
        expected = np.asarray(result["expected"])
        assert [row[3] for row in rows] == result["texts"]
        assert [row[0] for row in rows] == [["bad", "good"][k] for k in expected.argmax(1)]
        np.testing.assert_allclose([[float(p) for p in row[1:3]] for row in rows], expected,
                                   atol=2e-6)  # printed with 6 decimals
    elif name == "glue_submission":
        assert result["printed"].startswith("ram://glue/submission.zip: 11 file(s): ")
        assert result["same_as_local"]  # fixed zip dates: the same predictions, same bytes
        assert "submission.zip" in result["files"]
    elif name == "export_encoder":
        assert result["printed"].splitlines() == [
            "preprocessor\tram://enc/hub/preprocessor", "encoder\tram://enc/hub/encoder"]
        assert {"hub/preprocessor/saved_model.pb", "hub/encoder/saved_model.pb",
                "hub/encoder/variables/variables.index"} <= set(result["files"])
        assert not [f for f in result["files"] if os.path.basename(f).startswith(".")]
        assert result["pooled_diff"] < 1e-5 and result["pooled_vs_original"] == 0.0
        assert result["ids"][0][:6] == [2, 5, 7, 10, 12, 3]  # [CLS] the movie was good [SEP]
    elif name == "prepare_corpus":
        assert result["same_as_local"] and result["documents"] == 3
        assert "corpus.txt" in result["files"]
    elif name == "build_vocab":
        assert result["same_as_local"] and result["lines"] == 120
        assert result["files"] == ["corpus.txt", "out/vocab.txt"]


# === Local-only commands refuse a cloud path in one line ===


@pytest.mark.parametrize("command, flags", [
    ("download", ["glue/MRPC"]),
    ("quickstart", ["--stages=data"]),
])
def test_local_only_commands_refuse_a_cloud_output_dir(command, flags, tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("OFFICIAL_BERT_TRACEBACK", None)
    result = processes.run([sys.executable, "-m", "official_bert.commands.cli", command, *flags,
                             "--output_dir=gs://my-bucket/data"], cwd=str(tmp_path), env=env,
                           capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert errors[0].startswith("error: --output_dir gs://my-bucket/data: ")
    assert "local directory" in errors[0]
    assert list(tmp_path.iterdir()) == []  # nothing made here (no "gs:" directory)


# === Preemption of a fine-tuning run ===

# run_classifier.py with a progress hook that prints each logged loss and, at the
# step in TERM_AT, sends this process SIGTERM (what a cloud VM's preemption does).
PREEMPTED = r"""
import os, runpy, signal, sys
from official_bert.training import trainer
term_at = int(os.environ.get("TERM_AT", "0"))
train = trainer.Trainer.train
def hooked(self, dataset_fn, global_batch_size, hooks=None, **kwargs):
    def report(step, results):
        print("LOSS", step, repr(results["loss"]), flush=True)
        if step == term_at:
            os.kill(os.getpid(), signal.SIGTERM)
    return train(self, dataset_fn, global_batch_size, hooks=list(hooks or []) + [report],
                 **kwargs)
trainer.Trainer.train = hooked
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow  # three tiny fine-tuning runs: about 40 s on one core
def test_sigterm_during_fine_tuning_resumes_to_the_same_evaluations(tmp_path):
    from test_run_classifier import (DEV, DEV_LABELS, TRAIN, TRAIN_LABELS, make_checkpoint,
                                     write_sst2)

    ckpt = make_checkpoint(str(tmp_path / "ckpt"))
    data = write_sst2(tmp_path / "sst", (TRAIN * 4, TRAIN_LABELS * 4), (DEV, DEV_LABELS))

    def run(out, term_at=0):
        # 32 examples, batch 4, 2 epochs: 16 steps; evaluations at 4, 8, 12, 16; no
        # checkpoint on the way but the one SIGTERM makes.
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=REPO, TERM_AT=str(term_at))
        env.pop("OFFICIAL_BERT_TRACEBACK", None)
        return subprocess.run(
            [sys.executable, "-c", PREEMPTED, os.path.join(REPO, "run_classifier.py"),
             "--task_name=sst-2", f"--data_dir={data}", f"--init_checkpoint={ckpt}",
             "--do_train", "--do_eval", "--max_seq_length=16", "--train_batch_size=4",
             "--num_train_epochs=2", "--learning_rate=1e-3", "--log_steps=1",
             "--save_checkpoints_steps=100", "--eval_every_steps=4",
             "--keep_best_metric=eval_loss", f"--output_dir={out}"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)

    def losses(stdout):
        return {int(step): float(loss) for _, step, loss in
                (line.split() for line in stdout.splitlines() if line.startswith("LOSS "))}

    def outcome(out):
        results = dict(line.split(" = ") for line in
                       (out / "eval_results.txt").read_text().splitlines())
        history = [json.loads(line) for line in
                   (out / "eval_history.jsonl").read_text().splitlines()]
        return results, history, json.loads((out / "best" / "best.json").read_text())

    whole = run(tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    stopped = run(tmp_path / "stopped", term_at=6)
    assert stopped.returncode == 75, stopped.stderr[-3000:]
    assert "Traceback" not in stopped.stderr
    [line] = [line for line in stopped.stderr.splitlines() if line.startswith("preempted: ")]
    assert line.startswith("preempted: stopped by SIGTERM at step 6: ")
    assert (tmp_path / "stopped" / "ckpt-6.index").exists()
    assert not (tmp_path / "stopped" / "eval_results.txt").exists()
    assert sorted(losses(stopped.stdout)) == list(range(1, 7))
    resumed = run(tmp_path / "stopped")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resumed from" in resumed.stderr
    assert sorted(losses(resumed.stdout)) == list(range(7, 17))  # steps 1-6 not redone
    expected = losses(whole.stdout)
    for step, loss in {**losses(stopped.stdout), **losses(resumed.stdout)}.items():
        assert loss == pytest.approx(expected[step], abs=1e-6), step
    (results, history, best), want = outcome(tmp_path / "stopped"), outcome(tmp_path / "whole")
    assert [h["global_step"] for h in history] == [4, 8, 12, 16]
    assert results.keys() == want[0].keys() and results["best_step"] == want[0]["best_step"]
    for key, value in want[0].items():
        assert float(results[key]) == pytest.approx(float(value), abs=1e-6), key
    for got, expected_evaluation in zip(history, want[1]):
        assert got == pytest.approx(expected_evaluation, abs=1e-6)
    assert best["step"] == want[2]["step"] and best["value"] == pytest.approx(want[2]["value"],
                                                                              abs=1e-6)
