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

    /tmp/hf/bin/python tools/parity/hf_ner_native.py \
        --model_dir=$MINILM --train_file=../shared/data/ner/wnut17/wnut17train.conll \
        --eval_file=../shared/data/ner/wnut17/emerging.dev.conll --num_train_epochs=3 --seed=42

(`tools/parity/README.md` says how to make /tmp/hf.)
"""

import math

import torch
from transformers import (AutoTokenizer, BertForTokenClassification,
                          DataCollatorForTokenClassification)

import common
from data_prep import conll


def main():
    parser = common.recipe_parser(__doc__.splitlines()[0], "ner")
    parser.add_argument("--warmup_ratio", type=float, default=0.1)
    args = parser.parse_args()
    common.seed_torch(args.seed)

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
    steps_per_epoch, total = common.epoch_steps(len(train_rows), args.train_batch_size,
                                                args.num_train_epochs)
    # transformers' Trainer rounds the warm-up up (hf_ner_finetune.py: down, as run_ner).
    optimizer, schedule = common.bert_adamw(model, args.learning_rate, total,
                                            math.ceil(args.warmup_ratio * total))
    generator = torch.Generator().manual_seed(args.seed)
    orders = (torch.randperm(len(train_rows), generator=generator).tolist()
              for _ in range(args.num_train_epochs))
    common.train(model, optimizer, schedule,
                 (collate([train_rows[i] for i in indices])
                  for indices in common.index_batches(orders, args.train_batch_size,
                                                      steps_per_epoch)), total)

    model.eval()
    for path in args.eval_file:
        data = conll.read_conll(path)
        rows = encode(data.sentences)
        gold_all, predicted_all = [], []
        with torch.no_grad():
            for i in range(0, len(rows), 64):
                batch = collate(rows[i:i + 64])
                ids = model(**{k: v for k, v in batch.items() if k != "labels"}).logits.argmax(-1)
                for label_row, pred_row in zip(batch["labels"].tolist(), ids.tolist()):
                    keep = [j for j, label in enumerate(label_row) if label != -100]
                    gold_all.append([labels[label_row[j]] for j in keep])
                    predicted_all.append([labels[pred_row[j]] for j in keep])
        common.print_ner_scores(path, gold_all, predicted_all)


if __name__ == "__main__":
    main()
