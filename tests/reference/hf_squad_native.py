"""SQuAD v1.1 done entirely the Hugging Face way: a reference run.

Unlike `hf_squad_finetune.py` (run_squad's windows and post-processing,
transformers only doing the training), everything here is transformers' own
`run_qa.py` pipeline: the fast tokenizer on (question, context) with
`truncation="only_second"`, `stride=doc_stride` (transformers' stride is the
*overlap* between windows, google's the distance between their starts),
`max_length`, answer labels from the offset mapping ((0, 0) = [CLS] when the
answer is not wholly inside the window), and `postprocess_qa_predictions`'
n-best search (no max-context rule; answer text sliced from the context by
offsets). The official metric scores it (`squad_metrics.evaluate_v1`).
Comparing it with `hf_squad_finetune.py` on the same seed separates the data
pipeline and post-processing from the training. Needs torch and transformers;
from the repository root:

    PYTHONPATH=.:tests /tmp/hf/bin/python tests/reference/hf_squad_native.py \
        --model_dir=$MINILM \
        --train_file=../shared/data/squad_v1.1/train-v1.1-first12articles.json \
        --predict_file=../shared/data/squad_v1.1/squad_v1.1-shared.json --seed=42
"""

import argparse
import collections
import json
import math
import os
import time

import numpy as np
import torch
from transformers import AutoTokenizer, BertForQuestionAnswering, get_linear_schedule_with_warmup

from data_prep import squad
from official_bert.metrics import squad as squad_metrics


def examples_of(path):
    out = []
    for article in squad.load_squad_json(path):
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answer = qa["answers"][0] if qa.get("answers") else None
                out.append(dict(id=qa["id"], question=qa["question"].lstrip(),
                                context=paragraph["context"], answer=answer))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--predict_file", required=True)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--n_best_size", type=int, default=20)
    parser.add_argument("--max_answer_length", type=int, default=30)
    parser.add_argument("--train_batch_size", type=int, default=16)
    parser.add_argument("--predict_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)

    def encode(examples):
        return tokenizer([e["question"] for e in examples], [e["context"] for e in examples],
                         truncation="only_second", max_length=args.max_seq_length,
                         stride=args.doc_stride, return_overflowing_tokens=True,
                         return_offsets_mapping=True, padding="max_length")

    train_examples = examples_of(args.train_file)
    enc = encode(train_examples)
    starts, ends = [], []
    for i, offsets in enumerate(enc["offset_mapping"]):
        example = train_examples[enc["overflow_to_sample_mapping"][i]]
        answer_start = example["answer"]["answer_start"]
        answer_end = answer_start + len(example["answer"]["text"])
        sequence_ids = enc.sequence_ids(i)
        first = sequence_ids.index(1)
        last = len(sequence_ids) - 1 - sequence_ids[::-1].index(1)
        if not (offsets[first][0] <= answer_start and offsets[last][1] >= answer_end):
            starts.append(0), ends.append(0)
            continue
        s = first
        while s <= last and offsets[s][0] <= answer_start:
            s += 1
        e = last
        while e >= first and offsets[e][1] >= answer_end:
            e -= 1
        starts.append(s - 1), ends.append(e + 1)
    train = {k: torch.tensor(enc[k]) for k in ("input_ids", "attention_mask", "token_type_ids")}
    train["start_positions"], train["end_positions"] = torch.tensor(starts), torch.tensor(ends)
    num_windows = len(starts)

    model = BertForQuestionAnswering.from_pretrained(args.model_dir)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
    steps_per_epoch = math.ceil(num_windows / args.train_batch_size)
    total = steps_per_epoch * args.num_train_epochs
    schedule = get_linear_schedule_with_warmup(optimizer, math.ceil(0.1 * total), total)
    print(f"{num_windows} training windows ({sum(s == 0 for s in starts)} without the answer), "
          f"{total} steps", flush=True)
    generator = torch.Generator().manual_seed(args.seed)
    start, step, window_loss = time.time(), 0, 0.0
    model.train()
    for _ in range(args.num_train_epochs):
        order = torch.randperm(num_windows, generator=generator)
        for b in range(steps_per_epoch):
            indices = order[b * args.train_batch_size:(b + 1) * args.train_batch_size]
            loss = model(**{k: v[indices] for k, v in train.items()}).loss
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

    examples = examples_of(args.predict_file)
    enc = encode(examples)
    inputs = {k: torch.tensor(enc[k]) for k in ("input_ids", "attention_mask", "token_type_ids")}
    all_start, all_end = [], []
    model.eval()
    with torch.no_grad():
        for i in range(0, len(enc["input_ids"]), args.predict_batch_size):
            out = model(**{k: v[i:i + args.predict_batch_size] for k, v in inputs.items()})
            all_start.append(out.start_logits.numpy())
            all_end.append(out.end_logits.numpy())
    all_start, all_end = np.concatenate(all_start), np.concatenate(all_end)
    features_of = collections.defaultdict(list)
    for i, sample in enumerate(enc["overflow_to_sample_mapping"]):
        features_of[sample].append(i)
    predictions = {}
    for index, example in enumerate(examples):
        candidates = []
        for i in features_of[index]:
            sequence_ids = enc.sequence_ids(i)
            offsets = [o if sequence_ids[k] == 1 else None
                       for k, o in enumerate(enc["offset_mapping"][i])]
            start_logits, end_logits = all_start[i], all_end[i]
            best_starts = np.argsort(start_logits)[-1:-args.n_best_size - 1:-1]
            best_ends = np.argsort(end_logits)[-1:-args.n_best_size - 1:-1]
            for s in best_starts:
                for e in best_ends:
                    if offsets[s] is None or offsets[e] is None:
                        continue
                    if e < s or e - s + 1 > args.max_answer_length:
                        continue
                    candidates.append((start_logits[s] + end_logits[e],
                                       example["context"][offsets[s][0]:offsets[e][1]]))
        predictions[example["id"]] = max(candidates)[1] if candidates else ""
    dataset = squad.load_squad_json(args.predict_file)
    print(json.dumps(squad_metrics.evaluate_v1(dataset, predictions)), flush=True)


if __name__ == "__main__":
    main()
