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

`--head=keras` writes instead the head Keras' global seed draws (`BertSpanLabeler`
without a seed: the draw of the other tasks' heads, and run_squad's before it drew
transformers' numbers). Measured with it (the acceptance recipe, seed 42): transformers on
these draws EM 16.01 / F1 23.86, run_squad with that head 15.44 / 22.55 (training loss at
steps 151-200: 3.59 and 3.62).
"""

import numpy as np

import common


def main():
    parser = common.recipe_parser(__doc__.splitlines()[0], "squad",
                                  without=("predict_file", "predict_batch_size", "learning_rate"))
    parser.add_argument("--output", required=True, help=".npz with order, kernel, bias")
    parser.add_argument("--head", choices=("run_squad", "keras"), default="run_squad",
                        help="run_squad's span head for --seed (transformers' numbers), or "
                             "the one Keras' global seed draws")
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    from official_bert.training import input_pipeline

    from official_bert.tasks import runner

    task = common.official_bert_squad_task(args, num_train_epochs=args.num_train_epochs)
    num_windows = task.train_dataset().examples
    steps = runner.train_steps(task.spec, task.run_config, num_windows)
    # As tasks.runner.run_task: seed, build the model (encoder, then head), then the data, whose
    # shuffle is the run's of task.train_dataset(): the same numpy_dataset, over window indices.
    keras.utils.set_random_seed(args.seed)
    if args.head == "keras":  # task.build_model() with a head that has no seed of its own
        from official_bert.modeling.encoder import BertEncoder, dummy_inputs
        from official_bert.modeling.heads import BertSpanLabeler

        encoder = BertEncoder.from_bert_config(task.bert_config)
        model = BertSpanLabeler(encoder)
        model(dummy_inputs())
    else:
        model = task.build_model()
    head = model.span_labeler
    dataset = input_pipeline.numpy_dataset({"index": np.arange(num_windows)},
                                           args.train_batch_size, training=True,
                                           seed=args.seed)(tf.distribute.InputContext())
    order = np.concatenate([b["index"].numpy() for b in dataset.take(steps)])
    np.savez(args.output, order=order, kernel=head.kernel.numpy(), bias=head.bias.numpy())
    print(f"{num_windows} windows, {steps} steps: wrote {args.output}")


if __name__ == "__main__":
    main()
