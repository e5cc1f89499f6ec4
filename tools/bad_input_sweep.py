r"""Every command x every bad input we can think of, on tiny data: a table.

    python tools/bad_input_sweep.py                      # all cases (about 20 minutes on 2 cores)
    python tools/bad_input_sweep.py --commands=classify  # the cases of some commands (a,b,...)
    python tools/bad_input_sweep.py --only=predict       # the cases whose command or input says it
    python tools/bad_input_sweep.py --limit=3            # the first 3 cases of each command
    python tools/bad_input_sweep.py --list               # the cases, without running them
    python tools/bad_input_sweep.py --matrix             # the generated matrix instead
    python tools/bad_input_sweep.py --matrix --commands=build-vocab --classes=race,sigint

The matrix (`tools/sweep/matrix.py`) is generated from the command registry: every
command x every output fault of each output it declares, every signal at each of its
phases and the run-record faults; it prints one table per command and fault class (each
cell its outcomes: clean, ok, traceback, vague, silent, lost, refused, unreached) and
writes every case's outcome as JSON (--json).

The cases are data, one module per command in tools/sweep/cases/ (a list of `Case`:
the input's name, the command's argv, the damage done first, what the error line must
name, the outputs that must not be left). Each case copies a tiny world (vocabulary,
config, checkpoint, the data of every task, pre-training TFRecords, a fine-tuned
classifier and its SavedModel: `tools/kit/fault_kit.py`), damages it or passes a
bad flag, runs the real command in a subprocess (`bert <command>`, a `run_*.py` script
or a command module), and classifies what happened:

    clean error          exit 1 with exactly one `error: ...` line, no traceback,
                         naming the file or flag (or, for a good input, exit 0)
    vague error          an error line that names neither, or several error lines
    traceback            a Python traceback reached the user
    silent wrong result  exit 0 where the input was bad
    data lost            an input was modified or deleted, an output that looks
                         complete was left half-written, or rerunning the same
                         command after the fault did not resume

It prints one Markdown row per case, then the totals and the same counts per command
(docs/troubleshoot.md, "Bad input and faults: the sweep", shows the last full run's).
Exit status 1 unless every bad input gave a clean error and every control ran through.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import shutil
import signal
import sys
import tempfile
import threading
import time
import types

# Run as a script, this folder is on sys.path (the `sweep` package beside this file); the
# repository root is not, and the fault kit (`tools.kit`) is not installed with the library.
sys.path.insert(1, str(pathlib.Path(__file__).resolve().parents[1]))

from official_bert import interruption  # noqa: E402
from sweep import cases as sweep_cases  # noqa: E402
from sweep import matrix  # noqa: E402
from sweep import run as sweep_run  # noqa: E402


def select(by_command: dict, commands: str, only: str, limit: int | None) -> list:
    """The cases of `commands` (all if empty) whose "command: input" contains a word of
    `only` (comma-separated), at most `limit` of each command, in the table's order."""
    wanted = [c.strip() for c in commands.split(",") if c.strip()]
    unknown = sorted(set(wanted) - set(by_command))
    if unknown:
        raise SystemExit(f"error: --commands: no cases for {', '.join(unknown)} "
                         f"(the commands: {', '.join(by_command)})")
    words = [w.strip().lower() for w in only.split(",")] if only else [""]
    selected = []
    for command, cases in by_command.items():
        if wanted and command not in wanted:
            continue
        mine = [c for c in cases if any(w in f"{c.command}: {c.name}".lower() for w in words)]
        selected += mine[:limit] if limit is not None else mine
    return selected


def count(cases: list) -> str:
    bad = sum(c.expect_error for c in cases)
    return f"{len(cases)} cases: {bad} bad inputs + {len(cases) - bad} controls"


def run_all(cases: list, keep: bool, jobs: int = 1) -> list:
    """Builds the world in a scratch directory and runs `cases` there."""
    return _run_in_world(cases, keep, jobs, "bad_input_sweep-", sweep_run.run_case,
                         lambda case: f"{case.command}: {case.name}")


def run_matrix(generated: list, keep: bool, jobs: int = 1, json_path=None,
               kept=()) -> list:
    """Builds the world and runs the generated cases (each in a copy); with
    `json_path`, the outcomes so far, after `kept` (rows of an earlier run, as JSON),
    are written there after each case (a long run stopped part-way keeps what it ran,
    for --resume and --merge)."""
    finished = []

    def save(row):
        finished.append(row)
        if json_path:
            temporary = pathlib.Path(f"{json_path}.part")
            temporary.write_text(json.dumps([*kept, *matrix.as_json(finished)], indent=1)
                                 + "\n")
            os.replace(temporary, json_path)

    return _run_in_world(generated, keep, jobs, "bad_input_matrix-", matrix.run_generated,
                         lambda case: f"{case.command}: {case.klass}: {case.case.name}", save)


