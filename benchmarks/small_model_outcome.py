r"""The "Make it small" recipe (docs/make_it_small.md) measured at full size:
SST-2, MRPC and CoNLL-2003, each on its whole training set; a teacher, students
of it, their int8 files, all scored and timed side by side by `bert compare`.

    python benchmarks/small_model_outcome.py --work_dir=/tmp/small_model \
        --json_output=benchmarks/results/small_model_outcome.json
    python benchmarks/small_model_outcome.py --dry_run     # every command, nothing run

The teacher is all-MiniLM-L6-v2 (L=6, H=384) fine-tuned on each task (seed 42).
Rows, each a supported command of the page:

  teacher            all six layers, fine-tuned; its SavedModel (float32) and
                     its int8 model (`--quantize`)
  student            the teacher run's layers 0,2,4 (`--student_layers`), fine-tuned
                     alone (--seeds)
  distilled          the same student with task distillation from the teacher
                     (`--teacher`; 0.5 labels + 0.5 T^2 KL at T = 2) (--seeds)
  narrow_distilled   layers 0 and 5 only (L=2), distilled the same way (--seeds)
  pretrained_start   the distilled student started from the pre-trained
                     checkpoint's layers instead of the fine-tuned teacher's
                     (--start_seeds; where the student starts)

Levers, rows run only when --rows names them (where the distilled student falls
short of 97% of the teacher), each the `distilled` row with one change (the last, both):

  distilled_longer   twice the epochs
  distilled_text     `--distill_text`: more text of the task's kind, without labels,
                     that the teacher labels (TinyBERT's augmented data). MRPC: the
                     sentence pairs of STS-B and RTE (train and dev), less STS-B's
                     MSRpar pairs (taken from MRPC's own corpus) and any pair with a
                     sentence of MRPC's dev or test set. CoNLL-2003: the sentences of
                     MRPC's training pairs and of STS-B's news pairs, as CoNLL words.
  distilled_text_longer  both: `--distill_text` and twice the epochs

Every row's first-seed run is exported with `--quantize` (float32 SavedModel and
int8 `model.tflite` in one version folder); `bert compare` then scores every
export and int8 file on the task's scoring file (SST-2: dev, 872 rows; MRPC: its
labelled test set, 1,725 rows; CoNLL-2003: eng.testb, 3,453 sentences) and times
them interleaved in one process (B1 p50/p95 at length 128, B32 throughput, 2
threads). The quality of the other seeds is their dev score (eval_results.txt);
the table gives medians (min-max) over seeds.

The plan runs seeds last (a run stopped part-way leaves whole rows of the first
seed: cut seeds before data), and every step is resumed from --work_dir
(`benchmarks/step_runner.py`).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script: benchmarks/ is not installed
from benchmarks.common import machine, minilm_dir  # noqa: E402
from benchmarks.outcome_metrics import (read_key_values, row_summaries, spread,  # noqa: E402
                                        task_score)
from benchmarks.step_runner import (InProcess, Step, add_data_dir_flags, bert,  # noqa: E402
                                    check_choices, check_seeds, measure, measurement_parser,
                                    python, read_json, split_lists)
from official_bert.run_directory.layout import EVAL_RESULTS  # noqa: E402

EXPORT_LENGTH, THREADS = 128, 2
TASKS = ("MRPC", "CoNLL-2003", "SST-2")
ROWS = ("teacher", "student", "distilled", "narrow_distilled", "pretrained_start")
LEVERS = ("distilled_longer", "distilled_text", "distilled_text_longer")
LONGER = ("distilled_longer", "distilled_text_longer")  # twice the epochs
WITH_TEXT = ("distilled_text", "distilled_text_longer")  # --distill_text
# Row → (the layers it keeps, or None: all; whether it learns from the teacher; whether it
# starts from the pre-trained checkpoint rather than the fine-tuned teacher run).
SHAPES = {"teacher": (None, False, True), "student": ("0,2,4", False, False),
          "distilled": ("0,2,4", True, False), "narrow_distilled": ("0,5", True, False),
          "pretrained_start": ("0,2,4", True, True),
          **{lever: ("0,2,4", True, False) for lever in LEVERS}}
# Task → (its command's own flags, length, epochs, learning rate); one epoch of SST-2's
# 67,349 rows is 2,104 steps of 32.
TASK_SETTINGS = {
    "SST-2": (["--task_name=sst-2", "--data_dir={glue}/SST-2"], 64, 1, 5e-5),
    "MRPC": (["--task_name=mrpc", "--data_dir={glue}/MRPC"], 128, 3, 1e-4),
    "CoNLL-2003": (["--train_file={conll}/eng.train", "--eval_file={conll}/eng.testa"],
                   128, 3, 5e-5),
}


def parse_args(argv=None) -> argparse.Namespace:
    p = measurement_parser(__doc__, "/tmp/small_model_outcome")
    add = p.add_argument
    add("--tasks", default=",".join(TASKS), help="Comma-separated: " + ",".join(TASKS))
    add("--rows", default=",".join(ROWS),
        help="Comma-separated: " + ",".join(ROWS + LEVERS))
    add("--seeds", default="42,43,44", help="Of the student rows.")
    add("--start_seeds", default="42", help="Of the pretrained_start row.")
    add("--batch_size", type=int, default=32)
    add_data_dir_flags(p, "glue_dir", "conll_dir")
    args = p.parse_args(argv)
    split_lists(args, "tasks", "rows", "seeds", "start_seeds")
    check_choices(p, "tasks", args.tasks, TASKS)
    check_choices(p, "rows", args.rows, ROWS + LEVERS)
    if set(WITH_TEXT) & set(args.rows) and "SST-2" in args.tasks:
        p.error(f"--rows={','.join(r for r in args.rows if r in WITH_TEXT)}: SST-2 has no text of its kind here beyond its own "
                "67,349 rows; leave it out of --tasks")
    if "teacher" not in args.rows:
        args.rows.insert(0, "teacher")  # (every student learns from it)
    check_seeds(p, "seeds", args.seeds)
    check_seeds(p, "start_seeds", args.start_seeds)
    args.json_output = args.json_output or os.path.join(args.work_dir, "results.json")
    return args


# --- the plan ---------------------------------------------------------------------------


def seeds_of(args, row: str) -> list:
    return {"teacher": ["42"], "pretrained_start": args.start_seeds}.get(row, args.seeds)


def script_of(task: str) -> str:
    return "run_ner.py" if task == "CoNLL-2003" else "run_classifier.py"


def task_flags(args, task: str) -> list:
    flags, length, _, _ = TASK_SETTINGS[task]
    return [f.format(glue=args.glue_dir, conll=args.conll_dir) for f in flags] + [
        f"--max_seq_length={length}"]


def train_step(args, task: str, row: str, seed: str, base: str) -> Step:
    layers, distils, pretrained = SHAPES[row]
    _, length, epochs, learning_rate = TASK_SETTINGS[task]
    epochs *= 2 if row in LONGER else 1

    def make(r):
        teacher = None if row == "teacher" else r[f"{task}/teacher/seed42"]["output_dir"]
        init = [f"--init_checkpoint={base if pretrained else teacher}"]
        if layers:
            init.append(f"--student_layers={layers}")
        if distils:
            init.append(f"--teacher={teacher}")
        if row in WITH_TEXT:
            init.append(f"--distill_text={r[f'{task}/distill_text']['file']}")
        return python(script_of(task)) + task_flags(args, task) + init + [
            "--do_train", "--do_eval", f"--train_batch_size={args.batch_size}",
            f"--learning_rate={learning_rate:g}", f"--num_train_epochs={epochs}",
            f"--seed={seed}", "--keep_checkpoint_max=1", "--output_dir={out}"]

    def parse(out, log):
        results = read_key_values(out / EVAL_RESULTS)
        return {"score": task_score(task, results), "eval": results}

    return Step(f"{task}/{row}/seed{seed}", f"train:{task}:{row == 'teacher'}",
                {"SST-2": 2400, "MRPC": 600, "CoNLL-2003": 1500}[task] * (
                    2 if row == "teacher" else 1), make, parse)


def distill_text_step(args, task: str) -> Step:
    """The file of `--distill_text` (the distilled_text lever), written here."""
    name = "distill_text.tsv" if task == "MRPC" else "distill_text.conll"

    def write(out):
        rows = (mrpc_pairs(args) if task == "MRPC" else
                [f"{word} O" for sentence in news_sentences(args)
                 for word in [*sentence.split(), ""]])
        header = ["#1 String\t#2 String"] if task == "MRPC" else []
        (out / name).write_text("\n".join(header + rows) + "\n", encoding="utf-8")

    return Step(f"{task}/distill_text", "data", 10,
                lambda r: InProcess(f"{name}: more text of {task}'s kind", write),
                lambda out, log: {"file": str(out / name)})


def tsv_rows(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        return [dict(zip(header, line.rstrip("\n").split("\t"))) for line in f]


def mrpc_pairs(args) -> list:
    """STS-B's and RTE's sentence pairs (tab-joined), less STS-B's MSRpar pairs and
    any pair sharing a sentence with MRPC's dev or test set."""
    held_out = set()
    for path in (f"{args.glue_dir}/MRPC/dev.tsv",
                 f"{args.glue_dir}/MRPC/original/msr_paraphrase_test.txt"):
        for row in tsv_rows(path):
            held_out.update((row["#1 String"].strip(), row["#2 String"].strip()))
    pairs = []
    for split in ("train", "dev"):
        for row in tsv_rows(f"{args.glue_dir}/STS-B/{split}.tsv"):
            if row["filename"] != "MSRpar":
                pairs.append((row["sentence1"], row["sentence2"]))
        pairs += [(row["sentence1"], row["sentence2"])
                  for row in tsv_rows(f"{args.glue_dir}/RTE/{split}.tsv")]
    return [f"{a.strip()}\t{b.strip()}" for a, b in pairs
            if a.strip() not in held_out and b.strip() not in held_out]


