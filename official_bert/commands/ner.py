"""Named-entity recognition (token classification) with BERT: fine-tuning or feature-based.

Reads CoNLL files (CoNLL-2003's 4 columns with `-DOCSTART-`, WNUT-17's 2
columns; IOB1 or BIO; `data_prep/conll.py`). Each word's first WordPiece
carries its label; long sentences are split into overlapping windows. Fine-tuning
(default) trains a dense layer on each final token vector and the whole
network; `--feature_based` (the BERT paper's §5.3) freezes the encoder and
trains a BiLSTM (or dense) tagger on its `--layers`. What it writes:
`official_bert/tasks/ner.py`.

Example (WNUT-17):
  python run_ner.py --do_train --do_eval \\
    --train_file=../shared/data/ner/wnut17/wnut17train.conll \\
    --eval_file=../shared/data/ner/wnut17/emerging.dev.conll \\
    --init_checkpoint=$MINILM --max_seq_length=128 --train_batch_size=32 \\
    --learning_rate=5e-5 --num_train_epochs=3 --output_dir=/tmp/wnut17
"""

from __future__ import annotations

from absl import flags

from official_bert import app, cli_flags

# tasks.ner loads TensorFlow: `main` imports it once the flags are parsed, so
# that defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS

flags.DEFINE_string("train_file", None, "CoNLL file to train on.")
flags.DEFINE_string("eval_file", None, "CoNLL file with gold tags to evaluate on.")
flags.DEFINE_string("predict_file", None, "CoNLL file to tag (gold column optional).")
flags.DEFINE_integer("window_stride", None, "Sub-tokens between the starts of a long "
                     "sentence's windows (default: half a window).")
flags.DEFINE_enum("tag_scheme", "auto", ["auto", "bio", "iob1"],
                  "The files' tag scheme (auto: I- opening an entity means IOB1).")
flags.DEFINE_bool("feature_based", False, "Freeze the encoder; train a task model on its features.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Encoder layers for --feature_based (-1 = last).")
flags.DEFINE_enum("combine", "concat", ["concat", "sum", "last"],
                  "How the --layers are combined (last: the deepest of them alone).")
flags.DEFINE_enum("task_model", "bilstm", ["bilstm", "dense"], "Task model for --feature_based.")
flags.DEFINE_integer("lstm_units", 768, "Units per direction (or dense width) of the task model.")
flags.DEFINE_integer("task_model_layers", 2, "Layers of the task model.")
flags.DEFINE_float("task_dropout", 0.1, "Dropout in the feature-based task model.")
flags.DEFINE_integer("feature_batch_size", 32, "Windows per encoder pass when caching features.")
cli_flags.define_run_flags(max_seq_length=128, train_batch_size=32)


# The main/entry pair every task command ends with (deliberately the same): flags → config →
# the library.
def main(argv):
    app.refuse_arguments(argv)
    from official_bert.tasks import base, ner

    config = cli_flags.from_flags(ner.NerConfig, FLAGS)
    task_class = ner.FeatureBasedNerTask if config.feature_based else ner.NerTask
    base.run(task_class(config, cli_flags.run_config(FLAGS)))


def entry(argv=None):
    """Console entry point (`bert ner`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
