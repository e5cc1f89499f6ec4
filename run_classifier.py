"""Sentence(-pair) classification and regression with BERT: GLUE and your own data.

`--task_name` is a GLUE task (cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte,
wnli; files under `--data_dir` in GLUE's layout, see `data_prep/glue.py`) or
`custom`: your own `.tsv` / `.csv` (with a header) / `.jsonl` files, found as
`--data_dir`/train.*, dev.*, test.* or given by `--train_file --eval_file
--predict_file`, with `--text_a_column` (`--text_b_column` for pairs) and
`--label_column`; the labels are `--labels`, or read from the training data
(sorted), or a float score with `--regression`.

The model is a dense layer on the pooled [CLS] vector (`models.BertClassifier`;
cross-entropy, or MSE for regression), fine-tuned with BERT's recipe (AdamW,
weight decay 0.01 except LayerNorm and biases, linear warm-up and decay,
global-norm clipping 1.0).

Outputs in `--output_dir` (a rerun with the same directory resumes training):
  checkpoints, bert_config.json, vocab.txt, classifier_config.json (task, labels),
  train/ and eval/ TensorBoard summaries, features/ (cached TFRecords),
  eval_results.txt   `key = value`: eval_accuracy, eval_loss, the task's metrics
                     (eval_f1 for 2 classes, eval_matthews_corr for CoLA,
                     eval_pearson / eval_spearman for STS-B), global_step,
                     num_examples; MNLI adds eval_mismatched_* when
                     dev_mismatched.tsv is present. Every dev example counts once.
  test_results.tsv   one row per test example: the probability of each label,
                     tab-separated, in label order (the score for regression).
`--export_dir` writes a SavedModel for TF Serving (raw text in; see
`official_bert/export.py`); without --do_train it exports the checkpoint in
--output_dir.

Example (SST-2 from all-MiniLM-L6-v2):
  python run_classifier.py --task_name=sst-2 --data_dir=../shared/data/glue/SST-2 \\
    --init_checkpoint=$MINILM --do_train --do_eval --max_train_examples=8000 \\
    --num_train_epochs=1 --train_batch_size=32 --learning_rate=5e-5 \\
    --max_seq_length=64 --output_dir=/tmp/sst2 --export_dir=/tmp/sst2_export
"""

from __future__ import annotations

import json
import os
import time

from absl import flags, logging

from official_bert import app, runner

app.quiet_tensorflow()

FLAGS = flags.FLAGS

flags.DEFINE_string("task_name", None,
                    "cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli, or custom.")
flags.DEFINE_string("data_dir", None,
                    "Directory of the task's train/dev/test files (GLUE layout).")
flags.DEFINE_string("train_file", None, "Training file (default: the task's file in --data_dir).")
flags.DEFINE_string("eval_file", None, "Dev file (default: the task's file in --data_dir).")
flags.DEFINE_string("predict_file", None, "Test file (default: the task's file in --data_dir).")
flags.DEFINE_string("text_a_column", None, "custom: header name (or JSON key) of the text.")
flags.DEFINE_string("text_b_column", None, "custom: the second text of a pair task.")
flags.DEFINE_string("label_column", "label", "custom: the label (or score) column.")
flags.DEFINE_list("labels", None,
                  "custom: every label, in class order (default: sorted from the training data).")
flags.DEFINE_bool("regression", False, "custom: the label is a float score (one output, MSE).")
flags.DEFINE_integer("max_eval_examples", None, "Evaluate on the first N dev examples only.")
flags.DEFINE_integer("max_predict_examples", None, "Predict the first N test examples only.")
flags.DEFINE_bool("cache_features", True,
                  "Keep converted features as TFRecords in output_dir/features and re-use "
                  "them while the data, vocabulary and settings are unchanged.")
runner.define_model_flags(max_seq_length=128)
runner.define_finetuning_flags(train_batch_size=32, eval_batch_size=8, predict_batch_size=8)
runner.define_distribution_flags()

CLASSIFIER_CONFIG = "classifier_config.json"


