"""The pure parts of `benchmarks/pretraining_outcome.py`: the held-out split,
GLUE's scores, the seeds' median and spread, the figures read from the
commands' outputs, and the tables.

GLUE's score of a task (`glue_score`), from run_classifier's eval_results.txt:
CoLA Matthews correlation x 100, STS-B (Pearson + Spearman) / 2 x 100, MRPC
(accuracy + F1) / 2 x 100, the others accuracy x 100; the average is the mean of
the tasks' medians over seeds.
"""

from __future__ import annotations

import hashlib
import pathlib
import re
import statistics
from typing import Optional

# GLUE task → its score from eval_results.txt's values.
GLUE_SCORES = {
    "SST-2": lambda r: 100 * r["eval_accuracy"],
    "MRPC": lambda r: 100 * (r["eval_accuracy"] + r["eval_f1"]) / 2,
    "STS-B": lambda r: 100 * (r["eval_pearson"] + r["eval_spearman"]) / 2,
    "CoLA": lambda r: 100 * r["eval_matthews_corr"],
    "RTE": lambda r: 100 * r["eval_accuracy"],
    "QNLI": lambda r: 100 * r["eval_accuracy"],
}


def split_documents(text: str, fraction: float) -> tuple[list, list]:
    """Documents (blank-line separated) → (train, held-out), in corpus order.

    Held out: documents taken in the order of their SHA-1 (deterministic, not
    by position or size) while they keep the held-out part within 1.25x
    `fraction` of the characters, until it reaches `fraction`; at least one
    document each side."""
    documents = [d.strip("\n") for d in text.split("\n\n") if d.strip()]
    if len(documents) < 2:
        raise ValueError(f"the corpus has {len(documents)} document(s): need 2 to hold one out")
    target = fraction * sum(len(d) for d in documents)
    order = sorted(range(len(documents)),
                   key=lambda i: hashlib.sha1(documents[i].encode("utf-8")).hexdigest())
    held, size = set(), 0
    for i in order:
        if size >= target:
            break
        if size + len(documents[i]) <= 1.25 * target:
            held.add(i)
            size += len(documents[i])
    if not held:
        held.add(min(range(len(documents)), key=lambda i: len(documents[i])))
    return ([d for i, d in enumerate(documents) if i not in held],
            [d for i, d in enumerate(documents) if i in held])


def glue_score(task: str, results: dict) -> float:
    """GLUE's score of one task from run_classifier's eval_results.txt values:
    CoLA MCC x 100, STS-B (Pearson + Spearman) / 2 x 100, MRPC (accuracy + F1) / 2
    x 100, the others accuracy x 100."""
    return GLUE_SCORES[task](results)


def task_score(task: str, results: dict) -> float:
    """`glue_score` for a GLUE task; entity F1 x 100 for an NER set (WNUT-17: the
    key is `entity_f1`, or `eval_entity_f1`)."""
    if task in GLUE_SCORES:
        return glue_score(task, results)
    key = "entity_f1" if "entity_f1" in results else "eval_entity_f1"
    return 100 * results[key]