def news_sentences(args) -> list:
    """The sentences of MRPC's training pairs and of STS-B's news pairs, each once,
    split into words and punctuation as CoNLL-2003 is."""
    found = [s for row in tsv_rows(f"{args.glue_dir}/MRPC/train.tsv")
             for s in (row["#1 String"], row["#2 String"])]
    for split in ("train", "dev"):
        found += [s for row in tsv_rows(f"{args.glue_dir}/STS-B/{split}.tsv")
                  if row["genre"] == "main-news" and row["filename"] != "MSRpar"
                  for s in (row["sentence1"], row["sentence2"])]
    words = (" ".join(re.findall(r"\w+(?:[-'.]\w+)*|[^\w\s]", s)) for s in found)
    return list(dict.fromkeys(w for w in words if w))


def export_step(args, task: str, row: str) -> Step:
    """The row's first-seed run exported for TF Serving with its int8 model
    (`--quantize`), at length 128 (the timed length), evaluated on the way (the
    int8 check reads the dev set)."""
    run = f"{task}/{row}/seed{seeds_of(args, row)[0]}"
    flags = [f for f in task_flags(args, task) if not f.startswith("--max_seq_length")]
    return Step(f"{task}/{row}/export", "export", 300, lambda r: python(script_of(task)) + [
        *flags, f"--output_dir={r[run]['output_dir']}", "--do_eval",
        "--export_dir={out}/export", "--export_version=1", "--quantize",
        f"--max_seq_length={EXPORT_LENGTH}"])


