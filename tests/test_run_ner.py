"""run_ner.py end to end on tiny files with a tiny random encoder: fine-tuning with
long-sentence windows, eval/predict outputs, the raw-sentence export (loaded without
this project), the feature-based path, and one-line errors for bad input."""

import json
import os
import shutil
import re
import sys

import pytest

from official_bert.metrics import ner as ner_metrics
from support import processes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a man woman walk ##s ##ing to of in city new york "
         "john smith paris went and is on . , he she sat down").split()
TRAIN = """-DOCSTART- -X- O O

John NNP I-NP I-PER
Smith NNP I-NP I-PER
went VBD I-VP O
to TO I-PP O
New NNP I-NP I-LOC
York NNP I-NP I-LOC
. . O O

the DT I-NP O
man NN I-NP O
walks VBZ I-VP O
in IN I-PP O
Paris NNP I-NP I-LOC

she PRP I-NP O
went VBD I-VP O
to TO I-PP O
Paris NNP I-NP I-LOC
"""


def make_checkpoint(directory):
    from official_bert import checkpoints
    from official_bert.modeling.configs import BertConfig
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs

    os.makedirs(directory, exist_ok=True)
    vocab = os.path.join(directory, "vocab.txt")
    with open(vocab, "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    encoder = BertEncoder.from_bert_config(config)
    encoder(dummy_inputs())
    checkpoints.save_checkpoint(encoder, directory, vocab_file=vocab)
    return directory


def run(script, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return processes.run([sys.executable, os.path.join(REPO, script), *args], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("ner")
    ckpt = make_checkpoint(str(root / "ckpt"))
    train = root / "train.conll"
    train.write_text(TRAIN)
    out, export = root / "out", root / "export"
    result = run("run_ner.py", "--do_train", "--do_eval", "--do_predict",
                 f"--train_file={train}", f"--eval_file={train}", f"--predict_file={train}",
                 f"--init_checkpoint={ckpt}", "--max_seq_length=8", "--train_batch_size=2",
                 "--num_train_epochs=2", "--log_steps=1", f"--output_dir={out}",
                 f"--export_dir={export}")
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(root=root, ckpt=ckpt, train=train, out=out, export=export, log=result.stderr)


def read_results(path):
    return {k.strip(): float(v) for k, v in
            (line.split("=") for line in open(path).read().splitlines())}


def test_fine_tuning_outputs(trained):
    out = trained["out"]
    # 7 words = 8 sub-tokens > max_seq_length - 2: the first sentence needs 2 windows.
    assert "4 windows (1 extra windows of long sentences)" in trained["log"]
    results = read_results(out / "eval_results.txt")
    for key in ("entity_f1", "precision", "recall", "token_accuracy", "eval_loss",
                "PER_f1", "LOC_f1", "LOC_precision", "LOC_recall"):
        assert key in results
    assert results["global_step"] == 4.0  # 4 windows / batch 2 × 2 epochs
    assert (out / "label_list.txt").read_text().split() == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    # Predictions beside the gold, every word once, in the file's (IOB1) scheme.
    lines = (out / "eval_predictions.conll").read_text().split("\n")
    rows = [l.split() for l in lines if l]
    assert len(rows) == 16 and all(len(r) == 5 for r in rows)
    assert rows[0][:4] == ["John", "NNP", "I-NP", "I-PER"]
    gold_iob1 = [r[3] for r in rows]
    assert ner_metrics.detect_scheme([gold_iob1]) == "iob1"
    assert (out / "test_predictions.conll").exists()
    # --predict_file has gold tags: they are scored, in test_results.txt and in the log.
    scored = read_results(out / "test_results.txt")
    logged = re.search(r"Predict results \(--predict_file's gold tags, in \S+\): (.*)",
                       trained["log"])
    assert logged, trained["log"][-2000:]
    assert f"entity_f1 = {scored['entity_f1']:.4g}" in logged.group(1)


def test_a_predict_only_rerun_reads_at_the_trained_length_and_says_so(trained, tmp_path):
    """Trained at --max_seq_length=8, rerun with --do_predict alone and no length:
    it predicts at 8 (the same windows, the same scores), says so, and says it
    uses the checkpoint, not that it resumed (it trains nothing)."""
    out = tmp_path / "out"
    shutil.copytree(trained["out"], out)
    result = run("run_ner.py", "--do_predict", f"--predict_file={trained['train']}",
                 f"--init_checkpoint={trained['ckpt']}", f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--max_seq_length=8: the length this run was trained with (run.json" in result.stderr
    assert "Resumed from" not in result.stderr
    assert f"Using {out / 'ckpt-4'} (step 4)" in result.stderr
    assert read_results(out / "test_results.txt") == read_results(
        trained["out"] / "test_results.txt")


def test_export_round_trip_without_project(trained):
    [version] = list(trained["export"].iterdir())  # the one TF Serving version
    assert (version / "saved_model.pb").exists()
    script = f"""
import json, sys
sys.modules["official_bert"] = None  # the export must not need this project
sys.modules["data_prep"] = None
import tensorflow as tf, tensorflow_text  # noqa: F401  (WordPiece ops)
serve = tf.saved_model.load({str(version)!r}).signatures["serving_default"]
out = serve(text=tf.constant(["the man walks in Paris", "she went to Paris", ""]))
print(json.dumps({{k: v.numpy().tolist() for k, v in out.items() if k != "tag_probabilities"}},
                 default=lambda b: b.decode()))
"""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH="", CUDA_VISIBLE_DEVICES="")
    result = processes.run([sys.executable, "-c", script], cwd=str(trained["root"]), env=env,
                           capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["num_words"] == [5, 4, 0]
    assert out["words"][0][:5] == ["the", "man", "walks", "in", "Paris"]
    # Same tags as the Trainer's prediction for sentences that fit one window.
    predicted = [ner_metrics.to_bio([line.split()[-1] for line in block.strip().split("\n")])
                 for block in (trained["out"] / "test_predictions.conll").read_text().strip().split("\n\n")]
    # (the export gives each word's argmax tag; read as entities they are the same)
    assert ner_metrics.to_bio(out["tags"][0][:5]) == predicted[1]
    assert ner_metrics.to_bio(out["tags"][1][:4]) == predicted[2]
    assert out["tags"][2] == [""] * len(out["tags"][2])


def test_bad_inputs_are_one_line_errors(trained):
    # (a wrong column count is checked in test_conll.py; here the CLI's one-line error)
    unknown = trained["root"] / "unknown.conll"
    unknown.write_text("John NNP I-NP I-PER\nIBM NNP I-NP I-ORG\n")
    result = run("run_ner.py", "--do_predict", f"--predict_file={unknown}",
                 f"--init_checkpoint={trained['ckpt']}", f"--output_dir={trained['out']}",
                 "--max_seq_length=8")
    assert result.returncode == 1
    assert "unknown.conll line 2 has the tag 'B-ORG'" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow  # 7 s or more here
def test_feature_based(trained, tmp_path):
    out = tmp_path / "feat"
    result = run("run_ner.py", "--feature_based", "--layers=-1,-2", "--combine=concat",
                 "--task_model=dense", "--lstm_units=4", "--do_train", "--do_eval",
                 f"--train_file={trained['train']}", f"--eval_file={trained['train']}",
                 f"--init_checkpoint={trained['ckpt']}", "--max_seq_length=8",
                 "--train_batch_size=2", "--num_train_epochs=1", "--log_steps=1",
                 "--learning_rate=1e-3", f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    results = read_results(out / "eval_results.txt")
    assert {"entity_f1", "precision", "recall", "token_accuracy"} <= set(results)
    cached = os.listdir(out / "feature_cache")
    # One cache for the file (train and eval read the same file and settings
    # except the train-only --max_train_examples key): features + offsets.
    assert any(n.endswith(".features.npy") for n in cached)
    assert "Using cached" in result.stderr or len(cached) == 4
    import numpy as np
    flat = np.load(out / "feature_cache" / next(n for n in cached if n.endswith(".features.npy")))
    assert flat.shape == (16, 32)  # 16 words, 2 layers × H=16 concatenated


@pytest.mark.parametrize("flags,message", [
    (dict(task_dropout=1.5), r"--task_dropout must be in \[0, 1\), got 1.5"),
    (dict(lstm_units=0), "--lstm_units must be positive, got 0"),
    (dict(feature_batch_size=0), "--feature_batch_size must be positive, got 0"),
    (dict(task_model_layers=-1), "--task_model_layers cannot be negative, got -1"),
])
def test_bad_feature_based_flags_are_one_line(flags, message):
    # (Keras's own errors, later, named no flag)
    from official_bert.configs import NerConfig, RunConfig
    from official_bert.errors import UserError
    from official_bert.tasks import ner

    with pytest.raises(UserError, match=f"^{message}$"):
        ner.FeatureBasedNerTask.check_flags(NerConfig(feature_based=True, **flags),
                                            RunConfig(init_checkpoint="ckpt", output_dir="out"))


def test_fine_tuned_run_as_init_checkpoint_keeps_its_head(trained, tmp_path):
    result = run("run_ner.py", "--do_eval", f"--eval_file={trained['train']}",
                 f"--init_checkpoint={trained['out']}", "--max_seq_length=8",
                 f"--output_dir={tmp_path / 'again'}")
    assert result.returncode == 0, result.stderr[-3000:]
    own = read_results(trained["out"] / "eval_results.txt")
    again = read_results(tmp_path / "again" / "eval_results.txt")
    for key in ("entity_f1", "token_accuracy", "eval_loss"):
        assert again[key] == own[key], key
    labels = (trained["out"] / "label_list.txt").read_text()
    num_labels = len(labels.split())
    assert f"Task head: restored output_weights ({num_labels}, 16) from the checkpoint" in result.stderr


@pytest.mark.parametrize("given", ["encoder", "other_labels"])
def test_evaluating_a_random_head_is_refused(trained, tmp_path, given):
    # --output_dir holds the label list (a run stopped before its first checkpoint) but
    # no checkpoint: without --do_train the head must come from --init_checkpoint.
    labels = (trained["out"] / "label_list.txt").read_text()
    num_labels = len(labels.split())
    out = tmp_path / "out"
    out.mkdir()
    (out / "label_list.txt").write_text(labels + ("B-MISC\n" if given == "other_labels" else ""))
    init = trained["ckpt"] if given == "encoder" else trained["out"]
    result = run("run_ner.py", "--do_eval", f"--eval_file={trained['train']}",
                 f"--init_checkpoint={init}", "--max_seq_length=8", f"--output_dir={out}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    holds = ("holds an encoder only" if given == "encoder" else
             f"holds a head of shape ({num_labels}, 16) (output_weights) that does not fit "
             f"this task's ({num_labels + 1}, 16)")
    assert f"error: --init_checkpoint {init} {holds}, and --output_dir holds no checkpoint: " \
        "evaluating or exporting now would use a random head" in result.stderr
    if given == "other_labels":
        assert (f"Skipped output_weights of shape ({num_labels}, 16) in {init}: this task's "
                f"head needs ({num_labels + 1}, 16)") in result.stderr
        assert f"Task head: initialized output_bias ({num_labels + 1},) (the checkpoint's does " \
            "not fit)" in result.stderr
