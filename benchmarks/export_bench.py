r"""Serving formats of one export, side by side: load time, first request with and
without warm-up, B1 and B32 latency, file size, and the accuracy cost of the
quantized variants.

Formats (all of the ids signature, so every row answers the same request):

    savedmodel          the TF Serving export itself (`tf.saved_model.load`, `serve_ids`)
    savedmodel_bf16     the same model exported with `--serving_dtype=bfloat16` (weights
                        stored and matmuls run in bfloat16, `serving.base.with_weights_in`;
                        `--classifier_bf16_export` / `--ner_bf16_export`; skipped without)
    tflite              `serving/edge.py`: TFLite, builtin ops, fixed length
    tflite_dynamic_range  TFLite with int8 weights (`Optimize.DEFAULT`)
    onnx                tf2onnx, run with onnxruntime
    onnx_int8           ONNX Runtime dynamic quantization (int8 weights and activations)

* load: seconds from nothing to a callable model, in a fresh process (TensorFlow
  or the runtime already imported);
* first request: the first B1 call after loading, in a fresh process: without
  warm-up, and with it (the SavedModel: its `assets.extra` warm-up requests
  replayed, as TF Serving does on load; the edge runtimes: one B1 call first);
* B1 / B32: median of `--steps` calls after warm-up, in one process;
* size: the SavedModel directory or the file;
* accuracy: the classifier's accuracy on `--classifier_data` (a GLUE-layout dev
  TSV) and the tagger's entity F1 on `--ner_data` (a CoNLL file), each through the
  format, inputs made by the project's Python tokenizer and packer; the delta is
  against the (float32) SavedModel's.

    python run_classifier.py --task_name=sst-2 --data_dir=$DATA/glue/SST-2 \
        --init_checkpoint=$MINILM --do_train --do_eval --max_train_examples=8000 \
        --num_train_epochs=1 --max_seq_length=64 --output_dir=/tmp/sst2 \
        --export_dir=/tmp/sst2_export
    python run_classifier.py --task_name=sst-2 --data_dir=$DATA/glue/SST-2 \
        --max_seq_length=64 --output_dir=/tmp/sst2 --export_dir=/tmp/sst2_export_bf16 \
        --serving_dtype=bfloat16          # no --do_train: the run's checkpoint, in bf16
    python run_ner.py --do_train --train_file=$DATA/ner/conll2003/eng.train ... \
        --output_dir=/tmp/ner --export_dir=/tmp/ner_export
    python run_ner.py ... --output_dir=/tmp/ner --export_dir=/tmp/ner_export_bf16 \
        --serving_dtype=bfloat16
    python benchmarks/export_bench.py --classifier_export=/tmp/sst2_export \
        --classifier_bf16_export=/tmp/sst2_export_bf16 \
        --classifier_data=$DATA/glue/SST-2/dev.tsv --ner_export=/tmp/ner_export \
        --ner_bf16_export=/tmp/ner_export_bf16 \
        --ner_data=$DATA/ner/conll2003/eng.testb --work_dir=/tmp/export_bench \
        --json_output=benchmarks/results/export_bench.json

bfloat16 pays off only on CPUs with AVX512-BF16 or AMX; elsewhere its row is slower
than float32's (the matmuls are emulated).

Needs the `edge` extra for the TFLite/ONNX rows (`pip install -e '.[edge]'`).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time

from absl import app, flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks import common  # noqa: E402

FORMATS = ("savedmodel", "savedmodel_bf16", "tflite", "tflite_dynamic_range", "onnx",
           "onnx_int8")
FLAGS = flags.FLAGS
flags.DEFINE_string("classifier_export", None, "A classifier export (TF Serving directory).")
flags.DEFINE_string("classifier_bf16_export", None,
                    "The same classifier exported with --serving_dtype=bfloat16 (the "
                    "savedmodel_bf16 row; skipped without).")
flags.DEFINE_string("classifier_data", None, "GLUE-layout dev TSV (sentence, label) to score.")
flags.DEFINE_string("ner_export", None, "An NER export (TF Serving directory).")
flags.DEFINE_string("ner_bf16_export", None,
                    "The same tagger exported with --serving_dtype=bfloat16 (the "
                    "savedmodel_bf16 row; skipped without).")
flags.DEFINE_string("ner_data", None, "CoNLL file with gold tags to score.")
flags.DEFINE_integer("max_eval_examples", None, "Score the first N examples/sentences only.")
flags.DEFINE_string("work_dir", "/tmp/export_bench", "Where the converted files go.")
flags.DEFINE_list("formats", list(FORMATS), "Formats to measure.")
flags.DEFINE_integer("steps", 20, "Timed calls per batch size.")
flags.DEFINE_integer("threads", 2, "Threads of TensorFlow, TFLite and ONNX Runtime.")
flags.DEFINE_string("json_output", None, "Also write the results here.")
flags.DEFINE_string("_measure", None, "Internal: a fresh process's load/first-request timing.")


def _paths(export, work_dir, name, bf16_export=None):
    from official_bert.serving.versions import latest_version_dir

    saved = latest_version_dir(export)
    if saved is None:
        raise SystemExit(f"{export} holds no SavedModel export")
    bf16 = latest_version_dir(bf16_export) if bf16_export else None
    if bf16_export and bf16 is None:
        raise SystemExit(f"{bf16_export} holds no SavedModel export")
    return {"savedmodel": saved, "savedmodel_bf16": bf16,
            "tflite": os.path.join(work_dir, f"{name}.tflite"),
            "tflite_dynamic_range": os.path.join(work_dir, f"{name}_dynamic_range.tflite"),
            "onnx": os.path.join(work_dir, f"{name}.onnx"),
            "onnx_int8": os.path.join(work_dir, f"{name}_int8.onnx")}


def _convert(export, paths, formats):
    from official_bert.serving import edge

    for name in formats:
        if name.startswith("savedmodel") or os.path.exists(paths[name]):
            continue
        start = time.time()
        if name.startswith("tflite"):
            edge.to_tflite(paths["savedmodel"], paths[name], quantize=name != "tflite")
        else:
            edge.to_onnx(paths["savedmodel"], paths[name], quantize=name != "onnx")
        print(f"converted {name} in {time.time() - start:.1f} s", flush=True)


def _runner(name, path, threads):
    """ids dict → outputs dict (numpy), for one format."""
    import numpy as np

    from official_bert.serving import edge

    if name.startswith("savedmodel"):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401

        loaded = tf.saved_model.load(path)
        signature = loaded.signatures["serve_ids"]

        def run(inputs):
            out = signature(**{k: tf.constant(v) for k, v in inputs.items()})
            return {k: np.asarray(v) for k, v in out.items()}

        run.loaded = loaded
        return run
    if name.startswith("tflite"):
        return edge.tflite_runner(path, threads)
    return edge.onnx_runner(path, threads)


def _size(path) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path)
                   for f in files)
    return os.path.getsize(path)


def _request(seq_length, batch, vocab_size):
    import numpy as np

    rng = np.random.default_rng(batch)
    ids = rng.integers(5, vocab_size, size=(batch, seq_length)).astype("int32")
    ids[:, 0], ids[:, -1] = 2, 3
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}


def measure_fresh(name, path, seq_length, vocab_size, warm, threads):
    """In a fresh process: load seconds and the first B1 request's seconds."""
    payload = json.dumps({"name": name, "path": path, "seq": seq_length, "warm": warm,
                          "threads": threads, "vocab_size": vocab_size})
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, os.path.abspath(__file__), f"--_measure={payload}"],
                            capture_output=True, text=True, env=env, timeout=1200)
    if result.returncode:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def _measure_here(payload):
    import numpy as np

    args = json.loads(payload)
    savedmodel = args["name"].startswith("savedmodel")
    if savedmodel:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401

        common.set_threads(args["threads"])
    else:
        import tensorflow  # noqa: F401  (as imported in the other rows' processes)
    start = time.perf_counter()
    run = _runner(args["name"], args["path"], args["threads"])
    load = time.perf_counter() - start
    warmup = 0.0
    if args["warm"]:
        start = time.perf_counter()
        if savedmodel:
            from official_bert.serving import base

            for signature, inputs in base.read_warmup_requests(args["path"]):
                run.loaded.signatures[signature](**{k: tf.constant(v)
                                                    for k, v in inputs.items()})
        else:
            run(_request(args["seq"], 1, args["vocab_size"]))
        warmup = time.perf_counter() - start
    request = _request(args["seq"], 1, args["vocab_size"])
    start = time.perf_counter()
    out = run(request)
    first = time.perf_counter() - start
    assert all(np.all(np.isfinite(v)) for v in out.values() if v.dtype.kind == "f")
    print(json.dumps({"load_s": load, "warmup_s": warmup, "first_ms": 1000 * first}))


