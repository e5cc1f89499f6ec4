"""run_squad's model and Trainer, replaying a transformers run's random draws.

`hf_squad_finetune.py --save_replay=R.npz` records the order in which its run
visited the training windows and its initial span head. This script builds
the same windows, trains official_bert's `BertSpanLabeler` through the
runners' `Trainer` (AdamW, schedule, clipping, XLA) in that order from that
head, then predicts and scores with `run_squad.py --do_predict`. What is left
different from the transformers run is the dropout masks alone, so the two
scores compare the implementations without the seed-to-seed spread of a
1-epoch SQuAD run (several points at this size). From the repository root:

    PYTHONPATH=.:tests /tmp/hf/bin/python tests/reference/hf_squad_finetune.py \\
        --model_dir=$MINILM --train_file=$TRAIN --predict_file=$DEV --save_replay=/tmp/r.npz
    python tests/reference/squad_replay.py --model_dir=$MINILM --train_file=$TRAIN \\
        --predict_file=$DEV --replay=/tmp/r.npz --output_dir=/tmp/squad_replay

Measured (the acceptance recipe): seed 42, transformers EM 25.70 / F1 36.47,
this replay 26.60 / 37.69 (final 30-step training loss 2.747 and 2.759);
seed 43, transformers 22.25 / 32.60, this replay 24.52 / 35.60.
"""

import argparse
import math
import os
import shutil
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)


def recipe_parser(description):
    """The flags both replay directions share: model, training file, windows, seed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--max_query_length", type=int, default=64)
    parser.add_argument("--train_batch_size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=42)
    return parser


def training_windows(args):
    """(model files, training feature arrays) as run_squad.py builds them."""
    from data_prep import squad
    from official_bert import runner
    from official_bert.text import tokenization

    files = runner.resolve_model_files(init_checkpoint=args.model_dir, bert_config_file=None,
                                       vocab_file=None, do_lower_case=None)
    tokenizer = tokenization.FullTokenizer(files.vocab_file, do_lower_case=files.do_lower_case)
    arrays = squad.features_to_arrays(squad.convert_examples_to_features(
        squad.read_squad_examples(args.train_file, is_training=True), tokenizer,
        is_training=True, max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
        max_query_length=args.max_query_length), is_training=True)
    return files, arrays


def main():
    parser = recipe_parser(__doc__.splitlines()[0])
    parser.add_argument("--predict_file", required=True)
    parser.add_argument("--replay", required=True, help="hf_squad_finetune.py --save_replay file")
    parser.add_argument("--output_dir", required=True, help="Replaced if it exists.")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    from official_bert import runner
    from official_bert.tasks.squad import SpanLabelingTask

    keras.utils.set_random_seed(args.seed)
    shutil.rmtree(args.output_dir, ignore_errors=True)
    files, arrays = training_windows(args)
    replay = np.load(args.replay)
    num_windows = len(arrays["input_word_ids"])
    if len(replay["order"]) % num_windows or replay["order"].max() >= num_windows:
        sys.exit(f"error: {args.replay} orders {len(replay['order'])} windows, these settings "
                 f"make {num_windows}: use the same files and window flags for both")
    epochs = len(replay["order"]) // num_windows
    steps_per_epoch = math.ceil(num_windows / args.train_batch_size)  # last batch kept
    total = steps_per_epoch * epochs
    ordered = {k: v for k, v in arrays.items() if k != "unique_ids"}

    def dataset_fn(context):
        epoch = lambda e: tf.data.Dataset.from_tensor_slices(  # noqa: E731
            {k: v[replay["order"][e * num_windows:(e + 1) * num_windows]]
             for k, v in ordered.items()}).batch(args.train_batch_size)
        ds = epoch(0)
        for e in range(1, epochs):
            ds = ds.concatenate(epoch(e))
        return ds

    task = SpanLabelingTask(files.config)
    settings = runner.RunSettings(output_dir=args.output_dir, learning_rate=args.learning_rate,
                                  jit_compile=True, log_steps=50,
                                  max_seq_length=args.max_seq_length, seed=args.seed)
    trainer = runner.make_trainer(task, settings, total, int(0.1 * total),
                                  runner.encoder_init_fn(files.checkpoint), train=True)
    trainer.model.span_labeler.kernel.assign(replay["kernel"])
    trainer.model.span_labeler.bias.assign(replay["bias"])
    iterator = trainer.train_iterator(dataset_fn)
    losses = []
    for step in range(1, total + 1):  # one step a call: the last batch is smaller
        losses.append(trainer.run_train_steps(iterator, 1))
        if step % 50 == 0 or step == total:
            print(f"step {step}/{total}: loss {np.mean(losses[-(step % 50 or 50):]):.4f}",
                  flush=True)
    trainer.save()
    subprocess.run([sys.executable, os.path.join(REPO, "run_squad.py"), "--do_predict",
                    f"--predict_file={args.predict_file}", f"--init_checkpoint={args.model_dir}",
                    f"--max_seq_length={args.max_seq_length}", f"--doc_stride={args.doc_stride}",
                    f"--max_query_length={args.max_query_length}", "--jit_compile",
                    f"--output_dir={args.output_dir}"], check=True)


if __name__ == "__main__":
    main()
