"""The plain encoder's SavedModel for TF Serving: text in, BERT's vectors out.

An `ExportModule` (`serving.base`; TF Serving's versions, atomic: `serving.versions`;
the vocabulary asset; the warm-up file; the input checks), written by
`bert export-encoder --export_dir=...` beside the TF-Hub-style pair
(`serving.hub`).

`serving_default`:
    inputs:  text             string [batch]         (one segment per example)
    outputs: pooled_output    float32 [batch, H]     (C: tanh(dense(T_[CLS])))
             sequence_output  float32 [batch, seq, H] (T_i; seq is the batch's
                                                       longest text, rounded up
                                                       to 16, at most seq_length)
             input_mask       int32 [batch, seq]      (1 on the text's tokens)
             input_word_ids   int32 [batch, seq]      (the WordPiece ids)
`serve_ids` (int32 `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq]):
    outputs: pooled_output, sequence_output, as above.

`export_checkpoint` is the whole job of `bert export-encoder`: a checkpoint's
encoder as TF Hub's pair (`serving.hub`), this SavedModel, and the edge files
(`serving.edge`).
"""

from __future__ import annotations

import tensorflow as tf
from absl import logging

from official_bert import checkpoints, io, model_files
from official_bert.errors import UserError
from official_bert.modeling.heads import BertPretrainer
from official_bert.serving import edge, hub
from official_bert.serving.base import MAX_BATCH_SIZE, ExportModule, with_weights_in
from official_bert.serving.versions import check_export_version_free
from official_bert.configs import check_serving_dtype
from official_bert.text import text_layers


class EncoderServing(ExportModule):
    """A `BertEncoder` with its in-graph preprocessing (module docstring)."""

    TASK = "encoder"
    TEXT_INPUTS = {"text": 1}

    def serve_text(self, text):
        packed = text_layers.trim_padding(self.pack([self.tokenizer(text)]))
        return {**self.serve_token_ids(packed), "input_mask": packed["input_mask"],
                "input_word_ids": packed["input_word_ids"]}

    def serve_token_ids(self, inputs):
        outputs = self.model(inputs, training=False)
        return {"pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
                "sequence_output": tf.cast(outputs["sequence_output"], tf.float32)}

    def metadata_entries(self):
        config = self.model.config
        return {"hidden_size": config.hidden_size, "num_hidden_layers": config.num_hidden_layers}


def export_encoder(encoder, vocab, do_lower_case, seq_length, export_dir, version=None,
                   max_batch_size=MAX_BATCH_SIZE, jit_compile=False) -> str:
    """Writes the encoder SavedModel in TF Serving's layout; returns its version dir
    (`jit_compile`: the encoder's call compiled by XLA, see `ExportModule`)."""
    module = EncoderServing(encoder, vocab, do_lower_case, seq_length,
                            max_batch_size=max_batch_size, jit_compile=jit_compile)
    return module.save(export_dir, version)


def export_checkpoint(config) -> dict:
    """`bert export-encoder` (an `ExportEncoderConfig`): writes the checkpoint's
    encoder as TF Hub's preprocessor/ and encoder/ in --output_dir, and what
    else `config` asks for (--export_dir, --edge_formats); returns {what: path}."""
    formats = _checked_formats(config)
    files = model_files.prepare_job(
        config, inputs={},
        outputs={"--output_dir": config.output_dir, "--export_dir": config.export_dir})
    if config.export_dir and io.same_path(config.export_dir, config.output_dir):
        raise UserError("--export_dir must not be --output_dir: TF Serving's directory holds "
                        "only numbered versions")
    # Before preprocessor/ and encoder/ are written (they would block the rerun).
    check_export_version_free(config.export_dir, config.export_version)

    # (The checkpoint the job read: a run that trains is read once, at one step.)
    encoder, checkpoint = checkpoints.load_encoder(files.checkpoint or config.init_checkpoint,
                                                   config=files.config)
    pretrainer = BertPretrainer(encoder)
    if "masked_lm" not in pretrainer.load_head_weights(checkpoint).heads:
        pretrainer = None
    logging.info("Encoder from %s (%s checkpoint)%s", checkpoint.path, checkpoint.kind,
                 " with its masked-LM head (encoder.mlm)" if pretrainer else "")
    written = {}
    written["preprocessor"], written["encoder"] = hub.export_pair(
        encoder, files.vocab, files.do_lower_case, config.max_seq_length, config.output_dir,
        pretrainer)
    module = EncoderServing(encoder, files.vocab, files.do_lower_case, config.max_seq_length,
                            max_batch_size=config.max_batch_size)
    if config.export_dir:
        serving = module if config.serving_dtype == "float32" else EncoderServing(
            with_weights_in(encoder, config.serving_dtype), files.vocab,
            files.do_lower_case, config.max_seq_length, max_batch_size=config.max_batch_size)
        written["serving"] = serving.save(config.export_dir, config.export_version)
    if formats:
        written.update(edge.convert(module, config.output_dir, formats, config.quantize,
                                    prefix="encoder"))
    for what, path in written.items():
        logging.info("Wrote %s: %s", what, path)
    return written


def _checked_formats(config) -> list:
    """The export's flags checked (`UserError`), before anything is read;
    returns the --edge_formats asked for."""
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
    check_serving_dtype(config.serving_dtype, config.export_dir)
    if config.quantize and not formats:
        raise UserError("--quantize needs --edge_formats (tflite, onnx)")
    for name in ("preprocessor", "encoder"):
        if io.exists(io.join(config.output_dir, name)):
            raise UserError(f"{io.join(config.output_dir, name)} exists: an export never "
                            "overwrites one; use another --output_dir or remove it")
    return formats
