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
import tensorflow_text  # noqa: F401  (registers the text ops of an export loaded from disk)

from official_bert import io
from official_bert.serving.base import IDS_KEYS, track_captured_variables
from official_bert.serving.versions import latest_version_dir

# tf2onnx, onnxruntime and ai_edge_litert (the optional `edge` extra) are
# imported in the functions that use them: without the extra, this module
# still loads and TFLite works.

ONNX_OPSET = 17
FORMATS = ("tflite", "onnx")


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
