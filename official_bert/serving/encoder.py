"""The plain encoder's SavedModel for TF Serving: text in, BERT's vectors out.

An `ExportModule` (`serving.base`: TF Serving's layout, atomic and versioned;
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
"""

from __future__ import annotations

import tensorflow as tf

from official_bert.serving.base import MAX_BATCH_SIZE, ExportModule
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
