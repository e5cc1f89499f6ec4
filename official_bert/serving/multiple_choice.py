"""The multiple-choice (SWAG) SavedModel.

An `ExportModule` (`serving.base`; TF Serving's versions, atomic: `serving.versions`;
the vocabulary asset; the warm-up file; the input checks). The tokenizer and
packer run in the graph (`text.text_layers`, the same ids as `FullTokenizer`),
so a client sends raw strings. Loading needs TensorFlow and `tensorflow_text`
(`import tensorflow_text` before `tf.saved_model.load`), not this project.

`serving_default`:
    inputs:  context  string [batch]            (sentence A, SWAG's sent1)
             start    string [batch]            (SWAG's sent2; may be "")
             endings  string [batch, choices]   (the candidate endings; every
                                                 example has the same number)
    outputs: probabilities float32 [batch, choices]  (softmax over the choices)
             logits        float32 [batch, choices]  (one score per choice)
             choice        int32   [batch]           (the most probable ending)
Each choice is packed `[CLS] context [SEP] start ending [SEP]`, truncated
longest-first, as `data_prep/swag.py` does.

`serve_ids`: the same outputs from `input_word_ids`, `input_mask`,
`input_type_ids` int32 [batch, choices, seq] (one packed row per choice, as
`data_prep.swag.convert_examples` makes them).
"""

from __future__ import annotations

import tensorflow as tf

from official_bert.serving.base import MAX_BATCH_SIZE, ExportModule
from official_bert.text import text_layers


class MultipleChoiceServing(ExportModule):
    """A `BertMultipleChoice` with its in-graph preprocessing (module docstring)."""

    TASK = "multiple_choice"
    TEXT_INPUTS = {"context": 1, "start": 1, "endings": 2}
    IDS_RANK = 3

    def serve_text(self, context, start, endings):
        batch, k = tf.shape(endings)[0], tf.shape(endings)[1]
        flat_endings = tf.reshape(endings, [-1])
        contexts = tf.repeat(context, k)
        starts = tf.repeat(start, k)
        has_start = tf.strings.length(tf.strings.strip(starts)) > 0
        second = tf.where(has_start, tf.strings.join([starts, flat_endings], " "), flat_endings)
        packed = self.pack([self.tokenizer(contexts), self.tokenizer(second)])
        packed = text_layers.trim_padding(packed)
        return self.serve_token_ids(
            {key: tf.reshape(value, [batch, k, -1]) for key, value in packed.items()})

    def serve_token_ids(self, inputs):
        logits = self.model(inputs, training=False)
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
                "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}

    def warmup_texts(self):
        return {"context": "The man walks to the city.", "start": "He",
                "endings": ["sat down.", "went to the park.", "is on the man.", "walks home."]}


def export_multiple_choice(model, vocab_file, do_lower_case, seq_length, export_dir,
                           version=None, max_batch_size=MAX_BATCH_SIZE, int8=False) -> str:
    """Writes the multiple-choice SavedModel in TF Serving's layout; returns its version dir."""
    module = MultipleChoiceServing(model, vocab_file, do_lower_case, seq_length,
                                   max_batch_size=max_batch_size)
    return module.save(export_dir, version, int8=int8)
