"""Hugging Face transformers (PyTorch) on the same shapes: the same-run baseline.

Not a project dependency: `pretraining_step.py` and `inference.py` run this file
with `--transformers_python` (a Python that has torch and transformers, e.g.
`python -m venv /tmp/hf && /tmp/hf/bin/pip install torch==2.13.0 transformers`)
and put its numbers beside their own. On its own:

    /tmp/hf/bin/python benchmarks/transformers_baseline.py --mode=pretraining \
        --num_layers=12 --hidden_size=768 --num_heads=12 --batch_size=8 --seq_length=128

Modes: `pretraining` times one training step of `BertForPreTraining` as a
transformers user runs it (masked-LM labels -100 except at the masked positions,
so its vocabulary projection runs over every position; next-sentence labels;
backward; `clip_grad_norm_(1.0)`; torch's AdamW); `classifier` the same for
`BertForSequenceClassification`; `inference` one eager forward of `BertModel`
under `torch.inference_mode()`. `--dtype=bfloat16` runs the step under CPU
autocast. Prints one JSON line: seconds of every timed step. `onnx` instead
writes `BertModel` (random weights, float32) to `--onnx_output` with
`torch.onnx.export` (dynamic batch and length; needs `onnx` and `onnxscript` in
that Python): the ONNX file ONNX Runtime and OpenVINO users serve
(`benchmarks/serving_speed.py`).
"""

import argparse
import json
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["pretraining", "classifier", "inference", "onnx"],
                        default="pretraining")
    parser.add_argument("--num_layers", type=int, default=12)
    parser.add_argument("--hidden_size", type=int, default=768)
    parser.add_argument("--num_heads", type=int, default=12)
    parser.add_argument("--intermediate_size", type=int, default=0)
    parser.add_argument("--vocab_size", type=int, default=30522)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--masked_positions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup_steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--dropout", type=float, default=0.1,
                        help="hidden_dropout_prob and attention_probs_dropout_prob (training).")
    parser.add_argument("--onnx_output", default=None, help="--mode=onnx: the file to write.")
    args = parser.parse_args()

    import torch
    import transformers

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=args.vocab_size, hidden_size=args.hidden_size,
        num_hidden_layers=args.num_layers, num_attention_heads=args.num_heads,
        intermediate_size=args.intermediate_size or 4 * args.hidden_size,
        max_position_embeddings=max(512, args.seq_length),
        hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
    batch, seq = args.batch_size, args.seq_length
    ids = torch.randint(1000, args.vocab_size, (batch, seq))
    inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids),
                  token_type_ids=(torch.arange(seq)[None, :] >= seq // 2).long().repeat(batch, 1))
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.dtype == "bfloat16")

    if args.mode == "onnx":
        _export_onnx(torch, transformers.BertModel(config).eval(), inputs, args.onnx_output)
        return
    if args.mode == "inference":
        model = transformers.BertModel(config).eval()

        def step():
            with torch.inference_mode(), autocast:
                model(**inputs).last_hidden_state.float().numpy()
    else:
        if args.mode == "pretraining":
            model = transformers.BertForPreTraining(config)
            labels = torch.full((batch, seq), -100)
            for row in range(batch):
                positions = torch.randperm(seq - 1)[:args.masked_positions] + 1
                labels[row, positions] = torch.randint(1000, args.vocab_size,
                                                       (args.masked_positions,))
            targets = dict(labels=labels, next_sentence_label=torch.randint(0, 2, (batch,)))
        else:
            model = transformers.BertForSequenceClassification(config)
            targets = dict(labels=torch.randint(0, 2, (batch,)))
        model.train()
        no_decay = ("bias", "LayerNorm.weight")
        optimizer = torch.optim.AdamW([
            {"params": [p for n, p in model.named_parameters()
                        if not any(k in n for k in no_decay)], "weight_decay": 0.01},
            {"params": [p for n, p in model.named_parameters()
                        if any(k in n for k in no_decay)], "weight_decay": 0.0},
        ], lr=1e-4, eps=1e-6)

        def step():
            with autocast:
                loss = model(**inputs, **targets).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            loss.item()

    for _ in range(args.warmup_steps):
        step()
    seconds = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"seconds": seconds, "torch": torch.__version__,
                      "transformers": transformers.__version__,
                      "threads": torch.get_num_threads()}))


def _export_onnx(torch, model, inputs, path):
    """BertModel → ONNX (opset 17), inputs int64 [batch, seq] with both dimensions
    dynamic, outputs last_hidden_state and pooler_output."""
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dynamic = {name: {0: "batch", 1: "sequence"} for name in names}

    class Positional(torch.nn.Module):  # the exporter passes inputs by position
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids)
            return out.last_hidden_state, out.pooler_output

    with torch.no_grad():
        torch.onnx.export(Positional().eval(), tuple(inputs[k] for k in names), path,
                          input_names=names, output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes=dynamic, opset_version=17, dynamo=False)
    print(json.dumps({"onnx": path, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
