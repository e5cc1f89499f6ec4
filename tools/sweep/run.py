"""Running the sweep: the world every case copies, one case, and the tables."""

from __future__ import annotations

import os
import pathlib
import shutil
import time

from tools.kit import fault_kit as kit

from . import argv
from .case import Case, Ctx

# Files that say "this step finished": none may appear when a command fails.
COMPLETE_MARKERS = {"eval_results.txt", "test_results.tsv", "predictions.json",
                    "nbest_predictions.json", "null_odds.json", "saved_model.pb",
                    "test_predictions.txt", "predictions.txt"}
# The directories a run writes in: what changes there is output, not a changed input.
RUN_DIRS = ("run", "out", "gen", "trained")
SETUP_FAILED = "setup failed"


def build_world(root: pathlib.Path) -> kit.World:
    """The fault kit's world (checkpoint, pre-training records), and in export/ the
    SavedModel of a classifier fine-tuned on it (for `bert predict` and export-ids-only)."""
    world = kit.World(root).build(checkpoint=True, pretraining_data=True)
    ctx = Ctx(root)
    trained = argv.classify(f"--export_dir={root / 'export'}", out="trained",
                            modes=("--do_train",))
    result = kit.run(kit.command(*ctx.resolve(trained)))
    if result.returncode:
        raise SystemExit("could not train the classifier for `bert predict`:\n"
                         + result.stderr[-3000:])
    shutil.rmtree(root / "trained")
    return world


def _damage(case: Case, root: pathlib.Path, outputs: list, before: dict, after: dict,
            result) -> tuple[list, list]:
    """(inputs changed, outputs left that look complete), relative to `root`."""
    run_dirs = [os.path.join(str(root), d) for d in RUN_DIRS]
    changed = [p for p in kit.changed(before, after)
               if not any(p.startswith(d + os.sep) for d in run_dirs) and p not in outputs]
    partial = []
    if result.returncode != 0:
        partial = [p for p in outputs if os.path.exists(p)]
        partial += sorted(p for p in set(after) - set(before)
                          if os.path.basename(p) in COMPLETE_MARKERS)
    return ([os.path.relpath(p, root) for p in changed],
            [os.path.relpath(p, root) for p in partial])


def run_case(world_root: pathlib.Path, scratch: pathlib.Path, index: int, case: Case) -> dict:
    """Copies the world, runs the case's setup and command, and classifies the outcome:
    {case, outcome, why, seconds}."""
    root = scratch / f"case-{index:03d}"
    shutil.copytree(world_root, root, symlinks=True)
    ctx = Ctx(root)
    start = time.time()
    try:
        for step in case.setup:
            step(ctx)
    except Exception as e:  # noqa: BLE001 - a broken case is reported, not fatal
        return dict(case=case, outcome=SETUP_FAILED, why=f"{type(e).__name__}: {e}"[:300],
                    seconds=time.time() - start)
    outputs = ctx.paths(case.outputs)
    before = kit.snapshot(root)
    result = kit.run(kit.command(*ctx.resolve(case.argv)), stdin=case.stdin,
                     timeout=case.timeout, file_size_limit=case.file_size_limit)
    inputs_changed, partial = _damage(case, root, outputs, before, kit.snapshot(root), result)
    outcome, why = kit.classify(result, case.expect_error, names=case.names,
                                inputs_changed=inputs_changed, partial_outputs=partial)
    if case.after and outcome in (kit.CLEAN, kit.OK):
        ok, note = case.after(ctx, case)
        why = f"{why} — {note}" if why else note
        if not ok:  # a bad input's rerun lost data; a control's result was wrong
            outcome = kit.LOST if outcome == kit.CLEAN else kit.SILENT
    return dict(case=case, outcome=outcome, why=kit.strip_paths(why, root),
                seconds=time.time() - start)


def table(rows: list) -> str:
    """One Markdown row per case run."""
    lines = ["| command | input | outcome | detail |", "|---|---|---|---|"]
    for row in rows:
        detail = row["why"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {row['case'].command} | {row['case'].name} | {row['outcome']} | "
                     f"{detail} |")
    return "\n".join(lines)


def totals(rows: list) -> str:
    """The outcomes of the bad inputs, counted, and how many controls ran through."""
    bad = [r for r in rows if r["case"].expect_error]
    good = [r for r in rows if not r["case"].expect_error]

    def count(outcome, rs=bad):
        return sum(r["outcome"] == outcome for r in rs)

    lines = ["| bad inputs tried | clean errors | vague errors | tracebacks | silent wrong "
             "results | data lost | setup failed |", "|---|---|---|---|---|---|---|",
             f"| {len(bad)} | {count(kit.CLEAN)} | {count(kit.VAGUE)} | {count(kit.TRACEBACK)} | "
             f"{count(kit.SILENT)} | {count(kit.LOST)} | {count(SETUP_FAILED)} |"]
    lines.append("")
    lines.append(f"Good inputs (controls): {len(good)} tried, {count(kit.OK, good)} ran "
                 "through.")
    return "\n".join(lines)


def per_command(rows: list) -> str:
    """The same counts per command: bad inputs and their outcomes, controls."""
    lines = ["| command | bad inputs | clean errors | vague | tracebacks | silent wrong results "
             "| data lost | controls (ran through) |", "|---|---|---|---|---|---|---|---|"]
    for command in dict.fromkeys(r["case"].command for r in rows):
        mine = [r for r in rows if r["case"].command == command]
        bad = [r for r in mine if r["case"].expect_error]
        good = [r for r in mine if not r["case"].expect_error]
        n = [sum(r["outcome"] == o for r in bad)
             for o in (kit.CLEAN, kit.VAGUE, kit.TRACEBACK, kit.SILENT, kit.LOST)]
        ran = sum(r["outcome"] == kit.OK for r in good)
        lines.append(f"| {command} | {len(bad)} | " + " | ".join(map(str, n))
                     + f" | {len(good)} ({ran}) |")
    return "\n".join(lines)