# === Task and data ===


def resolve_task():
    from data_prep import glue

    if not FLAGS.task_name:
        raise ValueError(f"--task_name is required; known tasks: {', '.join(glue.known_task_names())}")
    if FLAGS.task_name.strip().lower() == glue.CUSTOM:
        return glue.custom_task(FLAGS.text_a_column, FLAGS.text_b_column, FLAGS.label_column,
                                FLAGS.labels, FLAGS.regression)
    task = glue.get_task(FLAGS.task_name)
    if FLAGS.labels and tuple(FLAGS.labels) != task.labels:
        raise ValueError(f"--labels does not apply to {task.name}, whose labels are fixed: "
                         f"{', '.join(task.labels or ['(regression score)'])}")
    return task


def split_files(task, split: str) -> list:
    """[(suffix, path, required)] of the task's `split` ("train", "dev", "test")."""
    from data_prep import glue

    explicit = {"train": FLAGS.train_file, "dev": FLAGS.eval_file, "test": FLAGS.predict_file}[split]
    names = {"train": [("", task.train_file)], "dev": list(task.dev_files),
             "test": list(task.test_files)}[split]
    flag = {"train": "train_file", "dev": "eval_file", "test": "predict_file"}[split]
    files = []
    for position, (suffix, name) in enumerate(names):
        if position == 0 and explicit:
            files.append((suffix, explicit, True))
        elif FLAGS.data_dir:
            files.append((suffix, glue.find_data_file(FLAGS.data_dir, name), position == 0))
        elif position == 0:
            raise ValueError(f"pass --data_dir (with {name}) or --{flag}")
    return files


def read_split(task, split: str, limit: int | None):
    """[(suffix, path, examples)] for every file of the split that exists."""
    from data_prep import glue

    out = []
    for suffix, path, required in split_files(task, split):
        if not required and not os.path.exists(path):
            logging.info("%s not found: skipping the %s set", path, suffix)
            continue
        examples = glue.read_split(task, path, split)
        if limit:
            examples = examples[:limit]
        logging.info("%s %s: %d examples from %s", split, suffix or task.name, len(examples), path)
        out.append((suffix, path, examples))
    return out


def settle_labels(task, train_examples):
    """The task with its final label list, checked against an earlier run's."""
    from data_prep import glue

    saved_path = os.path.join(FLAGS.output_dir, CLASSIFIER_CONFIG)
    saved = None  # only a trained model's labels bind
    if os.path.exists(saved_path) and has_checkpoint(FLAGS.output_dir):
        with open(saved_path, encoding="utf-8") as f:
            saved = json.load(f)
    if task.name == glue.CUSTOM and task.labels is None and task.metric_kind != "regression":
        if saved and saved.get("labels"):
            task = task.with_labels(saved["labels"])
        elif train_examples:
            task = task.with_labels(glue.labels_from_examples(train_examples))
        else:
            raise ValueError("the labels are unknown: pass --labels (every label, in class "
                             "order) or train in this --output_dir first")
        logging.info("labels: %s", ", ".join(task.labels))
    if saved is not None:
        if saved.get("labels") != (list(task.labels) if task.labels else None):
            raise ValueError(
                f"{FLAGS.output_dir} holds a model trained with labels {saved.get('labels')}, "
                f"not {list(task.labels) if task.labels else None}; use another --output_dir")
    return task


def write_classifier_config(task, do_lower_case):
    from official_bert.modeling.configs import write_text_atomic

    config = {"task_name": task.name, "labels": list(task.labels) if task.labels else None,
              "regression": task.is_regression, "pair": task.is_pair,
              "metric_kind": task.metric_kind, "max_seq_length": FLAGS.max_seq_length,
              "do_lower_case": bool(do_lower_case),
              "text_a_column": task.columns.text_a if task.name == "custom" else None,
              "text_b_column": task.columns.text_b if task.name == "custom" else None}
    write_text_atomic(os.path.join(FLAGS.output_dir, CLASSIFIER_CONFIG),
                      json.dumps(config, indent=2) + "\n")


