"""Hugging Face transformers' masked-LM pre-training on a wall-clock budget: the
`transformers` row of `benchmarks/pretraining_outcome.py`.

Not a project dependency: it runs in a Python that has torch and transformers
(`--transformers_python` of the orchestrator), e.g.

    python -m venv /tmp/hf && /tmp/hf/bin/pip install torch==2.13.0 transformers
    /tmp/hf/bin/python benchmarks/hf_mlm_pretraining.py --train_file=train.txt \
        --eval_file=heldout.txt --vocab_file=vocab.txt --bert_config_file=bert_config.json \
        --budget_minutes=60 --output_dir=/tmp/hf_mlm

What a transformers user runs, with its documented CPU settings: `BertForMaskedLM`
built from the same `bert_config.json`, `BertTokenizerFast(vocab_file=...)` over the
same vocabulary, the text tokenized line by line and grouped into `--seq_length`
blocks (`examples/pytorch/language-modeling/run_mlm.py` without `--line_by_line`:
no padding, so every token is real), `DataCollatorForLanguageModeling`, and
`Trainer` with `use_cpu=True`, `torch.set_num_threads(<cores>)`, no dataloader
workers, AdamW (weight decay 0.01 off biases and LayerNorm, epsilon 1e-6: BERT's),
a linear schedule with warm-up. Its `max_steps` comes from a short calibration
(`--calibration_steps` timed after one untimed step), so the rate decays to zero
at the budget; a callback stops training when the budget is spent. `--dtype=auto`
calibrates float32 and `bf16=True` (CPU autocast) and keeps bfloat16 when it is
faster and its calibration loss is within 5% of float32's.

Writes `--output_dir` as a Hugging Face directory (model.safetensors,
config.json, vocab.txt, tokenizer_config.json), which the project's
`run_classifier.py --init_checkpoint` loads (saved as `BertForPreTraining`: the
pooler it needs, which `BertForMaskedLM` lacks, freshly initialized, as
transformers does when it fine-tunes from a masked-LM checkpoint), and
`results.json` in it: tokens/s
(median over logging windows after the first), tokens seen, steps, the chosen
dtype, the calibration, and the masked-LM accuracy on `--eval_file` with the
collator's masking (15%, seeded).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train_file", required=True,
                        help="Pre-training text (one sentence a line).")
    parser.add_argument("--eval_file", required=True, help="Held-out text, the same format.")
    parser.add_argument("--vocab_file", default=None,
                        help="Default: --init_model's vocab.txt (required without it).")
    parser.add_argument("--bert_config_file", default=None,
                        help="A fresh model of this config (or --init_model).")
    parser.add_argument("--init_model", default=None,
                        help="Continue this Hugging Face BERT directory's pre-training "
                             "(task-adaptive pre-training): its weights, a masked-LM head "
                             "fresh where it has none, its pooler kept in the output.")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--budget_minutes", type=float, default=60.0)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--warmup_fraction", type=float, default=0.1)
    parser.add_argument("--mlm_probability", type=float, default=0.15)
    parser.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto")
    parser.add_argument("--calibration_steps", type=int, default=20)
    parser.add_argument("--log_steps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=0, help="0: every core.")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    if bool(args.init_model) == bool(args.bert_config_file):
        parser.error("give --bert_config_file (a fresh model) or --init_model (continue one)")
    args.vocab_file = args.vocab_file or (args.init_model and
                                          os.path.join(args.init_model, "vocab.txt"))
    if not args.vocab_file:
        parser.error("--vocab_file is required with --bert_config_file")
    return args


def main(argv=None):
    args = parse_args(argv)
    import torch
    import transformers

    torch.set_num_threads(args.threads or os.cpu_count())
    tokenizer = load_tokenizer(transformers, args.vocab_file)
    train_blocks = grouped_blocks(tokenizer, args.train_file, args.seq_length)
    eval_blocks = grouped_blocks(tokenizer, args.eval_file, args.seq_length)
    print(f"{len(train_blocks)} training and {len(eval_blocks)} held-out blocks of "
          f"{args.seq_length} tokens", flush=True)
    collator = transformers.DataCollatorForLanguageModeling(
        tokenizer, mlm_probability=args.mlm_probability)
    calibration = calibrate(args, train_blocks, collator)
    dtype = choose_dtype(args.dtype, calibration)
    seconds = args.budget_minutes * 60
    max_steps = max(1, int(seconds / calibration[dtype]["seconds_per_step"]))
    print(f"{dtype}: {calibration[dtype]['seconds_per_step']:.3f} s/step → max_steps "
          f"{max_steps} for {args.budget_minutes:g} min", flush=True)
    model, budget = train(args, train_blocks, collator, dtype, max_steps, seconds)
    with_pooler(model, args.init_model).save_pretrained(args.output_dir)
    tokenizer.save_pretrained(args.output_dir)
    shutil.copyfile(args.vocab_file, os.path.join(args.output_dir, "vocab.txt"))
    results = dict(
        dtype=dtype, max_steps=max_steps, steps=budget.steps, train_seconds=budget.elapsed(),
        tokens_per_second=budget.tokens_per_second(args.batch_size * args.seq_length),
        tokens_seen=budget.steps * args.batch_size * args.seq_length,
        calibration=calibration, threads=torch.get_num_threads(),
        torch=torch.__version__, transformers=transformers.__version__,
        **evaluate(model, eval_blocks, tokenizer, args))
    with open(os.path.join(args.output_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print(json.dumps(results), flush=True)


def load_tokenizer(transformers, vocab_file):
    """`BertTokenizerFast` over `vocab_file`, uncased. transformers 5 takes the
    file as `vocab=` and silently ignores 4.x's `vocab_file=` (every word then
    [UNK]), so the size is checked."""
    import inspect

    keyword = ("vocab" if "vocab" in inspect.signature(transformers.BertTokenizerFast).parameters
               else "vocab_file")
    tokenizer = transformers.BertTokenizerFast(**{keyword: vocab_file}, do_lower_case=True)
    with open(vocab_file, encoding="utf-8") as f:
        size = sum(1 for line in f if line.strip())
    if len(tokenizer) != size:
        raise SystemExit(f"error: BertTokenizerFast read {len(tokenizer)} tokens of {vocab_file}, "
                         f"which has {size}: this transformers version loads vocabularies "
                         "differently; load it with from_pretrained on its directory")
    return tokenizer


def grouped_blocks(tokenizer, path, seq_length) -> list:
    """run_mlm.py's group_texts: every non-empty line tokenized with [CLS] and
    [SEP], all concatenated, cut into blocks of `seq_length` (the remainder
    dropped)."""
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    encoded = tokenizer(lines, return_special_tokens_mask=True)
    ids = [i for row in encoded["input_ids"] for i in row]
    special = [s for row in encoded["special_tokens_mask"] for s in row]
    return [{"input_ids": ids[start:start + seq_length],
             "special_tokens_mask": special[start:start + seq_length]}
            for start in range(0, len(ids) - seq_length + 1, seq_length)]


def budget_callback(seconds: float, window: int):
    """A `TrainerCallback` that stops training when `seconds` of it are spent
    (`BudgetClock`'s)."""
    import transformers

    class Budget(BudgetClock, transformers.TrainerCallback):
        pass

    return Budget(seconds, window)


class BudgetClock:
    """Training time since `on_train_begin`, and each step's end time (for the
    tokens/s of the logging windows); asks the Trainer to stop once `seconds`
    are spent."""

    def __init__(self, seconds: float, window: int):
        self.seconds, self.window = seconds, window
        self.start, self.ends = None, []

    @property
    def steps(self) -> int:
        return len(self.ends)

    def elapsed(self) -> float:
        return (self.ends[-1] - self.start) if self.ends else 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())
        if self.elapsed() >= self.seconds:
            control.should_training_stop = True

    def tokens_per_second(self, tokens_per_step: int) -> float:
        """Median over windows of `window` steps, the first (warming up) left
        out; over all steps when there are fewer than two windows."""
        times = [self.start] + self.ends
        rates = [self.window * tokens_per_step / (times[i + self.window] - times[i])
                 for i in range(self.window, len(times) - self.window, self.window)]
        if not rates:
            return self.steps * tokens_per_step / max(self.elapsed(), 1e-9)
        return statistics.median(rates)


