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
entity F1 for WNUT-17), and each row's average over the tasks as a share of the
teacher's. Speed: each row's first-seed run on the first task, exported as TF
Serving's SavedModel (the run's command without --do_train, at length 128) and
with its int8 model.tflite (`--quantize`); every one's B1 x S128 p50 latency and
B32 x S128 throughput by `bert compare` (2 threads, timed in turn in one process:
the same engine and moment for all), against the teacher's.

The plan runs row by row over the tasks (the teacher first, general
distillation late), so a run stopped part-way leaves whole rows.

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
from benchmarks.common import machine, minilm_dir  # noqa: E402
from benchmarks.outcome_metrics import (fmt, read_key_values, row_summaries, spread,  # noqa: E402
                                        task_score)
from benchmarks.step_runner import (InProcess, Step, add_data_dir_flags,  # noqa: E402
                                    add_fine_tuning_flags, bert, check_choices, check_positive,
                                    check_seeds, measure, measurement_parser, python, read_json,
                                    split_lists)
from official_bert.run_directory.layout import EVAL_RESULTS  # noqa: E402

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
PLAN_ORDER = ("teacher", "student", "distilled", "narrow", "narrow_distilled", "general",
              "distilled_text")
FIVE_SEED_ROWS = ("teacher", "student", "distilled")
# The rows that also learn the teacher's outputs on more text (--distill_text).
TEXT_ROWS = ("distilled_text",)


def parse_args(argv=None) -> argparse.Namespace:
    p = measurement_parser(__doc__, "/tmp/distillation_outcome")
    add = p.add_argument
    add("--tasks", default=",".join(TASKS), help="Comma-separated: " + ",".join(TASKS))
    add("--rows", default=",".join(ROWS), help="Comma-separated: " + ",".join(ROWS))
    add("--seeds", default="42,43,44,45,46", help="Of the teacher, student and distilled rows.")
    add("--other_seeds", default="42,43,44", help="Of the other rows.")
    add("--train_rows", type=int, default=1000, help="Each task trains on its first N rows.")
    add("--eval_rows", type=int, default=500, help="Each task is scored on its first N dev rows.")
    add("--extra_rows", type=int, default=1000,
        help="The distilled_text row's unlabelled text: the training rows after --train_rows.")
    add("--seq_length", type=int, default=64)
    add_fine_tuning_flags(p)
    add("--general_minutes", type=float, default=15.0,
        help="Training time of general distillation on the corpus.")
    add("--general_learning_rate", type=float, default=1e-4)
    add_data_dir_flags(p, "corpus_dir", "glue_dir", "wnut_dir")
    args = p.parse_args(argv)
    check_args(p, args)
    return args


def check_args(parser, args) -> None:
    """One line (argparse's error) for each bad value; lists made lists."""
    split_lists(args, "tasks", "rows", "seeds", "other_seeds")
    check_choices(parser, "tasks", args.tasks, TASKS)
    check_choices(parser, "rows", args.rows, ROWS)
    check_seeds(parser, "seeds", args.seeds)
    check_seeds(parser, "other_seeds", args.other_seeds)
    check_positive(parser, args, ("train_rows", "eval_rows", "extra_rows", "seq_length",
                                  "batch_size", "epochs", "learning_rate", "general_minutes",
                                  "general_learning_rate"))
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


def conll_sentences(text: str) -> list[str]:
    """A CoNLL file's sentences, each its lines joined; a sentence ends at a
    line of whitespace (WNUT-17's are mostly a tab)."""
    sentences, lines = [], []
    for line in text.splitlines() + [""]:
        if line.strip():
            lines.append(line)
        elif lines:
            sentences.append("\n".join(lines))
            lines = []
    return sentences


def extra_text_step(args, task: str) -> Step:
    """The task's training rows after its first --train_rows (at most
    --extra_rows), as a file of the training file's format: --distill_text
    reads their text and leaves their labels."""
    def run(out):
        if task == "WNUT-17":
            text = pathlib.Path(args.wnut_dir, "wnut17train.conll").read_text(encoding="utf-8")
            rows = conll_sentences(text)
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


SPEED_LENGTH, SPEED_BATCH, SPEED_THREADS = 128, 32, 2


def export_step(args, row: str) -> Step:
    """The row's first seed's run on the first task, exported as TF Serving's
    SavedModel with its int8 model.tflite (the run command without --do_train,
    `--quantize`, at length 128)."""
    task = args.tasks[0]
    run = f"{task}/{row}/seed{seeds_of(args, row)[0]}"
    script = "run_ner.py" if task == "WNUT-17" else "run_classifier.py"
    flags = [] if task == "WNUT-17" else [f"--task_name={GLUE_TASKS[task]}"]
    return Step(f"speed/{row}", "export", 60, lambda r: python(script) + [
        *flags, f"--output_dir={r[run]['output_dir']}", "--export_dir={out}/export",
        "--export_version=1", "--quantize", f"--max_seq_length={SPEED_LENGTH}"])


