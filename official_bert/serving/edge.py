"""Edge formats of an export's ids signature: TFLite and ONNX, and quantized variants.

What converts, and why only that:

* **Only the ids signature.** The in-graph tokenizer uses tensorflow-text ops
  (`RegexSplitWithOffsets`, `NormalizeUTF8`, `WordpieceTokenizeWithOffsets`,
  ...) that have no TFLite kernels and no ONNX equivalents, so the edge files
  take `input_word_ids`, `input_mask`, `input_type_ids` and return the ids
  signature's numeric outputs (string outputs such as a label name are left
  out; map the ids with `metadata()["labels"]`). Tokenize on the device with
  the vocabulary (`assets/vocab.txt`) and `FullTokenizer`'s rules.
* **TFLite** (`tf.lite`, run with `ai-edge-litert`): builtin ops only (no Flex
  delegate). The sequence length is fixed at export (`seq_length`, the
  fine-tuning `max_seq_length`): the converter cannot lower the attention
  mask's broadcast of a dynamic length to builtins. Pad every row to it
  (padding is masked out; the outputs do not change). The batch is dynamic.
* **TFLite in TF Serving.** The model server runs a `model.tflite` found in a
  version directory instead of its `saved_model.pb` when started with
  `--prefer_tflite_model` (marked experimental in TF Serving): one single-threaded
  interpreter per pool (`--num_tflite_pools`), builtin ops, `serving_default`
  built from the tensor names (`name_tensors_by_signature` makes them the
  signature's keys). Read from tensorflow/serving's `tflite_session.cc` and
  `saved_model_bundle_factory.cc` (9d981c5); the model server is not run here.
* **ONNX** (`tf2onnx`, opset 17, run with `onnxruntime`): dynamic batch and
  length. Two tf2onnx 1.17 gaps are bridged here: `Erfc` (the exact GELU) is
  rewritten as 1 - Erf, and tf2onnx's `reshape_optimizer` is left out (it
  rewires the Keras attention's dynamic reshapes to the wrong shape tensors,
  which fails at run time for any length).
* **Quantized variants.** TFLite dynamic range (`tf.lite.Optimize.DEFAULT`:
  int8 weights of the large matrices, float activations) and ONNX Runtime's
  dynamic quantization (`quantize_dynamic`, int8 weights, activations
  quantized per batch at run time). Their accuracy cost is measured by
  `benchmarks/export_bench.py`.

The converters and runtimes are the optional `edge` extra
(`pip install -e '.[edge]'`: tf2onnx, onnxruntime, ai-edge-litert);
`tf.lite` ships with TensorFlow.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np
import tensorflow as tf
from absl import logging
import tensorflow_text  # noqa: F401  (registers the text ops of an export loaded from disk)

from official_bert import io
from official_bert.serving.variables import IDS_KEYS, track_captured_variables
from official_bert.serving.versions import latest_version_dir

# tf2onnx, onnxruntime and ai_edge_litert (the optional `edge` extra) are
# imported in the functions that use them: without the extra, this module
# still loads and TFLite works.

ONNX_OPSET = 17
FORMATS = ("tflite", "onnx")
# The file in a version folder that TF Serving's --prefer_tflite_model serves instead of
# saved_model.pb (`--quantize`: the ids signature with int8 weights).
SERVING_TFLITE = "model.tflite"
# Rows of the evaluation data the int8 model is checked on at export.
CHECK_ROWS = 2000


def _numeric(outputs: dict) -> dict:
    return {k: v for k, v in outputs.items() if v.dtype != tf.string}


def ids_function(call, rank: int = 2, seq_length: int | None = None):
    """A tf.function of the three id tensors → the numeric outputs of `call(inputs)`.

    Args:
        call: ids dict → outputs dict (an `ExportModule.serve_token_ids`, or a
            loaded SavedModel's serve_ids signature).
        rank: 2 ([batch, seq]) or 3 ([batch, choices, seq]).
        seq_length: a fixed length (TFLite), or None (dynamic).
    """
    shape = [None] * (rank - 1) + [seq_length]
    specs = [tf.TensorSpec(shape, tf.int32, name=k) for k in IDS_KEYS]

    @tf.function(input_signature=specs)
    def serve_ids(input_word_ids, input_mask, input_type_ids):
        return _numeric(call({"input_word_ids": input_word_ids, "input_mask": input_mask,
                              "input_type_ids": input_type_ids}))

    return serve_ids


def source_of(module_or_path):
    """(call, trackable, rank, seq_length) of an `ExportModule` or an export's
    directory (loaded with tensorflow-text, for its other signatures' ops)."""
    if isinstance(module_or_path, (str, os.PathLike)):
        path = latest_version_dir(os.fspath(module_or_path))
        if path is None:
            raise ValueError(f"{module_or_path} is not a SavedModel export")
        loaded = tf.saved_model.load(path)
        signature = loaded.signatures["serve_ids"]
        rank = len(signature.structured_input_signature[1]["input_word_ids"].shape)
        metadata = loaded.metadata() if hasattr(loaded, "metadata") else {}
        seq_length = int(metadata["seq_length"]) if "seq_length" in metadata else None
        # Only the variables the ids signature reads: the tokenizer's tables
        # (string hash tables) have no TFLite form.
        holder = tf.Module()
        holder.variables_read = list(signature.variables)

        def call(inputs, _loaded=loaded):  # (keeps the restored objects alive)
            return signature(**inputs)

        return call, holder, rank, seq_length
    module = module_or_path
    holder = tf.Module()
    track_captured_variables(holder, [module.keras_model])
    return module.serve_token_ids, holder, module.IDS_RANK, module.seq_length


def to_tflite(module_or_path, path: str, quantize: bool = False,
              seq_length: int | None = None) -> str:
    """Writes the ids signature as a TFLite flatbuffer (builtin ops, fixed
    length `seq_length`, default the export's); dynamic-range quantized when
    `quantize`. Returns `path`."""
    call, trackable, rank, default_length = source_of(module_or_path)
    length = seq_length or default_length
    if not length:
        raise ValueError("TFLite needs a fixed seq_length")
    function = ids_function(call, rank, int(length))
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()], trackable)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    io.atomic_write(path, name_tensors_by_signature(converter.convert()))
    return path


