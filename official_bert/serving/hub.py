"""The TF-Hub-style encoder pair: a preprocessor SavedModel and an encoder SavedModel.

What TF Hub / Kaggle BERT users load (`bert_en_uncased_preprocess` +
`bert_en_uncased_L-12_H-768_A-12`), from any checkpoint this project reads,
written by `bert export-encoder` (`commands/export_encoder.py`):

`preprocessor/` (load with `tensorflow_text` imported):
    preprocessor(strings [batch])          the default: one segment, packed to
                                           the export's seq_length →
                                           {input_word_ids, input_mask,
                                           input_type_ids} int32 [batch, seq_length]
                                           (also the `serving_default` signature)
    preprocessor.tokenize(strings [batch]) → int32 RaggedTensor
                                           [batch, (words), (wordpieces)]
                                           (the same ids as `FullTokenizer`)
    preprocessor.bert_pack_inputs(segments, seq_length=None)
                                           segments: a list of one or two
                                           tokenized batches (ragged, from
                                           `tokenize`); `[CLS] A [SEP] B [SEP]`,
                                           google's longest-first truncation;
                                           seq_length: an int (default: the
                                           export's) → the three int32 tensors
    preprocessor.vocab_file                the vocabulary asset
    preprocessor.do_lower_case             a bool variable

`encoder/` (needs only TensorFlow):
    encoder(inputs, training=False)        inputs: dict of the three int32
                                           tensors [batch, seq] → {pooled_output
                                           [batch, H], sequence_output [batch,
                                           seq, H], encoder_outputs (list of L
                                           [batch, seq, H]), default (=
                                           pooled_output)}; `training=True`
                                           applies dropout (fine-tuning)
    encoder.variables, encoder.trainable_variables, encoder.regularization_losses
    encoder.mlm(inputs, training=False)    when the checkpoint has the masked-LM
                                           head: inputs add `masked_lm_positions`
                                           int32 [batch, P]; outputs add
                                           `mlm_logits` [batch, P, vocab]
    signature `serving_default`            the three ids → pooled_output,
                                           sequence_output, default,
                                           encoder_outputs_<i> (TF Serving)

In Keras 3, wrap each in a layer that calls the loaded object (docs/serve.md
shows one that fine-tunes); `keras.layers.TFSMLayer` copies the variables it
finds, so training it does not move the loaded encoder's weights.
"""

from __future__ import annotations

import tensorflow as tf

from official_bert import io
from official_bert.errors import UserError
from official_bert.serving.base import (IDS_KEYS, Untracked, _asset_files, _vocab_tokens,
                                        track_captured_variables)
from official_bert.serving.versions import publish_version
from official_bert.text import text_layers, tokenization

_IDS_SPEC = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in IDS_KEYS}


