"""tools/parity/squad_seeds.py: its statistics against values worked out by
hand, and its table, resume and --extra paths on fake result files (no
training runs)."""

import math

import pytest

from support import load_script

pytest.importorskip("scipy", reason="squad_seeds.py's tests use scipy (pip install scipy)")
squad_seeds = load_script("tools/parity/squad_seeds.py")

# The SQuAD v1.1 acceptance recipe, seeds 42-45 (docs/fine_tune.md, "SQuAD: seeds").
RUN_SQUAD_EM = [15.44, 18.57, 18.00, 17.72]
TRANSFORMERS_EM = [25.70, 22.25, 18.53, 25.82]


def test_welch_t_test_by_hand():
    # Means 2.5 and 4.5, both variances 5/3: t = -2 / sqrt(2 * 5/12) = -sqrt(4.8), and
    # Welch-Satterthwaite gives df = 6. For even df the t distribution's tail is closed:
    # with x = t²/(t² + 6) = 4/9, P(|T| > |t|) = 1 - sqrt(x) (1 + (1-x)/2 + 3(1-x)²/8) = 23/324.
    tests = squad_seeds.compare([1, 2, 3, 4], [3, 4, 5, 6])
    assert tests["t"] == pytest.approx(-math.sqrt(4.8), rel=1e-12)
    assert tests["df"] == pytest.approx(6.0, rel=1e-12)
    assert tests["welch_p"] == pytest.approx(23 / 324, rel=1e-9)


def test_welch_t_test_unequal_sizes():
    # Means 2 and 6, variances 1 and 10: t = -4 / sqrt(1/3 + 2) = -2.61861...,
    # df = (7/3)² / ((1/3)²/2 + 2²/4) = 98/19; p as R's t.test(..., var.equal=FALSE).
    tests = squad_seeds.compare([1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0, 10.0])
    assert tests["t"] == pytest.approx(-4 / math.sqrt(7 / 3), rel=1e-12)
    assert tests["df"] == pytest.approx(98 / 19, rel=1e-12)
    assert tests["welch_p"] == pytest.approx(0.045776, abs=1e-6)


def test_mann_whitney_exact_by_hand():
    # No overlap: U = 0, the most extreme of the C(8, 4) = 70 equally likely rankings,
    # on either side: p = 2/70.
    tests = squad_seeds.compare([1, 2, 3, 4], [5, 6, 7, 8])
    assert tests["u"] == 0
    assert tests["mann_whitney_p"] == pytest.approx(2 / 70, rel=1e-12)
    # The documented seeds: one pair out of order (18.57 > 18.53), U = 1; U <= 1 in
    # 2 of 70 rankings per side: p = 4/70.
    tests = squad_seeds.compare(RUN_SQUAD_EM, TRANSFORMERS_EM)
    assert tests["u"] == 1
    assert tests["mann_whitney_p"] == pytest.approx(4 / 70, rel=1e-12)
    assert tests["t"] == pytest.approx(-3.036647, abs=1e-6)
    assert tests["welch_p"] == pytest.approx(0.039455, abs=1e-6)


def test_paired_t_test_by_hand():
    # Differences -1, -2, -1, -2, -1 over the 5 shared seeds (seed 9 has one side only):
    # mean -1.4, variance 0.3, t = -1.4 / sqrt(0.3 / 5), df 4. For df 4 the tail is closed:
    # with x = t²/(t² + 4), P(|T| > |t|) = 1 - sqrt(x) (1 + (1-x)/2).
    tests = squad_seeds.compare_paired({1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 9: 0},
                                       {1: 2, 2: 4, 3: 4, 4: 6, 5: 6})
    t = -1.4 / math.sqrt(0.3 / 5)
    x = t * t / (t * t + 4)
    assert tests["n"] == 5
    assert tests["mean_difference"] == pytest.approx(-1.4, rel=1e-12)
    assert tests["t"] == pytest.approx(t, rel=1e-12)
    assert tests["paired_p"] == pytest.approx(1 - math.sqrt(x) * (1 + (1 - x) / 2), rel=1e-9)
    assert math.isnan(squad_seeds.compare_paired({1: 1.0}, {1: 2.0, 2: 3.0})["paired_p"])


def test_too_few_values_give_no_test():
    tests = squad_seeds.compare([20.0], [25.0, 26.0])
    assert all(math.isnan(v) for v in tests.values())


def _fake_results(output_dir, values):
    for (side, seed), (em, f1) in values.items():
        squad_seeds.write_result(str(output_dir), dict(side=side, seed=seed, exact_match=em,
                                                      f1=f1))


