"""docs/contributing.md's worked example of a new task (examples/multilabel/) runs end to end:
the task module and its 30-line script get the whole run flow (validation, the
run directory, training, resume, eval_results.txt, predictions)."""

import json
import os
import sys

import pytest

from test_run_classifier import REPO, make_checkpoint
from support import processes

SCRIPT = os.path.join(REPO, "examples", "multilabel", "run_multilabel.py")
TRAIN = [("a good movie", ["positive", "film"]), ("the film was awful", ["negative", "film"]),
         ("great fun", ["positive"]), ("very bad", ["negative"])] * 4


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps({"text": t, "labels": labels}) + "\n"
                            for t, labels in rows))


def run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return processes.run([sys.executable, SCRIPT, *args], cwd=REPO, env=env, text=True,
                         capture_output=True, timeout=300)


@pytest.mark.slow  # 15 s or more here
def test_multilabel_example(tmp_path):
    ckpt = make_checkpoint(str(tmp_path / "ckpt"))
    write_jsonl(tmp_path / "train.jsonl", TRAIN)
    write_jsonl(tmp_path / "dev.jsonl", TRAIN[:4])
    out = tmp_path / "out"
    common = [f"--init_checkpoint={ckpt}", f"--output_dir={out}", "--max_seq_length=16",
              f"--eval_file={tmp_path / 'dev.jsonl'}", f"--predict_file={tmp_path / 'dev.jsonl'}"]
    result = run("--do_train", "--do_eval", "--do_predict", f"--train_file={tmp_path / 'train.jsonl'}",
                 "--train_batch_size=4", "--num_train_epochs=2", "--learning_rate=1e-3", *common)
    assert result.returncode == 0, result.stderr[-3000:]
    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    assert {"eval_micro_f1", "eval_precision", "eval_recall", "eval_exact_match", "global_step",
            "num_examples"} <= set(results)
    assert results["global_step"] == "8" and results["num_examples"] == "4"
    assert (out / "labels.txt").read_text().split() == ["film", "negative", "positive"]
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["text"] for p in predictions] == [t for t, _ in TRAIN[:4]]

    # Evaluating the run again needs no --train_file: the run flow resumes it.
    again = run("--do_eval", *common[1:])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Using " in again.stderr and "(step 8): its weights, untrained further" in again.stderr

    # A bad line is one error naming the file and line, before anything is written.
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{"labels": []}\n')
    bad = run("--do_train", f"--train_file={tmp_path / 'bad.jsonl'}",
              f"--init_checkpoint={ckpt}", f"--output_dir={tmp_path / 'never'}",
              "--max_seq_length=16")
    assert bad.returncode == 1
    assert f"error: {tmp_path / 'bad.jsonl'} line 2 is not a JSON object with a 'text'" in bad.stderr
    assert not (tmp_path / "never").exists()
