"""The benchmarks' arithmetic (their timings are never asserted)."""

import os
import sys

import numpy as np
import pytest

# benchmarks/ is a package at the repository root that pip does not install: `python -m
# pytest` from the root finds it (the root is the working directory), a bare `pytest` would not.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks import common, step_floor  # noqa: E402
from official_bert.modeling.configs import BertConfig  # noqa: E402
from support import processes


def test_step_floor_runs_exactly_the_counted_matmul_flops():
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32)
    batch, seq, masked = 2, 8, 3
    import tensorflow as tf

    run, flops = step_floor.step_matmuls(config, batch, seq, masked, tf.float32,
                                         jit_compile=False)
    per_token = common.pretraining_flops_per_token(2, 16, 32, seq, 50, masked)
    assert flops == batch * seq * per_token
    # Every product is run: 6 dense kinds x 3 products and 6 attention products per
    # layer, 2 head denses x 3, each reduced to one finite number.
    outputs = run()
    assert len(outputs) == 2 * (6 * 3 + 6) + 2 * 3
    assert np.all(np.isfinite([o.numpy() for o in outputs]))


def test_step_elementwise_differentiates_every_piece_and_multiplies_nothing():
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32)
    for dtype in ("float32", "bfloat16"):
        run = step_floor.step_elementwise(config, batch=2, seq=8, masked=3, dtype_name=dtype,
                                          dropout=0.1, jit_compile=False)
        results = run()
        # A gradient for every input: 11 shared (embeddings, head, two LayerNorms' 2 each)
        # and 18 per layer (scores, Q/K/V outputs, attended, residual, both feed-forward
        # sides, 6 biases, two LayerNorms' 2 each); then every output (the embeddings',
        # 6 per layer, the head's) and the loss, all computed.
        assert len(results) == (11 + 2 * 18) + (1 + 2 * 6 + 1) + 1
        assert np.all(np.isfinite([r.numpy() for r in results]))
        graph = run.get_concrete_function().graph
        assert not [op.type for op in graph.get_operations()
                    if op.type in ("MatMul", "BatchMatMulV2", "_MklMatMul")]


def test_serving_speed_interleaves_the_engines_and_divides_right():
    from benchmarks import serving_speed

    calls = []

    def engine(name, seconds):
        def run(request):
            calls.append((name, request))
            return seconds
        return run

    runs = {"ours": engine("ours", 1), "ort_fp32": engine("ort_fp32", 2),
            "ov_bf16": engine("ov_bf16", 3)}
    seconds = common.time_interleaved(runs, {"b1": "one", "batch": "many"},
                                             {"b1": 2, "batch": 1}, rounds=3)
    # One untimed call per engine and request, then 3 rounds of 2 + 1 timed calls.
    assert len(calls) == 3 * 2 + 3 * 3 * 3
    assert {name: {k: len(v) for k, v in s.items()} for name, s in seconds.items()} == {
        name: {"b1": 6, "batch": 3} for name in runs}
    # The order rotates by one engine each round.
    firsts = [calls[6 + r * 9][0] for r in range(3)]
    assert firsts == ["ours", "ort_fp32", "ov_bf16"]
    assert all(request == "one" for _, request in calls[6:8])

    rows = serving_speed.summarize(
        {"ours": {"b1": [0.05, 0.04, 0.06], "batch": [2.0, 4.0, 3.0]},
         "ort_fp32": {"b1": [0.1, 0.2, 0.1], "batch": [8.0, 8.0, 8.0]}}, 32, 1)
    serving_speed.add_ratios(rows)
    ours, ort = rows
    assert ours["b1_p50_ms"] == 50.0 and ort["b1_p50_ms"] == 100.0
    assert ours["b32_seq_per_s"] == 32 / 3.0 and ort["b32_seq_per_s"] == 4.0
    assert ours["b1_vs_ort_fp32"] == 0.5 and ort["b1_vs_ort_fp32"] == 1.0
    assert abs(ours["tput_vs_ort_fp32"] - (32 / 3.0) / 4.0) < 1e-12
    assert "b1_vs_ov_fp32" not in ours  # only competitors that ran


def test_serving_elementwise_floor_computes_every_piece_and_multiplies_nothing():
    from benchmarks import serving_speed

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32)
    request = {"input_word_ids": np.array([[2, 7, 9, 3]], np.int32),
               "input_mask": np.array([[1, 1, 1, 0]], np.int32),
               "input_type_ids": np.array([[0, 0, 1, 1]], np.int32)}
    for dtype in ("float32", "bfloat16"):
        run = serving_speed._elementwise_only_runner(config, dtype)
        # Per layer Q, K, V bias adds, the softmax and GELU; the last LayerNorm's output.
        results = run(request)
        assert len(results) == 2 * 5 + 1 and np.all(np.isfinite(results))
        ops = {op.type for op in run.graph(request).get_operations()}
        assert {"Softmax", "Erfc", "Rsqrt"} <= ops  # softmax, exact GELU, LayerNorm
        assert not ops & {"MatMul", "BatchMatMulV2", "_MklMatMul", "Einsum"}
        # Without the fusable ops: the softmax and LayerNorms, no GELU, one output a layer.
        run = serving_speed._elementwise_only_runner(config, dtype, fusable=False)
        results = run(request)
        assert len(results) == 2 + 1 and np.all(np.isfinite(results))
        ops = {op.type for op in run.graph(request).get_operations()}
        assert {"Softmax", "Rsqrt"} <= ops and "Erfc" not in ops


