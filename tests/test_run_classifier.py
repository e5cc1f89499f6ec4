"""run_classifier.py end to end with a tiny random encoder on a tiny SST-2-layout set: training,
eval_results.txt (every dev example counted once, with a last batch smaller than the others),
test_results.tsv, export from an existing run's checkpoint, predict.py on that export, and
one-line errors; plus the classifier head and loss (in process)."""

import json
import math
import os
import pathlib
import sys

import numpy as np
import pytest

from support import processes, tiny_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a movie film is was very good bad great awful "
         "fun dull boring charming , . !").split()
TRAIN = ["the movie was good", "a very bad film", "great fun !", "dull and boring",
         "charming , charming movie", "an awful film .", "very good .", "bad , bad , bad"]
TRAIN_LABELS = [1, 0, 1, 0, 1, 0, 1, 0]
DEV = ["a good movie", "the film is awful", "great !", "boring", "very very charming fun"]
DEV_LABELS = [1, 0, 1, 0, 1]


def make_checkpoint(directory):
    from official_bert import checkpoints
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs

    os.makedirs(directory, exist_ok=True)
    vocab = os.path.join(directory, "vocab.txt")
    with open(vocab, "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    encoder = BertEncoder.from_bert_config(tiny_config(vocab_size=len(VOCAB)))
    encoder(dummy_inputs())
    checkpoints.save_checkpoint(encoder, directory, vocab_file=vocab)
    return directory


def write_sst2(directory, train=None, dev=None, test=None):
    """GLUE's SST-2 layout in `directory` (made if needed): train.tsv / dev.tsv
    from (sentences, labels), test.tsv (index, sentence) from sentences; None
    is not written."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("dev", dev)):
        if rows is not None:
            (directory / f"{name}.tsv").write_text("sentence\tlabel\n" + "".join(
                f"{s}\t{y}\n" for s, y in zip(*rows)))
    if test is not None:
        (directory / "test.tsv").write_text("index\tsentence\n" + "".join(
            f"{i}\t{s}\n" for i, s in enumerate(test)))
    return directory


def run(script, *args, stdin=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return processes.run([sys.executable, os.path.join(REPO, script), *args], cwd=REPO, env=env,
                         input=stdin, capture_output=True, text=True, timeout=300)


def read_results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


def train_tiny_classifier(root):
    """The run every test of a fine-tuned classifier reads: run_classifier.py trained,
    evaluated and predicted under `root` (conftest's session fixture `classifier_run`)."""
    ckpt = make_checkpoint(str(root / "ckpt"))
    data = write_sst2(root / "sst", (TRAIN, TRAIN_LABELS), (DEV, DEV_LABELS), DEV)
    out = root / "out"
    result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={data}",
                 f"--init_checkpoint={ckpt}", "--do_train", "--do_eval", "--do_predict",
                 "--max_seq_length=16", "--train_batch_size=4", "--eval_batch_size=2",
                 "--predict_batch_size=3", "--num_train_epochs=1", "--learning_rate=1e-3",
                 "--log_steps=1", f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(root=root, ckpt=ckpt, data=data, out=out, log=result.stderr)


@pytest.fixture(scope="module")
def trained(classifier_run):
    return classifier_run


def test_eval_counts_every_example_once(trained):
    results = read_results(trained["out"] / "eval_results.txt")
    # google-research/bert's keys (eval_accuracy, eval_loss, global_step, loss) and ours.
    assert set(results) == {"eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss",
                            "num_examples"}
    assert results["loss"] == results["eval_loss"]
    assert results["global_step"] == "2"  # 8 examples / batch 4, one epoch
    assert results["num_examples"] == "5"  # batches of 2, 2, 1: none dropped or padded
    # test.tsv holds the dev sentences: its probabilities give the eval numbers back.
    probabilities = np.loadtxt(trained["out"] / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (5, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    # Prediction reports its progress: the 5 dev and the 5 test examples.
    assert trained["log"].count("predicted 5 examples in") == 2
    labels = np.array(DEV_LABELS)
    loss = -np.mean(np.log(probabilities[np.arange(5), labels]))
    assert float(results["eval_loss"]) == pytest.approx(loss, abs=1e-5)
    accuracy = np.mean(probabilities.argmax(axis=1) == labels)
    assert float(results["eval_accuracy"]) == pytest.approx(accuracy)
    # GLUE's leaderboard file: the test file's index and the most probable label.
    assert (trained["out"] / "SST-2.tsv").read_text() == "index\tprediction\n" + "".join(
        f"{i}\t{k}\n" for i, k in enumerate(probabilities.argmax(axis=1)))


def test_run_directory(trained):
    out = trained["out"]
    config = json.loads((out / "classifier_config.json").read_text())
    assert config["labels"] == ["0", "1"] and config["pair"] is False
    assert config["max_seq_length"] == 16 and config["do_lower_case"] is True
    assert (out / "bert_config.json").exists() and (out / "vocab.txt").exists()
    assert os.listdir(out / "train") and os.listdir(out / "eval")  # TensorBoard summaries
    cached = sorted(p.name.split("-")[0] for p in (out / "features").iterdir())
    assert cached == ["dev", "test", "train"]
    assert "examples_per_second" in trained["log"]


def test_export_existing_run_and_predict(trained):
    export = trained["root"] / "export"
    result = run("run_classifier.py", "--task_name=sst-2", "--max_seq_length=16",
                 f"--output_dir={trained['out']}", f"--export_dir={export}")
    assert result.returncode == 0, result.stderr[-3000:]
    # The run's checkpoint, not the random init; nothing trains, so nothing "resumed".
    assert "Using " in result.stderr and "Resumed from" not in result.stderr
    [version] = os.listdir(export)  # one TF Serving version: seconds since the epoch
    assert version.isdigit()

    result = run("official_bert/commands/predict.py", f"--model={export}",
                 stdin="\n".join(DEV) + "\n\n")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert lines[0].split("\t") == ["label", "p(0)", "p(1)", "text"]
    rows = [line.split("\t") for line in lines[1:]]
    assert [row[3] for row in rows] == DEV
    served = np.array([[float(p) for p in row[1:3]] for row in rows])
    expected = np.loadtxt(trained["out"] / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(served, expected, atol=1e-5)
    assert [row[0] for row in rows] == [str(i) for i in expected.argmax(axis=1)]


def test_predictor_on_the_run_directory(trained):
    """predict.py's model loader, on the run's checkpoint (in process)."""
    from official_bert.serving import classification as export

    predictor = export.ClassifierPredictor(str(trained["out"]))
    assert not predictor.pair and predictor.labels == ["0", "1"]
    assert predictor.source.startswith("checkpoint ")
    outputs = predictor.predict(DEV)
    expected = np.loadtxt(trained["out"] / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(outputs["probabilities"], expected, atol=1e-5)
    with pytest.raises(ValueError, match="single-sentence: it takes text_a only, no text_b"):
        predictor.predict(DEV, DEV)
    with pytest.raises(ValueError, match="neither a SavedModel"):
        export.ClassifierPredictor(str(trained["data"]))


def test_unknown_task_lists_the_known_ones(trained):
    result = run("run_classifier.py", "--task_name=sst-3", "--do_eval", f"--output_dir={trained['out']}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ("error: --task_name='sst-3' is unknown; known tasks: cola, mnli, mrpc, qnli, qqp, rte, "
            "sst-2, sts-b, wnli, xnli, xnli-<lang>, custom") in result.stderr


def test_unknown_label_is_a_one_line_error(trained):
    bad = trained["root"] / "bad"
    bad.mkdir()
    (bad / "dev.tsv").write_text("sentence\tlabel\ngood\t1\nbad\tnegative\n")
    result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={bad}", "--do_eval",
                 f"--output_dir={trained['out']}", "--max_seq_length=16")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "dev.tsv line 3 has the unknown label 'negative'; the labels are 0, 1" in result.stderr


# === The head and the loss (in process) ===


def test_classifier_head_and_config():
    import keras

    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from official_bert.modeling.heads import BertClassifier

    encoder = BertEncoder.from_bert_config(tiny_config())
    model = BertClassifier(encoder, num_classes=3, dropout=0.2)
    assert model(dummy_inputs(batch_size=2)).shape == (2, 3)
    clone = BertClassifier.from_config(model.get_config())
    assert clone.num_classes == 3 and clone.dropout_rate == 0.2
    assert keras.saving.get_registered_object("official_bert>BertClassifier") is BertClassifier
    with pytest.raises(ValueError, match="num_classes=0"):
        BertClassifier(encoder, num_classes=0)


def test_load_head_weights():
    from official_bert.checkpoints import BertCheckpoint
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from official_bert.modeling.heads import BertClassifier

    config = tiny_config()
    model = BertClassifier(BertEncoder.from_bert_config(config), num_classes=3)
    model(dummy_inputs())
    kernel = np.arange(3 * config.hidden_size, dtype=np.float32).reshape(3, config.hidden_size)
    bias = np.array([1.0, 2.0, 3.0], np.float32)
    checkpoint = BertCheckpoint("google_tf1", "x", config,
                                {"output_weights": kernel, "output_bias": bias})
    assert model.load_head_weights(checkpoint)
    np.testing.assert_array_equal(model.classifier.kernel.numpy(), kernel.T)  # [C, H] → [H, C]
    np.testing.assert_array_equal(model.classifier.bias.numpy(), bias)
    # A head for another number of classes (MNLI's, reused for RTE) is left out.
    two = BertClassifier(BertEncoder.from_bert_config(config), num_classes=2)
    two(dummy_inputs())
    assert not two.load_head_weights(checkpoint)
    assert not model.load_head_weights(BertCheckpoint("google_tf1", "x", config, {}))


def test_head_restore_is_logged_weight_by_weight(caplog):
    # One place (Task.initialize) logs what load_head_weights did with each head weight;
    # a 3-class MNLI head given to a 2-class task is skipped, with a warning.
    import logging

    from official_bert.checkpoints import BertCheckpoint, get_encoder_weights
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from official_bert.modeling.heads import BertClassifier
    from official_bert.tasks.classification import ClassificationTask

    config = tiny_config()
    encoder = BertEncoder.from_bert_config(config)
    encoder(dummy_inputs())
    weights = dict(get_encoder_weights(encoder), output_weights=np.ones((3, 16), np.float32),
                   output_bias=np.ones(3, np.float32))
    checkpoint = BertCheckpoint("official_bert", "mnli_run", config, weights)

    def initialize(num_classes):
        task = ClassificationTask(num_classes=num_classes, bert_config=config)
        model = BertClassifier(BertEncoder.from_bert_config(config), num_classes=num_classes)
        model(dummy_inputs())
        caplog.clear()
        # absl.logging's logger is "absl": an earlier test in the process may have raised its level.
        with caplog.at_level(logging.INFO, logger="absl"):
            report = task.initialize(model, checkpoint)
        return report, [r.getMessage() for r in caplog.records]

    report, log = initialize(2)
    assert not report
    assert "Task head: initialized output_weights (2, 16) (the checkpoint's does not fit)" in log
    assert "Task head: initialized output_bias (2,) (the checkpoint's does not fit)" in log
    assert ("Skipped output_weights of shape (3, 16) in mnli_run: this task's head needs "
            "(2, 16) (a head for another number of labels?)") in log
    assert report.what_the_checkpoint_holds() == (
        "holds a head of shape (3, 16) (output_weights) that does not fit this task's (2, 16)")

    report, log = initialize(3)
    assert report and not any(line.startswith("Skipped") for line in log)
    assert [line for line in log if line.startswith("Task head:")] == [
        "Task head: restored output_weights (3, 16) from the checkpoint",
        "Task head: restored output_bias (3,) from the checkpoint"]


def test_classification_and_regression_losses():
    import tensorflow as tf

    from official_bert.tasks.classification import ClassificationTask

    class Fixed:  # a "model" that returns given logits
        def __init__(self, logits):
            self.logits = tf.constant(logits, tf.float32)

        def __call__(self, features, training=False):
            return self.logits

    task = ClassificationTask(num_classes=2, bert_config=tiny_config())
    features = {"label": tf.constant([1, 0], tf.int32)}
    # Global batch of 4 (two replicas): the sum over this replica's 2 examples / 4.
    loss, metrics = task.loss_and_metrics(Fixed([[0.0, 0.0], [0.0, math.log(3.0)]]), features,
                                          {"examples": tf.constant(4.0)}, training=True)
    assert float(loss) == pytest.approx((math.log(2.0) + math.log(4.0)) / 4)
    correct, count = metrics["accuracy"]
    assert float(correct) == 0.0 and float(count) == 2.0  # a tie picks class 0; row 2 is wrong

    regression = ClassificationTask(num_classes=1, bert_config=tiny_config())
    features = {"label": tf.constant([1.0, 3.0])}
    loss, metrics = regression.loss_and_metrics(Fixed([[2.0], [3.0]]), features,
                                                regression.loss_normalizers(features), training=True)
    assert float(loss) == pytest.approx(0.5)  # squared errors 1 and 0 over 2 examples
    assert float(metrics["mse"][0]) == pytest.approx(1.0)


def test_xla_evaluation_equals_the_plain_one(trained, tmp_path):
    # --jit_compile also compiles the prediction step (one program per batch
    # shape: batches of 2, 2 and 1 here); the metrics must not move.
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(trained["out"], copy)
    result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={trained['data']}",
                 "--do_eval", "--max_seq_length=16", "--eval_batch_size=2", "--jit_compile",
                 f"--output_dir={copy}")
    assert result.returncode == 0, result.stderr[-3000:]
    plain = read_results(trained["out"] / "eval_results.txt")
    xla = read_results(copy / "eval_results.txt")
    assert xla["num_examples"] == "5" and xla["global_step"] == plain["global_step"]
    assert float(xla["eval_loss"]) == pytest.approx(float(plain["eval_loss"]), abs=1e-5)
    assert xla["eval_accuracy"] == plain["eval_accuracy"]


@pytest.mark.slow  # 10 s or more here
def test_dynamic_padding_keeps_the_metrics(trained, tmp_path):
    # At --max_seq_length=32 the batches are cut to 16 columns (every dev
    # sentence is shorter): padding is masked out, so the metrics must not move.
    # Training with cut batches under XLA (shapes vary by batch) must run too.
    import shutil

    results = {}
    for name, flag in (("cut", "--dynamic_padding"), ("full", "--nodynamic_padding")):
        copy = tmp_path / name
        shutil.copytree(trained["out"], copy)
        result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={trained['data']}",
                     "--do_eval", "--max_seq_length=32", "--eval_batch_size=2", flag,
                     f"--output_dir={copy}")
        assert result.returncode == 0, result.stderr[-3000:]
        results[name] = read_results(copy / "eval_results.txt")
    assert results["cut"]["num_examples"] == "5"
    assert float(results["cut"]["eval_loss"]) == pytest.approx(
        float(results["full"]["eval_loss"]), abs=1e-5)
    assert results["cut"]["eval_accuracy"] == results["full"]["eval_accuracy"]

    result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={trained['data']}",
                 f"--init_checkpoint={trained['ckpt']}", "--do_train", "--max_seq_length=32",
                 "--train_batch_size=4", "--num_train_epochs=2", "--jit_compile",
                 f"--output_dir={tmp_path / 'train'}")
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow  # 10 s or more here
def test_gradient_accumulation_with_dynamic_padding_trains(trained, tmp_path):
    # One long sentence: its micro-batch is cut to 32 columns, the other one of
    # its update to 16, unless the update's batch is cut whole before it is split
    # (tests/test_fine_tuning_input.py: the micro-batches are that batch's halves).
    texts = TRAIN[:-1] + ["very " * 20 + "good"]
    data = write_sst2(tmp_path / "sst", (texts, TRAIN_LABELS), None, None)
    result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={data}",
                 f"--init_checkpoint={trained['ckpt']}", "--do_train", "--max_seq_length=32",
                 "--train_batch_size=4", "--gradient_accumulation_steps=2",
                 "--num_train_epochs=1", "--log_steps=1", f"--output_dir={tmp_path / 'out'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "batch 4 (2 per replica x 2 accumulation steps)" in result.stderr
    assert "step 2/2" in result.stderr  # 8 examples, 4 an update


def test_fine_tuned_run_as_init_checkpoint_keeps_its_head(trained, tmp_path):
    # google-research/bert restores every variable whose name matches, heads included:
    # a fine-tuned run given as --init_checkpoint evaluates as the run itself did.
    common = ["--task_name=sst-2", f"--data_dir={trained['data']}", "--do_eval",
              "--max_seq_length=16", "--eval_batch_size=2"]
    result = run("run_classifier.py", *common, f"--init_checkpoint={trained['out']}",
                 f"--output_dir={tmp_path / 'again'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "and the task head" in result.stderr
    # The log names each head weight restored, with its shape (H = 16, 2 labels).
    assert "Task head: restored output_weights (2, 16) from the checkpoint" in result.stderr
    assert "Task head: restored output_bias (2,) from the checkpoint" in result.stderr
    own = read_results(trained["out"] / "eval_results.txt")
    again = read_results(tmp_path / "again" / "eval_results.txt")
    assert (again["eval_accuracy"], again["eval_loss"]) == (own["eval_accuracy"], own["eval_loss"])
    # The pre-trained encoder alone has no classifier head: evaluating it is refused.
    refused = run("run_classifier.py", *common, f"--init_checkpoint={trained['ckpt']}",
                  f"--output_dir={tmp_path / 'random'}")
    assert refused.returncode == 1
    assert f"--init_checkpoint {trained['ckpt']} holds an encoder only" in refused.stderr
    assert "random head" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.slow  # 10 s or more here
def test_a_run_started_from_another_run_records_its_step(trained, tmp_path):
    """--init_checkpoint=<a run directory>: its latest checkpoint is read and named
    with its step, and the new run's record keeps where it started (issue 56)."""
    out = tmp_path / "from_run"
    result = run("run_classifier.py", "--task_name=sst-2", f"--data_dir={trained['data']}",
                 f"--init_checkpoint={trained['out']}", "--do_train", "--max_seq_length=16",
                 "--train_batch_size=4", "--max_train_examples=4", f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Reading ckpt-2 (step 2), the latest checkpoint of {trained['out']}" in result.stderr
    record = json.loads((out / "run.json").read_text())
    assert record["started_from"] == {"path": str(trained["out"]), "checkpoint": "ckpt-2",
                                      "step": 2}


@pytest.mark.slow  # 10 s or more here
def test_bfloat16_export_serves_the_runs_labels(trained):
    """--serving_dtype=bfloat16: weights stored in bfloat16 in the SavedModel,
    answers within bfloat16's rounding of the float32 checkpoint's."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's text ops)

    export = trained["root"] / "export_bf16"
    result = run("run_classifier.py", "--task_name=sst-2", "--max_seq_length=16",
                 f"--output_dir={trained['out']}", f"--export_dir={export}",
                 "--export_version=3", "--serving_dtype=bfloat16")
    assert result.returncode == 0, result.stderr[-3000:]
    reader = tf.train.load_checkpoint(str(export / "3" / "variables" / "variables"))
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    matrices = {dtypes[name] for name, shape in shapes.items() if len(shape) == 2}
    assert matrices == {tf.bfloat16}, matrices  # every matrix: embeddings, kernels, the head
    loaded = tf.saved_model.load(str(export / "3"))
    served = loaded.signatures["serving_default"](text_a=tf.constant(DEV))
    expected = np.loadtxt(trained["out"] / "test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=3e-2)
    without = run("run_classifier.py", "--task_name=sst-2", f"--output_dir={trained['out']}",
                  "--do_eval", "--serving_dtype=bfloat16")
    assert without.returncode == 1
    assert without.stderr.strip().splitlines()[-1] == (
        "error: --serving_dtype needs --export_dir (it sets the TF Serving export's precision)")