def compare_step(args, task: str) -> Step:
    """`bert compare` of every row's export and int8 file on the task's scoring file."""
    rows = [row for row in args.rows]

    def make(r):
        models = []
        for row in rows:
            export = f"{r[f'{task}/{row}/export']['output_dir']}/export"
            models += [export, f"{export}/1/model.tflite"]
        name = {"SST-2": ["--task_name=sst-2"], "MRPC": ["--task_name=mrpc"]}.get(task, [])
        return bert("compare") + [f"--models={','.join(models)}",
                                  f"--data_file={scoring_file(args, task)}", *name,
                                  f"--threads={THREADS}", "--json_output={out}/compare.json",
                                  "--plot_output={out}/compare.png"]

    return Step(f"{task}/compare", "compare", 900, make,
                lambda out, log: read_json(out / "compare.json"))


def scoring_file(args, task: str) -> str:
    """SST-2: its dev set (its test set has no labels); MRPC: its labelled test set;
    CoNLL-2003: eng.testb (its test set)."""
    return {"SST-2": f"{args.glue_dir}/SST-2/dev.tsv",
            "MRPC": f"{args.glue_dir}/MRPC/original/msr_paraphrase_test.txt",
            "CoNLL-2003": f"{args.conll_dir}/eng.testb"}[task]