class Preprocessor(tf.Module):
    """The preprocessor SavedModel's root (see the module docstring)."""

    def __init__(self, vocab, lower_case=True, seq_length=128):
        super().__init__(name="bert_preprocessor")
        self._vocab = tuple(_vocab_tokens(vocab))
        self.tokenizer = text_layers.BertTokenizerLayer(list(self._vocab), lower_case=lower_case,
                                                        name="tokenizer")
        self._vocab_table = self.tokenizer._vocab_table
        self._lower_table = self.tokenizer._lower_table
        self.seq_length = int(seq_length)
        if self.seq_length < 3:
            raise ValueError(f"seq_length={seq_length} leaves no room for [CLS] A [SEP] B [SEP]")
        self.cls_id = self.tokenizer.token_id(tokenization.CLS_TOKEN)
        self.sep_id = self.tokenizer.token_id(tokenization.SEP_TOKEN)
        self.pad_id = self.tokenizer.token_to_id.get(tokenization.PAD_TOKEN, 0)
        self.do_lower_case = tf.Variable(bool(lower_case), trainable=False, name="do_lower_case")

        self.tokenize = tf.function(self._tokenize,
                                    input_signature=[tf.TensorSpec([None], tf.string)])
        self.bert_pack_inputs = tf.function(self._pack)
        for ragged_rank in (1, 2):
            segment = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32,
                                          ragged_rank=ragged_rank)
            for count in (1, 2):
                self.bert_pack_inputs.get_concrete_function([segment] * count)
                self.bert_pack_inputs.get_concrete_function(
                    [segment] * count, seq_length=tf.TensorSpec([], tf.int32))
        self.__call__ = tf.function(self._default,
                                    input_signature=[tf.TensorSpec([None], tf.string)])

    def _tokenize(self, text):
        tok = self.tokenizer
        words = text_layers.basic_tokenize(text, tok.lower_case, tok._lower_table)
        too_long = (tf.strings.length(words.flat_values, unit="UTF8_CHAR")
                    > tok.max_input_chars_per_word)
        words = words.with_flat_values(tf.where(too_long, tok.unknown_token, words.flat_values))
        return tf.cast(tok._wordpiece.tokenize(words), tf.int32)  # [batch, (words), (pieces)]

    def _pack(self, segments, seq_length=None):
        seq_length = tf.constant(self.seq_length) if seq_length is None else seq_length
        seq_length = tf.cast(seq_length, tf.int32)
        segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
        segments = [tf.cast(s, tf.int32) for s in segments]
        a = segments[0]
        batch = a.nrows(out_type=tf.int32)
        len_a = tf.cast(a.row_lengths(), tf.int32)
        if len(segments) == 1:
            new_a, b = tf.minimum(len_a, seq_length - 2), None
        else:
            b = segments[1]
            len_b = tf.cast(b.row_lengths(), tf.int32)
            new_a, new_b = text_layers.longest_first_lengths(len_a, len_b, seq_length - 3)
            b = tf.ragged.boolean_mask(b, tf.ragged.range(len_b) < new_b[:, tf.newaxis])
        a = tf.ragged.boolean_mask(a, tf.ragged.range(len_a) < new_a[:, tf.newaxis])

        def column(value):
            return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], value))

        pieces, types = [column(self.cls_id), a, column(self.sep_id)], [column(0),
                                                                        tf.zeros_like(a),
                                                                        column(0)]
        if b is not None:
            pieces += [b, column(self.sep_id)]
            types += [tf.ones_like(b), column(1)]
        word_ids, type_ids = tf.concat(pieces, axis=1), tf.concat(types, axis=1)
        shape = tf.stack([tf.cast(batch, tf.int64), tf.cast(seq_length, tf.int64)])
        return {"input_word_ids": word_ids.to_tensor(self.pad_id, shape=shape),
                "input_mask": tf.ones_like(word_ids).to_tensor(0, shape=shape),
                "input_type_ids": type_ids.to_tensor(0, shape=shape)}

    def _default(self, text):
        return self._pack([self._tokenize(text)])


def _encoder_outputs(outputs):
    return {"pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
            "encoder_outputs": [tf.cast(x, tf.float32) for x in outputs["encoder_outputs"]],
            "default": tf.cast(outputs["pooled_output"], tf.float32)}


def _inner_variables(layer) -> list:
    return track_captured_variables(tf.Module(), [layer])


# `variables` and `trainable_variables` are plain attributes here (a tf.Module
# computes them), as TF Hub's reusable SavedModels have them.
_Trackable = tf.__internal__.tracking.AutoTrackable


class _Encoder(_Trackable):
    """The encoder SavedModel's root (see the module docstring)."""

    def __init__(self, encoder, pretrainer=None):
        super().__init__()
        self._encoder = Untracked(encoder)  # its tf.Variables are tracked, not it
        self.variables = _inner_variables(encoder)
        self.trainable_variables = [v for v in self.variables if v.trainable]
        self.regularization_losses = []
        call = tf.function(lambda inputs, training=False: _encoder_outputs(
            encoder({k: inputs[k] for k in IDS_KEYS}, training=training)))
        for training in (False, True):
            call.get_concrete_function(_IDS_SPEC, training=training)
        self.__call__ = call
        if pretrainer is not None:
            self.mlm = _Mlm(pretrainer)

    def signature(self):
        encoder = self._encoder.value

        def serve(**inputs):
            outputs = _encoder_outputs(encoder(inputs, training=False))
            layers = outputs.pop("encoder_outputs")
            outputs.update({f"encoder_outputs_{i}": x for i, x in enumerate(layers)})
            return outputs

        return tf.function(serve).get_concrete_function(**_IDS_SPEC)


