"""benchmarks/pretraining_outcome.py (issue 34's measurement): its arithmetic, its
split, its tables, its resumable steps, and (slow) a tiny run of this project's rows.

The measurement's figures are never asserted here: it is a benchmark, run by hand.
"""

import json
import os
import sys

import pytest

# benchmarks/ is a package at the repository root that pip does not install.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks import hf_mlm_pretraining, outcome_metrics, step_runner  # noqa: E402
from benchmarks import pretraining_outcome as outcome  # noqa: E402
from support import REPO_ROOT, SHARED  # noqa: E402


def test_glue_scores_are_the_glue_leaderboards_per_task_scores():
    results = {"eval_accuracy": 0.8, "eval_f1": 0.9, "eval_matthews_corr": 0.3,
               "eval_pearson": 0.8, "eval_spearman": 0.7}
    scores = {task: outcome_metrics.glue_score(task, results)
              for task in ("CoLA", "STS-B", "MRPC", "SST-2", "RTE")}
    assert scores == pytest.approx({"CoLA": 30.0, "STS-B": 75.0, "MRPC": 85.0, "SST-2": 80.0,
                                    "RTE": 80.0})


def test_seeds_summarize_as_median_and_spread_and_the_average_takes_medians():
    cola = outcome_metrics.seed_summary([20.0, 35.0, 25.0, 10.0, 30.0])
    assert (cola["median"], cola["min"], cola["max"]) == (25.0, 10.0, 35.0)
    rte = outcome_metrics.seed_summary([55.0, 60.0])
    assert rte["median"] == 57.5
    assert outcome_metrics.glue_average({"CoLA": cola, "RTE": rte}) == pytest.approx(41.25)
    assert outcome_metrics.glue_average({"CoLA": cola, "RTE": None}) is None


def corpus(sizes):
    """Documents of the given character counts, each distinct."""
    return "\n\n".join(f"document {i}. " + "w" * (size - len(f"document {i}. "))
                       for i, size in enumerate(sizes))


def test_held_out_documents_are_about_the_fraction_chosen_by_content_alone():
    sizes = [200 + 37 * (i % 11) for i in range(60)] + [5000]
    text = corpus(sizes)
    train, held = outcome_metrics.split_documents(text, 0.05)
    total = sum(sizes)
    assert 0.05 * total <= sum(map(len, held)) <= 1.25 * 0.05 * total
    assert sorted(train + held) == sorted(text.split("\n\n"))
    assert not set(train) & set(held)
    # Corpus order is kept on both sides, and the choice follows the documents' text,
    # not their position: reversing the corpus holds out the same documents.
    documents = text.split("\n\n")
    assert held == [d for d in documents if d in held]
    _, held_reversed = outcome_metrics.split_documents("\n\n".join(documents[::-1]), 0.05)
    assert sorted(held_reversed) == sorted(held)


def test_a_corpus_of_big_documents_holds_out_the_smallest_and_one_document_is_refused():
    train, held = outcome_metrics.split_documents(corpus([3000, 1000, 2000]), 0.05)
    assert [len(d) for d in held] == [1000] and len(train) == 2
    with pytest.raises(ValueError, match="1 document"):
        outcome_metrics.split_documents(corpus([500]), 0.05)


LOG = """\
I1126 trainer.py:498] step 10/400: loss = 8.9, masked_lm_accuracy = 0.001, learning_rate = 0.0004, examples_per_second = 36.4, tokens_per_second = 4659
I1126 trainer.py:498] step 20/400: loss = 8.8, examples_per_second = 171.8, tokens_per_second = 2.199e+04
I1126 trainer.py:498] step 30/400: loss = 8.7, examples_per_second = 169.2, tokens_per_second = 2.166e+04
I1126 trainer.py:498] step 37/400: loss = 8.6, examples_per_second = 205, tokens_per_second = 2.625e+04; trained 1.00 of 1 min, 0.00 min left
"""


def test_rates_come_from_the_progress_lines_after_the_first_window():
    rates = outcome_metrics.log_rates(LOG)
    assert rates == {"steps": 37, "examples_per_second": 171.8, "tokens_per_second": 21990.0}
    assert outcome_metrics.log_rates("no progress") == {
        "steps": 0, "examples_per_second": None, "tokens_per_second": None}
    args = outcome.parse_args(["--efficient_batch_size=32", "--seq_length=128"])
    recipe = outcome.recipes(args)["efficient"]
    real = outcome.real_tokens(args, recipe, rates, padding=0.25)
    assert real == {"tokens_per_second": pytest.approx(16492.5),
                    "tokens_seen": 37 * 32 * 96, "steps": 37}


def test_eval_results_are_read_as_numbers(tmp_path):
    (tmp_path / "eval_results.txt").write_text(
        "eval_accuracy = 0.75\neval_f1 = 0.5\nglobal_step = 77\nnote = text\n")
    assert outcome_metrics.read_key_values(tmp_path / "eval_results.txt") == {
        "eval_accuracy": 0.75, "eval_f1": 0.5, "global_step": 77.0}