def test_collect_only_prints_the_table(tmp_path, capsys):
    _fake_results(tmp_path, {("run_squad", 42): (15.44, 22.55), ("run_squad", 43): (18.57, 28.77),
                             ("transformers", 42): (25.70, 36.47)})
    (tmp_path / "eval_results.json").write_text('{"exact_match": 1.0, "f1": 2.0}')  # not a result
    squad_seeds.main(["--output_dir", str(tmp_path), "--collect_only",
                      "--extra=transformers:43:22.25:32.60"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| seed | run_squad EM | run_squad F1 | transformers EM | transformers F1 |"
    assert lines[2] == "| 42 | 15.44 | 22.55 | 25.70 | 36.47 |"
    assert lines[3] == "| 43 | 18.57 | 28.77 | 22.25 | 32.60 |"
    assert lines[4] == "| mean | 17.00 | 25.66 | 23.98 | 34.53 |"
    assert lines[5] == "| std | 2.21 | 4.40 | 2.44 | 2.74 |"
    assert lines[7] == ("EM, run_squad (n=2) vs transformers (n=2): Welch's t = -2.99 (df 2.0), "
                        "p = 0.097; Mann-Whitney U = 0.0, p = 0.333 (two-sided)")
    # Seeds 42 and 43 on both sides: differences -10.26 and -3.68.
    assert lines[8] == ("EM paired by seed (2 seeds on both sides): run_squad − transformers = "
                        "-6.97 on average, paired t = -2.12 (df 1), p = 0.281")
    # The extra is stored beside the runs, and a later collect finds it.
    assert (tmp_path / "transformers_43.json").exists()
    squad_seeds.main(["--output_dir", str(tmp_path), "--collect_only", "--sides=transformers"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| seed | transformers EM | transformers F1 |"
    assert lines[3] == "| 43 | 22.25 | 32.60 |"
    assert len(lines) == 6  # no test with one side


def test_missing_values_are_dashes(tmp_path, capsys):
    _fake_results(tmp_path, {("run_squad", 42): (15.44, 22.55)})
    squad_seeds.main(["--output_dir", str(tmp_path), "--collect_only"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| 42 | 15.44 | 22.55 | — | — |"
    assert lines[4] == "| std | — | — | — | — |"
    assert "p = —" in lines[6]


def test_runs_only_the_missing_results(tmp_path, monkeypatch, capsys):
    _fake_results(tmp_path, {("run_squad", 42): (15.44, 22.55),
                             ("transformers", 42): (25.70, 36.47)})
    ran = []

    def fake_run(side, seed, args):
        ran.append((side, seed))
        return dict(side=side, seed=seed, exact_match=20.0, f1=30.0)

    monkeypatch.setattr(squad_seeds, "run_one", fake_run)
    argv = ["--output_dir", str(tmp_path), "--model_dir", "/models/minilm", "--seeds=42,43"]
    squad_seeds.main(argv)
    assert ran == [("run_squad", 43), ("transformers", 43)]
    stored = squad_seeds.read_result(str(tmp_path / "transformers_43.json"))
    assert stored["recipe"]["max_seq_length"] == 384
    squad_seeds.main(argv)  # everything there: nothing runs
    assert len(ran) == 2
    # A result of another recipe is not taken for this one's.
    with pytest.raises(SystemExit, match="another recipe"):
        squad_seeds.main(argv + ["--max_seq_length=128"])


def test_commands(tmp_path):
    args = squad_seeds.parse_args(["--output_dir", str(tmp_path), "--model_dir", "/m",
                                   "--threads=2", "--max_train_examples=200"])
    cmd, scores = squad_seeds.command("run_squad", 44, args)
    assert cmd[:3] == ["taskset", "-c", "0-1"]
    assert cmd[4].endswith("run_squad.py") and "--seed=44" in cmd and "--jit_compile" in cmd
    assert "--init_checkpoint=/m" in cmd and "--max_train_examples=200" in cmd
    assert "--doc_stride=128" in cmd and "--max_seq_length=384" in cmd
    assert scores == str(tmp_path / "run_squad_44" / "eval_results.json")
    cmd, scores = squad_seeds.command("transformers", 44, args)
    assert cmd[3] == "/tmp/hf/bin/python" and cmd[4].endswith("tools/parity/hf_squad_finetune.py")
    assert "--model_dir=/m" in cmd and scores is None


def test_extra_and_output_parsing(tmp_path):
    assert squad_seeds.parse_extra("run_squad:42:15.44:22.55") == dict(
        side="run_squad", seed=42, exact_match=15.44, f1=22.55)
    with pytest.raises(SystemExit, match="SIDE:SEED:EM:F1"):
        squad_seeds.parse_extra("run_squad:42:15.44")
    with pytest.raises(SystemExit, match="side must be"):
        squad_seeds.parse_extra("bert:42:15.44:22.55")
    output = 'step 280/280: loss 3.1\n{"exact_match": 25.7, "f1": 36.47}\nbye\n'
    assert squad_seeds.last_json_line(output) == {"exact_match": 25.7, "f1": 36.47}
    assert squad_seeds.last_json_line("no scores\n") is None
    _fake_results(tmp_path, {("run_squad", 42): (15.44, 22.55)})
    with pytest.raises(SystemExit, match="remove it"):
        squad_seeds.main(["--output_dir", str(tmp_path), "--collect_only",
                          "--extra=run_squad:42:16:23"])


def test_mix_draws_keeps_one_epoch_of_the_order_and_the_other_head(tmp_path):
    import numpy as np

    mix_draws = load_script("tools/parity/mix_draws.py")

    rng = np.random.default_rng(0)
    # run_squad's stream: 3 steps of batch 4 over 10 windows (its first 10 a permutation).
    stream = np.concatenate([rng.permutation(10), rng.permutation(10)[:2]])
    np.savez(tmp_path / "ours.npz", order=stream, kernel=np.zeros((8, 2)), bias=np.zeros(2))
    head = rng.normal(size=(8, 2))
    np.savez(tmp_path / "theirs.npz", order=rng.permutation(10), kernel=head, bias=np.ones(2))
    mixed = mix_draws.mix(str(tmp_path / "ours.npz"), str(tmp_path / "theirs.npz"))
    assert mixed["order"].tolist() == stream[:10].tolist()
    assert (mixed["kernel"] == head).all() and mixed["bias"].tolist() == [1.0, 1.0]
    # Windows of other settings (11 here) are refused.
    np.savez(tmp_path / "other.npz", order=rng.permutation(11), kernel=head, bias=np.ones(2))
    with pytest.raises(SystemExit, match="not a permutation"):
        mix_draws.mix(str(tmp_path / "ours.npz"), str(tmp_path / "other.npz"))