def has_checkpoint(directory) -> bool:
    """Whether `directory` holds a training checkpoint (the CheckpointManager's
    `checkpoint` index file; no TensorFlow import needed)."""
    return bool(directory) and os.path.isfile(os.path.join(directory, "checkpoint"))


# === Evaluation and prediction ===


def predict_logits(trainer, arrays, batch_size, padding_multiple=None):
    """Logits [examples, outputs] in file order; every example exactly once."""
    import numpy as np

    def output_fn(model, features):
        return {"logits": model(features, training=False),
                "example_index": features["example_index"]}

    out = trainer.predict(runner.numpy_dataset(arrays, batch_size, False, 0,
                                                 padding_multiple), output_fn)
    order = np.argsort(out["example_index"], kind="stable")
    if not np.array_equal(out["example_index"][order], np.arange(len(arrays["label"]))):
        raise RuntimeError(f"prediction returned {len(order)} outputs for "
                           f"{len(arrays['label'])} examples")
    return out["logits"][order].astype(np.float64)


def write_summaries(directory, step, results):
    import tensorflow as tf

    writer = tf.summary.create_file_writer(directory)
    with writer.as_default(step=step):
        for name, value in results.items():
            if isinstance(value, float):
                tf.summary.scalar(name, value)
    writer.flush()


# === Main ===


