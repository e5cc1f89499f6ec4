r"""What distillation buys (issue 45's measurement): one resumable command that
fine-tunes a teacher, and students of it several ways, on several tasks over
seeds; prints a table of quality (median, min-max) and speed, and writes JSON.

    python benchmarks/distillation_outcome.py --work_dir=/tmp/distillation \
        --json_output=benchmarks/results/distillation_outcome.json
    python benchmarks/distillation_outcome.py --dry_run     # every command, nothing run

The teacher is all-MiniLM-L6-v2 (L=6, H=384) fine-tuned on each task. Rows:

  teacher      all six layers, fine-tuned (--seeds)
  student      its layers 0,2,4 (`--student_layers`, DistilBERT's initialisation),
               fine-tuned alone (--seeds)
  distilled    the same student, task distillation from the teacher of the first
               seed (`--teacher`; loss 0.5 labels + 0.5 T^2 KL at T = 2) (--seeds)
  general      the student after general distillation (`bert distill`) on
               ../shared/data/pretrain_text for --general_minutes, then task
               distillation (--other_seeds)
  narrow       layers 0 and 5 only (L=2), alone (--other_seeds)
  narrow_distilled   the same with task distillation (--other_seeds)
  distilled_text     the distilled row with teacher-labelled extra text
               (TinyBERT's lever, `--distill_text`): the task's next
               --extra_rows training rows after the first --train_rows, their
               labels unread (--other_seeds)

Quality is each task's own metric x 100 (GLUE's score:
accuracy, (accuracy + F1) / 2 for MRPC, (Pearson + Spearman) / 2 for STS-B;
entity F1 for WNUT-17); speed is the teacher encoder's forward time over the
row's (`speed`: batches of 32 at --seq_length, each depth timed in turn, rounds
in one process: the same engine and moment).

Every step is a subprocess of the project's own commands, as a user runs them,
resumed from `--work_dir` when run again (`benchmarks/step_runner.py`).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script: benchmarks/ is not installed
from benchmarks.common import machine, minilm_dir, time_calls  # noqa: E402
from benchmarks.outcome_metrics import fmt, read_key_values, seed_summary, spread, task_score  # noqa: E402,E501
from benchmarks.step_runner import (InProcess, Step, bert, measure, python, read_json,  # noqa: E402
                                    split_list, write_json)
from official_bert.run_directory.layout import EVAL_RESULTS  # noqa: E402

SHARED = REPO.parent / "shared"
GLUE_TASKS = {"SST-2": "sst-2", "MRPC": "mrpc", "STS-B": "sts-b"}
TASKS = (*GLUE_TASKS, "WNUT-17")
ROWS = ("teacher", "student", "distilled", "general", "narrow", "narrow_distilled",
        "distilled_text")
# Row → (the teacher's layers it keeps, or None: all; whether it learns from the teacher;
# whether it starts from general distillation).
SHAPES = {"teacher": (None, False, False), "student": ("0,2,4", False, False),
          "distilled": ("0,2,4", True, False), "general": (None, True, True),
          "narrow": ("0,5", False, False), "narrow_distilled": ("0,5", True, False),
          "distilled_text": ("0,2,4", True, False)}
FIVE_SEED_ROWS = ("teacher", "student", "distilled")
# The rows that also learn the teacher's outputs on more text (--distill_text).
TEXT_ROWS = ("distilled_text",)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add = p.add_argument
    add("--tasks", default=",".join(TASKS), help="Comma-separated: " + ",".join(TASKS))
    add("--rows", default=",".join(ROWS), help="Comma-separated: " + ",".join(ROWS))
    add("--seeds", default="42,43,44,45,46", help="Of the teacher, student and distilled rows.")
    add("--other_seeds", default="42,43,44", help="Of the other rows.")
    add("--train_rows", type=int, default=1000, help="Each task trains on its first N rows.")
    add("--eval_rows", type=int, default=500, help="Each task is scored on its first N dev rows.")
    add("--extra_rows", type=int, default=2000,
        help="The distilled_text row's unlabelled text: the training rows after --train_rows.")
    add("--seq_length", type=int, default=64)
    add("--epochs", type=float, default=3.0)
    add("--learning_rate", type=float, default=1e-4)
    add("--batch_size", type=int, default=32)
    add("--general_minutes", type=float, default=30.0,
        help="Training time of general distillation on the corpus.")
    add("--general_learning_rate", type=float, default=1e-4)
    add("--work_dir", default="/tmp/distillation_outcome", help="Every step's output; reused.")
    add("--json_output", default=None, help="Results JSON (default: work_dir/results.json).")
    add("--dry_run", action="store_true", help="Print every command; run nothing.")
    add("--corpus_dir", default=str(SHARED / "data" / "pretrain_text"))
    add("--glue_dir", default=str(SHARED / "data" / "glue"))
    add("--wnut_dir", default=str(SHARED / "data" / "ner" / "wnut17"))
    args = p.parse_args(argv)
    check_args(p, args)
    return args


def check_args(parser, args) -> None:
    """One line (argparse's error) for each bad value; lists made lists."""
    args.tasks, args.rows = split_list(args.tasks), split_list(args.rows)
    args.seeds, args.other_seeds = split_list(args.seeds), split_list(args.other_seeds)
    for name, values, allowed in (("tasks", args.tasks, TASKS), ("rows", args.rows, ROWS)):
        unknown = [v for v in values if v not in allowed]
        if unknown or not values:
            parser.error(f"--{name}: unknown {unknown}; choose from {', '.join(allowed)}")
    for name in ("seeds", "other_seeds"):
        seeds = getattr(args, name)
        if not seeds or not all(s.isdigit() for s in seeds):
            parser.error(f"--{name} must be comma-separated integers, got {seeds}")
    for name in ("train_rows", "eval_rows", "extra_rows", "seq_length", "batch_size"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")
    for name in ("epochs", "learning_rate", "general_minutes", "general_learning_rate"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")
    args.json_output = args.json_output or os.path.join(args.work_dir, "results.json")


# --- the plan ---------------------------------------------------------------------------


def seeds_of(args, row: str) -> list:
    return args.seeds if row in FIVE_SEED_ROWS else args.other_seeds


def general_steps(args, base: str) -> list:
    """The corpus, then `bert distill`: MiniLM's layers 0,2,4 learn all six on it."""
    corpus = Step("general/corpus", "corpus", 10, lambda r: bert("prepare-corpus") + [
        f"--input={args.corpus_dir}", "--output_file={out}/corpus.txt"])
    distill = Step("general/distill", "distill", args.general_minutes * 60 + 120, lambda r: bert(
        "distill") + [
        "--do_train", f"--teacher={base}", f"--init_checkpoint={base}", "--student_layers=0,2,4",
        "--input_format=text", f"--input_file={r['general/corpus']['output_dir']}/corpus.txt",
        f"--max_seq_length={max(args.seq_length, 128)}", "--max_predictions_per_seq=20",
        "--train_batch_size=32", f"--learning_rate={args.general_learning_rate}",
        f"--max_train_minutes={args.general_minutes:g}", "--num_train_steps=10000000",
        "--num_warmup_steps=1000000", "--log_steps=100", "--seed=12345", "--output_dir={out}"])
    return [corpus, distill]


def task_command(args, task: str, init: list, seed: str) -> list:
    """The task's fine-tuning command from `init` (model flags) with `seed`."""
    common = [*init, "--do_train", "--do_eval", f"--max_seq_length={args.seq_length}",
              f"--train_batch_size={args.batch_size}", f"--learning_rate={args.learning_rate}",
              f"--num_train_epochs={args.epochs:g}", f"--seed={seed}",
              f"--max_train_examples={args.train_rows}", "--keep_checkpoint_max=1",
              "--output_dir={out}"]
    if task == "WNUT-17":
        return python("run_ner.py") + [
            f"--train_file={args.wnut_dir}/wnut17train.conll",
            f"--eval_file={args.wnut_dir}/emerging.dev.conll", *common]
    return python("run_classifier.py") + [
        f"--task_name={GLUE_TASKS[task]}", f"--data_dir={args.glue_dir}/{task}",
        f"--max_eval_examples={args.eval_rows}", *common]


def task_step(args, task: str, row: str, seed: str, base: str) -> Step:
    layers, distils, general = SHAPES[row]

    def make(r):
        init = [f"--init_checkpoint={r['general/distill']['output_dir'] if general else base}"]
        if layers:
            init.append(f"--student_layers={layers}")
        if distils:
            init.append(f"--teacher={r[f'{task}/teacher/seed{args.seeds[0]}']['output_dir']}")
        if row in TEXT_ROWS:
            init.append(f"--distill_text={r[f'{task}/extra_text']['output_dir']}/"
                        f"{extra_text_name(task)}")
        return task_command(args, task, init, seed)

    def parse(out, log):
        results = read_key_values(out / EVAL_RESULTS)
        return {"score": task_score(task, results), "eval": results}

    estimate = 60 + args.train_rows * args.epochs * args.seq_length / (
        1500 if row == "teacher" else 3000)
    return Step(f"{task}/{row}/seed{seed}", f"{row}:{task}", estimate, make, parse)


def extra_text_name(task: str) -> str:
    return "extra.conll" if task == "WNUT-17" else "extra.tsv"


def extra_text_step(args, task: str) -> Step:
    """The task's training rows after its first --train_rows (at most
    --extra_rows), as a file of the training file's format: --distill_text
    reads their text and leaves their labels."""
    def run(out):
        if task == "WNUT-17":
            text = pathlib.Path(args.wnut_dir, "wnut17train.conll").read_text(encoding="utf-8")
            rows = [s.strip("\n") for s in text.split("\n\n") if s.strip()]
            header = []
        else:
            lines = pathlib.Path(args.glue_dir, task, "train.tsv").read_text(
                encoding="utf-8-sig").splitlines()
            header, rows = lines[:1], lines[1:]
        chosen = rows[args.train_rows:args.train_rows + args.extra_rows]
        separator = "\n\n" if task == "WNUT-17" else "\n"
        (out / extra_text_name(task)).write_text(
            separator.join(header + chosen) + separator, encoding="utf-8")

    return Step(f"{task}/extra_text", "text", 5, lambda r: InProcess(
        f"write {task}'s training rows {args.train_rows}-{args.train_rows + args.extra_rows} "
        "as text the teacher labels", run))


def speed_step(args, base: str) -> Step:
    """The encoders of the teacher and of each student's shape, timed in one process,
    round by round in turn (the same engine, batches and moment), at --seq_length."""
    def run(out):
        write_json(out / "speed.json", encoder_speed(base, args.seq_length))
    return Step("speed", "speed", 180, lambda r: InProcess(
        f"time the encoders of {sorted(set(LAYERS.values()))} layers of {base}", run),
        lambda out, log: read_json(out / "speed.json"))


# Row → the encoder's layers (the teacher's six, or the student's).
LAYERS = {"teacher": 6, "student": 3, "distilled": 3, "general": 3, "narrow": 2,
          "narrow_distilled": 2, "distilled_text": 3}


def encoder_speed(base: str, seq_length: int, batch: int = 32, rounds: int = 7,
                  calls: int = 5) -> dict:
    """Median seconds of a forward pass of `batch` sequences, per number of layers:
    all-MiniLM-L6-v2's config at each depth (the weights do not change the time),
    each depth's `calls` in turn in every round."""
    import dataclasses

    import numpy as np
    import tensorflow as tf

    from official_bert import checkpoints
    from official_bert.modeling.encoder import BertEncoder

    config = checkpoints.read_checkpoint(base).config
    ids = np.random.default_rng(0).integers(1000, config.vocab_size, (batch, seq_length))
    inputs = {"input_word_ids": tf.constant(ids, tf.int32),
              "input_mask": tf.ones((batch, seq_length), tf.int32),
              "input_type_ids": tf.zeros((batch, seq_length), tf.int32)}
    forwards = {}
    for layers in sorted(set(LAYERS.values())):
        encoder = BertEncoder.from_bert_config(
            dataclasses.replace(config, num_hidden_layers=layers))
        forwards[layers] = tf.function(lambda x, e=encoder: e(x)["sequence_output"])
        forwards[layers](inputs).numpy()  # traced, warmed
    seconds = {layers: [] for layers in forwards}
    for _ in range(rounds):
        for layers, forward in forwards.items():
            seconds[layers] += time_calls(lambda f=forward: f(inputs).numpy(), calls, 1)
    return {str(layers): statistics.median(times) for layers, times in seconds.items()}


def plan(args) -> list:
    base = minilm_dir("the teacher")
    steps = [speed_step(args, base)]
    steps += general_steps(args, base) if "general" in args.rows else []
    for task in args.tasks:
        rows = ["teacher", *[row for row in args.rows if row != "teacher"]]
        if any(row in TEXT_ROWS for row in args.rows):
            steps.append(extra_text_step(args, task))
        for row in rows:
            seeds = seeds_of(args, row) if row in args.rows else args.seeds[:1]
            steps += [task_step(args, task, row, seed, base) for seed in seeds]
    return steps


# --- the report -------------------------------------------------------------------------


def build_report(args, results: dict) -> dict:
    tasks = {}
    for task in args.tasks:
        rows = {}
        for row in args.rows:
            runs = [results[f"{task}/{row}/seed{s}"] for s in seeds_of(args, row)
                    if f"{task}/{row}/seed{s}" in results]
            if runs:
                rows[row] = seed_summary([run["score"] for run in runs])
        tasks[task] = rows
    speed = results.get("speed") or {}
    teacher = speed.get(str(LAYERS["teacher"]))
    speedup = {row: teacher / speed[str(LAYERS[row])] for row in args.rows
               if teacher and speed.get(str(LAYERS[row]))}
    average = {}
    for row in args.rows:
        medians = [tasks[t][row]["median"] for t in args.tasks if row in tasks[t]]
        average[row] = statistics.mean(medians) if len(medians) == len(args.tasks) else None
    report = {"settings": vars(args), "machine": machine(), "tasks": tasks, "average": average,
              "encoder_seconds": speed, "speedup": speedup}
    if "general/distill" in results:
        report["general_distillation"] = results["general/distill"]
    return report


def format_table(report: dict) -> str:
    s = report["settings"]
    lines = [f"Distillation of all-MiniLM-L6-v2 fine-tuned per task: first {s['train_rows']} "
             f"training rows, {s['epochs']:g} epochs, length {s['seq_length']}, learning rate "
             f"{s['learning_rate']:g}; dev: first {s['eval_rows']} rows (WNUT-17: all). "
             f"Median (min-max) over seeds; speed: the teacher encoder's time over the row's, "
             f"batches of 32 timed in turn in one process.", "",
             "| row | " + " | ".join(s["tasks"]) + " | average | speed |",
             "|---|" + "---|" * (len(s["tasks"]) + 2)]
    for row in s["rows"]:
        cells = [spread(report["tasks"][task].get(row)) if report["tasks"][task].get(row)
                 else "—" for task in s["tasks"]]
        speedup = report.get("speedup", {}).get(row)
        speed = f"{speedup:.1f}x" if speedup else "—"
        lines.append(f"| {row} | " + " | ".join(cells) +
                     f" | {fmt(report['average'].get(row))} | {speed} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    measure(parse_args(argv), plan, build_report, format_table)

if __name__ == "__main__":
    main()