def _run_in_world(cases: list, keep: bool, jobs: int, prefix: str, run_one, name,
                  on_row=None) -> list:
    """The tiny world in a scratch directory, then `run_one(world, scratch, i, case)`
    for each case, `jobs` at a time (each case is its own processes in its own copy
    of the world), with a progress line named `name(case)` (and `on_row(row)`, one
    case at a time); the rows, in order."""
    scratch = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    done = 0
    lock = threading.Lock()

    def one(i, case):
        nonlocal done
        row = run_one(scratch / "world", scratch, i, case)
        with lock:
            done += 1
            if on_row:
                on_row(row)
        print(f"[{done}/{len(cases)}] {name(case)}: {row['outcome']} "
              f"({row['seconds']:.0f} s) {row['why'][:160]}", file=sys.stderr, flush=True)
        if not keep:
            shutil.rmtree(scratch / f"case-{i:03d}", ignore_errors=True)
        return row

    try:
        print(f"building the tiny world in {scratch} ...", file=sys.stderr, flush=True)
        sweep_run.build_world(scratch / "world")
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            return list(pool.map(one, range(len(cases)), cases))
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


def row_of(written: dict) -> dict:
    """A row as a run makes it, from its JSON (`matrix.as_json`)."""
    case = types.SimpleNamespace(name=written["case"])
    generated = types.SimpleNamespace(command=written["command"], klass=written["klass"],
                                      target=written.get("target"), case=case)
    return dict(generated=generated, outcome=written["outcome"], why=written["why"],
                seconds=written["seconds"])


def merged_rows(paths: str) -> list:
    """The rows of several runs' JSON (`--json`), the latest of each case winning:
    a matrix run by parts (`--commands=`, `--classes=`) read back as one."""
    rows = {}
    for path in (p.strip() for p in paths.split(",") if p.strip()):
        try:
            read = json.loads(pathlib.Path(path).read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"error: --merge: cannot read {path} ({e}): give the --json "
                             "files of earlier matrix runs") from None
        for row in read:
            rows[(row["command"], row["klass"], row["case"])] = row_of(row)
    # In the registry's order; a case the registry no longer generates is left out.
    order = {(g.command, g.klass, g.case.name): i for i, g in enumerate(matrix.generate())}
    return sorted((r for key, r in rows.items() if key in order), key=lambda r: order[(
        r["generated"].command, r["generated"].klass, r["generated"].case.name)])


def counts(generated: list) -> str:
    """The cases a command gets of each group of classes, as a Markdown table."""
    groups = {"outputs": (*matrix.OUTPUT_FAULTS, "record"), "inputs": tuple(matrix.INPUT_FAULTS),
              "live runs": ("live-run",), "signals": tuple(matrix.SIGNALS),
              "limits, stdout": (*matrix.LIMITS, *matrix.STDOUT_FAULTS)}
    commands = list(dict.fromkeys(g.command for g in generated))
    n = {(c, group): sum(g.command == c and g.klass in classes for g in generated)
         for c in commands for group, classes in groups.items()}
    lines = ["| command | " + " | ".join(groups) + " | all |", "|---" * (len(groups) + 2) + "|"]
    for c in [*commands, "all"]:
        row = [sum(n[(d, group)] for d in commands if c in ("all", d)) for group in groups]
        lines.append(f"| {c} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    return "\n".join(lines)


def resumed_rows(json_path: str, generated: list) -> list:
    """--resume: the rows of `json_path` (an earlier run's --json) that are clean or ok
    and among `generated`; the others run again. None when the file is not there yet."""
    path = pathlib.Path(json_path)
    if not path.exists():
        return []
    try:
        rows = json.loads(path.read_text())
    except ValueError as e:
        raise SystemExit(f"error: --resume: {path} is not an earlier run's --json ({e}): "
                         "give another --json, or remove it to start again") from None
    wanted = {(g.command, g.klass, g.case.name) for g in generated}
    return [r for r in rows if r["outcome"] in matrix.GOOD
            and (r["command"], r["klass"], r["case"]) in wanted]


def rows_beside(json_path: str, generated: list) -> list:
    """--resume: the rows of `json_path` whose cases are not among `generated`."""
    path = pathlib.Path(json_path)
    if not path.exists():
        return []
    wanted = {(g.command, g.klass, g.case.name) for g in generated}
    return [r for r in json.loads(path.read_text())
            if (r["command"], r["klass"], r["case"]) not in wanted]


def matrix_main(args) -> int:
    if args.merge:
        rows = merged_rows(args.merge)
        print(matrix.grid(rows))
        print()
        print(matrix.details(rows))
        good = sum(r["outcome"] in matrix.GOOD for r in rows)
        print(f"\n{len(rows)} of {len(matrix.generate())} generated cases run, {good} clean or "
              f"ok, {sum(r['seconds'] for r in rows):.0f} s of cases")
        return 0 if good == len(rows) else 1
    generated = matrix.select(matrix.generate(), args.commands, args.classes)
    if args.only:
        words = [w.strip().lower() for w in args.only.split(",")]
        generated = [g for g in generated
                     if any(w in f"{g.command}: {g.klass}: {g.case.name}".lower() for w in words)]
    if args.counts:
        print(counts(generated))
        return 0
    if args.list:
        for g in generated:
            print(f"{g.command}: {g.klass}: {g.case.name}")
        print(f"{len(generated)} generated cases", file=sys.stderr)
        return 0
    kept = resumed_rows(args.json, generated) if args.resume else []
    # (the file's rows of cases outside this selection stay in it: a part resumed with
    # --commands= or --classes= never drops another part's outcomes)
    beside = rows_beside(args.json, generated) if args.resume else []
    done = {(r["command"], r["klass"], r["case"]) for r in kept}
    generated = [g for g in generated if (g.command, g.klass, g.case.name) not in done]
    print(f"{len(generated)} generated cases" + (
        f" ({len(kept)} clean or ok in {args.json} kept)" if args.resume else ""),
        file=sys.stderr, flush=True)
    start = time.time()
    rows = [row_of(r) for r in kept] + run_matrix(generated, args.keep, args.jobs, args.json,
                                                  [*beside, *kept])
    print(matrix.grid(rows))
    print()
    print(matrix.details(rows))
    print()
    good = sum(r["outcome"] in matrix.GOOD for r in rows)
    print(f"`python tools/bad_input_sweep.py --matrix` ({len(rows)} generated cases, {good} "
          f"clean or ok, {sum(r['seconds'] for r in rows):.0f} s of cases, "
          f"{time.time() - start:.0f} s this sitting)")
    written = pathlib.Path(f"{args.json}.part")
    written.write_text(json.dumps([*beside, *matrix.as_json(rows)], indent=1) + "\n")
    os.replace(written, args.json)
    print(f"every case's outcome: {args.json}", file=sys.stderr)
    return 0 if good == len(rows) else 1


def deliverable_stop_signals() -> None:
    """Every stop signal at its default action in every case's process. A sweep
    started by `nohup` or with `&` from a script inherits SIGHUP, or SIGINT and
    SIGQUIT, ignored; an exec'd process keeps an ignored signal ignored, and every
    command rightly keeps it so (`official_bert.interruption`): the signal cases
    would end "silent", the harness's environment and not the command's behaviour.
    A handler, unlike an ignore, is reset to the default action by exec: the cases
    get the default, and the sweep itself still ignores what it was started
    ignoring (nohup's SIGHUP), bar Ctrl-C's KeyboardInterrupt."""
    for signum in interruption.STOP_SIGNALS:
        if signal.getsignal(signum) == signal.SIG_IGN:
            print(f"{signal.Signals(signum).name} was ignored (nohup, or started with &): "
                  "its default action in the cases", file=sys.stderr)
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT
                          else _still_ignored)