def name_tensors_by_signature(model: bytes) -> bytes:
    """The TFLite model with each signature input and output tensor named by its
    key (`input_word_ids`, ..., `pooled_output`), not the converter's
    `serving_default_input_word_ids:0` / `StatefulPartitionedCall:1`.

    Why: TF Serving's TFLite runtime (`--prefer_tflite_model`, `model.tflite` in
    the version directory) does not read the flatbuffer's signatures; it builds
    `serving_default` from the tensor names with the `:N` suffix cut off, so the
    converter's names would give both outputs the one key
    `StatefulPartitionedCall` and lose one of them. Signatures address tensors
    by index, so the interpreter's signature runner is unaffected.
    """
    from tensorflow.lite.tools import flatbuffer_utils

    tree = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))
    for signature in tree.signatureDefs or []:
        tensors = tree.subgraphs[signature.subgraphIndex].tensors
        for item in [*signature.inputs, *signature.outputs]:
            tensors[item.tensorIndex].name = item.name
    return bytes(flatbuffer_utils.convert_object_to_bytearray(tree))


@contextlib.contextmanager
def _without_reshape_optimizer():
    from tf2onnx import optimizer

    original = optimizer._get_optimizers
    kept = {k: v for k, v in original().items() if k != "reshape_optimizer"}
    optimizer._get_optimizers = lambda: kept
    try:
        yield
    finally:
        optimizer._get_optimizers = original


def _erfc_as_one_minus_erf(ctx, node, name, args):
    """tf2onnx handler: Erfc(x) = 1 - Erf(x) (ONNX has no Erfc)."""
    from tf2onnx import utils

    del name, args
    node.type = "Erf"
    dtype = ctx.get_dtype(node.output[0])
    one = ctx.make_const(utils.make_name("erfc_one"),
                         np.array(1, utils.map_onnx_to_numpy_type(dtype)))
    sub = ctx.insert_new_node_on_output("Sub", node.output[0], name=utils.make_name("erfc"),
                                        inputs=[one.output[0], node.output[0]])
    ctx.set_dtype(sub.output[0], dtype)
    ctx.copy_shape(node.output[0], sub.output[0])


def to_onnx(module_or_path, path: str, quantize: bool = False) -> str:
    """Writes the ids signature as an ONNX model (dynamic batch and length);
    with `quantize`, ONNX Runtime's dynamic int8 quantization of it. Returns `path`."""
    import tf2onnx

    call, _, rank, _ = source_of(module_or_path)
    function = ids_function(call, rank)
    with _without_reshape_optimizer():
        proto, _ = tf2onnx.convert.from_function(
            function, input_signature=function.input_signature, opset=ONNX_OPSET,
            custom_op_handlers={"Erfc": (_erfc_as_one_minus_erf, [])})
    data = proto.SerializeToString()
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory() as scratch:
            source, target = os.path.join(scratch, "fp32.onnx"), os.path.join(scratch, "int8.onnx")
            with open(source, "wb") as f:
                f.write(data)
            quantize_dynamic(source, target, weight_type=QuantType.QInt8)
            with open(target, "rb") as f:
                data = f.read()
    io.atomic_write(path, data)
    return path