def plan(args) -> list:
    base = minilm_dir("the teacher")
    steps = []
    rows = [row for row in args.rows if row != "teacher"]
    # Task by task, every row's first seed, its exports and the comparison: a run stopped
    # part-way leaves whole tasks. Then the other seeds (cut seeds before data).
    for task in args.tasks:
        steps.append(train_step(args, task, "teacher", "42", base))
        if set(WITH_TEXT) & set(rows):
            steps.append(distill_text_step(args, task))
        steps += [train_step(args, task, row, seeds_of(args, row)[0], base) for row in rows]
        steps += [export_step(args, task, row) for row in args.rows]
        steps.append(compare_step(args, task))
    for index in range(1, max(len(seeds_of(args, row)) for row in rows) if rows else 1):
        steps += [train_step(args, task, row, seeds_of(args, row)[index], base)
                  for task in args.tasks for row in rows if index < len(seeds_of(args, row))]
    return steps


# --- the report -------------------------------------------------------------------------


def build_report(args, results: dict) -> dict:
    dev, compared = {}, {}
    for task in args.tasks:
        dev[task] = row_summaries(results, task, args.rows, lambda row: seeds_of(args, row))
        report = results.get(f"{task}/compare")
        if report:
            # bert compare's models, in the plan's order: each row's export, then its int8 file.
            names = [f"{row} {kind}" for row in args.rows for kind in ("float32", "int8")]
            compared[task] = {"file": report["data_file"], "metric": report["metric"],
                              "length": report["length"],
                              "models": dict(zip(names, report["models"]))}
    return {"settings": vars(args), "machine": machine(), "dev": dev, "compare": compared}


def format_table(report: dict) -> str:
    s = report["settings"]
    lines = [f"Dev scores (GLUE's score x 100; CoNLL-2003: entity F1 x 100), median (min-max) "
             f"over seeds {','.join(s['seeds'])} (the teacher: seed 42).", "",
             "| row | " + " | ".join(s["tasks"]) + " |", "|---|" + "---|" * len(s["tasks"])]
    for row in s["rows"]:
        cells = [spread(report["dev"][task].get(row)) if report["dev"][task].get(row)
                 else "—" for task in s["tasks"]]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    for task, found in report["compare"].items():
        lines += ["", f"{task}: bert compare on {found['file']} ({found['metric']}; seed 42's "
                  f"runs; length {found['length']}, {THREADS} threads, interleaved):", "",
                  f"| model | {found['metric']} | of teacher | B1 p50 ms | B32 rows/s | size MB "
                  "| x B1 | x B32 |", "|---|---|---|---|---|---|---|---|"]
        for name, row in found["models"].items():
            lines.append(f"| {name} | {100 * row['metrics'][found['metric']]:.2f} | "
                         f"{100 * row['of_first']:.1f}% | {row['b1_p50_ms']:.1f} | "
                         f"{row['b32_rows_per_s']:.1f} | {row['size_mb']:.1f} | "
                         f"{row['speedup_b1']:.1f}x | {row['speedup_b32']:.1f}x |")
    return "\n".join(lines)


def main(argv=None) -> None:
    measure(parse_args(argv), plan, build_report, format_table)


if __name__ == "__main__":
    main()
