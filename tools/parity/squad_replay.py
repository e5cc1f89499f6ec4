"""run_squad's model and Trainer, replaying a transformers run's random draws.

`hf_squad_finetune.py --save_replay=R.npz` records the order in which its run
visited the training windows and its initial span head. This script builds
the same windows, trains official_bert's `BertSpanLabeler` through
run_squad's task and `Trainer` (`tasks.runner.make_trainer`: AdamW, schedule,
clipping, XLA) in that order from that head, then predicts and scores with
`run_squad.py --do_predict`. What is left different from the transformers run
is the dropout masks alone, so the two scores compare the implementations
without the seed-to-seed spread of a 1-epoch SQuAD run (several points at
this size). From the repository root:

    /tmp/hf/bin/python tools/parity/hf_squad_finetune.py \\
        --model_dir=$MINILM --train_file=$TRAIN --predict_file=$DEV --save_replay=/tmp/r.npz
    python tools/parity/squad_replay.py --model_dir=$MINILM --train_file=$TRAIN \\
        --predict_file=$DEV --replay=/tmp/r.npz --output_dir=/tmp/squad_replay

Measured (the acceptance recipe): seed 42, transformers EM 25.70 / F1 36.47,
this replay 26.60 / 37.69 (final 30-step training loss 2.747 and 2.759);
seed 43, transformers 22.25 / 32.60, this replay 24.52 / 35.60. (Those runs
seeded the replay's dropout with 42 whatever `--seed`, as the task then did;
it now follows `--seed`, as run_squad's does. Seed 42 gives the same losses.)
"""

import math
import os
import shutil
import subprocess
import sys

import numpy as np

import common


def main():
    # The epochs are the replay's; prediction is run_squad.py's, with its batch size.
    parser = common.recipe_parser(__doc__.splitlines()[0], "squad",
                                  without=("num_train_epochs", "predict_batch_size"))
    parser.add_argument("--replay", required=True, help="hf_squad_finetune.py --save_replay file")
    parser.add_argument("--output_dir", required=True, help="Replaced if it exists.")
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    from official_bert.tasks import runner

    keras.utils.set_random_seed(args.seed)
    shutil.rmtree(args.output_dir, ignore_errors=True)
    task = common.official_bert_squad_task(args, output_dir=args.output_dir,
                                           learning_rate=args.learning_rate, jit_compile=True,
                                           log_steps=50)
    arrays = common.squad_training_arrays(args, task.model_files.tokenizer())
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

    # run_squad's Trainer (encoder from --model_dir), then the replay's head.
    trainer = runner.make_trainer(task, runner.make_strategy(task.run_config), total,
                                  int(0.1 * total), train=True)
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
    subprocess.run([sys.executable, os.path.join(common.REPO, "run_squad.py"), "--do_predict",
                    f"--predict_file={args.predict_file}", f"--init_checkpoint={args.model_dir}",
                    f"--max_seq_length={args.max_seq_length}", f"--doc_stride={args.doc_stride}",
                    f"--max_query_length={args.max_query_length}", "--jit_compile",
                    f"--output_dir={args.output_dir}"], check=True)


if __name__ == "__main__":
    main()
