"""run_squad.py's random draws, for `hf_squad_finetune.py --load_replay`.

The other direction of `squad_replay.py`: writes the window order in which
`run_squad.py --seed=S` trains (its `tf.data` shuffle, batches of
`--train_batch_size` with the remainder carried into the next epoch's stream)
and its initial span head, so transformers can train on official_bert's draws.
From the repository root:

    python tools/parity/run_squad_draws.py --model_dir=$MINILM --train_file=$TRAIN \\
        --seed=42 --output=/tmp/ours42.npz
    /tmp/hf/bin/python tools/parity/hf_squad_finetune.py \\
        --model_dir=$MINILM --train_file=$TRAIN --predict_file=$DEV --load_replay=/tmp/ours42.npz

Measured (the acceptance recipe, seed 42): transformers on these draws EM 16.01 / F1 23.86,
`run_squad.py --seed=42` 15.44 / 22.55 (training loss at steps 151-200: 3.59 and 3.62).
"""

import numpy as np

import common


def main():
    parser = common.recipe_parser(__doc__.splitlines()[0], "squad",
                                  without=("predict_file", "predict_batch_size", "learning_rate"))
    parser.add_argument("--output", required=True, help=".npz with order, kernel, bias")
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    from official_bert.training import input_pipeline

    task = common.official_bert_squad_task(args, num_train_epochs=args.num_train_epochs)
    num_windows, steps = task.num_train_examples(), task.train_steps()
    # As tasks.base.run: seed, build the model (encoder, then head), then the data, whose
    # shuffle is task.train_dataset()'s: the same numpy_dataset, over window indices.
    keras.utils.set_random_seed(args.seed)
    head = task.build_model().span_labeler
    dataset = input_pipeline.numpy_dataset({"index": np.arange(num_windows)},
                                           args.train_batch_size, training=True,
                                           seed=args.seed)(tf.distribute.InputContext())
    order = np.concatenate([b["index"].numpy() for b in dataset.take(steps)])
    np.savez(args.output, order=order, kernel=head.kernel.numpy(), bias=head.bias.numpy())
    print(f"{num_windows} windows, {steps} steps: wrote {args.output}")


if __name__ == "__main__":
    main()