def trainer_for(args, blocks, collator, dtype, max_steps, callback, output_dir):
    import torch
    import transformers

    torch.manual_seed(args.seed)
    if args.init_model:
        model = transformers.BertForMaskedLM.from_pretrained(args.init_model)
    else:
        model = transformers.BertForMaskedLM(
            transformers.BertConfig.from_json_file(args.bert_config_file))
    training_args = transformers.TrainingArguments(
        output_dir=output_dir, use_cpu=True, bf16=dtype == "bfloat16",
        per_device_train_batch_size=args.batch_size, learning_rate=args.learning_rate,
        weight_decay=0.01, adam_epsilon=1e-6, max_grad_norm=1.0, lr_scheduler_type="linear",
        warmup_steps=int(args.warmup_fraction * max_steps), max_steps=max_steps,
        logging_steps=args.log_steps, save_strategy="no", report_to="none",
        dataloader_num_workers=0, dataloader_drop_last=True, seed=args.seed,
        disable_tqdm=True)
    return transformers.Trainer(model=model, args=training_args, train_dataset=blocks,
                                data_collator=collator, callbacks=[callback])


def calibrate(args, blocks, collator) -> dict:
    """Seconds per step (after one untimed step) and the last loss, per dtype
    tried: float32 and bfloat16 for --dtype=auto, else the one asked for."""
    dtypes = ["float32", "bfloat16"] if args.dtype == "auto" else [args.dtype]
    results = {}
    for dtype in dtypes:
        callback = budget_callback(float("inf"), window=1)
        trainer = trainer_for(args, blocks, collator, dtype, args.calibration_steps + 1,
                              callback, os.path.join(args.output_dir, "calibration"))
        output = trainer.train()
        timed = callback.ends[-1] - callback.ends[0]
        results[dtype] = {"seconds_per_step": timed / max(len(callback.ends) - 1, 1),
                          "loss": output.training_loss}
        print(f"calibration {dtype}: {results[dtype]}", flush=True)
    return results


