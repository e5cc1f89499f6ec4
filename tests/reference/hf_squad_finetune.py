"""run_squad's SQuAD v1.1 recipe with Hugging Face transformers doing the training.

The windows (google-research/bert's `doc_stride` windows and max-context
rule), the post-processing and the official metric are run_squad's
(`data_prep.squad`, `official_bert.metrics.squad`); the model and optimizer are
transformers' `BertForQuestionAnswering` and torch's `AdamW` with BERT's
recipe (weight decay 0.01 except biases and LayerNorm, epsilon 1e-6, 10%
warm-up then linear decay, clipping 1.0, dropout 0.1, a shuffle each epoch,
steps = windows / batch rounded up). A gap between this and run_squad on the
same data is a difference of implementation, not of data or scoring (and of
the random draws: `--save_replay` hands this run's window order and head to
`squad_replay.py`, which trains run_squad's model on them; `--load_replay` trains
this one on run_squad's draws from `run_squad_draws.py`). Needs
torch and transformers; from the repository root:

    PYTHONPATH=.:tests /tmp/hf/bin/python tests/reference/hf_squad_finetune.py \
        --model_dir=$MINILM \
        --train_file=../shared/data/squad_v1.1/train-v1.1-first12articles.json \
        --predict_file=../shared/data/squad_v1.1/squad_v1.1-shared.json --seed=42

(`tests/reference/hf_trajectory.py` says how to make /tmp/hf.)
"""

import argparse
import json
import math
import os
import time

import numpy as np
import torch
from transformers import BertForQuestionAnswering, get_linear_schedule_with_warmup

from data_prep import squad
from official_bert.metrics import squad as squad_metrics
from official_bert.text import tokenization


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--predict_file", required=True)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--max_query_length", type=int, default=64)
    parser.add_argument("--train_batch_size", type=int, default=16)
    parser.add_argument("--predict_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--save_replay", default=None,
                        help="Write this run's window order and initial head here (.npz) for "
                             "tests/reference/squad_replay.py.")
    parser.add_argument("--load_replay", default=None,
                        help="Train in this .npz's window order from its initial head instead "
                             "of this run's own draws (e.g. run_squad's, from "
                             "tests/reference/run_squad_draws.py).")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.RandomState(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    tokenizer = tokenization.FullTokenizer(os.path.join(args.model_dir, "vocab.txt"),
                                           do_lower_case=True)
    windows = dict(max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
                   max_query_length=args.max_query_length)

    train = squad.features_to_arrays(squad.convert_examples_to_features(
        squad.read_squad_examples(args.train_file, is_training=True), tokenizer,
        is_training=True, **windows), is_training=True)
    model = BertForQuestionAnswering.from_pretrained(args.model_dir)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
    num_windows = len(train["input_word_ids"])
    steps_per_epoch = math.ceil(num_windows / args.train_batch_size)
    total = steps_per_epoch * args.num_train_epochs
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * total), total)
    print(f"{num_windows} training windows, {total} steps", flush=True)

    def inputs_of(arrays, indices):
        return dict(input_ids=torch.tensor(arrays["input_word_ids"][indices], dtype=torch.long),
                    attention_mask=torch.tensor(arrays["input_mask"][indices], dtype=torch.long),
                    token_type_ids=torch.tensor(arrays["input_type_ids"][indices],
                                                dtype=torch.long))

    orders = [rng.permutation(num_windows) for _ in range(args.num_train_epochs)]
    if args.load_replay:
        replay = np.load(args.load_replay)
        order = replay["order"][:total * args.train_batch_size]
        if order.max() >= num_windows:
            raise SystemExit(f"error: {args.load_replay} orders windows these settings lack")
        orders = [order[e * steps_per_epoch * args.train_batch_size:
                        (e + 1) * steps_per_epoch * args.train_batch_size]
                  for e in range(args.num_train_epochs)]
        with torch.no_grad():
            model.qa_outputs.weight.copy_(torch.from_numpy(replay["kernel"].T))
            model.qa_outputs.bias.copy_(torch.from_numpy(replay["bias"]))
    if args.save_replay:
        np.savez(args.save_replay, order=np.concatenate(orders),
                 kernel=model.qa_outputs.weight.detach().numpy().T,
                 bias=model.qa_outputs.bias.detach().numpy())
    start, step, window_loss = time.time(), 0, 0.0
    model.train()
    for order in orders:
        for b in range(steps_per_epoch):
            indices = order[b * args.train_batch_size:(b + 1) * args.train_batch_size]
            loss = model(**inputs_of(train, indices),
                         start_positions=torch.tensor(train["start_positions"][indices],
                                                      dtype=torch.long),
                         end_positions=torch.tensor(train["end_positions"][indices],
                                                    dtype=torch.long)).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            window_loss += loss.item()
            if step % 50 == 0 or step == total:
                print(f"step {step}/{total}: loss {window_loss / (step % 50 or 50):.4f}, "
                      f"{time.time() - start:.0f} s", flush=True)
                window_loss = 0.0
    print(f"training took {time.time() - start:.0f} s", flush=True)

    examples = squad.read_squad_examples(args.predict_file, is_training=False)
    features = squad.convert_examples_to_features(examples, tokenizer, is_training=False,
                                                  **windows)
    arrays = squad.features_to_arrays(features, is_training=False)
    lengths = arrays["input_mask"].sum(axis=1)
    order = np.argsort(-lengths, kind="stable")  # each batch cut to its longest window
    results = {}
    model.eval()
    with torch.no_grad():
        for i in range(0, len(order), args.predict_batch_size):
            indices = order[i:i + args.predict_batch_size]
            longest = int(lengths[indices].max())
            inputs = {k: v[:, :longest] for k, v in inputs_of(arrays, indices).items()}
            out = model(**inputs)
            pad = args.max_seq_length - longest
            starts = np.pad(out.start_logits.numpy(), ((0, 0), (0, pad)))
            ends = np.pad(out.end_logits.numpy(), ((0, 0), (0, pad)))
            for j, index in enumerate(indices):
                results[int(arrays["unique_ids"][index])] = (starts[j], ends[j])
    predictions = squad.postprocess_predictions(examples, features, results)
    dataset = squad.load_squad_json(args.predict_file)
    scores = squad_metrics.evaluate_v1(dataset, {q: p.text for q, p in predictions.items()})
    print(json.dumps(scores), flush=True)


if __name__ == "__main__":
    main()
