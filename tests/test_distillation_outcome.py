"""benchmarks/distillation_outcome.py (issue 45's measurement): its plan and its table.

The measurement's figures are never asserted here: it is a benchmark, run by hand.
"""

import json
import os
import sys

import pytest

# benchmarks/ is a package at the repository root that pip does not install.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks import distillation_outcome as outcome  # noqa: E402
from benchmarks import step_runner  # noqa: E402


def _pending(*names):
    return {name: step_runner.Pending(name) for name in names}


def test_each_row_task_and_seed_is_one_step_and_students_learn_the_first_seeds_teacher():
    args = outcome.parse_args(["--tasks=MRPC,WNUT-17", "--seeds=42,43", "--other_seeds=42"])
    names = [step.name for step in outcome.plan(args)]
    assert names[:3] == ["speed", "general/corpus", "general/distill"]
    for task in ("MRPC", "WNUT-17"):
        for row in outcome.ROWS:
            seeds = (42, 43) if row in outcome.FIVE_SEED_ROWS else (42,)
            assert [n for n in names if n.startswith(f"{task}/{row}/")] == [
                f"{task}/{row}/seed{s}" for s in seeds]
    steps = {step.name: step for step in outcome.plan(args)}
    results = _pending("general/distill", "MRPC/teacher/seed42", "WNUT-17/teacher/seed42")
    distilled = steps["MRPC/distilled/seed43"].make(results)
    assert {"--student_layers=0,2,4", "--teacher=<MRPC/teacher/seed42>", "--seed=43"} <= set(
        distilled)
    general = steps["WNUT-17/general/seed42"].make(results)
    assert "--init_checkpoint=<general/distill>" in general and "run_ner.py" in general[1]
    assert not any(a.startswith("--student_layers") for a in general)
    teacher = steps["MRPC/teacher/seed43"].make(results)
    assert not any(a.startswith(("--teacher", "--student_layers")) for a in teacher)
    narrow = steps["MRPC/narrow_distilled/seed42"].make(results)
    assert "--student_layers=0,5" in narrow and "--teacher=<MRPC/teacher/seed42>" in narrow
    with_text = steps["WNUT-17/distilled_text/seed42"].make(_pending(
        "WNUT-17/teacher/seed42", "WNUT-17/extra_text"))
    assert "--distill_text=<WNUT-17/extra_text>/extra.conll" in with_text
    distill = steps["general/distill"].make(_pending("general/corpus"))
    assert distill[2:4] == ["official_bert.commands.cli", "distill"]
    assert {"--student_layers=0,2,4", "--max_train_minutes=30"} <= set(distill)


def test_the_extra_text_is_the_training_rows_after_the_labelled_ones(tmp_path):
    glue, wnut = tmp_path / "glue", tmp_path / "wnut"
    (glue / "MRPC").mkdir(parents=True)
    (glue / "MRPC" / "train.tsv").write_text(
        "\ufeffQuality\t#1 String\n" + "".join(f"1\tpair {i}\n" for i in range(6)))
    wnut.mkdir()
    (wnut / "wnut17train.conll").write_text(
        "".join(f"word{i}\tO\nmore{i}\tB-person\n\n" for i in range(6)))
    args = outcome.parse_args(["--tasks=MRPC,WNUT-17", "--rows=distilled_text", "--train_rows=2",
                               "--extra_rows=3", f"--glue_dir={glue}", f"--wnut_dir={wnut}"])
    for task, name in (("MRPC", "extra.tsv"), ("WNUT-17", "extra.conll")):
        out = tmp_path / task
        out.mkdir()
        outcome.extra_text_step(args, task).make({}).run(out)
        text = (out / name).read_text()
        if task == "MRPC":
            assert text == "Quality\t#1 String\n1\tpair 2\n1\tpair 3\n1\tpair 4\n"
        else:
            assert text.split("\n\n")[:3] == [f"word{i}\tO\nmore{i}\tB-person"
                                              for i in (2, 3, 4)]


def test_without_the_teacher_row_its_first_seed_still_runs_for_the_students():
    args = outcome.parse_args(["--tasks=SST-2", "--rows=distilled", "--seeds=42,43"])
    names = [step.name for step in outcome.plan(args)]
    assert names == ["speed", "SST-2/teacher/seed42", "SST-2/distilled/seed42",
                     "SST-2/distilled/seed43"]


def test_the_table_gives_medians_spreads_the_average_and_the_speedup():
    args = outcome.parse_args(["--tasks=MRPC,WNUT-17", "--rows=teacher,student",
                               "--seeds=42,43,44"])
    results = {}
    for task, scores in (("MRPC", {"teacher": [80, 82, 84], "student": [75, 76, 80]}),
                         ("WNUT-17", {"teacher": [40, 44, 45], "student": [30, 31, 35]})):
        for row in ("teacher", "student"):
            for seed, value in zip(args.seeds, scores[row]):
                results[f"{task}/{row}/seed{seed}"] = {"score": float(value)}
    results["speed"] = {"6": 0.10, "3": 0.05, "2": 0.04}
    report = outcome.build_report(args, results)
    assert report["tasks"]["MRPC"]["student"]["median"] == 76.0
    assert report["average"] == {"teacher": 63.0, "student": 53.5}
    text = outcome.format_table(report)
    assert "| row | MRPC | WNUT-17 | average | speed |" in text
    assert "| teacher | 82.0 (80.0–84.0) | 44.0 (40.0–45.0) | 63.0 | 1.0x |" in text
    assert "| student | 76.0 (75.0–80.0) | 31.0 (30.0–35.0) | 53.5 | 2.0x |" in text
    json.dumps(report)


@pytest.mark.slow  # builds and times three encoders of all-MiniLM-L6-v2's width
def test_the_encoders_are_timed_by_depth_and_a_deeper_one_is_slower():
    seconds = outcome.encoder_speed(outcome.minilm_dir("the test"), seq_length=16, batch=4,
                                    rounds=2, calls=2)
    assert set(seconds) == {"2", "3", "6"}
    assert seconds["6"] > seconds["2"] > 0


def test_bad_flags_are_one_line_each(capsys):
    for argv, says in ((["--rows=teacher,tiny"], "--rows: unknown ['tiny']"),
                       (["--tasks=QNLI"], "--tasks: unknown ['QNLI']"),
                       (["--seeds=42,x"], "--seeds must be"),
                       (["--general_minutes=0"], "--general_minutes must be positive")):
        with pytest.raises(SystemExit):
            outcome.parse_args(argv)
        assert says in capsys.readouterr().err
