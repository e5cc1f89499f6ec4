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

import multilabel_task  # noqa: E402
from official_bert.commands import app, cli_flags  # noqa: E402

FLAGS = flags.FLAGS
cli_flags.define_flags(multilabel_task.MultiLabelConfig)  # the task's settings, as flags
cli_flags.define_run_flags()


def main(argv):
    del argv
    from official_bert.tasks import runner

    config = cli_flags.from_flags(multilabel_task.MultiLabelConfig, FLAGS)
    runner.run_task(multilabel_task.MultiLabelTask, config, cli_flags.run_config(FLAGS))


if __name__ == "__main__":
    app.run(main)
