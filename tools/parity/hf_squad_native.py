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

    /tmp/hf/bin/python tools/parity/hf_squad_native.py \
        --model_dir=$MINILM \
        --train_file=../shared/data/squad_v1.1/train-v1.1-first12articles.json \
        --predict_file=../shared/data/squad_v1.1/squad_v1.1-shared.json --seed=42

(`tools/parity/README.md` says how to make /tmp/hf.)
"""

import collections
import math

import numpy as np
import torch
from transformers import AutoTokenizer, BertForQuestionAnswering

import common
from data_prep import squad


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
    parser = common.recipe_parser(__doc__.splitlines()[0], "squad", without=("max_query_length",))
    parser.add_argument("--n_best_size", type=int, default=20)
    parser.add_argument("--max_answer_length", type=int, default=30)
    args = parser.parse_args()
    common.seed_torch(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)

    def encode(examples):
        return tokenizer([e["question"] for e in examples], [e["context"] for e in examples],
                         truncation="only_second", max_length=args.max_seq_length,
                         stride=args.doc_stride, return_overflowing_tokens=True,
                         return_offsets_mapping=True, padding="max_length")

    train_examples = examples_of(args.train_file)[:args.max_train_examples]
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
    steps_per_epoch, total = common.epoch_steps(num_windows, args.train_batch_size,
                                                args.num_train_epochs)
    # transformers' Trainer rounds the warm-up up (hf_squad_finetune.py: down, as run_squad).
    optimizer, schedule = common.bert_adamw(model, args.learning_rate, total,
                                            math.ceil(0.1 * total))
    print(f"{num_windows} training windows ({sum(s == 0 for s in starts)} without the answer), "
          f"{total} steps", flush=True)
    generator = torch.Generator().manual_seed(args.seed)
    orders = (torch.randperm(num_windows, generator=generator)
              for _ in range(args.num_train_epochs))
    common.train(model, optimizer, schedule,
                 ({k: v[indices] for k, v in train.items()}
                  for indices in common.index_batches(orders, args.train_batch_size,
                                                      steps_per_epoch)), total)

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
    common.print_squad_scores(args.predict_file, predictions)


if __name__ == "__main__":
    main()
