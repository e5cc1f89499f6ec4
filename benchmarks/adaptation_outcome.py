r"""What adapting a public checkpoint to a task's text buys (issue 46's measurement):
task-adaptive pre-training of all-MiniLM-L6-v2 on several tasks of different
kinds, ours and Hugging Face transformers' at the same budget, each then
fine-tuned over seeds; a table and JSON. One resumable command:

    python benchmarks/adaptation_outcome.py --transformers_python=/tmp/hf/bin/python \
        --work_dir=/tmp/adaptation --json_output=benchmarks/results/adaptation_outcome.json
    python benchmarks/adaptation_outcome.py --dry_run     # every command, nothing run

The recipe, stated once (the adaptation commands of docs/adapt.md):
continue the checkpoint's masked LM on the task's own training text for
`--adapt_minutes` (`run_pretraining.py --input_format=conll|table
--max_train_minutes`, pre-training's default schedule as the bound the budget
reaches first: the warm-up is its first 10%), length 64, batch 32, learning rate
1e-4; then fine-tune from it exactly as from the checkpoint itself
(`run_classifier.py` at `--glue_learning_rate` on the first `--train_rows` rows;
`run_ner.py` at 5e-5 on all of WNUT-17's 3,394 training sentences, since on its
first 500 or 1,000 the unadapted model predicts no entity at all (entity F1 0 on
every seed, measured); 3 epochs, length 64. The adaptation reads the whole
training text: unlabelled text is cheap, labels are not).

By default three tasks of three kinds: SST-2 (a sentence), MRPC (a pair) and
WNUT-17 (tags); about 3 1/2 hours here, resumable by step (SST-2 and MRPC about
1 1/2, WNUT-17's fifteen fine-tunings on all its sentences about 2). STS-B
(`--tasks=STS-B`) needs more than 500 rows: at 500 (47 steps) its regression
head learns too little for a comparison (dev 24.6 and 23.6, seeds 42 and 43,
unadapted); give it `--train_rows=2000` in a run of its own. Rows per task: `base` (the checkpoint as it is), `ours` (adapted by
run_pretraining.py), `transformers` (adapted by `benchmarks/hf_mlm_pretraining.py
--init_model` in --transformers_python: BertForMaskedLM + Trainer, the same
budget, length, batch, rate and warm-up share; skipped without it). Tasks:
WNUT-17 (entity F1), SST-2 (accuracy), MRPC ((accuracy + F1) / 2), STS-B
((Pearson + Spearman) / 2), on their dev sets; MRPC and STS-B also on their
labelled test sets (`original/msr_paraphrase_test.txt`, `original/sts-test.tsv`:
the fine-tuned run evaluated again, `--eval_file`). Medians of --seeds with
min-max, and the gain over `base`; the adaptation's steps beside.
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
from benchmarks.outcome_metrics import fmt, log_rates, read_key_values, seed_summary, spread, task_score  # noqa: E402,E501
from benchmarks.step_runner import (InProcess, Step, add_data_dir_flags,  # noqa: E402
                                    check_choices, check_positive, check_seeds, measure,
                                    measurement_parser, python, read_json, split_lists)
from official_bert.run_directory.layout import EVAL_RESULTS  # noqa: E402

# Task → (its kind: conll or a GLUE task name for run_classifier; the text columns its
# training table is read by, for --input_format=table).
TASKS = {"WNUT-17": ("conll", None), "SST-2": ("sst-2", "sentence"),
         "MRPC": ("mrpc", "#1 String,#2 String"), "STS-B": ("sts-b", "sentence1,sentence2")}
ROWS = ("base", "ours", "transformers")


def parse_args(argv=None) -> argparse.Namespace:
    p = measurement_parser(__doc__, "/tmp/adaptation_outcome")
    add = p.add_argument
    add("--tasks", default="SST-2,MRPC,WNUT-17", help="Comma-separated: " + ",".join(TASKS))
    add("--seeds", default="42,43,44,45,46")
    add("--adapt_minutes", type=float, default=4.0, help="Training time of each adaptation.")
    add("--seq_length", type=int, default=64)
    add("--train_rows", type=int, default=500,
        help="Each GLUE task fine-tunes on its first N rows (WNUT-17 on all; the adaptation "
             "reads all the text).")
    add("--glue_learning_rate", type=float, default=1e-4)
    add("--ner_learning_rate", type=float, default=5e-5)
    add("--epochs", type=float, default=3.0)
    add("--transformers_python", default=None, help="A Python with torch and transformers.")
    add_data_dir_flags(p, "glue_dir", "wnut_dir")
    args = p.parse_args(argv)
    split_lists(args, "tasks", "seeds")
    check_choices(p, "tasks", args.tasks, TASKS)
    check_seeds(p, "seeds", args.seeds)
    check_positive(p, args, ("adapt_minutes", "epochs", "glue_learning_rate", "ner_learning_rate"))
    if args.transformers_python and not os.access(args.transformers_python, os.X_OK):
        p.error(f"--transformers_python={args.transformers_python} is not an executable; make "
                "one: python -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers")
    args.json_output = args.json_output or os.path.join(args.work_dir, "results.json")
    return args


def files(args, task: str) -> tuple:
    """The task's (training file, dev file)."""
    if task == "WNUT-17":
        return (f"{args.wnut_dir}/wnut17train.conll", f"{args.wnut_dir}/emerging.dev.conll")
    return f"{args.glue_dir}/{task}/train.tsv", f"{args.glue_dir}/{task}/dev.tsv"


