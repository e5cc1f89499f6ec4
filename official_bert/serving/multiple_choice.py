"""The raw-text multiple-choice (SWAG) SavedModel.

Written in TF Serving's layout (`serving.base`); the tokenizer and packer run
in the graph (`text.text_layers`, the same ids as `FullTokenizer`), so a
client sends raw strings. Loading needs TensorFlow and `tensorflow_text`
(`import tensorflow_text` before `tf.saved_model.load`), not this project.

Multiple choice, signature `serving_default`:
    inputs:  context  string [batch]        (sentence A, SWAG's sent1)
             start    string [batch]        (SWAG's sent2; may be "")
             endings  string [batch, k]     (k candidate endings)
    outputs: probabilities float32 [batch, k] (softmax over the choices)
             logits        float32 [batch, k]
Each choice is packed `[CLS] context [SEP] start ending [SEP]`, truncated
longest-first, as `data_prep/swag.py` does.
"""

from __future__ import annotations

import tensorflow as tf

from official_bert.serving.base import save_versioned
from official_bert.text import text_layers, tokenization


class MultipleChoiceServing(tf.Module):
    def __init__(self, model, vocab, lower_case, seq_length):
        super().__init__()
        self.model = model
        self.preprocessor = text_layers.BertPreprocessor(
            vocab, lower_case=lower_case, seq_length=seq_length)

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.string, name="context"),
        tf.TensorSpec([None], tf.string, name="start"),
        tf.TensorSpec([None, None], tf.string, name="endings"),
    ])
    def serve(self, context, start, endings):
        batch, k = tf.shape(endings)[0], tf.shape(endings)[1]
        flat_endings = tf.reshape(endings, [-1])
        contexts = tf.repeat(context, k)
        starts = tf.repeat(start, k)
        has_start = tf.strings.length(tf.strings.strip(starts)) > 0
        second = tf.where(has_start, tf.strings.join([starts, flat_endings], " "), flat_endings)
        packed = text_layers.trim_padding(self.preprocessor([contexts, second]))
        inputs = {key: tf.reshape(value, [batch, k, -1]) for key, value in packed.items()}
        logits = self.model(inputs, training=False)
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits}


def export_multiple_choice(model, vocab_file, do_lower_case, seq_length, export_dir,
                           version=None) -> str:
    """Writes the raw-text multiple-choice SavedModel; returns its version dir."""
    module = MultipleChoiceServing(model, tokenization.load_vocab_list(vocab_file),
                                   do_lower_case, seq_length)
    return save_versioned(module, export_dir, {"serving_default": module.serve}, version)