class _Mlm(_Trackable):
    """`encoder.mlm`: the encoder with the masked-LM head."""

    def __init__(self, pretrainer):
        super().__init__()
        self.variables = _inner_variables(pretrainer)
        self.trainable_variables = [v for v in self.variables if v.trainable]
        self.regularization_losses = []
        spec = dict(_IDS_SPEC, masked_lm_positions=tf.TensorSpec([None, None], tf.int32,
                                                                 name="masked_lm_positions"))

        def call(inputs, training=False):
            # BertPretrainer's masked LM on one encoder pass (one dropout draw).
            outputs = pretrainer.encoder({k: inputs[k] for k in IDS_KEYS}, training=training)
            positions = tf.cast(inputs["masked_lm_positions"], tf.int32)
            gathered = tf.gather(outputs["sequence_output"], positions, batch_dims=1)
            hidden = pretrainer.mlm_layer_norm(pretrainer.mlm_transform(gathered))
            embeddings = tf.cast(pretrainer.mlm_output_embeddings, hidden.dtype)
            logits = tf.einsum("bph,vh->bpv", hidden, embeddings)
            logits = tf.cast(logits, tf.float32) + pretrainer.mlm_output_bias
            return {**_encoder_outputs(outputs), "mlm_logits": logits}

        function = tf.function(call)
        for training in (False, True):
            function.get_concrete_function(spec, training=training)
        self.__call__ = function


def _save(root, parent: str, name: str, signatures=None, assets=None) -> str:
    """`tf.saved_model.save` into `parent/name`, staged and renamed (never overwritten)."""
    final = io.join(parent, name)
    if io.exists(final):
        raise UserError(f"{final} exists: an export never overwrites one; use another "
                        "--output_dir or remove it")
    staging = io.make_temporary_dir(parent, name)
    assets = assets or {}
    try:
        with _asset_files({file_name: text for file_name, text in assets.values()}) as paths:
            for attribute, (file_name, _) in assets.items():
                setattr(root, attribute, tf.saved_model.Asset(paths[file_name]))
            tf.saved_model.save(root, staging, signatures=signatures)
        try:
            publish_version(staging, final)
        except FileExistsError:  # another export published it while this one was writing
            raise UserError(f"{final} exists now (another export wrote it meanwhile): it is "
                            "kept, and this one was not written; use another --output_dir"
                            ) from None
    finally:
        io.remove_tree(staging)
    return final


def export_preprocessor(vocab, lower_case, seq_length, output_dir: str) -> str:
    """Writes `output_dir/preprocessor`; returns its path."""
    module = Preprocessor(vocab, lower_case, seq_length)
    vocab_text = "".join(token + "\n" for token in module._vocab)
    return _save(module, output_dir, "preprocessor",
                 signatures={"serving_default": module.__call__.get_concrete_function()},
                 assets={"vocab_file": ("vocab.txt", vocab_text)})


def export_encoder(encoder, output_dir: str, pretrainer=None) -> str:
    """Writes `output_dir/encoder` (with `mlm` when `pretrainer` is given);
    returns its path."""
    root = _Encoder(encoder, pretrainer)
    return _save(root, output_dir, "encoder", signatures={"serving_default": root.signature()})


def export_pair(encoder, vocab, lower_case, seq_length, output_dir: str,
                pretrainer=None) -> tuple:
    """Writes `output_dir/preprocessor` and `output_dir/encoder` (each staged
    and renamed when complete; neither overwrites); returns their paths."""
    for name in ("preprocessor", "encoder"):
        if io.exists(io.join(output_dir, name)):
            raise UserError(f"{io.join(output_dir, name)} exists: an export never overwrites "
                            "one; use another --output_dir or remove it")
    io.makedirs(output_dir)
    return (export_preprocessor(vocab, lower_case, seq_length, output_dir),
            export_encoder(encoder, output_dir, pretrainer))