def choose_dtype(requested: str, calibration: dict) -> str:
    """bfloat16 under --dtype=auto when it is faster and its calibration loss
    is within 5% of float32's."""
    if requested != "auto":
        return requested
    fp32, bf16 = calibration["float32"], calibration["bfloat16"]
    holds = abs(bf16["loss"] - fp32["loss"]) <= 0.05 * fp32["loss"]
    return "bfloat16" if holds and bf16["seconds_per_step"] < fp32["seconds_per_step"] \
        else "float32"


def train(args, blocks, collator, dtype, max_steps, seconds):
    callback = budget_callback(seconds, window=args.log_steps)
    trainer = trainer_for(args, blocks, collator, dtype, max_steps, callback,
                          os.path.join(args.output_dir, "trainer"))
    trainer.train()
    print(f"trained {callback.steps} steps in {callback.elapsed():.1f} s", flush=True)
    return trainer.model, callback


def with_pooler(model, init_model=None):
    """The trained `BertForMaskedLM` as a `BertForPreTraining`: the same encoder
    and masked-LM head, plus the pooler and next-sentence layer that
    BertForMaskedLM lacks, freshly initialized (as transformers initializes the
    pooler when it fine-tunes a classifier from a masked-LM checkpoint), so that
    the project's run_classifier, which needs a pooler, loads it. With
    `init_model`, its own pooler (which the masked-LM training never touched)."""
    import transformers

    full = transformers.BertForPreTraining(model.config)
    missing, unexpected = full.bert.load_state_dict(model.bert.state_dict(), strict=False)
    if unexpected or any(not name.startswith("pooler.") for name in missing):
        raise RuntimeError(f"encoder weights do not match: missing {missing}, "
                           f"unexpected {unexpected}")
    full.cls.predictions.load_state_dict(model.cls.predictions.state_dict())
    if init_model:
        original = transformers.BertModel.from_pretrained(init_model)
        if original.pooler is not None:
            full.bert.pooler.load_state_dict(original.pooler.state_dict())
    return full


def evaluate(model, blocks, tokenizer, args) -> dict:
    """Masked-LM accuracy and loss on the held-out blocks, masked by the
    collator with a fixed seed, in float32."""
    import torch
    import transformers

    collator = transformers.DataCollatorForLanguageModeling(
        tokenizer, mlm_probability=args.mlm_probability, seed=args.seed)
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with torch.inference_mode():
        for start in range(0, len(blocks), 64):
            batch = collator(blocks[start:start + 64])
            batch.pop("special_tokens_mask", None)
            labels = batch.pop("labels")
            logits = model(**batch).logits.float()
            scored = labels != -100
            correct += int((logits.argmax(-1)[scored] == labels[scored]).sum())
            loss_sum += float(torch.nn.functional.cross_entropy(
                logits[scored], labels[scored], reduction="sum"))
            total += int(scored.sum())
    return {"heldout_masked_tokens": total,
            "heldout_masked_lm_accuracy": correct / max(total, 1),
            "heldout_masked_lm_loss": loss_sum / max(total, 1)}


if __name__ == "__main__":
    main()
