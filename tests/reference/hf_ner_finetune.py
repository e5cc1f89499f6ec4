"""run_ner's recipe with Hugging Face transformers doing the training: a reference run.

The windows (first sub-token labelled, BIO), the evaluation (exact-span entity
F1) and the recipe (AdamW, weight decay 0.01 except biases and LayerNorm,
epsilon 1e-6, 10% warm-up then linear decay, clipping 1.0, dropout 0.1,
batches padded to their longest window, a fresh shuffle each epoch, the last
partial batch kept as transformers' Trainer does) are run_ner's; the model and
the optimizer are transformers' `BertForTokenClassification` and torch's
`AdamW`. A gap between this and run_ner on the same data is then a difference
of implementation, not of data or scoring. Needs torch and transformers (not
the project's dependencies); from the repository root:

    PYTHONPATH=.:tests /tmp/hf/bin/python tests/reference/hf_ner_finetune.py \
        --model_dir=$MINILM --train_file=../shared/data/ner/wnut17/wnut17train.conll \
        --eval_file=../shared/data/ner/wnut17/emerging.dev.conll --num_train_epochs=3 --seed=42

(`tests/reference/hf_trajectory.py` says how to make /tmp/hf.)
"""

import argparse
import json
import math
import os
import time

import numpy as np
import torch
from transformers import BertForTokenClassification, get_linear_schedule_with_warmup

from data_prep import conll
from official_bert.metrics import ner as ner_metrics
from official_bert.text import tokenization


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--eval_file", action="append", required=True,
                        help="CoNLL file(s) with gold tags (repeat the flag for several)")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.RandomState(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)

    train = conll.read_conll(args.train_file)
    labels = conll.label_list_from(train.sentences)
    tokenizer = tokenization.FullTokenizer(os.path.join(args.model_dir, "vocab.txt"),
                                           do_lower_case=True)
    train_arrays = conll.windows_to_arrays(
        conll.convert_sentences(train.sentences, tokenizer, labels, args.max_seq_length))
    model = BertForTokenClassification.from_pretrained(args.model_dir, num_labels=len(labels))
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
    num_windows = len(train_arrays["input_word_ids"])
    steps_per_epoch = math.ceil(num_windows / args.train_batch_size)
    total = steps_per_epoch * args.num_train_epochs
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * total), total)

    def batch(arrays, indices):
        length = int(arrays["input_mask"][indices].sum(1).max())
        t = {k: torch.tensor(v[indices][:, :length], dtype=torch.long) for k, v in arrays.items()}
        inputs = dict(input_ids=t["input_word_ids"], attention_mask=t["input_mask"],
                      token_type_ids=t["input_type_ids"])
        return inputs, t["label_ids"].masked_fill(t["label_ids"] < 0, -100)

    start, step, window_loss = time.time(), 0, 0.0
    model.train()
    for _ in range(args.num_train_epochs):
        order = rng.permutation(num_windows)
        for b in range(steps_per_epoch):
            inputs, targets = batch(train_arrays, order[b * args.train_batch_size:
                                                        (b + 1) * args.train_batch_size])
            loss = model(**inputs, labels=targets).loss
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

    model.eval()
    for path in args.eval_file:
        data = conll.read_conll(path)
        windows = conll.convert_sentences(data.sentences, tokenizer, labels, args.max_seq_length)
        arrays = conll.windows_to_arrays(windows)
        predicted = np.zeros_like(arrays["label_ids"])
        with torch.no_grad():
            for i in range(0, len(windows), 64):
                indices = np.arange(i, min(i + 64, len(windows)))
                inputs, _ = batch(arrays, indices)
                ids = model(**inputs).logits.argmax(-1).numpy()
                predicted[indices, :ids.shape[1]] = ids
        per_word = conll.word_predictions(windows, predicted, len(data.sentences),
                                          [len(s.words) for s in data.sentences])
        tags = [[labels[i] for i in sentence] for sentence in per_word]
        scores = ner_metrics.flat_results(
            ner_metrics.entity_scores([s.tags for s in data.sentences], tags))
        print(path, json.dumps({k: round(v, 4) for k, v in scores.items()
                                if k in ("entity_f1", "precision", "recall")}), flush=True)


if __name__ == "__main__":
    main()
