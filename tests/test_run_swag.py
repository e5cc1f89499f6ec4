"""run_swag.py end to end on a tiny 3-choice file with a tiny random encoder: training,
eval_results.txt, test_results.tsv, the raw-text export (loaded without this project)
agreeing with the Trainer's probabilities, and a one-line error for a missing ending."""

import json
import os
import sys

import numpy as np
import pytest

from support import processes
from test_run_ner import make_checkpoint, run

DATA = """video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,label
v0,0,x,The man walks to the city.,He,gold,sat down.,went to paris.,is on the man.,1
v1,1,x,She went to New York.,,gold,he sat down.,she sat down.,the city.,1
v2,2,x,John Smith walks.,He,gold,went to the city.,is a man.,is on.,0
v3,3,x,The woman sat down.,She,gold,is on the city.,walks.,sat down.,2
"""

# Its trained run takes 21-37 s here (CI time): slow. By default, SWAG's reader and
# batches are tested in tests/test_swag.py and tests/test_fine_tuning_input.py.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("swag")
    ckpt = make_checkpoint(str(root / "ckpt"))
    data = root / "swag.csv"
    data.write_text(DATA)
    out, export = root / "out", root / "export"
    result = run("run_swag.py", "--do_train", "--do_eval", "--do_predict",
                 f"--train_file={data}", f"--eval_file={data}", f"--predict_file={data}",
                 f"--init_checkpoint={ckpt}", "--max_seq_length=16", "--train_batch_size=2",
                 "--num_train_epochs=1", "--log_steps=1", "--learning_rate=1e-3",
                 f"--output_dir={out}", f"--export_dir={export}")
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(root=root, ckpt=ckpt, data=data, out=out, export=export)


def test_outputs(trained):
    results = dict(line.split(" = ") for line in
                   (trained["out"] / "eval_results.txt").read_text().splitlines())
    assert {"eval_accuracy", "eval_loss", "global_step", "num_examples"} <= set(results)
    assert results["global_step"] == "2" and results["num_examples"] == "4"
    assert 0.0 <= float(results["eval_accuracy"]) <= 1.0
    probabilities = np.loadtxt(trained["out"] / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (4, 3)  # one column per choice
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)


def test_export_round_trip_without_project(trained):
    [version] = list(trained["export"].iterdir())  # the one TF Serving version
    script = f"""
import json, sys
sys.modules["official_bert"] = None  # the export must not need this project
sys.modules["data_prep"] = None
import tensorflow as tf, tensorflow_text  # noqa: F401  (WordPiece ops)
serve = tf.saved_model.load({str(version)!r}).signatures["serving_default"]
out = serve(context=tf.constant(["The man walks to the city.", "She went to New York."]),
            start=tf.constant(["He", ""]),
            endings=tf.constant([["sat down.", "went to paris.", "is on the man."],
                                 ["he sat down.", "she sat down.", "the city."]]))
print(json.dumps(out["probabilities"].numpy().tolist()))
"""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH="", CUDA_VISIBLE_DEVICES="")
    result = processes.run([sys.executable, "-c", script], cwd=str(trained["root"]), env=env,
                           capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    served = np.asarray(json.loads(result.stdout.strip().splitlines()[-1]))
    expected = np.loadtxt(trained["out"] / "test_results.tsv", delimiter="\t")[:2]
    np.testing.assert_allclose(served, expected, atol=1e-5)


def test_missing_ending_is_a_one_line_error(trained):
    bad = trained["root"] / "bad.csv"
    bad.write_text(DATA.replace("is a man.,is on.,0", "is a man.,,0"))
    result = run("run_swag.py", "--do_eval", f"--eval_file={bad}",
                 f"--init_checkpoint={trained['ckpt']}", f"--output_dir={trained['out']}",
                 "--max_seq_length=16")
    assert result.returncode == 1
    assert "bad.csv line 4 has an empty ending2" in result.stderr
    assert "Traceback" not in result.stderr


def test_fine_tuned_run_as_init_checkpoint_keeps_its_head(trained, tmp_path):
    result = run("run_swag.py", "--do_eval", f"--eval_file={trained['data']}",
                 f"--init_checkpoint={trained['out']}", "--max_seq_length=16",
                 f"--output_dir={tmp_path / 'again'}")
    assert result.returncode == 0, result.stderr[-3000:]
    read = lambda p: dict(line.split(" = ") for line in p.read_text().splitlines())  # noqa: E731
    own, again = read(trained["out"] / "eval_results.txt"), read(tmp_path / "again" / "eval_results.txt")
    assert (again["eval_accuracy"], again["eval_loss"]) == (own["eval_accuracy"], own["eval_loss"])
    assert "Task head: restored output_weights (1, 16) from the checkpoint" in result.stderr
    # The pre-trained encoder alone has no choice scorer: evaluating it is refused.
    refused = run("run_swag.py", "--do_eval", f"--eval_file={trained['data']}",
                  f"--init_checkpoint={trained['ckpt']}", "--max_seq_length=16",
                  f"--output_dir={tmp_path / 'random'}")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert f"--init_checkpoint {trained['ckpt']} holds an encoder only" in refused.stderr
    assert "would use a random head" in refused.stderr
