"""Sentence(-pair) classification and regression with BERT: GLUE and your own data.

`--task_name` is a GLUE task (cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte,
wnli; files under `--data_dir` in GLUE's layout, see `data_prep/glue.py`; `bert
download glue` makes it), XNLI (xnli, xnli-<lang>; `bert download xnli`) or
`custom`: your own `.tsv` / `.csv` (with a header) / `.jsonl` files, found as
`--data_dir`/train.*, dev.*, test.* or given by `--train_file --eval_file
--predict_file`, with `--text_a_column` (`--text_b_column` for pairs) and
`--label_column`; the labels are `--labels`, or read from the training data
(sorted), or a float score with `--regression`. Texts longer than
`--max_seq_length`: `--long_document=windows` (with `--doc_stride`,
`--window_pooling`). What it writes: `official_bert/tasks/classification.py`.

Example (SST-2 from all-MiniLM-L6-v2):
  python run_classifier.py --task_name=sst-2 --data_dir=../shared/data/glue/SST-2 \\
    --init_checkpoint=$MINILM --do_train --do_eval --max_train_examples=8000 \\
    --num_train_epochs=1 --train_batch_size=32 --learning_rate=5e-5 \\
    --max_seq_length=64 --output_dir=/tmp/sst2 --export_dir=/tmp/sst2_export
"""

from __future__ import annotations

from absl import flags

from official_bert import app, cli_flags

# tasks.classification loads TensorFlow: `main` imports it once the flags are parsed, so
# that defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS

flags.DEFINE_string("task_name", None,
                    "cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli, xnli (Chinese, as "
                    "google's; xnli-<lang> for another XNLI language), or custom.")
flags.DEFINE_string("data_dir", None, "Directory of the task's train/dev/test files (GLUE layout).")
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
flags.DEFINE_enum("long_document", "truncate", ["truncate", "windows"],
                  "truncate: read the first --max_seq_length tokens (BERT's way). windows: read "
                  "the whole text in windows of --max_seq_length - 2 tokens every --doc_stride, "
                  "classify each and pool their logits (--window_pooling) in training, "
                  "evaluation, prediction and the export. Single-text tasks.")
flags.DEFINE_integer("doc_stride", 128, "--long_document=windows: tokens between the starts "
                     "of a document's windows (run_squad.py's flag; one longer than a window "
                     "is a window).")
flags.DEFINE_enum("window_pooling", "mean", ["mean", "max"],
                  "--long_document=windows: a document's logits are the mean, or per class the "
                  "max, of its windows' logits.")
flags.DEFINE_integer("max_windows", 16, "--long_document=windows: windows per document at "
                     "most (a longer document's tail is not read; a warning counts them). All "
                     "of a document's windows are in its training batch.")
cli_flags.define_run_flags(max_seq_length=128, train_batch_size=32)


# The main/entry pair every task command ends with (deliberately the same): flags → config →
# the library.
def main(argv):
    app.refuse_arguments(argv)
    from official_bert.tasks import base, classification

    config = cli_flags.from_flags(classification.ClassificationConfig, FLAGS)
    base.run(classification.ClassificationTask(config, cli_flags.run_config(FLAGS)))


def entry(argv=None):
    """Console entry point (`bert classify`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
