r"""What pre-training buys on a compute budget (issue 34's measurement): one command
that pre-trains the same small BERT several ways for the same wall-clock time,
fine-tunes each result on GLUE tasks over several seeds, measures task-adaptive
pre-training on WNUT-17, prints a table and writes JSON.

    python benchmarks/pretraining_outcome.py --budget_minutes=60 \
        --transformers_python=/tmp/hf/bin/python --work_dir=/tmp/outcome \
        --json_output=benchmarks/results/pretraining_outcome.json
    python benchmarks/pretraining_outcome.py --dry_run     # every command, nothing run

Every step is a subprocess of the project's own commands, as a user runs them
(`bert prepare-corpus`, `bert build-vocab`, `create_pretraining_data.py`,
`run_pretraining.py`, `run_classifier.py`, `run_ner.py`), its output and log in
`--work_dir`. A step's directory is named after a hash of its command, and a
finished step leaves `<dir>.done.json` (command, seconds, parsed result): a rerun
with the same settings reuses it, and an unfinished one resumes (the commands
resume their own --output_dir), so a long measurement can be continued.

Sections (`--sections`):
* `pretrain`: ../shared/data/pretrain_text → `bert prepare-corpus` → split by
  document into train and a held-out ~5% (`split_documents`, deterministic) → a
  vocabulary learned from the train part → `bert_config.json` → the rows
  (`--rows`), each for `--budget_minutes` of training:
  `none` random initialization (nothing pre-trained);
  `paper` BERT's recipe: static masking 15% + next sentence, AdamW 1e-4, float32;
  `efficient` masked LM only on packed full sentences (`--packing=full_sentences`),
  dynamic masking at `--efficient_masking_rate`, a higher learning rate, bfloat16
  where the CPU has AVX512-BF16/AMX;
  `transformers` `benchmarks/hf_mlm_pretraining.py` under `--transformers_python`
  (skipped without it). Each trained row is evaluated on the same held-out
  masked-LM file (packed, masked once at 15%) beside the unigram baseline (always
  predicting the training text's most frequent token).
* `glue`: `run_classifier.py` per row, task and seed; the GLUE score per task
  (`glue_score`), the median over seeds with its min-max spread, and the average.
* `tapt`: all-MiniLM-L6-v2 with and without masked-LM pre-training on WNUT-17's
  training text, then `run_ner.py` on WNUT-17 (the recipe of
  ../shared/REFERENCE_RESULTS.md), median over seeds.

The budget is `run_pretraining.py --max_train_minutes` (warm-up over the first
`--warmup_fraction` of it, linear decay to zero when it is spent, stop and save
there; training time only, a resumed run continues the clock);
`hf_mlm_pretraining.py` gets the same budget, its steps from a calibration.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script: benchmarks/ is not installed
from benchmarks.outcome_metrics import (  # noqa: E402
    format_tables, glue_average, glue_score, log_rates, read_key_values,
    seed_summary, split_documents, task_score)
from benchmarks.common import machine, minilm_dir  # noqa: E402
from benchmarks.step_runner import (InProcess, Step, add_data_dir_flags,  # noqa: E402
                                    add_fine_tuning_flags, bert, check_choices, check_positive,
                                    check_seeds, measure, measurement_parser, python,
                                    split_lists, write_json)
from official_bert.run_directory.layout import EVAL_RESULTS  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the unigram baseline reads TFRecords here
# GLUE task (its directory under --glue_dir) → run_classifier's --task_name.
GLUE_TASKS = {"SST-2": "sst-2", "MRPC": "mrpc", "STS-B": "sts-b", "CoLA": "cola", "RTE": "rte",
              "QNLI": "qnli"}
ROWS = ("none", "paper", "efficient", "transformers")
SECTIONS = ("pretrain", "glue", "tapt")


def parse_args(argv=None) -> argparse.Namespace:
    p = measurement_parser(__doc__, "/tmp/pretraining_outcome")
    add = p.add_argument
    add("--sections", default="pretrain,glue,tapt", help="Comma-separated: " + ",".join(SECTIONS))
    add("--rows", default=",".join(ROWS), help="Comma-separated: " + ",".join(ROWS))
    add("--budget_minutes", type=float, default=60.0, help="Training time of every row.")
    add_data_dir_flags(p, "corpus_dir", "glue_dir", "wnut_dir")
    add("--heldout_fraction", type=float, default=0.05, help="Of the corpus's characters.")
    add("--vocab_size", type=int, default=8000)
    add("--num_layers", type=int, default=4)
    add("--hidden_size", type=int, default=256)
    add("--num_heads", type=int, default=4)
    add("--seq_length", type=int, default=128)
    add("--warmup_fraction", type=float, default=0.1, help="Of the budget, every row.")
    add("--log_steps", type=int, default=100)
    add("--paper_batch_size", type=int, default=32)
    add("--paper_learning_rate", type=float, default=1e-4)
    add("--paper_dupe_factor", type=int, default=10)
    add("--efficient_batch_size", type=int, default=32)
    add("--efficient_learning_rate", type=float, default=5e-4)
    add("--efficient_masking_rate", type=float, default=0.2)
    add("--efficient_dtype", default="auto", choices=["auto", "float32", "bfloat16"],
        help="auto: bfloat16 where the CPU has AVX512-BF16 or AMX.")
    add("--efficient_length_bucket_width", type=int, default=0,
        help="run_pretraining's --length_bucket_width (packed instances have no padding).")
    add("--transformers_python", default=None, help="A Python with torch and transformers.")
    add("--transformers_dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    add("--transformers_learning_rate", type=float, default=None,
        help="Default: --efficient_learning_rate.")
    add("--tasks", default="SST-2,MRPC,STS-B,CoLA,RTE", help="GLUE tasks: " + ",".join(GLUE_TASKS))
    add("--seeds", default="42,43,44,45,46")
    add("--sst2_train_rows", type=int, default=8000, help="SST-2 trains on its first N rows.")
    add_fine_tuning_flags(p, "glue_", learning_rate=5e-5)
    add("--tapt_minutes", type=float, default=20.0,
        help="Training time of the masked LM on WNUT-17's training text.")
    add("--tapt_learning_rate", type=float, default=1e-4)
    add("--tapt_batch_size", type=int, default=32)
    add("--ner_epochs", type=float, default=3.0)
    args = p.parse_args(argv)
    check_args(p, args)
    return args


def check_args(parser, args) -> None:
    """One line (argparse's error) for each bad value; lists made lists."""
    split_lists(args, "sections", "rows", "tasks", "seeds")
    for name, allowed in (("sections", SECTIONS), ("rows", ROWS), ("tasks", GLUE_TASKS)):
        check_choices(parser, name, getattr(args, name), allowed, allow_empty=True)
    check_seeds(parser, "seeds", args.seeds)
    check_positive(parser, args, ("budget_minutes", "tapt_minutes", "glue_epochs", "ner_epochs"))
    if not 0 < args.heldout_fraction < 0.5:
        parser.error(f"--heldout_fraction must be in (0, 0.5), got {args.heldout_fraction}")
    if not 0 < args.efficient_masking_rate < 1:
        parser.error(f"--efficient_masking_rate must be in (0, 1), got "
                     f"{args.efficient_masking_rate}")
    if args.glue_epochs > 5:
        parser.error("--glue_epochs: at most 5 (GLUE-sane fine-tuning)")
    if args.transformers_python and not os.access(args.transformers_python, os.X_OK):
        parser.error(f"--transformers_python={args.transformers_python} is not an executable; "
                     "make one: python -m venv /tmp/hf && /tmp/hf/bin/pip install "
                     "torch==2.13.0 transformers")
    args.json_output = args.json_output or os.path.join(args.work_dir, "results.json")
    args.transformers_learning_rate = (args.transformers_learning_rate
                                       or args.efficient_learning_rate)


# --- the plan ---------------------------------------------------------------------------


def efficient_dtype(requested: str) -> str:
    """bfloat16 for `auto` on CPUs with AVX512-BF16 or AMX (oneDNN's fast
    bfloat16 kernels; elsewhere bfloat16 is emulated and slower)."""
    if requested != "auto":
        return requested
    try:
        flags = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return "float32"
    return "bfloat16" if re.search(r"\b(avx512_bf16|amx_bf16)\b", flags) else "float32"


def masked_per_sequence(rate: float, seq_length: int) -> int:
    """Masked-LM predictions per instance for a rate: 20 at 15% of 128, as BERT's."""
    return max(1, math.ceil(rate * seq_length))


def summary_of(out: pathlib.Path, name: str) -> dict:
    """create_pretraining_data's summary beside the first output file."""
    return json.loads((out / f".{name.replace('.', '_')}.summary.json").read_text())


def data_step(name, kind, input_path, vocab, args, extra, estimate) -> Step:
    """create_pretraining_data.py into the step's directory; its result: the
    files' pattern, instances and padding fraction (from its summary)."""
    def make(results):
        return python("create_pretraining_data.py") + [
            f"--input_file={input_path(results)}", "--output_file={out}/data.tfrecord",
            f"--vocab_file={vocab(results)}", f"--max_seq_length={args.seq_length}",
            "--random_seed=12345", *extra]

    def parse(out, log):
        summary = summary_of(out, "data.tfrecord")
        return {"pattern": str(out / "data.tfrecord"), "instances": summary["instances"],
                "padding_fraction": summary.get("padding_fraction") or 0.0}

    return Step(name, kind, estimate, make, parse)


def bert_config(args) -> dict:
    """google-research/bert's bert_config.json for the flags' architecture."""
    return {"vocab_size": args.vocab_size, "hidden_size": args.hidden_size,
            "num_hidden_layers": args.num_layers, "num_attention_heads": args.num_heads,
            "intermediate_size": 4 * args.hidden_size, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": max(512, args.seq_length), "type_vocab_size": 2,
            "initializer_range": 0.02}


def path_in(result, name: str) -> str:
    return str(pathlib.Path(result["output_dir"]) / name)


def write_split(corpus_file: str, fraction: float, out: pathlib.Path) -> None:
    train, held = split_documents(pathlib.Path(corpus_file).read_text(encoding="utf-8"), fraction)
    (out / "train.txt").write_text("\n\n".join(train) + "\n", encoding="utf-8")
    (out / "heldout.txt").write_text("\n\n".join(held) + "\n", encoding="utf-8")
    write_json(out / "split.json", {
        "train_documents": len(train), "heldout_documents": len(held),
        "train_characters": sum(map(len, train)), "heldout_characters": sum(map(len, held))})


def unigram_baseline(train_file: str, vocab_file: str, heldout_pattern: str,
                     predictions: int) -> dict:
    """The masked-LM accuracy of always predicting the training text's most
    frequent token (BERT's basic tokens: the most frequent ones are whole
    word pieces), on the held-out file's masked positions."""
    import tensorflow as tf

    from data_prep import build_vocab

    counts = build_vocab.count_words([train_file], do_lower_case=True)
    vocab = pathlib.Path(vocab_file).read_text(encoding="utf-8").split("\n")
    top = next(word for word, _ in counts.most_common() if word in vocab)
    spec = {"masked_lm_ids": tf.io.FixedLenFeature([predictions], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([predictions], tf.float32)}
    hits = total = 0
    for batch in tf.data.TFRecordDataset(tf.io.gfile.glob(heldout_pattern)).batch(1024).map(
            lambda s: tf.io.parse_example(s, spec)):
        ids, weights = batch["masked_lm_ids"].numpy(), batch["masked_lm_weights"].numpy()
        hits += int(((ids == vocab.index(top)) & (weights > 0)).sum())
        total += int((weights > 0).sum())
    return {"token": top, "accuracy": hits / max(total, 1), "masked_positions": total}


def corpus_steps(args) -> list:
    """The corpus, its split, the vocabulary, the config, the held-out file and
    its unigram baseline."""
    train = lambda r: path_in(r["split"], "train.txt")  # noqa: E731
    vocab = lambda r: path_in(r["vocab"], "vocab.txt")  # noqa: E731
    heldout_predictions = masked_per_sequence(0.15, args.seq_length)

    def split(r):
        corpus = path_in(r["corpus"], "corpus.txt")
        return InProcess(f"split {corpus} by document into train.txt and heldout.txt "
                         f"({args.heldout_fraction:g} held out)",
                         lambda out: write_split(corpus, args.heldout_fraction, out))

    def baseline(r):
        inputs = (train(r), vocab(r), r["data/heldout"]["pattern"], heldout_predictions)
        return InProcess(f"unigram baseline of {inputs[2]} (the most frequent token of "
                         f"{inputs[0]})",
                         lambda out: write_json(out / "unigram.json", unigram_baseline(*inputs)))

    config = bert_config(args)
    return [
        Step("corpus", "corpus", 10, lambda r: bert("prepare-corpus") + [
            f"--input={args.corpus_dir}", "--output_file={out}/corpus.txt"]),
        Step("split", "split", 2, split,
             lambda out, log: json.loads((out / "split.json").read_text())),
        Step("vocab", "vocab", 120, lambda r: bert("build-vocab") + [
            f"--input_file={train(r)}", "--output_file={out}/vocab.txt",
            f"--vocab_size={args.vocab_size}", "--num_unused=0"],
            lambda out, log: {"summary": re.findall(r"^wrote .*", log, re.M),
                              "small_corpus_warning": re.findall(r".*yields only.*", log)}),
        Step("config", "config", 1, lambda r: InProcess(
            f"write bert_config.json {json.dumps(config)}",
            lambda out: write_json(out / "bert_config.json", config))),
        data_step("data/heldout", "data", lambda r: path_in(r["split"], "heldout.txt"), vocab,
                  args, ["--packing=full_sentences", "--dupe_factor=1", "--masked_lm_prob=0.15",
                         f"--max_predictions_per_seq={heldout_predictions}"], 20),
        Step("unigram", "unigram", 15, baseline,
             lambda out, log: json.loads((out / "unigram.json").read_text())),
    ]


@dataclasses.dataclass
class Recipe:
    """One of this project's pre-training recipes: its data and its run."""

    description: str
    batch_size: int
    learning_rate: float
    predictions: int
    data_flags: list
    run_flags: list


def recipes(args) -> dict:
    paper = masked_per_sequence(0.15, args.seq_length)
    efficient = masked_per_sequence(args.efficient_masking_rate, args.seq_length)
    dtype = efficient_dtype(args.efficient_dtype)
    bucket = ([f"--length_bucket_width={args.efficient_length_bucket_width}"]
              if args.efficient_length_bucket_width else [])
    return {
        "paper": Recipe(
            "MLM 15% + NSP, static masking, AdamW, float32", args.paper_batch_size,
            args.paper_learning_rate, paper,
            [f"--dupe_factor={args.paper_dupe_factor}", "--masked_lm_prob=0.15",
             f"--max_predictions_per_seq={paper}"], []),
        "efficient": Recipe(
            f"MLM {args.efficient_masking_rate:.0%} only, packed, dynamic masking, AdamW, "
            f"{dtype}", args.efficient_batch_size, args.efficient_learning_rate, efficient,
            ["--packing=full_sentences", "--dynamic_masking", "--dupe_factor=1",
             f"--masked_lm_prob={args.efficient_masking_rate}",
             f"--max_predictions_per_seq={efficient}"],
            ["--dynamic_masking", f"--masked_lm_prob={args.efficient_masking_rate}",
             f"--dtype={dtype}", *bucket]),
    }


def pretrain_command(args, r, row, recipe, schedule) -> list:
    return python("run_pretraining.py") + [
        "--do_train", f"--input_file={r['data/' + row]['pattern']}",
        f"--bert_config_file={path_in(r['config'], 'bert_config.json')}",
        f"--vocab_file={path_in(r['vocab'], 'vocab.txt')}", f"--max_seq_length={args.seq_length}",
        f"--max_predictions_per_seq={recipe.predictions}",
        f"--train_batch_size={recipe.batch_size}", f"--learning_rate={recipe.learning_rate}",
        "--seed=12345", "--output_dir={out}", *recipe.run_flags, *schedule]


def budget(args, minutes: float) -> list:
    """--max_train_minutes, the warm-up its --warmup_fraction (given as the
    steps' fraction: a cap of steps that the budget reaches first)."""
    cap = 10**7
    return [f"--max_train_minutes={minutes:g}", f"--num_train_steps={cap}",
            f"--num_warmup_steps={round(args.warmup_fraction * cap)}",
            f"--log_steps={args.log_steps}"]


def real_tokens(args, recipe, rates: dict, padding: float) -> dict:
    """Non-padding tokens/s and tokens seen, from the log's windows."""
    per_step = recipe.batch_size * args.seq_length * (1 - padding)
    return {"tokens_per_second": (rates["tokens_per_second"] or 0) * (1 - padding),
            "tokens_seen": int(rates["steps"] * per_step), "steps": rates["steps"]}


def our_row_steps(args, row: str, recipe: Recipe) -> list:
    """create_pretraining_data, then run_pretraining for the budget."""
    data = data_step(f"data/{row}", "data", lambda r: path_in(r["split"], "train.txt"),
                     lambda r: path_in(r["vocab"], "vocab.txt"), args, recipe.data_flags,
                     30 + 15 * (args.paper_dupe_factor if row == "paper" else 1))
    train = Step(f"pretrain/{row}", "pretrain", args.budget_minutes * 60 + 90,
                 lambda r: pretrain_command(args, r, row, recipe,
                                            budget(args, args.budget_minutes)),
                 lambda out, log: {"rates": log_rates(log)})
    return [data, train]


def transformers_step(args) -> Step:
    """benchmarks/hf_mlm_pretraining.py in --transformers_python's venv."""
    def make(r):
        return [args.transformers_python, str(REPO / "benchmarks" / "hf_mlm_pretraining.py"),
                f"--train_file={path_in(r['split'], 'train.txt')}",
                f"--eval_file={path_in(r['split'], 'heldout.txt')}",
                f"--vocab_file={path_in(r['vocab'], 'vocab.txt')}",
                f"--bert_config_file={path_in(r['config'], 'bert_config.json')}",
                f"--budget_minutes={args.budget_minutes:g}", f"--seq_length={args.seq_length}",
                f"--batch_size={args.efficient_batch_size}",
                f"--learning_rate={args.transformers_learning_rate}",
                f"--warmup_fraction={args.warmup_fraction}", f"--dtype={args.transformers_dtype}",
                f"--log_steps={args.log_steps}", "--output_dir={out}"]
    return Step("pretrain/transformers", "pretrain_hf", args.budget_minutes * 60 + 300, make,
                lambda out, log: json.loads((out / "results.json").read_text()))


def heldout_step(args, row: str) -> Step:
    """The row's model (its masked-LM head too) on the held-out file."""
    def make(r):
        data = r["data/heldout"]["pattern"]
        return python("run_pretraining.py") + [
            "--do_eval", f"--init_checkpoint={r['pretrain/' + row]['output_dir']}",
            f"--eval_input_file={data}",
            f"--max_seq_length={args.seq_length}",
            f"--max_predictions_per_seq={masked_per_sequence(0.15, args.seq_length)}",
            "--eval_batch_size=32", "--max_eval_steps=1000000", "--output_dir={out}"]
    return Step(f"heldout/{row}", "heldout", 60, make,
                lambda out, log: read_key_values(out / EVAL_RESULTS))


# First guesses of a 3-epoch fine-tune at L=4 H=256 on 2 cores (the padded tokens of each
# training set at ~7,000 tokens/s, plus start-up); replaced by the measured mean as runs end.
GLUE_SECONDS = {"SST-2": 260, "MRPC": 220, "STS-B": 290, "CoLA": 165, "RTE": 170, "QNLI": 2400}


def glue_steps(args, row: str) -> list:
    """run_classifier.py for each task and seed, from the row's model."""
    def step(task, seed):
        def make(r):
            init = ([f"--bert_config_file={path_in(r['config'], 'bert_config.json')}",
                     f"--vocab_file={path_in(r['vocab'], 'vocab.txt')}"] if row == "none"
                    else [f"--init_checkpoint={r['pretrain/' + row]['output_dir']}"])
            subset = [f"--max_train_examples={args.sst2_train_rows}"] if task == "SST-2" else []
            return python("run_classifier.py") + [
                f"--task_name={GLUE_TASKS[task]}", f"--data_dir={args.glue_dir}/{task}",
                *init, "--do_train", "--do_eval", f"--max_seq_length={args.seq_length}",
                f"--train_batch_size={args.glue_batch_size}",
                f"--learning_rate={args.glue_learning_rate}",
                f"--num_train_epochs={args.glue_epochs:g}", f"--seed={seed}",
                "--keep_checkpoint_max=1", "--output_dir={out}", *subset]

        def parse(out, log):
            results = read_key_values(out / EVAL_RESULTS)
            return {"score": glue_score(task, results), "eval": results}
        return Step(f"glue/{row}/{task}/seed{seed}", f"glue:{task}",
                    GLUE_SECONDS[task] * args.glue_epochs / 3, make, parse)
    return [step(task, seed) for task in args.tasks for seed in args.seeds]


def tapt_steps(args) -> list:
    """MiniLM → masked LM on WNUT-17's training text (one command: its CoNLL
    file read as text, a fresh masked-LM head tied to the embeddings) → NER,
    beside NER from MiniLM itself."""
    base = minilm_dir("--sections=tapt (or leave tapt out of --sections)")
    train = f"{args.wnut_dir}/wnut17train.conll"
    dev = f"{args.wnut_dir}/emerging.dev.conll"

    def adapt(r):
        return python("run_pretraining.py") + [
            "--do_train", "--do_eval", f"--init_checkpoint={base}", "--input_format=conll",
            f"--input_file={train}", f"--eval_input_file={dev}", "--masked_lm_prob=0.15",
            f"--max_seq_length={args.seq_length}",
            f"--max_predictions_per_seq={masked_per_sequence(0.15, args.seq_length)}",
            f"--train_batch_size={args.tapt_batch_size}",
            f"--learning_rate={args.tapt_learning_rate}", "--eval_batch_size=32",
            "--max_eval_steps=1000000", "--seed=12345", "--output_dir={out}",
            *budget(args, args.tapt_minutes)]

    def ner(model, seed):
        def make(r):
            init = base if model == "minilm" else r["tapt/pretrain"]["output_dir"]
            return python("run_ner.py") + [
                "--do_train", "--do_eval", f"--train_file={train}", f"--eval_file={dev}",
                f"--init_checkpoint={init}", f"--max_seq_length={args.seq_length}",
                "--train_batch_size=32", "--learning_rate=5e-5",
                f"--num_train_epochs={args.ner_epochs:g}", f"--seed={seed}",
                "--keep_checkpoint_max=1", "--output_dir={out}"]

        def parse(out, log):
            results = read_key_values(out / EVAL_RESULTS)
            return {"score": task_score("WNUT-17", results), "eval": results}
        return Step(f"tapt/ner/{model}/seed{seed}", "ner", 500 * args.ner_epochs / 3, make, parse)

    pretrain = Step("tapt/pretrain", "tapt", args.tapt_minutes * 60 + 120, adapt,
                    lambda out, log: {"rates": log_rates(log),
                                      "dev": read_key_values(out / EVAL_RESULTS)})
    return [pretrain] + [ner(model, seed) for model in ("minilm", "tapt") for seed in args.seeds]


def plan(args) -> list:
    """Every step of the sections asked for, in order."""
    rows = [row for row in args.rows if row != "transformers" or args.transformers_python]
    steps = []
    if {"pretrain", "glue"} & set(args.sections):
        if rows != args.rows:
            print("the transformers row is skipped (no --transformers_python)", flush=True)
        steps += corpus_steps(args)
        for row in rows:
            if row in ("paper", "efficient"):
                steps += our_row_steps(args, row, recipes(args)[row])
            elif row == "transformers":
                steps.append(transformers_step(args))
            if row != "none" and "pretrain" in args.sections:
                steps.append(heldout_step(args, row))
    if "glue" in args.sections:
        for row in rows:
            steps += glue_steps(args, row)
    if "tapt" in args.sections:
        steps += tapt_steps(args)
    return steps


# --- the report -------------------------------------------------------------------------


def pretrain_report(args, results: dict) -> dict:
    """Per row: recipe, real tokens/s, tokens seen, held-out accuracy."""
    report = {}
    for row in args.rows:
        if row == "none":
            report[row] = {"recipe": "random initialization (no pre-training)"}
        elif f"pretrain/{row}" not in results:
            report[row] = {"recipe": "skipped: no --transformers_python"}
        elif row == "transformers":
            hf = results["pretrain/transformers"]
            report[row] = {**{k: hf[k] for k in ("tokens_per_second", "tokens_seen", "steps",
                                                 "dtype", "calibration")},
                           "recipe": f"BertForMaskedLM + Trainer, MLM 15%, AdamW, {hf['dtype']}",
                           "own_heldout_accuracy": hf["heldout_masked_lm_accuracy"]}
        else:
            recipe = recipes(args)[row]
            report[row] = {"recipe": recipe.description, **real_tokens(
                args, recipe, results[f"pretrain/{row}"]["rates"],
                results[f"data/{row}"]["padding_fraction"])}
        heldout = results.get(f"heldout/{row}")
        if heldout:
            report[row].update(heldout_accuracy=heldout["masked_lm_accuracy"],
                               heldout_loss=heldout["masked_lm_loss"])
    return report


def build_report(args, results: dict) -> dict:
    report = {"settings": vars(args), "machine": machine(),
              "corpus": results.get("split"), "vocab": results.get("vocab")}
    if "unigram" in results:
        report["unigram_baseline"] = results["unigram"]["accuracy"]
        report["unigram_token"] = results["unigram"]["token"]
    if "pretrain" in args.sections:
        report["pretrain"] = pretrain_report(args, results)
    glue = {}
    for row in args.rows:
        per_task = {task: seed_summary([results[f"glue/{row}/{task}/seed{s}"]["score"]
                                        for s in args.seeds]) for task in args.tasks
                    if f"glue/{row}/{task}/seed{args.seeds[0]}" in results}
        if per_task:
            glue[row] = {"tasks": per_task, "average": glue_average(per_task)}
    report["glue"] = glue
    if "tapt" in args.sections:
        report["tapt"] = {
            name: seed_summary([results[f"tapt/ner/{model}/seed{s}"]["score"]
                                for s in args.seeds])
            for model, name in (("minilm", "all-MiniLM-L6-v2"),
                                ("tapt", f"+ TAPT ({args.tapt_minutes:g} min on WNUT-17's "
                                         "training text)"))}
        adapted = results["tapt/pretrain"]
        report["tapt_masked_lm"] = {**adapted["dev"], "steps": adapted["rates"]["steps"]}
    return report


def main(argv=None) -> None:
    measure(parse_args(argv), plan, build_report, format_tables)

if __name__ == "__main__":
    main()