def test_floors_add_the_two_parts_times():
    from benchmarks import serving_speed

    rows = [{"engine": "tf_matmuls_only_bf16", "threads": 2, "b1_p50_ms": 10.0,
             "b32_seq_per_s": 128.0},
            {"engine": "tf_elementwise_only_bf16", "threads": 2, "b1_p50_ms": 5.0,
             "b32_seq_per_s": 64.0},
            {"engine": "tf_matmuls_only", "threads": 2, "b1_p50_ms": 20.0,
             "b32_seq_per_s": 32.0},
            {"engine": "tf_unfusable_only_bf16", "threads": 2, "b1_p50_ms": 2.0,
             "b32_seq_per_s": 256.0}]
    serving_speed.add_floors(rows)
    # fp32 lacks its second parts: no fp32 floor.
    assert [r["engine"] for r in rows[4:]] == ["tf_unfused_floor_bf16", "tf_fused_floor_bf16"]
    unfused, fused = rows[4:]
    # B1: 10 + 5 ms; B32: 32 / (0.25 s + 0.5 s) sequences a second.
    assert unfused["b1_p50_ms"] == 15.0 and unfused["b32_seq_per_s"] == 32 / 0.75
    assert fused["b1_p50_ms"] == 12.0 and fused["b32_seq_per_s"] == 32 / 0.375


@pytest.mark.slow  # the pre-training step benchmark's smoke run (30 s); the other benchmark tests stay
def test_pretraining_step_times_our_trainer_step(tmp_path):
    """The benchmark runs the runners' own Trainer step (a tiny model, both
    tasks) and reports the FLOPs the MFU formula counts for what it ran."""
    import json

    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    for task, masked in (("pretraining", 3), ("classifier", 0)):
        out = tmp_path / f"{task}.json"
        result = processes.run(
            [sys.executable, os.path.join(repo, "benchmarks", "pretraining_step.py"),
             f"--task={task}", "--num_layers=1", "--hidden_size=16", "--num_heads=2",
             "--vocab_size=2000", "--batch_size=2", "--seq_length=8", "--masked_positions=3",
             "--steps=2", "--warmup_steps=1", "--implementations=ours", "--dropout=0",
             f"--json_output={out}"],
            cwd=repo, capture_output=True, text=True, timeout=300,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(out.read_text())
        assert list(report["runs"]) == ["ours"] and report["masked_positions"] == masked
        assert report["config"]["hidden_dropout_prob"] == 0  # --dropout reaches the model
        assert report["config"]["attention_probs_dropout_prob"] == 0
        assert report["flops_per_token"] == common.pretraining_flops_per_token(1, 16, 64, 8, 2000,
                                                                               masked)
        assert report["tokens_per_second"] == 2 * 8 / (report["ms_per_step"] / 1000)


def test_data_generation_rounds_pair_each_google_run_with_the_ours_before_it():
    import json

    # In a fresh process: the script defines absl flags (--max_seq_length, ...) at import.
    snippet = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("bench", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
print(json.dumps([bench.round_ratios(json.loads(sys.argv[2])),
                  bench.round_ratios(json.loads(sys.argv[2])[:2])]))
"""

    def row(tool, replicate, instances, seconds, cpu):
        return dict(tool=tool, replicate=replicate, instances=instances, seconds=seconds,
                    cpu_seconds=cpu)

    rows = [row("ours", 1, 1000, 1.0, 1.0), row("ours", 10, 10000, 8.0, 8.0),
            row("google-research/bert", 1, 900, 9.0, 4.5),   # round 1: (1000/1) / (900/9)
            row("ours", 1, 1000, 2.0, 1.0), row("google-research/bert", 1, 900, 9.0, 9.0)]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks",
                        "create_pretraining_data_bench.py")
    result = processes.run([sys.executable, "-c", snippet, path, json.dumps(rows)],
                           capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    rounds, none = json.loads(result.stdout.strip().splitlines()[-1])
    assert rounds == [[10.0, 5.0], [5.0, 10.0]]  # each google run against the ours before it
    assert none == []  # no google run: no ratio


def test_tokenization_bench_checks_every_tokenizer_against_the_cached_one(tmp_path):
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", ".",
                                ",", "##s", "and", "of", "to", "in", "it"]) + "\n")
    result = processes.run(
        [sys.executable, os.path.join(repo, "benchmarks", "tokenization_bench.py"),
         f"--corpus={os.path.join(repo, 'data_prep', 'sample_corpus')}",
         f"--vocab_file={vocab}", "--rounds=1", "--full_lines=5"],
        cwd=repo, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()
            if line.split() and line.split()[0] in ("cached", "full", "hf_tokenizers")}
    assert rows["cached"][-1] == "True" and rows["full"][-1] == "True"
    assert rows["full"][1] == "5"  # the reference tokenizer timed on --full_lines lines
