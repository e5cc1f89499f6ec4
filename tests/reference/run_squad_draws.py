"""run_squad.py's random draws, for `hf_squad_finetune.py --load_replay`.

The other direction of `squad_replay.py`: writes the window order in which
`run_squad.py --seed=S` trains (its `tf.data` shuffle, batches of
`--train_batch_size` with the remainder carried into the next epoch's stream)
and its initial span head, so transformers can train on official_bert's draws.
From the repository root:

    python tests/reference/run_squad_draws.py --model_dir=$MINILM --train_file=$TRAIN \\
        --seed=42 --output=/tmp/ours42.npz
    PYTHONPATH=.:tests /tmp/hf/bin/python tests/reference/hf_squad_finetune.py \\
        --model_dir=$MINILM --train_file=$TRAIN --predict_file=$DEV --load_replay=/tmp/ours42.npz

Measured (the acceptance recipe, seed 42): transformers on these draws EM 16.01 / F1 23.86,
`run_squad.py --seed=42` 15.44 / 22.55 (training loss at steps 151-200: 3.59 and 3.62).
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import squad_replay  # noqa: E402  (puts the repository on the path too)


def main():
    parser = squad_replay.recipe_parser(__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help=".npz with order, kernel, bias")
    parser.add_argument("--num_train_epochs", type=int, default=1)
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    from official_bert import runner
    from official_bert.tasks.squad import SpanLabelingTask

    files, arrays = squad_replay.training_windows(args)
    num_windows = len(arrays["input_word_ids"])
    # As run_squad.py: seed, then the head (SpanLabelingTask seeds again), then the data.
    keras.utils.set_random_seed(args.seed)
    head = SpanLabelingTask(files.config, seed=args.seed).build_model().span_labeler
    steps = math.ceil(num_windows * args.num_train_epochs / args.train_batch_size)
    dataset = runner.numpy_dataset({"index": np.arange(num_windows)}, args.train_batch_size,
                                   training=True, seed=args.seed)(tf.distribute.InputContext())
    order = np.concatenate([b["index"].numpy() for b in dataset.take(steps)])
    np.savez(args.output, order=order, kernel=head.kernel.numpy(), bias=head.bias.numpy())
    print(f"{num_windows} windows, {steps} steps: wrote {args.output}")


if __name__ == "__main__":
    main()