def time_batches(run, seq_length, vocab_size, steps):
    out = {}
    for batch in (1, 32):
        request = _request(seq_length, batch, vocab_size)
        seconds = common.time_calls(lambda: run(request), steps=steps, warmup=2)
        out[f"b{batch}_ms"] = common.summarize_times(seconds)["p50_ms"]
    return out


# --- accuracy ------------------------------------------------------------------------


def _tokenizer(saved_model):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from official_bert.text import tokenization

    metadata = tf.saved_model.load(saved_model).metadata()
    vocab = os.path.join(saved_model, "assets", "vocab.txt")
    return (tokenization.FullTokenizer(vocab, do_lower_case=bool(metadata["lower_case"])),
            int(metadata["seq_length"]),
            [x.decode() for x in metadata["labels"].numpy().tolist()])


def _batched(run, arrays, batch=32):
    import numpy as np

    parts = []
    for start in range(0, len(arrays["input_word_ids"]), batch):
        parts.append(run({k: v[start:start + batch] for k, v in arrays.items()}))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def classifier_data(saved_model, path, limit):
    import numpy as np

    from official_bert.text import tokenization

    tokenizer, seq_length, labels = _tokenizer(saved_model)
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[:limit]
    arrays = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
    for row in rows:
        tokens, mask, segments = tokenization.pack_tokens(
            tokenizer.tokenize(row["sentence"]), None, seq_length)
        arrays["input_word_ids"].append(tokenizer.convert_tokens_to_ids(tokens))
        arrays["input_mask"].append(mask)
        arrays["input_type_ids"].append(segments)
    gold = np.asarray([labels.index(row["label"]) for row in rows])
    return {k: np.asarray(v, np.int32) for k, v in arrays.items()}, gold, seq_length