def main(argv):
    del argv
    task = resolve_task()
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
        raise ValueError("nothing to do: set --do_train, --do_eval, --do_predict or --export_dir")
    if not FLAGS.output_dir:
        raise ValueError("--output_dir is required")

    from data_prep import glue

    # Read every input first: a bad file fails at once, not after minutes of training.
    train_examples = None
    if FLAGS.do_train:
        [(_, _, train_examples)] = read_split(task, "train", FLAGS.max_train_examples)
    task = settle_labels(task, train_examples)
    if train_examples and task.labels:
        glue.check_labels(train_examples, task.labels, split_files(task, "train")[0][1])
    eval_sets = read_split(task, "dev", FLAGS.max_eval_examples) if FLAGS.do_eval else []
    predict_sets = read_split(task, "test", FLAGS.max_predict_examples) if FLAGS.do_predict else []

    import keras

    from data_prep import fast_tokenization
    from official_bert.metrics import classification as classification_metrics
    from official_bert.training import trainer as training
    from official_bert.modeling.configs import write_text_atomic
    from official_bert.tasks.classification import ClassificationTask

    os.makedirs(FLAGS.output_dir, exist_ok=True)
    keras.utils.set_random_seed(FLAGS.seed)
    policy = runner.dtype_policy(FLAGS.dtype)
    if policy:
        keras.mixed_precision.set_global_policy(policy)

    resumable = has_checkpoint(FLAGS.output_dir)
    init_checkpoint = FLAGS.init_checkpoint
    if not init_checkpoint and not FLAGS.bert_config_file and resumable:
        init_checkpoint = FLAGS.output_dir  # config and vocab.txt were copied there
    files = runner.resolve_model_files(
        init_checkpoint=init_checkpoint, bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
        max_seq_length=FLAGS.max_seq_length)
    if FLAGS.export_dir and not FLAGS.do_train and not resumable and not (
            files.checkpoint is not None and "output_weights" in files.checkpoint.weights):
        raise ValueError(f"nothing to export: {FLAGS.output_dir} holds no trained classifier "
                         "checkpoint; add --do_train, or point --output_dir at a trained run")
    files.copy_to(FLAGS.output_dir)
    write_classifier_config(task, files.do_lower_case)

    tokenizer = fast_tokenization.CachedTokenizer(files.vocab_file, do_lower_case=files.do_lower_case)
    cache_dir = os.path.join(FLAGS.output_dir, "features") if FLAGS.cache_features else None

    def features(examples, split):
        arrays = glue.cached_features(examples, tokenizer, files.vocab_file, files.do_lower_case,
                                      FLAGS.max_seq_length, task.labels, cache_dir, split,
                                      log=logging.info)
        full = glue.truncated_fraction(arrays)
        if full > 0.05:
            logging.warning("%s: %.0f%% of the examples fill all %d tokens (truncated); "
                            "a larger --max_seq_length may help", split, 100 * full,
                            FLAGS.max_seq_length)
        return arrays

    num_classes = 1 if task.is_regression else len(task.labels)
    num_train_steps = num_warmup_steps = 0
    if FLAGS.do_train:
        num_train_steps, num_warmup_steps = runner.training_steps(
            len(train_examples), FLAGS.train_batch_size, FLAGS.num_train_epochs,
            FLAGS.warmup_proportion)
        logging.info("train: %d examples, batch %d, %d steps (%d warm-up)", len(train_examples),
                     FLAGS.train_batch_size, num_train_steps, num_warmup_steps)

    encoder_init = runner.encoder_init_fn(files.checkpoint)

    def init_fn(model):
        encoder_init(model)
        if files.checkpoint is not None and model.load_head_weights(files.checkpoint):
            logging.info("Loaded the classifier head from %s", files.checkpoint.path)

    settings = runner.RunSettings.from_flags(FLAGS)
    trainer = runner.make_trainer(
        ClassificationTask(files.config, num_classes, policy), settings,
        num_train_steps, num_warmup_steps, init_fn, train=FLAGS.do_train)

    if FLAGS.do_train:
        arrays = features(train_examples, "train")
        start = time.time()
        trainer.train(runner.numpy_dataset(arrays, FLAGS.train_batch_size, True, FLAGS.seed,
                                           settings.padding_multiple()),
                      FLAGS.train_batch_size)
        logging.info("Training took %.1f s", time.time() - start)

    if FLAGS.do_eval:
        results = {}
        step = int(trainer.global_step.numpy())
        for suffix, path, examples in eval_sets:
            arrays = features(examples, "dev" + (f"_{suffix}" if suffix else ""))
            start = time.time()
            logits = predict_logits(trainer, arrays, FLAGS.eval_batch_size,
                                    settings.padding_multiple())
            split_results = classification_metrics.evaluate_logits(
                task.metric_kind, logits, arrays["label"])
            split_results["num_examples"] = len(examples)
            prefix = f"eval_{suffix}_" if suffix else "eval_"
            results.update({prefix + k: v for k, v in split_results.items()})
            write_summaries(os.path.join(FLAGS.output_dir, "eval" + (f"_{suffix}" if suffix else "")),
                            step, split_results)
            logging.info("Evaluated %d examples of %s in %.1f s: %s", len(examples), path,
                         time.time() - start, split_results)
        results["global_step"] = step
        results["num_examples"] = results.pop("eval_num_examples")
        path = os.path.join(FLAGS.output_dir, "eval_results.txt")
        training.write_results(path, results)
        logging.info("Wrote %s", path)

    if FLAGS.do_predict:
        for suffix, path, examples in predict_sets:
            arrays = features(examples, "test" + (f"_{suffix}" if suffix else ""))
            logits = predict_logits(trainer, arrays, FLAGS.predict_batch_size,
                                    settings.padding_multiple())
            rows = logits[:, :1] if task.is_regression else classification_metrics.softmax(logits)
            lines = ["\t".join(f"{p:.8f}" for p in row) for row in rows]
            out = os.path.join(FLAGS.output_dir,
                               f"test_results{'_' + suffix if suffix else ''}.tsv")
            write_text_atomic(out, "\n".join(lines) + "\n")
            logging.info("Wrote %d predictions of %s to %s", len(lines), path, out)

    if FLAGS.export_dir:
        from official_bert import export

        path = export.export_classifier(trainer.model, files.vocab_file, files.do_lower_case,
                                        FLAGS.max_seq_length, task.labels, task.is_pair,
                                        FLAGS.export_dir)
        logging.info("Exported the raw-text classifier (step %d) to %s",
                     int(trainer.global_step.numpy()), path)


def entry(argv=None):
    """Console entry point (`bert classify`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