def speed_step(args) -> Step:
    """Every row's SavedModel and its int8 model.tflite, scored and timed in one
    process by `bert compare` on the first task's dev file."""
    task = args.tasks[0]

    def make(r):
        models = []
        for row in speed_rows(args):
            export = f"{r[f'speed/{row}']['output_dir']}/export"
            models += [export, f"{export}/1/model.tflite"]
        data = (f"--data_file={args.wnut_dir}/emerging.dev.conll" if task == "WNUT-17" else
                f"--data_file={args.glue_dir}/{task}/dev.tsv")
        names = [] if task == "WNUT-17" else [f"--task_name={GLUE_TASKS[task]}"]
        return bert("compare") + [f"--models={','.join(models)}", data, *names,
                                  f"--threads={SPEED_THREADS}", "--json_output={out}/speed.json"]

    def parse(out, log):
        report = read_json(out / "speed.json")
        engines = [(row, engine) for row in speed_rows(args) for engine, _ in ENGINES]
        return {row: {} for row in speed_rows(args)} | {
            row: {engine: {"b1_p50_ms": found["b1_p50_ms"],
                           "batch_per_s": found["b32_rows_per_s"]}
                  for (r, engine), found in zip(engines, report["models"]) if r == row}
            for row in speed_rows(args)}

    return Step("speed", "speed", 120 + 60 * len(speed_rows(args)), make, parse)


def speed_rows(args) -> list:
    """The rows timed: the teacher's (the speed-ups' reference) and the others."""
    return ["teacher", *[row for row in args.rows if row != "teacher"]]


def plan(args) -> list:
    base = minilm_dir("the teacher")
    steps = []
    # Row by row over the tasks, in PLAN_ORDER (the teacher's first, the timed
    # general distillation late): a run stopped part-way leaves whole rows, each with
    # its average.
    for row in [row for row in PLAN_ORDER if row == "teacher" or row in args.rows]:
        if row == "general":
            steps += general_steps(args, base)
        if row in TEXT_ROWS:
            steps += [extra_text_step(args, task) for task in args.tasks]
        seeds = seeds_of(args, row) if row in args.rows else args.seeds[:1]
        steps += [task_step(args, task, row, seed, base) for task in args.tasks
                  for seed in seeds]
    return steps + [export_step(args, row) for row in speed_rows(args)] + [speed_step(args)]


# --- the report -------------------------------------------------------------------------


def build_report(args, results: dict) -> dict:
    tasks = {}
    for task in args.tasks:
        tasks[task] = row_summaries(results, task, args.rows, lambda row: seeds_of(args, row))
    timed = results.get("speed") or {}  # (and the step's output_dir)
    speed = {row: timed[row] for row in speed_rows(args) if row in timed}
    speedup = {row: {engine: {
        "b1": speed["teacher"][engine]["b1_p50_ms"] / times["b1_p50_ms"],
        "batch": times["batch_per_s"] / speed["teacher"][engine]["batch_per_s"]}
        for engine, times in engines.items()} for row, engines in speed.items()}
    average = {}
    for row in args.rows:
        medians = [tasks[t][row]["median"] for t in args.tasks if row in tasks[t]]
        average[row] = statistics.mean(medians) if len(medians) == len(args.tasks) else None
    teacher = average.get("teacher")
    kept = {row: value / teacher for row, value in average.items()
            if teacher and value is not None}
    report = {"settings": vars(args), "machine": machine(), "tasks": tasks, "average": average,
              "of_teacher": kept, "speed": speed, "speedup": speedup}
    if "general/distill" in results:
        report["general_distillation"] = results["general/distill"]
    return report


ENGINES = (("saved_model", "SavedModel"), ("tflite_int8", "int8 TFLite"))


def format_table(report: dict) -> str:
    s = report["settings"]
    speed_columns = [f"{label} {what}" for _, label in ENGINES
                     for what in ("B1 p50 ms", f"B{SPEED_BATCH} seq/s")]
    lines = [f"Distillation of all-MiniLM-L6-v2 fine-tuned per task: first {s['train_rows']} "
             f"training rows, {s['epochs']:g} epochs, length {s['seq_length']}, learning rate "
             f"{s['learning_rate']:g}; dev: first {s['eval_rows']} rows (WNUT-17: all). "
             f"Median (min-max) over seeds. Speed: each row's export of {s['tasks'][0]} at "
             f"length {SPEED_LENGTH}, {SPEED_THREADS} threads, all timed in turn in one "
             "process (x: against the teacher's).", "",
             "| row | " + " | ".join(s["tasks"]) + " | average | of teacher | "
             + " | ".join(speed_columns) + " |",
             "|---|" + "---|" * (len(s["tasks"]) + 2 + len(speed_columns))]
    for row in s["rows"]:
        cells = [spread(report["tasks"][task].get(row)) if report["tasks"][task].get(row)
                 else "—" for task in s["tasks"]]
        kept = report["of_teacher"].get(row)
        cells += [fmt(report["average"].get(row)), f"{100 * kept:.1f}%" if kept else "—"]
        cells += speed_cells(report, row)
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed_cells(report: dict, row: str) -> list:
    """Per engine: B1 p50 latency and throughput, each with its speed-up."""
    cells = []
    for engine, _ in ENGINES:
        times = report["speed"].get(row, {}).get(engine)
        if not times:
            cells += ["—", "—"]
            continue
        up = report["speedup"][row][engine]
        cells += [f"{times['b1_p50_ms']:.1f} ({up['b1']:.1f}x)",
                  f"{times['batch_per_s']:.0f} ({up['batch']:.1f}x)"]
    return cells


def main(argv=None) -> None:
    measure(parse_args(argv), plan, build_report, format_table)

if __name__ == "__main__":
    main()