def convert(module_or_path, output_dir: str, formats=FORMATS, quantize: bool = False,
            prefix: str = "model") -> dict:
    """Writes `<prefix>.tflite` / `<prefix>.onnx` (and with `quantize`
    `<prefix>_dynamic_range.tflite`, `<prefix>_int8.onnx`) into `output_dir`.
    Returns {name: path}."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown edge format(s) {', '.join(unknown)}; use {', '.join(FORMATS)}")
    io.makedirs(output_dir)
    written = {}
    if "tflite" in formats:
        written["tflite"] = to_tflite(module_or_path, io.join(output_dir, f"{prefix}.tflite"))
        if quantize:
            written["tflite_dynamic_range"] = to_tflite(
                module_or_path, io.join(output_dir, f"{prefix}_dynamic_range.tflite"), True)
    if "onnx" in formats:
        written["onnx"] = to_onnx(module_or_path, io.join(output_dir, f"{prefix}.onnx"))
        if quantize:
            written["onnx_int8"] = to_onnx(module_or_path,
                                           io.join(output_dir, f"{prefix}_int8.onnx"), True)
    return written


# --- the int8 model of an export (--quantize) -------------------------------------------


def write_int8_model(module, version_dir: str) -> str:
    """Writes `version_dir/model.tflite`: `module`'s ids signature, int8 weights
    (dynamic range), builtin ops, fixed length `module.seq_length`. Returns its
    path (`describe_tflite` says what it takes, once it is published)."""
    return to_tflite(module, io.join(version_dir, SERVING_TFLITE), quantize=True)


def describe_tflite(path: str) -> str:
    """One paragraph: what a TFLite file of an export takes and gives, and how
    TF Serving serves it."""
    signature = tflite_runner(path).interpreter.get_signature_runner()
    inputs = signature.get_input_details()
    outputs = signature.get_output_details()
    shape = inputs["input_word_ids"]["shape_signature"].tolist()
    shown = "[batch, " + ", ".join(str(d) for d in shape[1:]) + "]"
    gives = ", ".join(f"{k} {v['dtype'].__name__} [batch{', ...' if len(v['shape']) > 1 else ''}]"
                      for k, v in sorted(outputs.items()))
    int8 = any(d["dtype"] == np.int8 for d in signature_interpreter(path).get_tensor_details())
    kind = ("int8 model" if int8 else
            "TFLite model (float32: no weight matrix large enough to quantize)")
    return (f"{kind} {path} ({io.size(path) / 2**20:.1f} MB): takes token ids, not text "
            f"(the raw-text signature's tensorflow-text ops have no TFLite kernels): int32 "
            f"input_word_ids, input_mask, input_type_ids of shape {shown}, every row padded to "
            f"{shape[-1]} tokens with the version's assets/vocab.txt; gives {gives}. TF Serving "
            "serves it as serving_default when started with --prefer_tflite_model; "
            "docs/make_it_small.md shows a client.")


def signature_interpreter(path: str):
    """The TFLite interpreter of `path` (`tflite_runner`'s)."""
    return tflite_runner(path).interpreter


def check_int8(version_dir: str, arrays: dict | None, split: str = "dev") -> dict | None:
    """Runs the float SavedModel (`serve_ids`) and `model.tflite` of `version_dir`
    on the first `CHECK_ROWS` rows of `arrays` (a task's evaluation features) and
    logs how often their decisions agree (`decisions`) and each one's score on
    the rows' labels. Returns {"rows", "agreement", "float", "int8", "metric"};
    None (and a line saying why) without evaluation data."""
    if not arrays:
        logging.info("int8 check skipped: no evaluation data was read (add --do_eval to check "
                     "model.tflite against the float model on it)")
        return None
    rows = {k: np.asarray(v)[:CHECK_ROWS] for k, v in arrays.items()}
    ids = {k: rows[k] for k in IDS_KEYS}
    loaded = tf.saved_model.load(version_dir)
    signature = loaded.signatures["serve_ids"]
    outputs = {
        "float": batched(lambda x: {k: np.asarray(v) for k, v in signature(
            **{n: tf.constant(a) for n, a in x.items()}).items()}, ids),
        "int8": batched(tflite_runner(io.join(version_dir, SERVING_TFLITE)), ids)}
    same = agreement(outputs["float"], outputs["int8"], ids["input_mask"])
    scores = {name: label_score(out, rows) for name, out in outputs.items()}
    metric = scores["float"][0] if scores["float"] else None
    result = {"rows": len(ids["input_word_ids"]), "agreement": same, "metric": metric,
              "float": scores["float"][1] if metric else None,
              "int8": scores["int8"][1] if metric else None}
    logging.info("int8 check on the first %d %s rows: model.tflite decides as the float model "
                 "on %.1f%% of them%s", result["rows"], split, 100 * same,
                 f" ({metric}: float {100 * result['float']:.2f}, int8 "
                 f"{100 * result['int8']:.2f})" if metric else "")
    return result


def batched(run, arrays: dict, batch: int = 32) -> dict:
    """`run` (inputs dict → outputs dict) over `arrays` in batches; numeric
    outputs concatenated."""
    parts = []
    for start in range(0, len(next(iter(arrays.values()))), batch):
        out = run({k: v[start:start + batch] for k, v in arrays.items()})
        parts.append({k: np.asarray(v) for k, v in out.items()
                      if np.asarray(v).dtype.kind in "fiu"})
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def decisions(outputs: dict, mask) -> dict:
    """What a model decides, by output: a tagger's tag per token (padding
    zeroed), a choice, a class (the argmax of its probabilities), an answer's
    start and end, a regression score rounded to 0.1."""
    mask = np.asarray(mask)
    found = {}
    if "tag_ids" in outputs:
        found["tag_ids"] = np.where(mask > 0, outputs["tag_ids"], 0)
    for key in ("choice", "probabilities", "start_logits", "end_logits"):
        if key in outputs and "tag_ids" not in found:
            value = outputs[key]
            found[key] = value if value.dtype.kind in "iu" else np.argmax(value, -1)
            if key == "choice":
                break
    if "score" in outputs:
        found["score"] = np.round(np.asarray(outputs["score"]) * 10)
    return found


def agreement(first: dict, second: dict, mask) -> float:
    """The share of rows on which two models' `decisions` are all the same."""
    a, b = decisions(first, mask), decisions(second, mask)
    if not a:
        raise ValueError(f"no decision among the outputs {sorted(first)}")
    rows = len(next(iter(a.values())))
    same = np.ones(rows, bool)
    for key in a:
        equal = a[key] == b[key]
        same &= equal.reshape(rows, -1).all(axis=1)
    return float(same.mean())


def label_score(outputs: dict, arrays: dict):
    """(name, value) of a model's outputs against the rows' own labels: accuracy
    of a class or choice, Pearson's r of a regression score, the accuracy of a
    tagger's tags on the labelled tokens; None when the rows have no labels."""
    if "label" in arrays and "score" in outputs:
        return "pearson", float(np.corrcoef(outputs["score"], arrays["label"])[0, 1])
    if "label" in arrays:
        chosen = decisions(outputs, arrays["input_mask"])
        key = "choice" if "choice" in chosen else "probabilities"
        if key in chosen:
            return "accuracy", float(np.mean(chosen[key] == np.asarray(arrays["label"])))
    if "label_ids" in arrays and "tag_ids" in outputs:
        labelled = np.asarray(arrays["label_ids"]) >= 0
        return "token_accuracy", float(np.mean(outputs["tag_ids"][labelled]
                                               == np.asarray(arrays["label_ids"])[labelled]))
    return None


# --- running them (tests, benchmarks) ---------------------------------------------------


def tflite_runner(path: str, threads: int | None = None):
    """inputs dict of int32 arrays → outputs dict, through the TFLite interpreter
    (`ai-edge-litert` when installed, else `tf.lite`)."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        Interpreter = tf.lite.Interpreter
    interpreter = Interpreter(model_path=path, num_threads=threads)
    runner = interpreter.get_signature_runner()

    def run(inputs):
        return runner(**{k: np.asarray(v, np.int32) for k, v in inputs.items()})

    run.interpreter = interpreter
    return run


def onnx_runner(path: str, threads: int | None = None):
    """inputs dict of int32 arrays → outputs dict, through onnxruntime (CPU)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]

    def run(inputs):
        values = session.run(None, {k: np.asarray(v, np.int32) for k, v in inputs.items()})
        return dict(zip(names, values))

    run.session = session
    return run
