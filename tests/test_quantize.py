"""`--quantize` (every task family's export gets its int8 model.tflite, in the
version folder TF Serving's --prefer_tflite_model reads, checked against the
float model at export) and `bert compare` (models side by side on a labelled
file), end to end on the tiny classifier run of tests/test_run_classifier.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from test_run_classifier import DEV, DEV_LABELS, run

# A fresh process in which the project cannot be imported: TensorFlow alone.
TF_ONLY = """
import json, sys
import numpy as np
import tensorflow as tf
interpreter = tf.lite.Interpreter(model_path=sys.argv[1])
runner = interpreter.get_signature_runner()
ids = {k: np.asarray(v, np.int32) for k, v in json.loads(sys.stdin.read()).items()}
print(json.dumps({k: np.asarray(v).tolist() for k, v in runner(**ids).items()}))
"""


@pytest.fixture(scope="module")
def quantized(classifier_run):
    export = classifier_run["root"] / "export_int8"
    result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={classifier_run['data']}",
                 f"--output_dir={classifier_run['out']}", "--do_eval",
                 f"--export_dir={export}", "--export_version=1", "--quantize")
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(classifier_run, export=export, export_log=result.stderr)


def test_the_int8_model_sits_beside_the_savedmodel(quantized):
    version = quantized["export"] / "1"
    assert {"saved_model.pb", "model.tflite", "assets"} <= set(os.listdir(version))
    log = quantized["export_log"]
    # What it takes, said plainly; and the check on the run's own dev set.
    assert "takes token ids, not text" in log and "[batch, 16]" in log
    assert "no weight matrix large enough to quantize" in log  # (the tiny model)
    assert "--prefer_tflite_model" in log
    assert f"int8 check on the first {len(DEV)} dev rows" in log
    assert "decides as the float model on" in log and "accuracy: float" in log


def test_the_int8_model_loads_in_a_tensorflow_only_process(quantized):
    from official_bert.text import tokenization

    version = quantized["export"] / "1"
    tokenizer = tokenization.FullTokenizer(str(version / "assets" / "vocab.txt"), True)
    rows = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
    for text in DEV:
        tokens, mask, segments = tokenization.pack_tokens(tokenizer.tokenize(text), None, 16)
        rows["input_word_ids"].append(tokenizer.convert_tokens_to_ids(tokens))
        rows["input_mask"].append(mask)
        rows["input_type_ids"].append(segments)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH="")
    out = subprocess.run([sys.executable, "-c", TF_ONLY, str(version / "model.tflite")],
                         input=json.dumps(rows), capture_output=True, text=True, env=env,
                         cwd="/", timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    served = np.asarray(json.loads(out.stdout)["probabilities"])
    # The float model's probabilities (the run's predictions of the same sentences):
    # int8 weights move them by little.
    expected = np.loadtxt(quantized["out"] / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(served, expected, atol=0.05)


def test_compare_scores_and_times_every_model(quantized, tmp_path):
    version = quantized["export"] / "1"
    report_file = tmp_path / "compare.json"
    result = run("official_bert/commands/compare.py",
                 f"--models={quantized['export']},{version / 'model.tflite'}",
                 f"--data_file={quantized['data'] / 'dev.tsv'}", "--task_name=sst-2",
                 "--rounds=2", "--b1_calls=2", f"--json_output={report_file}")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(report_file.read_text())
    saved, tflite = report["models"]
    assert (saved["engine"], saved["precision"]) == ("SavedModel", "float32")
    # (the tiny model's matrices are below the converter's size for int8 weights)
    assert (tflite["engine"], tflite["precision"]) == ("TFLite", "float32")
    assert report["length"] == 16 and report["rows_scored"] == len(DEV)
    # The SavedModel's accuracy is the run's own on its dev set.
    results = dict(line.split(" = ") for line in
                   (quantized["out"] / "eval_results.txt").read_text().splitlines())
    assert saved["metrics"]["accuracy"] == pytest.approx(float(results["eval_accuracy"]))
    assert saved["of_first"] == 1.0 and saved["speedup_b1"] == 1.0
    for row in report["models"]:
        assert row["b1_p50_ms"] > 0 and row["b1_p95_ms"] >= row["b1_p50_ms"]
        assert row["b32_rows_per_s"] > 0 and row["file_rows_per_s"] > 0 and row["size_mb"] > 0
    assert "| model | engine | precision | accuracy |" in result.stdout
    # Named by their paths less the folders they share.
    assert saved["name"] == "export_int8"
    assert tflite["name"] == "export_int8/1/model.tflite"


def test_compare_names_must_match_the_models(quantized):
    result = run("official_bert/commands/compare.py", f"--models={quantized['export']}",
                 "--names=a,b", f"--data_file={quantized['data'] / 'dev.tsv'}",
                 "--task_name=sst-2")
    assert result.returncode != 0 and "--names has 2 names for 1 --models" in result.stderr


def test_compare_refuses_a_task_it_cannot_read(quantized, tmp_path):
    result = run("official_bert/commands/compare.py", f"--models={quantized['export']}",
                 f"--data_file={quantized['data'] / 'dev.tsv'}")
    assert result.returncode != 0
    assert "--task_name is required" in result.stderr and "Traceback" not in result.stderr


def test_pretraining_refuses_quantize_before_training():
    """The pre-training export (fill in [MASK]s) has no int8 form: --quantize is
    refused with the flags, before any data is read or any step trained."""
    from official_bert.configs import PretrainingConfig, RunConfig
    from official_bert.errors import UserError
    from official_bert.tasks.pretraining import PretrainingTask

    run_config = RunConfig(output_dir="/tmp/x", export_dir="/tmp/e", quantize=True,
                           do_train=True)
    with pytest.raises(UserError, match="--quantize: the pre-training export"):
        PretrainingTask.check_flags(PretrainingConfig(input_file=["x.tfrecord"]), run_config)


def test_decisions_and_agreement():
    from official_bert.serving import edge

    mask = np.array([[1, 1, 0], [1, 0, 0]])
    a = {"tag_ids": np.array([[1, 2, 7], [3, 9, 9]])}
    b = {"tag_ids": np.array([[1, 2, 0], [4, 9, 9]])}  # padding differs: not a decision
    assert edge.agreement(a, b, mask) == 0.5
    p = {"probabilities": np.array([[0.9, 0.1], [0.4, 0.6]])}
    q = {"probabilities": np.array([[0.8, 0.2], [0.6, 0.4]])}
    assert edge.agreement(p, q, mask) == 0.5
    assert edge.label_score(p, {"label": np.array([0, 0]), "input_mask": mask}) == (
        "accuracy", 0.5)
    assert edge.agreement({"score": np.array([1.01, 2.0])}, {"score": np.array([1.02, 2.3])},
                          mask) == 0.5


def test_predict_reads_the_int8_model(quantized):
    version = quantized["export"] / "1"
    result = run("official_bert/commands/predict.py", f"--model={version / 'model.tflite'}",
                 stdin="\n".join(DEV) + "\n")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split("\t") for line in result.stdout.strip().splitlines()[1:]]
    assert [row[3] for row in rows] == DEV
    served = np.array([[float(p) for p in row[1:3]] for row in rows])
    expected = np.loadtxt(quantized["out"] / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(served, expected, atol=0.05)