def test_the_tables_show_every_row_with_its_spread():
    args = outcome.parse_args(["--tasks=RTE,CoLA", "--seeds=42,43,44", "--budget_minutes=60"])
    report = {
        "settings": vars(args), "unigram_baseline": 0.0423,
        "pretrain": {"none": {"recipe": "random initialization (no pre-training)"},
                     "paper": {"recipe": "MLM 15% + NSP", "tokens_per_second": 5123.4,
                               "tokens_seen": 18000000, "heldout_accuracy": 0.3071}},
        "glue": {"paper": {"tasks": {
            "RTE": outcome_metrics.seed_summary([55.0, 57.0, 60.0]),
            "CoLA": outcome_metrics.seed_summary([10.0, 12.5, 20.0])}, "average": 35.25}},
        "tapt": {"all-MiniLM-L6-v2": outcome_metrics.seed_summary([45.0, 46.0, 47.0])},
        "tapt_masked_lm": {"masked_lm_accuracy": 0.41, "masked_lm_unigram_baseline": 0.05,
                           "steps": 1200},
    }
    text = outcome_metrics.format_tables(report)
    assert "60 min of training per row" in text and "unigram baseline 0.0423" in text
    assert "| paper | MLM 15% + NSP | 5,123 | 18,000,000 | 0.3071 |" in text
    assert "| none | random initialization (no pre-training) | — | — | — |" in text
    assert "| row | RTE | CoLA | average |" in text
    assert "| paper | 57.0 (55.0–60.0) | 12.5 (10.0–20.0) | 35.2 |" in text
    assert "| all-MiniLM-L6-v2 | 46.0 (45.0–47.0) |" in text
    assert "accuracy 0.4100 (unigram baseline 0.0500) after 1,200 steps" in text
    json.dumps(report)  # the JSON written is this report


def test_bad_flags_are_one_line_each(capsys):
    for argv, says in ((["--rows=paper,bert"], "--rows: unknown ['bert']"),
                       (["--glue_epochs=6"], "at most 5"),
                       (["--seeds=42,x"], "--seeds must be"),
                       (["--efficient_masking_rate=1.5"], "--efficient_masking_rate"),
                       (["--transformers_python=/nonexistent/python"], "python -m venv")):
        with pytest.raises(SystemExit):
            outcome.parse_args(argv)
        assert says in capsys.readouterr().err


def test_without_transformers_python_that_row_is_left_out_and_said_so(capsys):
    args = outcome.parse_args(["--sections=pretrain", "--rows=none,efficient,transformers"])
    names = [step.name for step in outcome.plan(args)]
    assert "pretrain/efficient" in names and "heldout/efficient" in names
    assert not any("transformers" in name for name in names)
    assert "transformers row is skipped" in capsys.readouterr().out
    report = outcome.pretrain_report(args, {})
    assert report["transformers"] == {"recipe": "skipped: no --transformers_python"}


def test_every_glue_task_seed_and_row_is_one_step_with_one_setting():
    args = outcome.parse_args(["--sections=glue", "--rows=none,paper", "--tasks=RTE,SST-2",
                               "--seeds=42,43", "--sst2_train_rows=500"])
    steps = [s for s in outcome.plan(args) if s.name.startswith("glue/")]
    assert [s.name for s in steps] == [f"glue/{row}/{task}/seed{seed}" for row in ("none", "paper")
                                       for task in ("RTE", "SST-2") for seed in (42, 43)]
    results = {name: step_runner.Pending(name) for name in ("config", "vocab", "pretrain/paper")}
    none_rte, paper_sst2 = steps[0].make(results), steps[-1].make(results)
    assert "--bert_config_file=<config>/bert_config.json" in none_rte
    assert not any(a.startswith("--init_checkpoint") for a in none_rte)
    assert "--init_checkpoint=<pretrain/paper>" in paper_sst2
    assert "--max_train_examples=500" in paper_sst2 and "--seed=43" in paper_sst2
    for argv in (none_rte, paper_sst2):
        assert {"--num_train_epochs=3", "--learning_rate=5e-05",
                "--train_batch_size=32"} <= set(argv)


def test_finished_steps_are_reused_and_a_changed_command_runs_anew(tmp_path, capsys):
    counter = tmp_path / "runs.txt"
    script = ("import pathlib, sys; out = pathlib.Path(sys.argv[1]); "
              f"open({str(counter)!r}, 'a').write('x'); "
              "(out / 'value.txt').write_text(sys.argv[2])")

    def steps(value):
        return [step_runner.Step("make", "make", 1, lambda r: [
                    sys.executable, "-c", script, "{out}", value],
                    lambda out, log: {"value": (out / "value.txt").read_text()}),
                step_runner.Step("double", "double", 1, lambda r: step_runner.InProcess(
                    f"double {r['make']['value']}",
                    lambda out: (out / "v.txt").write_text(r["make"]["value"] * 2)),
                    lambda out, log: {"value": (out / "v.txt").read_text()})]

    first = step_runner.Runner(str(tmp_path / "work"), False, steps("ab")).run_all()
    again = step_runner.Runner(str(tmp_path / "work"), False, steps("ab")).run_all()
    assert first == again and again["double"]["value"] == "abab"
    assert counter.read_text() == "x"  # the command ran once
    assert "reused" in capsys.readouterr().out
    changed = step_runner.Runner(str(tmp_path / "work"), False, steps("cd")).run_all()
    assert changed["double"]["value"] == "cdcd" and counter.read_text() == "xx"
    assert changed["make"]["output_dir"] != first["make"]["output_dir"]
    step_runner.Runner(str(tmp_path / "dry"), True, steps("ef")).run_all()
    assert "(in this process) double <make:value>" in capsys.readouterr().out
    assert not (tmp_path / "dry").exists() and counter.read_text() == "xx"