def classifier_accuracy(run, data):
    arrays, gold, _ = data
    probabilities = _batched(run, arrays)["probabilities"]
    return float((probabilities.argmax(axis=1) == gold).mean())


def ner_data(saved_model, path, limit):
    from data_prep import conll

    tokenizer, seq_length, labels = _tokenizer(saved_model)
    data = conll.read_conll(path)
    sentences = data.sentences[:limit]
    windows = conll.convert_sentences(sentences, tokenizer, labels, seq_length)
    arrays = {k: v for k, v in conll.windows_to_arrays(windows).items() if k != "label_ids"}
    return arrays, windows, sentences, labels, seq_length


def ner_f1(run, data):
    from data_prep import conll
    from official_bert.metrics import ner as ner_metrics

    arrays, windows, sentences, labels, _ = data
    tag_ids = _batched(run, arrays)["tag_ids"]
    predicted = conll.word_predictions(windows, tag_ids, len(sentences),
                                       [len(s.words) for s in sentences])
    tags = [[labels[i] for i in ids] for ids in predicted]
    scores = ner_metrics.flat_results(ner_metrics.entity_scores([s.tags for s in sentences],
                                                                tags))
    return float(scores["entity_f1"])


# --- the run ---------------------------------------------------------------------------


def bench_model(kind, export, bf16_export, data_path, rows, results):
    name = "classifier" if kind == "classification" else "ner"
    paths = _paths(export, FLAGS.work_dir, name, bf16_export)
    formats = [f for f in FORMATS if f in FLAGS.formats]
    if "savedmodel_bf16" in formats and paths["savedmodel_bf16"] is None:
        print(f"{name}: no savedmodel_bf16 row (give --{name}_bf16_export, an export made "
              "with --serving_dtype=bfloat16)", flush=True)
        formats.remove("savedmodel_bf16")
    _convert(export, paths, formats)
    data = (classifier_data if kind == "classification" else ner_data)(
        paths["savedmodel"], data_path, FLAGS.max_eval_examples) if data_path else None
    seq_length = data[-1] if data else 128
    with open(os.path.join(paths["savedmodel"], "assets", "vocab.txt"), encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    baseline = None
    for fmt in formats:
        row = {"model": name, "format": fmt, "size_mb": _size(paths[fmt]) / 2**20}
        cold = measure_fresh(fmt, paths[fmt], seq_length, vocab_size, False, FLAGS.threads)
        warm = measure_fresh(fmt, paths[fmt], seq_length, vocab_size, True, FLAGS.threads)
        row.update(load_s=cold["load_s"], first_ms_cold=cold["first_ms"],
                   first_ms_warm=warm["first_ms"], warmup_s=warm["warmup_s"])
        run = _runner(fmt, paths[fmt], FLAGS.threads)
        row.update(time_batches(run, seq_length, vocab_size, FLAGS.steps))
        if data:
            score = (classifier_accuracy if kind == "classification" else ner_f1)(run, data)
            row["metric"] = "accuracy" if kind == "classification" else "entity_f1"
            row["score"] = score
            if fmt == "savedmodel":
                baseline = score
            row["delta"] = None if baseline is None else score - baseline
            row["examples"] = int(len(data[1]) if kind == "classification" else len(data[2]))
        rows.append(row)
        print(json.dumps(row), flush=True)
        del run
    results[name] = [r for r in rows if r["model"] == name]
    results[name + "_seq_length"] = seq_length


def main(argv):
    del argv
    if FLAGS._measure:
        _measure_here(FLAGS._measure)
        return
    common.set_threads(FLAGS.threads)
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    rows, results = [], {}
    if FLAGS.classifier_export:
        bench_model("classification", FLAGS.classifier_export, FLAGS.classifier_bf16_export,
                    FLAGS.classifier_data, rows, results)
    if FLAGS.ner_export:
        bench_model("ner", FLAGS.ner_export, FLAGS.ner_bf16_export, FLAGS.ner_data, rows,
                    results)
    results["load_average"] = os.getloadavg()
    results["threads"] = FLAGS.threads
    results["max_eval_examples"] = FLAGS.max_eval_examples
    print()
    common.print_table(rows, ["model", "format", "size_mb", "load_s", "first_ms_cold",
                              "first_ms_warm", "b1_ms", "b32_ms", "metric", "score", "delta",
                              "examples"])
    common.write_json(FLAGS.json_output, results)


if __name__ == "__main__":
    app.run(main)
