"""Export a checkpoint's encoder as TF Hub's pair, for TF Serving, and for the edge.

From any checkpoint the project reads (Hugging Face directory, Google TF1
checkpoint, a run of this project), writes into `--output_dir`:

  preprocessor/   a SavedModel: strings → input_word_ids, input_mask,
                  input_type_ids; `tokenize` and `bert_pack_inputs(segments,
                  seq_length)` as TF Hub's BERT preprocessors have them
  encoder/        a SavedModel: dict of the three ids → pooled_output,
                  sequence_output, encoder_outputs (+ `mlm` when the checkpoint
                  has the masked-LM head)

and optionally `--export_dir/<version>/` (the encoder for TF Serving: raw-text
`serving_default` and `serve_ids`, `official_bert/serving/encoder.py`) and,
with `--edge_formats`, `encoder.tflite` / `encoder.onnx` (and with
`--quantize` `encoder_dynamic_range.tflite` / `encoder_int8.onnx`) in
`--output_dir` (`official_bert/serving/edge.py`; needs `pip install -e '.[edge]'`).
Nothing is overwritten; each SavedModel appears complete or not at all.

Example:
  bert export-encoder --init_checkpoint=path/to/all-MiniLM-L6-v2 --max_seq_length=128 \\
      --output_dir=/tmp/minilm_hub --export_dir=/tmp/minilm_serving --edge_formats=onnx
"""

from __future__ import annotations

import dataclasses

from absl import flags, logging

from official_bert import app, cli_flags, io
from official_bert.errors import UserError
from official_bert.modeling.configs import ModelFilesConfig

# What loads TensorFlow (checkpoints, modeling/, serving/, tasks/) is imported inside the
# functions that run the command: defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS


@dataclasses.dataclass
class ExportEncoderConfig(ModelFilesConfig):
    """The command's settings (its flags' names).

    Args:
        (the model files: `ModelFilesConfig`)
        max_seq_length: the preprocessor's default packed length (and the
            TF Serving export's, and the TFLite files' fixed length).
        output_dir: where preprocessor/ and encoder/ (and edge files) go.
        export_dir, export_version: the TF Serving encoder export.
        max_batch_size: the TF Serving export's request limit.
        edge_formats: "tflite", "onnx" or both.
        quantize: also write the quantized edge variants.
        serving_dtype: "float32", or "bfloat16": the --export_dir model's
            weights stored and its matmuls run in bfloat16
            (`serving.base.with_weights_in`), for CPUs with AVX512-BF16/AMX.
    """

    output_dir: str | None = None
    export_dir: str | None = None
    export_version: int | None = None
    max_batch_size: int = 256
    edge_formats: list = dataclasses.field(default_factory=list)
    quantize: bool = False
    serving_dtype: str = "float32"


def export(config: ExportEncoderConfig) -> dict:
    """Writes what `config` asks for; returns {what: path}."""
    from official_bert import checkpoints
    from official_bert.modeling.heads import BertPretrainer
    from official_bert.serving import base as serving_base
    from official_bert.serving import edge, hub
    from official_bert.serving import encoder as encoder_serving
    from official_bert.tasks import base

    if not config.init_checkpoint:
        raise UserError("--init_checkpoint is required: the weights to export")
    if not config.output_dir:
        raise UserError("--output_dir is required")
    if config.max_seq_length < 3:
        raise UserError(f"--max_seq_length must be at least 3, got {config.max_seq_length}")
    if config.max_batch_size < 1:
        raise UserError(f"--max_batch_size must be positive, got {config.max_batch_size}")
    formats = [f.strip().lower() for f in config.edge_formats if f.strip()]
    unknown = sorted(set(formats) - set(edge.FORMATS))
    if unknown:
        raise UserError(f"--edge_formats: unknown {', '.join(unknown)}; use "
                        f"{', '.join(edge.FORMATS)}")
    serving_base.check_serving_dtype(config.serving_dtype, config.export_dir)
    if config.quantize and not formats:
        raise UserError("--quantize needs --edge_formats (tflite, onnx)")
    for name in ("preprocessor", "encoder"):
        if io.exists(io.join(config.output_dir, name)):
            raise UserError(f"{io.join(config.output_dir, name)} exists: an export never "
                            "overwrites one; use another --output_dir or remove it")
    files = base.resolve_model_files(config)
    io.refuse_output_over_input(
        {"--output_dir": config.output_dir, "--export_dir": config.export_dir},
        {"init_checkpoint": config.init_checkpoint, "vocab_file": files.vocab_file,
         "bert_config_file": config.bert_config_file})
    if config.export_dir and io.same_path(config.export_dir, config.output_dir):
        raise UserError("--export_dir must not be --output_dir: TF Serving's directory holds "
                        "only numbered versions")
    if config.export_version is not None and config.export_version <= 0:
        raise UserError(f"--export_version must be positive, got {config.export_version}")

    encoder, checkpoint = checkpoints.load_encoder(config.init_checkpoint, config=files.config)
    pretrainer = BertPretrainer(encoder)
    heads = pretrainer.load_head_weights(checkpoint)
    if "masked_lm" not in heads:
        pretrainer = None
    logging.info("Encoder from %s (%s checkpoint)%s", checkpoint.path, checkpoint.kind,
                 " with its masked-LM head (encoder.mlm)" if pretrainer else "")
    written = {}
    written["preprocessor"], written["encoder"] = hub.export_pair(
        encoder, files.vocab, files.do_lower_case, config.max_seq_length, config.output_dir,
        pretrainer)
    module = encoder_serving.EncoderServing(encoder, files.vocab, files.do_lower_case,
                                            config.max_seq_length,
                                            max_batch_size=config.max_batch_size)
    if config.export_dir:
        serving = module if config.serving_dtype == "float32" else encoder_serving.EncoderServing(
            serving_base.with_weights_in(encoder, config.serving_dtype), files.vocab,
            files.do_lower_case, config.max_seq_length, max_batch_size=config.max_batch_size)
        written["serving"] = serving.save(config.export_dir, config.export_version)
    if formats:
        written.update(edge.convert(module, config.output_dir, formats, config.quantize,
                                    prefix="encoder"))
    for what, path in written.items():
        logging.info("Wrote %s: %s", what, path)
        print(f"{what}\t{path}", flush=True)
    return written


def _define_flags():
    flags.DEFINE_string("output_dir", None,
                        "Where to write preprocessor/ and encoder/ (TF Hub's pair) and the "
                        "edge files; neither SavedModel may exist there yet.")
    flags.DEFINE_integer("max_batch_size", 256,
                         "The --export_dir model refuses requests with more examples.")
    flags.DEFINE_list("edge_formats", [],
                      "Also convert the ids signature: tflite, onnx (needs pip install -e "
                      "'.[edge]'). TFLite takes a fixed length of --max_seq_length.")
    flags.DEFINE_bool("quantize", False,
                      "With --edge_formats: also write encoder_dynamic_range.tflite "
                      "(int8 weights) and encoder_int8.onnx (ONNX Runtime dynamic "
                      "quantization).")
    cli_flags.define_model_flags(max_seq_length=128)
    cli_flags.define_export_flags("Also write the encoder for TF Serving to "
                                  "export_dir/<version>/ (raw-text serving_default and "
                                  "serve_ids).")


def main(argv):
    app.refuse_arguments(argv)
    export(cli_flags.from_flags(ExportEncoderConfig, FLAGS))


def entry(argv=None):
    """Console entry point (`bert export-encoder`)."""
    _define_flags()
    app.run(main, argv)


if __name__ == "__main__":
    entry()
