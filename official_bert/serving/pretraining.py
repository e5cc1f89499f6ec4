"""The pre-training model's SavedModel: fill in `[MASK]`s, judge sentence pairs.

An `ExportModule` (`serving.base`; TF Serving's versions, atomic: `serving.versions`;
the vocabulary asset; the warm-up file; the input checks) around a
`BertPretrainer` (masked LM + next sentence), written by `run_pretraining.py
--export_dir`.

`serving_default`:
    inputs:  text_a  string [batch]   sentence A; every literal `[MASK]` in it
                                      (upper case, as written) is one masked token
             text_b  string [batch]   sentence B (may hold `[MASK]`s too); "" for
                                      one segment: `[CLS] A [SEP]`
    outputs: num_masks                   int32 [batch]
             masked_lm_positions         int32 [batch, m]  (position of each [MASK]
                                         in the packed sequence; -1 padding; m is
                                         the batch's most masks)
             top_ids                     int32 [batch, m, k]  (the k = 5 most
                                         probable tokens at each [MASK], best first)
             top_tokens                  string [batch, m, k]
             top_probabilities           float32 [batch, m, k]
             next_sentence_probabilities float32 [batch, 2]  (index 0: B follows A;
                                         1: B is a random sentence)
Text around a `[MASK]` is tokenized as the rest (the Python `FullTokenizer`
would split "[MASK]" into "[", "mask", "]"); truncation to `seq_length` is
google's longest-first.

`serve_ids` (int32 `input_word_ids`, `input_mask`, `input_type_ids` [batch,
seq]): the same outputs, the masked positions being where `input_word_ids` is
the [MASK] id.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from official_bert.errors import UserError
from official_bert.serving.base import MAX_BATCH_SIZE, ExportModule
from official_bert.text import text_layers, tokenization

TOP_K = 5
_MASK_PATTERN = r"\[MASK\]"


class PretrainingServing(ExportModule):
    """A `BertPretrainer` with its in-graph preprocessing (module docstring)."""

    TASK = "pretraining"
    TEXT_INPUTS = {"text_a": 1, "text_b": 1}

    def __init__(self, model, vocab, lower_case, seq_length, max_batch_size=MAX_BATCH_SIZE):
        super().__init__(model, vocab, lower_case, seq_length, max_batch_size=max_batch_size)
        if tokenization.MASK_TOKEN not in self.tokenizer.token_to_id:
            raise UserError("the vocabulary has no [MASK] token: the masked-LM export needs it")
        self.mask_id = self.tokenizer.token_id(tokenization.MASK_TOKEN)
        vocab_size = int(model.encoder.config.vocab_size)
        names = list(self._vocab)[:vocab_size]
        self._tokens = tuple(names + [""] * (vocab_size - len(names)))
        self.top_k = min(TOP_K, vocab_size)

    def warmup_texts(self):
        return {"text_a": "the man went to the [MASK] .", "text_b": "he bought milk ."}

    def warmup_ids(self):
        ids = super().warmup_ids()
        ids["input_word_ids"] = [ids["input_word_ids"][0], self.mask_id] + \
            ids["input_word_ids"][2:]
        return ids

    def _tokenize_with_masks(self, text):
        """strings [batch] → ragged ids [batch, (ids)], each literal [MASK] the mask id."""
        pieces = tf_text.regex_split(text, _MASK_PATTERN, keep_delim_regex_pattern=_MASK_PATTERN)
        flat = pieces.flat_values
        is_mask = tf.equal(flat, tokenization.MASK_TOKEN)
        ids = self.tokenizer(flat)  # [pieces, (ids)]
        keep = ids.with_flat_values(tf.repeat(tf.logical_not(is_mask), ids.row_lengths()))
        ids = tf.ragged.boolean_mask(ids, keep)
        masks = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(is_mask, tf.int32))], self.mask_id),
            tf.cast(is_mask, tf.int64))
        ids = tf.concat([ids, masks], axis=1)  # a [MASK] piece is exactly the mask id
        return tf.RaggedTensor.from_row_splits(ids, pieces.row_splits).merge_dims(1, 2)

    def serve_text(self, text_a, text_b):
        a, b = self._tokenize_with_masks(text_a), self._tokenize_with_masks(text_b)
        len_a = tf.cast(a.row_lengths(), tf.int32)
        len_b = tf.cast(b.row_lengths(), tf.int32)
        has_b = tf.cast(len_b > 0, tf.int32)
        new_a, new_b = text_layers.longest_first_lengths(
            len_a, len_b, self.seq_length - 2 - has_b)
        a = tf.ragged.boolean_mask(a, tf.ragged.range(len_a) < new_a[:, tf.newaxis])
        b = tf.ragged.boolean_mask(b, tf.ragged.range(len_b) < new_b[:, tf.newaxis])
        batch = a.nrows(out_type=tf.int32)

        def column(value, lengths=None):
            if lengths is None:
                return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], value))
            return tf.RaggedTensor.from_row_lengths(
                tf.fill([tf.reduce_sum(lengths)], value), tf.cast(lengths, tf.int64))

        word_ids = tf.concat([column(self.cls_id), a, column(self.sep_id), b,
                              column(self.sep_id, has_b)], axis=1)
        type_ids = tf.concat([column(0), tf.zeros_like(a), column(0), tf.ones_like(b),
                              column(1, has_b)], axis=1)
        shape = [None, self.seq_length]
        packed = {"input_word_ids": word_ids.to_tensor(self.pad_id, shape=shape),
                  "input_mask": tf.ones_like(word_ids).to_tensor(0, shape=shape),
                  "input_type_ids": type_ids.to_tensor(0, shape=shape)}
        return self.serve_token_ids(text_layers.trim_padding(packed))

    def serve_token_ids(self, inputs):
        ids = inputs["input_word_ids"]
        is_mask = tf.equal(ids, self.mask_id) & tf.equal(inputs["input_mask"], 1)
        positions = tf.ragged.boolean_mask(
            tf.broadcast_to(tf.range(tf.shape(ids)[1]), tf.shape(ids)), is_mask)
        num_masks = tf.cast(positions.row_lengths(), tf.int32)
        most = tf.reduce_max(tf.concat([num_masks, [0]], 0))
        width = tf.maximum(most, 1)  # the model gathers at least one position
        outputs = self.model({**inputs, "masked_lm_positions": positions.to_tensor(
            0, shape=tf.stack([tf.shape(ids, out_type=tf.int64)[0],
                               tf.cast(width, tf.int64)]))}, training=False)
        probabilities = tf.nn.softmax(outputs["masked_lm_logits"], axis=-1)
        top_probabilities, top_ids = tf.math.top_k(probabilities, k=self.top_k)
        valid = tf.sequence_mask(num_masks, width)[:, :, tf.newaxis]
        top_probabilities = tf.where(valid, top_probabilities, 0.0)[:, :most]
        top_ids = tf.where(valid, top_ids, -1)[:, :most]
        tokens = tf.constant(self._tokens)  # in the graph, not a captured tensor
        top_tokens = tf.where(top_ids >= 0, tf.gather(tokens, tf.maximum(top_ids, 0)), "")
        return {"num_masks": num_masks,
                "masked_lm_positions": positions.to_tensor(-1, shape=tf.stack(
                    [tf.shape(ids, out_type=tf.int64)[0], tf.cast(most, tf.int64)])),
                "top_ids": top_ids, "top_tokens": top_tokens,
                "top_probabilities": top_probabilities,
                "next_sentence_probabilities": tf.nn.softmax(
                    outputs["next_sentence_logits"], axis=-1)}


def export_pretraining_model(model, vocab, do_lower_case, seq_length, export_dir,
                             version=None, max_batch_size=MAX_BATCH_SIZE, int8=False) -> str:
    """Writes the masked-LM / next-sentence SavedModel in TF Serving's layout;
    returns its version dir."""
    module = PretrainingServing(model, vocab, do_lower_case, seq_length,
                                max_batch_size=max_batch_size)
    return module.save(export_dir, version, int8=int8)
