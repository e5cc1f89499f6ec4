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
    # Row by row (the teacher first, general distillation late), then the exports and speed.
    assert names[:3] == ["MRPC/teacher/seed42", "MRPC/teacher/seed43", "WNUT-17/teacher/seed42"]
    assert names.index("general/distill") == names.index("MRPC/general/seed42") - 1
    assert names.index("general/corpus") > names.index("WNUT-17/narrow_distilled/seed42")
    assert names[-len(outcome.ROWS) - 1:] == [f"speed/{row}" for row in outcome.ROWS] + ["speed"]
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
    assert {"--student_layers=0,2,4", "--max_train_minutes=15"} <= set(distill)
    export = steps["speed/narrow"].make(results | _pending("MRPC/narrow/seed42"))
    assert export[1].endswith("run_classifier.py") and {
        "--task_name=mrpc", "--output_dir=<MRPC/narrow/seed42>", "--export_dir={out}/export",
        "--max_seq_length=128"} <= set(export) and "--do_train" not in export


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
    assert names == ["SST-2/teacher/seed42", "SST-2/distilled/seed42", "SST-2/distilled/seed43",
                     "speed/teacher", "speed/distilled", "speed"]


def test_the_table_gives_medians_spreads_the_average_and_the_speedup():
    args = outcome.parse_args(["--tasks=MRPC,WNUT-17", "--rows=teacher,student",
                               "--seeds=42,43,44"])
    results = {}
    for task, scores in (("MRPC", {"teacher": [80, 82, 84], "student": [75, 76, 80]}),
                         ("WNUT-17", {"teacher": [40, 44, 45], "student": [30, 31, 35]})):
        for row in ("teacher", "student"):
            for seed, value in zip(args.seeds, scores[row]):
                results[f"{task}/{row}/seed{seed}"] = {"score": float(value)}
    results["speed"] = {
        "output_dir": "/work/speed-0123456789",  # every step's result names its directory
        "teacher": {"saved_model": {"b1_p50_ms": 10.0, "batch_per_s": 100.0},
                    "tflite_int8": {"b1_p50_ms": 6.0, "batch_per_s": 150.0}},
        "student": {"saved_model": {"b1_p50_ms": 4.0, "batch_per_s": 190.0},
                    "tflite_int8": {"b1_p50_ms": 3.0, "batch_per_s": 300.0}}}
    report = outcome.build_report(args, results)
    assert report["tasks"]["MRPC"]["student"]["median"] == 76.0
    assert report["average"] == {"teacher": 63.0, "student": 53.5}
    assert report["of_teacher"]["student"] == pytest.approx(53.5 / 63.0)
    assert report["speedup"]["student"]["saved_model"] == {"b1": 2.5, "batch": 1.9}
    text = outcome.format_table(report)
    assert ("| row | MRPC | WNUT-17 | average | of teacher | SavedModel B1 p50 ms | SavedModel "
            "B32 seq/s | int8 TFLite B1 p50 ms | int8 TFLite B32 seq/s |\n"
            "|---|---|---|---|---|---|---|---|---|\n") in text
    assert ("| teacher | 82.0 (80.0–84.0) | 44.0 (40.0–45.0) | 63.0 | 100.0% | 10.0 (1.0x) | "
            "100 (1.0x) | 6.0 (1.0x) | 150 (1.0x) |") in text
    assert ("| student | 76.0 (75.0–80.0) | 31.0 (30.0–35.0) | 53.5 | 84.9% | 4.0 (2.5x) | "
            "190 (1.9x) | 3.0 (2.0x) | 300 (2.0x) |") in text
    json.dumps(report)


def test_speed_comes_from_bert_compare(tmp_path):
    """The speed step runs `bert compare` on every row's export and its int8 file
    (in the rows' order) and reads its JSON back per row and engine."""
    args = outcome.parse_args(["--rows=teacher,student", "--tasks=SST-2",
                               f"--work_dir={tmp_path}"])
    step = outcome.speed_step(args)
    results = {f"speed/{row}": {"output_dir": f"/x/{row}"} for row in ("teacher", "student")}
    argv = step.make(results)
    assert argv[argv.index("-m") + 2] == "compare"
    assert ("--models=/x/teacher/export,/x/teacher/export/1/model.tflite,/x/student/export,"
            "/x/student/export/1/model.tflite") in argv
    rows = [{"b1_p50_ms": ms, "b32_rows_per_s": rate} for ms, rate in
            ((10.0, 100.0), (6.0, 150.0), (4.0, 190.0), (3.0, 300.0))]
    (tmp_path / "speed.json").write_text(json.dumps({"models": rows}))
    assert step.parse(tmp_path, "") == {
        "teacher": {"saved_model": {"b1_p50_ms": 10.0, "batch_per_s": 100.0},
                    "tflite_int8": {"b1_p50_ms": 6.0, "batch_per_s": 150.0}},
        "student": {"saved_model": {"b1_p50_ms": 4.0, "batch_per_s": 190.0},
                    "tflite_int8": {"b1_p50_ms": 3.0, "batch_per_s": 300.0}}}


def test_bad_flags_are_one_line_each(capsys):
    for argv, says in ((["--rows=teacher,tiny"], "--rows: unknown ['tiny']"),
                       (["--tasks=QNLI"], "--tasks: unknown ['QNLI']"),
                       (["--seeds=42,x"], "--seeds must be"),
                       (["--general_minutes=0"], "--general_minutes must be positive")):
        with pytest.raises(SystemExit):
            outcome.parse_args(argv)
        assert says in capsys.readouterr().err


def test_extra_conll_text_is_whole_sentences_after_the_training_ones():
    # WNUT-17 ends most sentences with a line holding a tab: a split on empty
    # lines alone found 1,001 "sentences" in its 3,394 and left the extra text empty.
    text = "a\tO\nb\tB-x\n\t\nc\tO\n\nd\tO\n \ne\tO\n"
    assert outcome.conll_sentences(text) == ["a\tO\nb\tB-x", "c\tO", "d\tO", "e\tO"]