def test_a_failed_step_ends_the_run_with_its_command_and_log(tmp_path):
    step = step_runner.Step("fail", "fail", 1, lambda r: [
        sys.executable, "-c", "import sys; print('the reason'); sys.exit(3)"])
    with pytest.raises(SystemExit) as failure:
        step_runner.Runner(str(tmp_path), False, [step]).run_all()
    assert "exit 3" in str(failure.value) and "the reason" in str(failure.value)
    assert not list(tmp_path.glob("*.done.json"))


def test_the_transformers_row_times_windows_after_the_first_and_keeps_bf16_only_if_it_holds():
    clock = hf_mlm_pretraining.BudgetClock(seconds=100.0, window=2)
    clock.start, clock.ends = 0.0, [5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 13.0]
    # windows of 2 steps after the first: 6→8 (2 s), 8→12 (4 s); 1,000 tokens a step
    assert clock.tokens_per_second(1000) == pytest.approx((1000.0 + 500.0) / 2)
    choose = hf_mlm_pretraining.choose_dtype
    fast_same = {"float32": {"seconds_per_step": 2.0, "loss": 8.0},
                 "bfloat16": {"seconds_per_step": 1.0, "loss": 8.2}}
    assert choose("auto", fast_same) == "bfloat16"
    worse = {**fast_same, "bfloat16": {"seconds_per_step": 1.0, "loss": 9.0}}
    assert choose("auto", worse) == "float32"
    assert choose("float32", fast_same) == "float32"


@pytest.mark.slow
def test_this_projects_rows_end_to_end_at_a_tiny_scale(tmp_path):
    """Every step of the `none`, `paper` and `efficient` rows through the real
    commands, on 8 inaugural addresses, a 1-layer model, 6 s of pre-training and
    RTE cut to 64 training rows; then the same command again reuses every step.
    About 3 minutes on 2 quiet cores, 5 on a loaded machine (each step starts a
    TensorFlow process)."""
    corpus_dir, glue = tmp_path / "corpus", tmp_path / "glue" / "RTE"
    corpus_dir.mkdir()
    glue.mkdir(parents=True)
    for path in sorted((REPO_ROOT / "data_prep" / "sample_corpus").glob("*.txt"))[:8]:
        (corpus_dir / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    rte = SHARED / "data" / "glue" / "RTE"
    if not rte.exists():
        pytest.skip(f"{rte} is absent (../shared is not checked out here)")
    for name, rows in (("train.tsv", 65), ("dev.tsv", 33)):
        lines = (rte / name).read_text(encoding="utf-8").splitlines()[:rows]
        (glue / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = [f"--corpus_dir={corpus_dir}", f"--glue_dir={tmp_path / 'glue'}",
            "--sections=pretrain,glue", "--rows=none,paper,efficient", "--budget_minutes=0.1",
            "--num_layers=1", "--hidden_size=32", "--num_heads=2", "--vocab_size=600",
            "--heldout_fraction=0.2", "--paper_dupe_factor=2", "--tasks=RTE", "--seeds=42",
            "--glue_epochs=1", "--log_steps=5",
            f"--work_dir={tmp_path / 'work'}", f"--json_output={tmp_path / 'out.json'}"]
    outcome.main(argv)
    report = json.loads((tmp_path / "out.json").read_text())
    assert 0 < report["unigram_baseline"] < 0.2
    for row in ("paper", "efficient"):
        result = report["pretrain"][row]
        assert result["steps"] > 0 and result["tokens_seen"] > 0
        assert result["tokens_per_second"] > 0 and 0 <= result["heldout_accuracy"] <= 1
    for row in ("none", "paper", "efficient"):
        rte_score = report["glue"][row]["tasks"]["RTE"]
        assert 0 <= rte_score["median"] <= 100 and rte_score["values"] == [rte_score["median"]]
    outcome.main(argv)  # everything reused: the same report
    assert json.loads((tmp_path / "out.json").read_text())["glue"] == report["glue"]


def test_figures_print_with_their_digits_and_no_negative_zero():
    assert [outcome_metrics.fmt(v) for v in (-0.03, -0.3, 0.0, 1234.5, None, 3)] == [
        "0.0", "-0.3", "0.0", "1,234.5", "—", "3"]
