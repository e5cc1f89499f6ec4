"""Multi-label classification with BERT (the guide's worked example of a new task).

Example:
  python examples/multilabel/run_multilabel.py --do_train --do_eval \\
    --train_file=train.jsonl --eval_file=dev.jsonl --init_checkpoint=$MINILM \\
    --num_train_epochs=3 --output_dir=/tmp/multilabel
"""

import os
import sys

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # multilabel_task beside it

from official_bert import app, cli_flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("train_file", None, "JSON lines: {'text': ..., 'labels': [...]}.")
flags.DEFINE_string("eval_file", None, "JSON lines with labels, to evaluate on.")
flags.DEFINE_string("predict_file", None, "JSON lines to label.")
flags.DEFINE_float("threshold", 0.5, "A label is predicted when its probability is above this.")
cli_flags.define_run_flags(max_seq_length=128, train_batch_size=32)


def main(argv):
    del argv
    import multilabel_task
    from official_bert.tasks import base

    config = cli_flags.from_flags(multilabel_task.MultiLabelConfig, FLAGS)
    base.run(multilabel_task.MultiLabelTask(config, cli_flags.run_config(FLAGS)))


if __name__ == "__main__":
    app.run(main)
