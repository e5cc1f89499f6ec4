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

import argparse
import math
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--output", required=True, help=".npz with order, kernel, bias")
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--max_query_length", type=int, default=64)
    parser.add_argument("--train_batch_size", type=int, default=16)
    parser.add_argument("--num_train_epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    from data_prep import squad
    from official_bert import runner, tokenization
    from official_bert.models import SpanLabelingTask

    files = runner.resolve_model_files(init_checkpoint=args.model_dir, bert_config_file=None,
                                       vocab_file=None, do_lower_case=None)
    tokenizer = tokenization.FullTokenizer(files.vocab_file, do_lower_case=files.do_lower_case)
    features = squad.convert_examples_to_features(
        squad.read_squad_examples(args.train_file, is_training=True), tokenizer,
        is_training=True, max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
        max_query_length=args.max_query_length)
    # As run_squad.py: seed, then the head (SpanLabelingTask seeds again), then the data.
    keras.utils.set_random_seed(args.seed)
    head = SpanLabelingTask(files.config, seed=args.seed).build_model().span_labeler
    steps = math.ceil(len(features) * args.num_train_epochs / args.train_batch_size)
    dataset = runner.numpy_dataset({"index": np.arange(len(features))}, args.train_batch_size,
                                   training=True, seed=args.seed)(tf.distribute.InputContext())
    order = np.concatenate([b["index"].numpy() for b in dataset.take(steps)])
    np.savez(args.output, order=order, kernel=head.kernel.numpy(), bias=head.bias.numpy())
    print(f"{len(features)} windows, {steps} steps: wrote {args.output}")


if __name__ == "__main__":
    main()
