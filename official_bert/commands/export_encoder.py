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

Example (`$MINILM` is the bundled all-MiniLM-L6-v2, as the README sets it):
  bert export-encoder --init_checkpoint=$MINILM --max_seq_length=128 \\
      --output_dir=/tmp/minilm_hub --export_dir=/tmp/minilm_serving --edge_formats=onnx
"""

from __future__ import annotations

from official_bert.commands import cli_flags, registry
from official_bert.configs import ExportEncoderConfig

CONFIGS = (ExportEncoderConfig,)  # its flags' definitions


def define_flags():
    cli_flags.define_command_flags(ExportEncoderConfig, cli_flags.MODEL_FILES, cli_flags.EXPORT)


# Its main is `registry.job_main`: the job its row names, run on its config (the
# library call loads TensorFlow once the flags are parsed, so `--help` stays fast).

if __name__ == "__main__":
    registry.run_command("export-encoder")
