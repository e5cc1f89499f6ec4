"""Multi-label classification with BERT (the guide's worked example of a new task).

The task registers its row on import (`multilabel_task.py`); its command is
then `bert multilabel`, run here as any registered command is.

Example:
  python examples/multilabel/run_multilabel.py --do_train --do_eval \\
    --train_file=train.jsonl --eval_file=dev.jsonl --init_checkpoint=$MINILM \\
    --num_train_epochs=3 --output_dir=/tmp/multilabel
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # multilabel_task beside it

import multilabel_task  # noqa: E402,F401  (registers the family)
from official_bert.commands import registry  # noqa: E402

if __name__ == "__main__":
    registry.run_command("multilabel")
