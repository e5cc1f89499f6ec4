"""benchmarks/adaptation_outcome.py (issue 46's measurement): its plan and its table.

The measurement's figures are never asserted here: it is a benchmark, run by hand.
"""

import json
import os
import sys

import pytest

# benchmarks/ is a package at the repository root that pip does not install.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks import adaptation_outcome as outcome  # noqa: E402
from benchmarks import step_runner  # noqa: E402


def test_each_task_adapts_once_per_library_and_fine_tunes_each_row_and_seed(capsys):
    args = outcome.parse_args(["--tasks=WNUT-17,MRPC", "--seeds=42,43"])
    steps = {step.name: step for step in outcome.plan(args)}
    assert "transformers row is skipped" in capsys.readouterr().out
    assert list(steps) == [
        "WNUT-17/adapt/ours", "WNUT-17/base/seed42", "WNUT-17/base/seed43",
        "WNUT-17/ours/seed42", "WNUT-17/ours/seed43",
        "MRPC/adapt/ours", "MRPC/base/seed42", "MRPC/base/seed42/test", "MRPC/base/seed43",
        "MRPC/base/seed43/test", "MRPC/ours/seed42", "MRPC/ours/seed42/test",
        "MRPC/ours/seed43", "MRPC/ours/seed43/test"]
    pending = {name: step_runner.Pending(name) for name in steps}
    adapt = steps["MRPC/adapt/ours"].make(pending)
    assert {"--input_format=table", "--text_column=#1 String,#2 String",
            "--max_train_minutes=4", "--max_seq_length=64", "--learning_rate=1e-4"} <= set(adapt)
    assert not any(a.startswith(("--num_train_steps", "--num_warmup_steps")) for a in adapt)
    conll = steps["WNUT-17/adapt/ours"].make(pending)
    assert "--input_format=conll" in conll and not any(a.startswith("--text_column")
                                                        for a in conll)
    base, ours = steps["MRPC/base/seed43"].make(pending), steps["MRPC/ours/seed43"].make(pending)
    assert [a for a in base if not a.startswith(("--init_checkpoint", "--output_dir"))] == [
        a for a in ours if not a.startswith(("--init_checkpoint", "--output_dir"))]
    assert "--init_checkpoint=<MRPC/adapt/ours>" in ours and "--max_train_examples=500" in ours
    ner = steps["WNUT-17/ours/seed42"].make(pending)
    assert "run_ner.py" in ner[1] and "--learning_rate=5e-05" in ner
    assert not any(a.startswith("--max_train_examples") for a in ner)  # (all its sentences)
    # The labelled test set: the fine-tuned run evaluated again on it, in its directory.
    test = steps["MRPC/ours/seed43/test"].make(pending)
    assert {"--do_eval", "--output_dir=<MRPC/ours/seed43>"} <= set(test)
    assert any(a.startswith("--eval_file=") and a.endswith("msr_paraphrase_test.txt")
               for a in test)


def test_sts_b_test_set_is_written_in_the_columns_run_classifier_reads(tmp_path):
    (tmp_path / "STS-B" / "original").mkdir(parents=True)
    (tmp_path / "STS-B" / "original" / "sts-test.tsv").write_text(
        "main-captions\tMSRvid\t2012test\t0024\t2.500\tA girl styles.\tA girl brushes.\n"
        "main-news\theadlines\t2015\t0001\t4.000\tOne.\tTwo.\tsource\n")
    args = outcome.parse_args(["--tasks=STS-B", f"--glue_dir={tmp_path}"])
    outcome.write_sts_test(args, tmp_path)
    assert (tmp_path / "test.tsv").read_text() == (
        "sentence1\tsentence2\tscore\nA girl styles.\tA girl brushes.\t2.500\n"
        "One.\tTwo.\t4.000\n")


def test_transformers_adapts_the_same_text_at_the_same_budget():
    args = outcome.parse_args(["--tasks=SST-2", "--seeds=42",
                               f"--transformers_python={sys.executable}"])
    steps = {step.name: step for step in outcome.plan(args)}
    assert {"SST-2/text", "SST-2/adapt/transformers", "SST-2/transformers/seed42"} <= set(steps)
    hf = steps["SST-2/adapt/transformers"].make({"SST-2/text": {"output_dir": "/t"}})
    assert {"--train_file=/t/train.txt", "--budget_minutes=4", "--seq_length=64",
            "--batch_size=32", "--learning_rate=1e-4", "--warmup_fraction=0.1"} <= set(hf)
    assert any(a.startswith("--init_model=") for a in hf)


def test_the_table_gives_each_rows_spread_and_its_gain_over_the_base():
    args = outcome.parse_args(["--tasks=WNUT-17,STS-B", "--seeds=42,43,44"])
    results = {}
    for task, rows in (("WNUT-17", {"base": [40, 44, 45], "ours": [46, 48, 50]}),
                       ("STS-B", {"base": [80, 81, 82], "ours": [79, 80, 83]})):
        results[f"{task}/adapt/ours"] = {"rates": {"steps": 300},
                                         "dev": {"masked_lm_accuracy": 0.4}}
        for row, scores in rows.items():
            for seed, value in zip(args.seeds, scores):
                results[f"{task}/{row}/seed{seed}"] = {"score": float(value)}
                if task == "STS-B":
                    results[f"{task}/{row}/seed{seed}/test"] = {"score": float(value) - 5}
    report = outcome.build_report(args, results)
    assert report["tasks"]["WNUT-17"]["rows"]["ours"]["gain"] == 4.0
    assert report["tasks"]["STS-B"]["rows"]["ours"]["gain"] == -1.0
    text = outcome.format_table(report)
    assert "| WNUT-17 | 44.0 (40.0–45.0) | 48.0 (46.0–50.0) | 4.0 | — | 300 / — |" in text
    assert "| STS-B | 81.0 (80.0–82.0) | 80.0 (79.0–83.0) | -1.0 | — | 300 / — |" in text
    assert "positive on 1 of 2 tasks (mean +1.5); beyond the seeds' spread" in text
    assert text.endswith("on 1 (WNUT-17).")  # its adapted seeds (46-50) all above 40-45
    assert "| STS-B | 76.0 (75.0–77.0) | 75.0 (74.0–78.0) | -1.0 | — |" in text  # its test set
    json.dumps(report)


def test_bad_flags_are_one_line_each(capsys):
    for argv, says in ((["--tasks=CoLA"], "--tasks: unknown ['CoLA']"),
                       (["--seeds=a"], "--seeds must be"),
                       (["--adapt_minutes=0"], "--adapt_minutes must be positive"),
                       (["--transformers_python=/nonexistent"], "python -m venv")):
        with pytest.raises(SystemExit):
            outcome.parse_args(argv)
        assert says in capsys.readouterr().err
