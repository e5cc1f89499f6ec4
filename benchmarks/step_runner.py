"""Resumable steps: each command of a long benchmark run once, its result kept.

A `Step` is a command (argv) or work done in this process (`InProcess`), named
and given a kind and an estimate of its seconds. `Runner` runs a plan of steps
in order; each step's directory is `work_dir/<name>-<hash of its command>`, its
output and log (`<dir>.log`) beside, and a finished step leaves `<dir>.done.json`
(command, seconds, parsed result): a rerun with the same command reuses it,
one killed part-way is run again with the same command (the project's commands
resume their --output_dir), and a changed command gets a new directory. A dry
run prints every command instead (results are `Pending` placeholders).
Progress lines say the time elapsed and an estimate of the time left (each
kind's mean so far, else the steps' own estimates).

Used by `benchmarks/pretraining_outcome.py`, `distillation_outcome.py`,
`adaptation_outcome.py` and `small_model_outcome.py` (`measure` is their main;
`measurement_parser`, the `add_*_flags` and the `check_*` functions, the flags they
share).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import time
from typing import Callable

REPO = pathlib.Path(__file__).resolve().parents[1]



def python(script: str) -> list:
    """The argv of one of the repository's scripts (`run_classifier.py`, ...)."""
    return [sys.executable, str(REPO / script)]


def bert(command: str) -> list:
    """The argv of `bert <command>` (as the module: no console script needed)."""
    return [sys.executable, "-m", "official_bert.commands.cli", command]


def split_list(text: str) -> list:
    """A comma-separated flag's items."""
    return [item.strip() for item in text.split(",") if item.strip()]


def split_lists(args, *names: str) -> None:
    """Each named comma-separated argument made its list of items, in place."""
    for name in names:
        setattr(args, name, split_list(getattr(args, name)))


def read_json(path) -> dict:
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


# --- the flags the measurements share, and their checks (argparse's one-line errors) ---