def test_file(args, task: str):
    """The task's labelled test file as run_classifier reads it, or None.
    STS-B's original test file has no header and more columns: `test_set`
    writes the GLUE layout of it."""
    return {"MRPC": f"{args.glue_dir}/MRPC/original/msr_paraphrase_test.txt",
            "STS-B": "{out}/test.tsv"}.get(task)


def write_sts_test(args, out) -> None:
    """sts-test.tsv (genre, file, year, id, score, sentence1, sentence2[, more])
    → test.tsv with run_classifier's STS-B columns."""
    source = pathlib.Path(args.glue_dir) / "STS-B" / "original" / "sts-test.tsv"
    lines = ["sentence1\tsentence2\tscore"]
    for line in source.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        lines.append("\t".join([fields[5], fields[6], fields[4]]))
    (out / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def text_flags(task: str) -> list:
    kind, columns = TASKS[task]
    return (["--input_format=conll"] if kind == "conll" else
            ["--input_format=table", f"--text_column={columns}"])


# --- the plan ---------------------------------------------------------------------------


def adapt_steps(args, task: str, base: str) -> list:
    """Our adaptation, and transformers' (its text written out as lines first)."""
    train, dev = files(args, task)
    ours = Step(f"{task}/adapt/ours", "adapt", args.adapt_minutes * 60 + 120, lambda r: python(
        "run_pretraining.py") + [
        "--do_train", "--do_eval", f"--init_checkpoint={base}", *text_flags(task),
        f"--input_file={train}", f"--eval_input_file={dev}",
        f"--max_seq_length={args.seq_length}", "--max_predictions_per_seq=10",
        "--train_batch_size=32", "--learning_rate=1e-4",
        f"--max_train_minutes={args.adapt_minutes:g}",
        "--seed=12345", "--output_dir={out}"],
        lambda out, log: {"rates": log_rates(log), "dev": read_key_values(out / EVAL_RESULTS)})
    if not args.transformers_python:
        return [ours]

    def write_text(out):
        from data_prep import task_text

        kind, columns = TASKS[task]
        fmt_, cols = ("conll", []) if kind == "conll" else ("table", columns.split(","))
        for name, path in (("train", train), ("dev", dev)):
            task_text.write_corpus([path], fmt_, cols, str(out / f"{name}.txt"))

    text = Step(f"{task}/text", "text", 5, lambda r: InProcess(
        f"write {train} and {dev}'s text as lines", write_text))
    hf = Step(f"{task}/adapt/transformers", "adapt_hf", args.adapt_minutes * 60 + 300,
              lambda r: [
                  args.transformers_python, str(REPO / "benchmarks" / "hf_mlm_pretraining.py"),
                  f"--init_model={base}",
                  f"--train_file={r[f'{task}/text']['output_dir']}/train.txt",
                  f"--eval_file={r[f'{task}/text']['output_dir']}/dev.txt",
                  f"--budget_minutes={args.adapt_minutes:g}", f"--seq_length={args.seq_length}",
                  "--batch_size=32", "--learning_rate=1e-4", "--warmup_fraction=0.1",
                  "--output_dir={out}"],
              lambda out, log: read_json(out / "results.json"))
    return [ours, text, hf]


def fine_tune_step(args, task: str, row: str, seed: str, base: str) -> Step:
    train, dev = files(args, task)

    def make(r):
        init = base if row == "base" else r[f"{task}/adapt/{row}"]["output_dir"]
        common = ["--do_train", "--do_eval", f"--init_checkpoint={init}",
                  f"--max_seq_length={args.seq_length}", "--train_batch_size=32",
                  f"--num_train_epochs={args.epochs:g}", f"--seed={seed}",
                  "--keep_checkpoint_max=1", "--output_dir={out}"]
        if task == "WNUT-17":
            return python("run_ner.py") + [f"--train_file={train}", f"--eval_file={dev}",
                                           f"--learning_rate={args.ner_learning_rate}", *common]
        return python("run_classifier.py") + [
            f"--task_name={TASKS[task][0]}", f"--data_dir={args.glue_dir}/{task}",
            f"--learning_rate={args.glue_learning_rate}", *common[:-2],
            f"--max_train_examples={args.train_rows}", *common[-2:]]

    def parse(out, log):
        results = read_key_values(out / EVAL_RESULTS)
        return {"score": task_score(task, results), "eval": results}

    return Step(f"{task}/{row}/seed{seed}", f"fine-tune:{task}",
                40 + 0.04 * args.train_rows * args.epochs, make, parse)


def test_step(args, task: str, row: str, seed: str) -> Step:
    """The fine-tuned run of `fine_tune_step` evaluated on the task's test set, in
    that run's directory (its eval_results.txt is then the test set's; the dev
    scores were read when the fine-tuning step finished)."""
    run = {}

    def make(r):
        run["dir"] = r[f"{task}/{row}/seed{seed}"]["output_dir"]
        test = test_file(args, task).replace("{out}", r.get(f"{task}/test-set", {}).get(
            "output_dir", ""))
        return python("run_classifier.py") + [
            "--do_eval", f"--task_name={TASKS[task][0]}", f"--eval_file={test}",
            f"--max_seq_length={args.seq_length}", f"--output_dir={run['dir']}"]

    def parse(out, log):
        results = read_key_values(pathlib.Path(run["dir"]) / EVAL_RESULTS)
        return {"score": task_score(task, results), "eval": results}

    return Step(f"{task}/{row}/seed{seed}/test", f"test:{task}", 30, make, parse)


def rows_of(args) -> list:
    return [row for row in ROWS if row != "transformers" or args.transformers_python]


def plan(args) -> list:
    base = minilm_dir("the adapted checkpoint")
    steps = []
    if not args.transformers_python:
        print("the transformers row is skipped (no --transformers_python)", flush=True)
    for task in args.tasks:
        steps += adapt_steps(args, task, base)
        if task == "STS-B":
            steps.append(Step(f"{task}/test-set", "text", 5, lambda r: InProcess(
                "write STS-B's labelled test set as run_classifier reads it",
                lambda out: write_sts_test(args, out))))
        for row in rows_of(args):
            for seed in args.seeds:
                steps.append(fine_tune_step(args, task, row, seed, base))
                if test_file(args, task):
                    steps.append(test_step(args, task, row, seed))
    return steps


# --- the report -------------------------------------------------------------------------


def summaries(args, results: dict, task: str, suffix: str) -> dict:
    """Row → the seeds' summary of `<task>/<row>/seed<s><suffix>`, with its gain
    over base."""
    rows = {}
    for row in rows_of(args):
        scores = [results[f"{task}/{row}/seed{s}{suffix}"]["score"] for s in args.seeds
                  if f"{task}/{row}/seed{s}{suffix}" in results]
        if scores:
            rows[row] = seed_summary(scores)
    base = rows.get("base")
    for row, summary in rows.items():
        if row != "base" and base:
            summary["gain"] = summary["median"] - base["median"]
    return rows


def build_report(args, results: dict) -> dict:
    tasks = {}
    for task in args.tasks:
        rows, test_rows = (summaries(args, results, task, suffix) for suffix in ("", "/test"))
        adaptation = {}
        if f"{task}/adapt/ours" in results:
            ours = results[f"{task}/adapt/ours"]
            adaptation["ours"] = {"steps": ours["rates"]["steps"],
                                  "dev_masked_lm_accuracy": ours["dev"].get("masked_lm_accuracy")}
        if f"{task}/adapt/transformers" in results:
            hf = results[f"{task}/adapt/transformers"]
            adaptation["transformers"] = {
                "steps": hf.get("steps"), "dev_masked_lm_accuracy": hf.get(
                    "heldout_masked_lm_accuracy")}
        tasks[task] = {"rows": rows, "test_rows": test_rows, "adaptation": adaptation}
    return {"settings": vars(args), "machine": machine(), "tasks": tasks}


def format_table(report: dict) -> str:
    s = report["settings"]
    rows = [r for r in ROWS if any(r in t["rows"] for t in report["tasks"].values())]
    lines = [f"Task-adaptive pre-training of all-MiniLM-L6-v2: {s['adapt_minutes']:g} min on each "
             f"task's training text, then fine-tuning ({s['epochs']:g} epochs, length "
             f"{s['seq_length']}); dev scores, median (min-max) of {len(s['seeds'])} seeds; "
             "gain: the median's over base.", "",
             "| task | " + " | ".join(rows) + " | gain (ours) | gain (transformers) | steps "
             "(ours / transformers) |",
             "|---|" + "---|" * (len(rows) + 3)]
    for task, t in report["tasks"].items():
        cells = [spread(t["rows"].get(r)) if t["rows"].get(r) else "—" for r in rows]
        gains = [fmt(t["rows"].get(r, {}).get("gain")) for r in ("ours", "transformers")]
        steps = " / ".join(fmt(t["adaptation"].get(r, {}).get("steps"))
                           for r in ("ours", "transformers"))
        lines.append(f"| {task} | " + " | ".join(cells) + f" | {gains[0]} | {gains[1]} | "
                     f"{steps} |")
    tested = {task: t for task, t in report["tasks"].items() if t.get("test_rows")}
    if tested:
        lines += ["", "The same runs on the labelled test sets:", "",
                  "| task (test set) | " + " | ".join(rows) + " | gain (ours) | "
                  "gain (transformers) |", "|---|" + "---|" * (len(rows) + 2)]
        for task, t in tested.items():
            cells = [spread(t["test_rows"].get(r)) if t["test_rows"].get(r) else "—"
                     for r in rows]
            gains = [fmt(t["test_rows"].get(r, {}).get("gain"))
                     for r in ("ours", "transformers")]
            lines.append(f"| {task} | " + " | ".join(cells) + f" | {gains[0]} | {gains[1]} |")
    lines += _gain_lines(report)
    return "\n".join(lines)


def _gain_lines(report: dict) -> list:
    """One line per adapted row: on how many tasks its median gains, and on how
    many beyond the seeds' spread."""
    lines = []
    for row, name in (("ours", "Ours"), ("transformers", "Transformers")):
        scored = [t["rows"] for t in report["tasks"].values() if "gain" in t["rows"].get(row, {})]
        if not scored:
            continue
        gains = [rows[row]["gain"] for rows in scored]
        beyond = [task for task, t in report["tasks"].items() if "gain" in t["rows"].get(row, {})
                  and t["rows"][row]["min"] > t["rows"]["base"]["max"]]
        lines += [""] if lines else []  # (a paragraph each)
        lines.append(f"{name}: the median's gain is positive on {sum(g > 0 for g in gains)} of "
                     f"{len(gains)} tasks (mean {statistics.mean(gains):+.1f}); beyond the seeds' "
                     f"spread (every adapted seed above every unadapted one) on {len(beyond)}"
                     + (f" ({', '.join(beyond)})." if beyond else "."))
    return [""] + lines if lines else []


def main(argv=None) -> None:
    measure(parse_args(argv), plan, build_report, format_table)

if __name__ == "__main__":
    main()
