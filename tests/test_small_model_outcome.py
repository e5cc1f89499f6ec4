"""benchmarks/small_model_outcome.py (issue 55's measurement at full size): its plan.

The measurement's figures are never asserted here: it is a benchmark, run by hand.
"""

import os
import sys

import pytest

# benchmarks/ is a package at the repository root that pip does not install.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks import small_model_outcome as outcome  # noqa: E402
from benchmarks import step_runner  # noqa: E402


def _made(args, name):
    results = {n: step_runner.Pending(n) for n in ("MRPC/teacher/seed42", "MRPC/distill_text")}
    return next(s for s in outcome.plan(args) if s.name == name).make(results)


def test_each_lever_is_the_distilled_row_with_its_change():
    args = outcome.parse_args(["--tasks=MRPC", "--seeds=42", "--rows=distilled,"
                               + ",".join(outcome.LEVERS)])
    names = [step.name for step in outcome.plan(args)]
    assert names.index("MRPC/distill_text") < names.index("MRPC/distilled_text/seed42")
    base = _made(args, "MRPC/distilled/seed42")
    expected = {"distilled_longer": {"--num_train_epochs=6"},
                "distilled_text": {"--distill_text=<MRPC/distill_text:file>"},
                "distilled_text_longer": {"--num_train_epochs=6",
                                          "--distill_text=<MRPC/distill_text:file>"}}
    for lever, change in expected.items():
        made = _made(args, f"MRPC/{lever}/seed42")
        assert set(made) - set(base) - {a for a in made if a.startswith("--output_dir")} == change


def test_sst2_has_no_text_for_the_text_levers():
    for lever in ("distilled_text", "distilled_text_longer"):
        with pytest.raises(SystemExit):
            outcome.parse_args(["--tasks=SST-2", f"--rows={lever}"])