def measurement_parser(doc: str, work_dir: str) -> argparse.ArgumentParser:
    """A measurement's parser (described by its docstring's first line, defaults in
    --help) with the flags `measure` reads: --work_dir, --json_output, --dry_run."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--work_dir", default=work_dir, help="Every step's output; reused.")
    p.add_argument("--json_output", default=None,
                   help="Results JSON (default: work_dir/results.json).")
    p.add_argument("--dry_run", action="store_true", help="Print every command; run nothing.")
    p.add_argument("--report_only", action="store_true",
                   help="The report of the steps finished so far in --work_dir; run nothing.")
    return p


# The data sets the measurements read: flag → its place in ../shared/data (beside the repository).
DATA_DIRS = {"corpus_dir": ("pretrain_text",), "glue_dir": ("glue",),
             "wnut_dir": ("ner", "wnut17"), "conll_dir": ("ner", "conll2003")}


def add_data_dir_flags(parser, *names: str) -> None:
    """The `DATA_DIRS` flags `names`, each defaulting to its shared copy."""
    for name in names:
        parser.add_argument(f"--{name}",
                            default=str(REPO.parent.joinpath("shared", "data", *DATA_DIRS[name])))


def add_fine_tuning_flags(parser, prefix: str = "", learning_rate: float = 1e-4) -> None:
    """--<prefix>epochs, --<prefix>learning_rate and --<prefix>batch_size: how every row
    fine-tunes on a task (3 epochs and batches of 32 by default: in the grid of BERT's paper)."""
    parser.add_argument(f"--{prefix}epochs", type=float, default=3.0)
    parser.add_argument(f"--{prefix}learning_rate", type=float, default=learning_rate)
    parser.add_argument(f"--{prefix}batch_size", type=int, default=32)


def check_choices(parser, name: str, values: list, allowed, allow_empty=False) -> None:
    unknown = [v for v in values if v not in allowed]
    if unknown or not (values or allow_empty):
        parser.error(f"--{name}: unknown {unknown}; choose from {', '.join(allowed)}")


def check_seeds(parser, name: str, seeds: list) -> None:
    if not seeds or not all(s.isdigit() for s in seeds):
        parser.error(f"--{name} must be comma-separated integers, got {seeds}")


def check_positive(parser, args, names) -> None:
    for name in names:
        if not getattr(args, name) > 0:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")

class Pending(dict):
    """A step's result in a dry run: any key reads as a placeholder."""

    def __init__(self, name):
        super().__init__(output_dir=f"<{name}>")
        self.name = name

    def __missing__(self, key):
        return f"<{self.name}:{key}>"


@dataclasses.dataclass
class Step:
    """One unit of work. `make(results)` gives the command (argv; "{out}" is
    the step's directory) or, for work done here, a function of that directory;
    `parse(out, log)` turns the finished step into its result."""

    name: str
    kind: str
    estimate: float
    make: Callable
    parse: Callable = lambda out, log: {}


@dataclasses.dataclass
class InProcess:
    """Work done in this process (a split, a small file): `run(out)`."""

    description: str
    run: Callable


class Runner:
    """Runs steps in order, reusing finished ones, printing progress with the
    time left (each kind's mean so far, else the step's own estimate)."""

    def __init__(self, work_dir: str, dry_run: bool, steps: list):
        self.work, self.dry_run, self.steps = pathlib.Path(work_dir), dry_run, steps
        self.results, self.durations, self.start = {}, {}, time.monotonic()

    def run_all(self) -> dict:
        for index, step in enumerate(self.steps):
            self.results[step.name] = self.run(step, index)
        if self.dry_run:
            print(f"# {len(self.steps)} steps, about {clock(sum(s.estimate for s in self.steps))} "
                  "(the steps' first estimates)", flush=True)
        return self.results

    def finished(self) -> dict:
        """The results of the steps already done, in plan order, running nothing
        (a step whose command needs an unfinished one's result is left out)."""
        for step in self.steps:
            try:
                work = step.make(self.results)
            except KeyError:
                continue
            done = self.step_dir(step, work).with_name(
                self.step_dir(step, work).name + ".done.json")
            if done.exists():
                self.results[step.name] = json.loads(done.read_text(encoding="utf-8"))["result"]
        return self.results

    def step_dir(self, step: Step, work) -> pathlib.Path:
        """`work_dir/<name>-<hash of its command>`."""
        key = work if isinstance(work, list) else [step.name, work.description]
        digest = hashlib.sha1(json.dumps(key).encode("utf-8")).hexdigest()[:10]
        return self.work / f"{step.name}-{digest}"

    def estimate(self, step) -> float:
        seen = self.durations.get(step.kind)
        return statistics.mean(seen) if seen else step.estimate

    def progress(self, index: int, text: str) -> None:
        left = sum(self.estimate(s) for s in self.steps[index:])
        print(f"[{clock(time.monotonic() - self.start)} elapsed, ~{clock(left)} left] "
              f"({index + 1}/{len(self.steps)}) {text}", flush=True)

    def run(self, step: Step, index: int):
        work = step.make(self.results)
        key = work if isinstance(work, list) else [step.name, work.description]
        out = self.step_dir(step, work)
        done = out.with_name(out.name + ".done.json")
        if self.dry_run:
            shown = (shlex.join(a.replace("{out}", str(out)) for a in work)
                     if isinstance(work, list) else f"(in this process) {work.description}")
            print(f"# {step.name}\n{shown}", flush=True)
            return Pending(step.name)
        if done.exists():
            self.progress(index, f"{step.name}: reused {done}")
            return json.loads(done.read_text(encoding="utf-8"))["result"]
        self.progress(index, f"{step.name} → {out}")
        started = time.monotonic()
        log_path = out.with_name(out.name + ".log")
        out.mkdir(parents=True, exist_ok=True)  # the data commands write into it
        if isinstance(work, list):
            run_logged([a.replace("{out}", str(out)) for a in work], log_path)
        else:
            work.run(out)
        log = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
        result = {"output_dir": str(out), **step.parse(out, log)}
        seconds = time.monotonic() - started
        self.durations.setdefault(step.kind, []).append(seconds)
        write_json(done, {"command": key, "seconds": seconds, "result": result})
        return result


def run_logged(argv: list, log_path: pathlib.Path) -> None:
    """Runs a command from the repository root, its output appended to the log
    (a resumed step keeps the first attempt's lines); a failure ends the
    benchmark with the command and the log's tail."""
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(argv)}\n")
        log.flush()
        code = subprocess.call(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    if code:
        tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise SystemExit(f"error: step failed (exit {code}): {shlex.join(argv)}\n"
                         + "\n".join(tail) + f"\n(the whole log: {log_path}; fix and rerun: "
                         "finished steps are reused)")


def write_json(path, value) -> None:
    """Atomically: a temporary file beside it, then renamed."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps(value, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def measure(args, plan, build_report, format_report) -> None:
    """The main of a measurement: --work_dir and --json_output's directory made
    (one line when they cannot be), the plan's steps run (or, with --dry_run,
    printed), the report written as JSON and its table printed."""
    for directory in (args.work_dir, os.path.dirname(os.path.abspath(args.json_output))):
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise SystemExit(f"error: cannot create {directory} ({e.strerror}): choose "
                             "another --work_dir or --json_output") from None
        if not os.access(directory, os.W_OK):
            raise SystemExit(f"error: {directory} is not writable: choose another "
                             "--work_dir or --json_output")
    runner = Runner(args.work_dir, args.dry_run, plan(args))
    if args.report_only:  # the steps done so far, nothing run
        results = runner.finished()
    else:
        results = runner.run_all()
    if args.dry_run:
        return
    report = build_report(args, results)
    write_json(args.json_output, report)
    print("\n" + format_report(report) + f"\n\nwrote {args.json_output}")

