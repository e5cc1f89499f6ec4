"""The token classification (NER) SavedModel: a tag for each word of raw sentences.

An `ExportModule` (`serving.base`; TF Serving's versions, atomic: `serving.versions`;
the vocabulary asset; the warm-up file; the input checks). The tokenizer runs
in the graph (`text.text_layers`, the same ids as `FullTokenizer`), so a
client sends raw strings. Loading needs TensorFlow and `tensorflow_text`
(`import tensorflow_text` before `tf.saved_model.load`), not this project.

`serving_default`:
    inputs:  text       string [batch]        (a sentence, words separated by
                                               white space; was `sentences`)
    outputs: words      string [batch, w]     (the white-space-split words, "" padding)
             tags       string [batch, w]     (the tag of each word, "" padding:
                                               aligned to `words`)
             tag_probabilities float32 [batch, w]  (the tag's probability)
             num_words  int32 [batch]
`serve_ids` (packed ids, one window per row, int32 [batch, seq]):
    outputs: tags       string [batch, seq]   (the tag of every token position;
                                               a word's tag is its first
                                               WordPiece's, as in training)
             tag_ids    int32 [batch, seq]    (index into `metadata()["labels"]`)
             tag_probabilities float32 [batch, seq]
Each word is WordPiece-tokenized on its own and tagged from its first
sub-token, as in training. A sentence longer than `seq_length - 2` sub-tokens
is cut into consecutive chunks that are tagged separately (no word is
dropped; training uses overlapping windows instead, so a word at a chunk
edge sees less context here).
"""

from __future__ import annotations

import tensorflow as tf

from official_bert.serving.base import MAX_BATCH_SIZE, ExportModule
from official_bert.text import text_layers


class TokenClassifierServing(ExportModule):
    """A `BertTokenClassifier` with its in-graph tokenization (module docstring)."""

    TASK = "ner"
    TEXT_INPUTS = {"text": 1}

    def __init__(self, model, vocab, lower_case, seq_length, label_list,
                 max_batch_size=MAX_BATCH_SIZE):
        super().__init__(model, vocab, lower_case, seq_length, max_batch_size=max_batch_size)
        self.chunk = self.seq_length - 2
        self._label_list = [str(label) for label in label_list]

    def _labels(self):
        # A constant of the traced graph, not a captured tensor: the ids
        # signature's converted (ONNX) graph then has no extra input.
        return tf.constant(self._label_list, tf.string)

    def metadata_entries(self):
        return {"labels": tf.constant(self._label_list, tf.string)}

    def warmup_texts(self):
        return {"text": "John Smith went to New York"}

    def serve_token_ids(self, inputs):
        logits = self.model(inputs, training=False)
        probabilities = tf.nn.softmax(logits, axis=-1)
        tag_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"tags": tf.gather(self._labels(), tag_ids), "tag_ids": tag_ids,
                "tag_probabilities": tf.reduce_max(probabilities, axis=-1)}

    def serve_text(self, text):
        sentences = text
        words = tf.strings.split(sentences)  # [batch, (words)]
        pieces = self.tokenizer(words.flat_values)  # [total words, (pieces)]
        # A word WordPiece drops entirely (a control character) becomes [UNK].
        empty = tf.cast(pieces.row_lengths() == 0, tf.int64)
        unk = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(empty)], tf.constant(self.unk_id, tf.int32)), empty)
        pieces = tf.concat([pieces, unk], axis=1)
        counts = pieces.row_lengths()  # per word
        word_sentence = words.value_rowids()
        batch = tf.shape(sentences, out_type=tf.int64)[0]
        tokens_per_sentence = tf.math.unsorted_segment_sum(counts, word_sentence, batch)
        sentence_start = tf.cumsum(tokens_per_sentence, exclusive=True)
        first = tf.cumsum(counts, exclusive=True) - tf.gather(sentence_start, word_sentence)

        tokens = tf.RaggedTensor.from_row_lengths(pieces.flat_values, tokens_per_sentence)
        chunk = tf.constant(self.chunk, tf.int64)
        longest = tf.maximum(tf.reduce_max(tf.concat([tokens_per_sentence, [1]], 0)), 1)
        num_chunks = (longest + chunk - 1) // chunk
        width = num_chunks * chunk
        dense = tokens.to_tensor(0)
        dense = tf.pad(dense, [[0, 0], [0, width - tf.shape(dense, out_type=tf.int64)[1]]])
        chunk_ids = tf.reshape(dense, [-1, chunk])  # [batch * chunks, chunk]
        positions = tf.range(width)[tf.newaxis, :]
        real = tf.cast(positions < tokens_per_sentence[:, tf.newaxis], tf.int32)
        chunk_len = tf.reduce_sum(tf.reshape(real, [-1, chunk]), axis=1)
        rows = tf.shape(chunk_ids)[0]
        ids = tf.concat([tf.fill([rows, 1], self.cls_id), chunk_ids,
                         tf.zeros([rows, 1], tf.int32)], axis=1)
        ids += self.sep_id * tf.one_hot(chunk_len + 1, self.chunk + 2, dtype=tf.int32)
        mask = tf.sequence_mask(chunk_len + 2, self.chunk + 2, dtype=tf.int32)
        # The encoder sees only the longest chunk's length (rounded up to 16,
        # as text_layers.trim_padding); the logits are padded back, and only
        # real tokens' positions are read from them below.
        length = text_layers.trimmed_length(chunk_len + 2, self.chunk + 2)
        logits = self.model({"input_word_ids": ids[:, :length], "input_mask": mask[:, :length],
                             "input_type_ids": tf.zeros_like(ids[:, :length])}, training=False)
        logits = tf.pad(logits, [[0, 0], [0, self.chunk + 2 - length], [0, 0]])
        logits = tf.reshape(logits[:, 1:-1, :], [-1, tf.shape(logits)[-1]])
        flat_index = word_sentence * width + first
        probabilities = tf.nn.softmax(tf.gather(logits, flat_index), axis=-1)
        tag_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        tags = tf.gather(self._labels(), tag_ids)
        scores = tf.reduce_max(probabilities, axis=-1)
        as_ragged = lambda values: tf.RaggedTensor.from_row_splits(values, words.row_splits)
        return {
            "words": words.to_tensor(""),
            "tags": as_ragged(tags).to_tensor(""),
            "tag_probabilities": as_ragged(scores).to_tensor(0.0),
            "num_words": tf.cast(words.row_lengths(), tf.int32),
        }


def export_token_classifier(model, vocab_file, do_lower_case, seq_length, label_list,
                            export_dir, version=None, max_batch_size=MAX_BATCH_SIZE,
                            int8=False) -> str:
    """Writes the NER SavedModel in TF Serving's layout; returns its version dir."""
    module = TokenClassifierServing(model, vocab_file, do_lower_case, seq_length, label_list,
                                    max_batch_size=max_batch_size)
    return module.save(export_dir, version, int8=int8)