def _still_ignored(signum, frame) -> None:
    """The sweep's own stand-in for an inherited ignore (see above)."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", default="", help="run the cases of these commands "
                        "(comma-separated, as the table names them: classify,squad,...)")
    parser.add_argument("--only", default="", help="run the cases whose command or input "
                        "contains this text (comma-separated: any of them)")
    parser.add_argument("--limit", type=int, default=None,
                        help="run at most this many cases of each command (its first ones)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once (each is "
                        "its own processes; a signal case's timing holds under load)")
    parser.add_argument("--matrix", action="store_true", help="run the matrix generated "
                        "from the command registry instead of the hand-written cases")
    parser.add_argument("--classes", default="", help="with --matrix: these fault classes "
                        f"(comma-separated: {', '.join(matrix.CLASSES)})")
    parser.add_argument("--json", default="bad_input_matrix.json",
                        help="with --matrix: where every case's outcome is written")
    parser.add_argument("--counts", action="store_true", help="with --matrix: a table of how "
                        "many cases each command gets of each group of classes, not run")
    parser.add_argument("--resume", action="store_true", help="with --matrix: keep the "
                        "clean or ok cases already in --json and run the rest (a matrix too "
                        "long for one sitting, run again with the same command)")
    parser.add_argument("--merge", default="", help="with --matrix: print the table of these "
                        "runs' --json files (comma-separated; a later run's case wins) instead "
                        "of running cases")
    args = parser.parse_args(argv)
    deliverable_stop_signals()
    if args.matrix:
        return matrix_main(args)
    cases = select(sweep_cases.by_command(), args.commands, args.only, args.limit)
    if args.list:
        for case in cases:
            print(f"{case.command}: {case.name}")
        print(count(cases), file=sys.stderr)
        return 0
    print(count(cases), file=sys.stderr, flush=True)
    start = time.time()
    rows = run_all(cases, args.keep, args.jobs)
    print(sweep_run.table(rows))
    print()
    print(sweep_run.totals(rows))
    print()
    print(sweep_run.per_command(rows))
    print()
    print(f"`python tools/bad_input_sweep.py` ({count(cases)}, {time.time() - start:.0f} s)")
    bad = [r for r in rows if r["case"].expect_error and r["outcome"] != "clean error"]
    good = [r for r in rows if not r["case"].expect_error and r["outcome"] != "ok"]
    return 1 if bad or good else 0


if __name__ == "__main__":
    sys.exit(main())
