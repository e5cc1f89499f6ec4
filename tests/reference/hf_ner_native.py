"""A token-classification run done entirely the Hugging Face way: a reference run.

Unlike `hf_ner_finetune.py` (run_ner's own windows and scoring, transformers
only doing the training), everything here is transformers' own pipeline, as
its `run_ner.py` example does it: the fast tokenizer with
`is_split_into_words=True` and truncation at `max_length` (words past it are
dropped, as are words the tokenizer turns into no token, from the gold
sequence too, as run_ner.py's scoring does), the first sub-token
of each word labelled (-100 elsewhere), `DataCollatorForTokenClassification`
padding each batch to its longest row, a `RandomSampler` shuffle seeded by
`--seed`, the last partial batch kept, and
scoring (`ner_metrics`, which reads tags by conlleval's rules as seqeval's
default mode does: an `I-` tag after `O` opens an entity). Comparing it with
`hf_ner_finetune.py` on the same seeds separates the data pipeline and the
scoring from the training. Needs torch and transformers; from the repository
root:

    PYTHONPATH=.:tests /tmp/hf/bin/python tests/reference/hf_ner_native.py \
        --model_dir=$MINILM --train_file=../shared/data/ner/wnut17/wnut17train.conll \
        --eval_file=../shared/data/ner/wnut17/emerging.dev.conll --num_train_epochs=3 --seed=42

(`tests/reference/hf_trajectory.py` says how to make /tmp/hf.)
"""

import argparse
import json
import math
import os
import time

import torch
from transformers import (AutoTokenizer, BertForTokenClassification,
                          DataCollatorForTokenClassification, get_linear_schedule_with_warmup)

from data_prep import conll
from official_bert.metrics import ner as ner_metrics


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--eval_file", action="append", required=True)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=int, default=3)
    parser.add_argument("--warmup_ratio", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)

    train = conll.read_conll(args.train_file)
    labels = conll.label_list_from(train.sentences)
    label_map = {label: i for i, label in enumerate(labels)}
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)

    def encode(sentences):
        rows = []
        for s in sentences:
            enc = tokenizer(s.words, is_split_into_words=True, truncation=True,
                            max_length=args.max_seq_length)
            word_ids, previous, label_ids = enc.word_ids(), None, []
            for w in word_ids:
                label_ids.append(-100 if w is None or w == previous
                                 else label_map.get(s.tags[w], 0) if s.tags else 0)
                previous = w
            rows.append(dict(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                             token_type_ids=enc["token_type_ids"], labels=label_ids))
        return rows

    train_rows = encode(train.sentences)
    model = BertForTokenClassification.from_pretrained(args.model_dir, num_labels=len(labels))
    collate = DataCollatorForTokenClassification(tokenizer)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
    steps_per_epoch = math.ceil(len(train_rows) / args.train_batch_size)
    total = steps_per_epoch * args.num_train_epochs
    schedule = get_linear_schedule_with_warmup(optimizer, math.ceil(args.warmup_ratio * total),
                                               total)
    generator = torch.Generator().manual_seed(args.seed)
    start, step, window_loss = time.time(), 0, 0.0
    model.train()
    for _ in range(args.num_train_epochs):
        order = torch.randperm(len(train_rows), generator=generator).tolist()
        for b in range(steps_per_epoch):
            batch = collate([train_rows[i] for i in
                             order[b * args.train_batch_size:(b + 1) * args.train_batch_size]])
            loss = model(**batch).loss
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
        rows = encode(data.sentences)
        gold_all, predicted_all = [], []
        with torch.no_grad():
            for i in range(0, len(rows), 64):
                part = rows[i:i + 64]
                batch = collate(part)
                ids = model(**{k: v for k, v in batch.items() if k != "labels"}).logits.argmax(-1)
                for row, label_row, pred_row in zip(part, batch["labels"].tolist(), ids.tolist()):
                    keep = [j for j, label in enumerate(label_row) if label != -100]
                    gold_all.append([labels[label_row[j]] for j in keep])
                    predicted_all.append([labels[pred_row[j]] for j in keep])
        scores = ner_metrics.flat_results(ner_metrics.entity_scores(gold_all, predicted_all))
        print(path, json.dumps({k: round(v, 4) for k, v in scores.items()
                                if k in ("entity_f1", "precision", "recall")}), flush=True)


if __name__ == "__main__":
    main()