def seed_summary(values: list) -> dict:
    """Median and min-max spread of the seeds' scores."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": list(values)}


def row_summaries(results: dict, task: str, rows, seeds_of) -> dict:
    """{row: `seed_summary` of its seeds' scores} for the rows of `task` that have
    runs (`results[f"{task}/{row}/seed{s}"]`, for s in `seeds_of(row)`)."""
    summaries = {}
    for row in rows:
        runs = [results[f"{task}/{row}/seed{s}"] for s in seeds_of(row)
                if f"{task}/{row}/seed{s}" in results]
        if runs:
            summaries[row] = seed_summary([run["score"] for run in runs])
    return summaries


def glue_average(per_task: dict) -> Optional[float]:
    """The mean of the tasks' medians (None while a task has no result)."""
    medians = [s["median"] for s in per_task.values() if s]
    return statistics.mean(medians) if medians and len(medians) == len(per_task) else None


def fmt(value, digits=1) -> str:
    if value is None:
        return "—"
    if not isinstance(value, float):
        return f"{value:,}"
    text = f"{value:,.{digits}f}"
    return text[1:] if text.startswith("-") and text.lstrip("-0.,") == "" else text  # no "-0.0"


def spread(summary) -> str:
    if not summary:
        return "—"
    return f"{summary['median']:.1f} ({summary['min']:.1f}–{summary['max']:.1f})"


def format_tables(report: dict) -> str:
    """The pre-training, GLUE and TAPT tables as Markdown."""
    s = report["settings"]
    out = []
    if report.get("pretrain"):
        out += [f"Pre-training, {s['budget_minutes']:g} min of training per row, "
                f"L={s['num_layers']} H={s['hidden_size']} A={s['num_heads']}, seq "
                f"{s['seq_length']}, vocabulary {s['vocab_size']}; held-out masked LM (15%, the "
                f"same masks for every row), unigram baseline "
                f"{fmt(report.get('unigram_baseline'), 4)}:", "",
                "| row | recipe | tokens/s | tokens seen | held-out MLM accuracy |",
                "|---|---|---|---|---|"]
        for row, r in report["pretrain"].items():
            out.append(f"| {row} | {r.get('recipe', '—')} | {fmt(r.get('tokens_per_second'), 0)} "
                       f"| {fmt(r.get('tokens_seen'))} | {fmt(r.get('heldout_accuracy'), 4)} |")
        out.append("")
    if report.get("glue"):
        tasks = s["tasks"]
        out += [f"GLUE dev, median of {len(s['seeds'])} seed(s) (min–max), {s['glue_epochs']:g} "
                f"epochs, lr {s['glue_learning_rate']:g}, batch {s['glue_batch_size']}:", "",
                "| row | " + " | ".join(tasks) + " | average |",
                "|---|" + "---|" * (len(tasks) + 1)]
        for row, r in report["glue"].items():
            cells = [spread(r["tasks"].get(t)) for t in tasks]
            out.append(f"| {row} | " + " | ".join(cells) + f" | {fmt(r.get('average'))} |")
        out.append("")
    if report.get("tapt"):
        out += [f"WNUT-17 entity F1 (dev), median of {len(s['seeds'])} seed(s) (min–max):", "",
                "| model | entity F1 |", "|---|---|"]
        out += [f"| {name} | {spread(r)} |" for name, r in report["tapt"].items()]
        mlm = report.get("tapt_masked_lm") or {}
        out += ["", f"The adapted model's masked LM on WNUT-17's dev sentences: accuracy "
                f"{fmt(mlm.get('masked_lm_accuracy'), 4)} (unigram baseline "
                f"{fmt(mlm.get('masked_lm_unigram_baseline'), 4)}) after "
                f"{fmt(mlm.get('steps'))} steps."]
    return "\n".join(out)


def read_key_values(path) -> dict:
    """eval_results.txt's `key = value` lines as floats."""
    values = {}
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(" = ")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            pass
    return values


def log_rates(log: str) -> dict:
    """From run_pretraining's progress lines: the last step and the median
    examples/s and tokens/s of the windows after the first (tracing)."""
    steps = [int(s) for s in re.findall(r"step (\d+)/\d+:", log)]
    number = r"([0-9][0-9.]*(?:e[+-]?[0-9]+)?)"
    examples = [float(v) for v in re.findall("examples_per_second = " + number, log)]
    tokens = [float(v) for v in re.findall("tokens_per_second = " + number, log)]
    later = slice(1, None) if len(examples) > 1 else slice(None)
    return {"steps": steps[-1] if steps else 0,
            "examples_per_second": statistics.median(examples[later]) if examples else None,
            "tokens_per_second": statistics.median(tokens[later]) if tokens else None}
