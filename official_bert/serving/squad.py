"""A SQuAD SavedModel that answers raw questions: strings in, answer text out.

`export_squad_model(model, vocab, export_dir, ...)` writes a SavedModel whose
`serving_default` signature takes batched `question` and `context` strings and
does everything `data_prep/squad.py` does in Python, in TensorFlow ops:

1. the context is split on white space into words (google's doc tokens: space,
   tab, CR, LF, U+202F), with their byte offsets;
2. each word is tokenized with the `BertTokenizerLayer` logic (the same ids as
   `FullTokenizer`), keeping each WordPiece's character span inside its word;
   the question is tokenized and cut to `max_query_length`;
3. the context WordPieces are split into windows of `max_seq_length -
   len(query) - 3` tokens every `doc_stride` (the window starts are a closed
   form of google's loop), every token is marked in its max-context window
   (google's `_check_is_max_context`, same scores and tie-break), and the
   windows are packed `[CLS] query [SEP] window [SEP]` and run through the model;
4. the answer is google's top prediction: the `n_best_size` best start and end
   logits of each window, legal spans only (inside the context, end >= start,
   at most `max_answer_length` tokens, start at its max-context window), the
   best start + end logit over all windows; v2.0: null score = min over the
   windows of start[CLS] + end[CLS], no answer when null - best > threshold;
5. the text is cut from the context: from the first character of the start
   WordPiece to the last character of the end WordPiece, which is what
   `get_final_text` finds; where its heuristic gives up (the tokenizer changed
   the length of a word, e.g. removed control characters or a combining
   accent, or the span has an [UNK]), whole words, as it does.

An `ExportModule` (`serving.base`: TF Serving's layout, atomic and
versioned; the vocabulary asset; the warm-up file; the input checks), with
two signatures:

`serving_default` (question string [batch], context string [batch]), per question:
    answer        string   the answer text, the context's own characters ("" when
                           there is no legal span, or for v2.0 no answer; a context
                           without a word, empty or white space, has no span: its
                           questions are skipped by `data_prep/squad.py`)
    start_char    int64    the answer is context[start_char:end_char], in Unicode
    end_char      int64    code points; -1 when there is no legal span
    score         float32  start + end logit of the best span
    start_logit   float32  its start logit, and
    end_logit     float32  its end logit (-inf when there is no legal span)
  and for v2.0 (`version_2_with_negative`):
    null_score    float32  min over the windows of start[CLS] + end[CLS]
    score_diff    float32  null_score - score
    is_impossible bool     score_diff > the threshold baked in at export
                           (`--null_score_diff_threshold`, or the tuned one
                           with `--tune_threshold`; `metadata()` has it)
    best_answer   string   the best non-null answer, whatever the decision

`serve_ids` (one packed window per row, `[CLS] question [SEP] context [SEP]`,
int32 [batch, seq]: type 1 on the context and its [SEP]):
    start_logits, end_logits  float32 [batch, seq]  the model's logits
    start_index, end_index    int32 [batch]  the best legal span's first and last
                              token (inside the context, end >= start, at most
                              max_answer_length tokens); -1 when none
    score                     float32 [batch]  its start + end logit
  and for v2.0: null_score, score_diff, is_impossible, as above (one window).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_text as tf_text

from official_bert.serving.base import MAX_BATCH_SIZE, ExportModule
from official_bert.text import text_layers
from official_bert.text.text_layers import basic_tokenize

# google's run_squad.py `is_whitespace`: the characters between doc tokens.
DOC_SPLIT_PATTERN = r"[ \t\r\n\x{202F}]+"

_NEG = -1e30


def _first_argmax(values, axis=-1):
    """Index of the first maximum along `axis` (top-k/sort tie order)."""
    best = tf.reduce_max(values, axis=axis, keepdims=True)
    size = tf.shape(values, out_type=tf.int64)[axis]
    index = tf.range(size, dtype=tf.int64)
    shape = [1] * len(values.shape)
    shape[axis] = -1
    index = tf.reshape(index, shape)
    return tf.reduce_min(tf.where(values >= best, index, size), axis=axis)


class _DocPieces(NamedTuple):
    """The contexts' doc tokens (words) and their WordPieces (`_doc_pieces`)."""

    context: Any  # [B] the contexts, valid UTF-8
    flat_words: Any  # [W] every doc token of the batch
    word_begin: Any  # [B, (words)] byte offsets of each word in its context
    word_end: Any
    word_ids: Any  # [W, (pieces)] WordPiece ids per word
    piece_begin: Any  # [P] each piece's first and end character in its word
    piece_end: Any
    word_aligned: Any  # [W] whether the word keeps its length when tokenized
    piece_word: Any  # [P] the (global) word of each piece
    length: Any  # [B] pieces per context
    ids: Any  # [B, (pieces)] the context's WordPiece ids
    starts: Any  # [B] the index of each context's first piece in [P]


class _Windows(NamedTuple):
    """The windows over the contexts' pieces (`_windows`), K in all."""

    ragged: Any  # [B, (windows)] their numbers per example
    example: Any  # [K] the example of each window
    index: Any  # [K] its number within the example
    start: Any  # [K] its first piece, and
    length: Any  # [K] its number of pieces
    positions: Any  # [K, (length)] the piece positions (in the context) of each window
    pos_window: Any  # [T] the window of each of them, flat
    pos: Any  # [T] the positions, flat
    tokens: Any  # [K, (length)] the WordPiece ids of each window


class _BestSpan(NamedTuple):
    """The best span of each example (`_best_window`)."""

    found: Any  # [B] whether there is a legal span
    score: Any  # [B] its start + end logit
    window: Any  # [B] the window it is in (0 when none)
    start_tok: Any  # [B] its first and last token in the packed window
    end_tok: Any
    start_logit: Any  # [B] its logits (-inf when none)
    end_logit: Any


class SquadServingModule(ExportModule):
    """The raw-text SQuAD graph around a `BertSpanLabeler` (see the module docstring)."""

    TASK = "squad"
    TEXT_INPUTS = {"question": 1, "context": 1}
    # Requests run at their longest window's length; False packs every window
    # to max_seq_length (benchmarks/serving_speed.py's "padded" rows).
    TRIM_PADDING = True

    def __init__(self, model, vocab, lower_case=True, max_seq_length=384, doc_stride=128,
                 max_query_length=64, n_best_size=20, max_answer_length=30,
                 version_2_with_negative=False, null_score_diff_threshold=0.0,
                 max_batch_size=MAX_BATCH_SIZE):
        if max_seq_length <= max_query_length + 3:
            raise ValueError(f"max_seq_length ({max_seq_length}) must be greater than "
                             f"max_query_length ({max_query_length}) + 3")
        super().__init__(model, vocab, lower_case, max_seq_length,
                         max_batch_size=max_batch_size, name="squad_serving")
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)
        self.n_best_size = int(n_best_size)
        self.max_answer_length = int(max_answer_length)
        self.version_2 = bool(version_2_with_negative)
        self.threshold = float(null_score_diff_threshold)

    def metadata_entries(self):
        return {"version_2_with_negative": self.version_2,
                "null_score_diff_threshold": self.threshold, "doc_stride": self.doc_stride,
                "max_query_length": self.max_query_length, "n_best_size": self.n_best_size,
                "max_answer_length": self.max_answer_length}

    def warmup_texts(self):
        return {"question": "who went to the store?",
                "context": "The man went to the store and bought a gallon of milk."}

    def warmup_ids(self):
        # [CLS] q [SEP] context... [SEP]: type 1 on the context.
        length = min(self.seq_length, self.max_positions)
        ids = [self.cls_id, self.unk_id, self.sep_id] + [self.unk_id] * (length - 4) + [self.sep_id]
        return {"input_word_ids": ids, "input_mask": [1] * length,
                "input_type_ids": [0, 0, 0] + [1] * (length - 3)}

    # --- tokenization with WordPiece character spans ---------------------

    def _tokenize_words(self, words):
        """words [N] → (ids [N, (pieces)], piece char begin/end in the word
        (spaces removed), whether the word keeps its length when tokenized)."""
        tok = self.tokenizer
        basic = basic_tokenize(words, tok.lower_case, tok._lower_table)  # [N, (b)]
        basic_chars = tf.strings.length(basic.flat_values, unit="UTF8_CHAR")
        too_long = basic_chars > tok.max_input_chars_per_word
        pieces_in = basic.with_flat_values(
            tf.where(too_long, tok.unknown_token, basic.flat_values))
        ids, begin, end = tok._wordpiece.tokenize_with_offsets(pieces_in)  # [N, (b), (p)]
        parent = ids.values.value_rowids()  # piece → basic token
        token = tf.gather(pieces_in.flat_values, parent)
        begin_b, end_b = begin.flat_values, end.flat_values
        char_begin = tf.strings.length(tf.strings.substr(token, tf.zeros_like(begin_b), begin_b), unit="UTF8_CHAR")
        char_end = tf.strings.length(tf.strings.substr(token, tf.zeros_like(end_b), end_b), unit="UTF8_CHAR")
        long_piece = tf.gather(too_long, parent)
        char_begin = tf.where(long_piece, 0, char_begin)
        char_end = tf.where(long_piece, tf.gather(basic_chars, parent), char_end)
        # Offset of each basic token inside its word, spaces removed.
        basic_chars64 = tf.cast(basic_chars, tf.int64)
        exclusive = tf.cumsum(basic_chars64, exclusive=True)
        word_first = tf.gather(tf.concat([exclusive, [0]], 0), basic.row_starts())
        basic_offset = exclusive - tf.gather(word_first, basic.value_rowids())
        piece_begin = tf.gather(basic_offset, parent) + tf.cast(char_begin, tf.int64)
        piece_end = tf.gather(basic_offset, parent) + tf.cast(char_end, tf.int64)
        ids = tf.cast(ids.merge_dims(1, 2), tf.int32)  # [N, (pieces)]
        normalized_chars = tf.math.unsorted_segment_sum(
            basic_chars64, basic.value_rowids(), tf.shape(words, out_type=tf.int64)[0])
        aligned = tf.equal(normalized_chars,
                           tf.cast(tf.strings.length(words, unit="UTF8_CHAR"), tf.int64))
        return ids, piece_begin, piece_end, aligned

    # --- the graph ----------------------------------------------------------

    def serve_text(self, question, context):
        return self.answer(question, context)

    def _best_spans(self, start_logits, end_logits, start_ok, end_ok):
        """google's n-best search in each window: the `n_best_size` best starts x
        ends, legal pairs only (start_ok / end_ok [K, S], end >= start, at most
        max_answer_length tokens). Returns per window the best score (_NEG
        when none), its start and end token, and their logits."""
        S = tf.shape(start_logits)[1]
        n = tf.minimum(self.n_best_size, S)
        s_val, s_idx = tf.math.top_k(start_logits, k=n)  # ties: lower index first
        e_val, e_idx = tf.math.top_k(end_logits, k=n)
        s_ok = tf.gather(start_ok, s_idx, batch_dims=1)
        e_ok = tf.gather(end_ok, e_idx, batch_dims=1)
        si, ei = s_idx[:, :, tf.newaxis], e_idx[:, tf.newaxis, :]
        legal = (s_ok[:, :, tf.newaxis] & e_ok[:, tf.newaxis, :] & (ei >= si)
                 & (ei - si + 1 <= self.max_answer_length))
        pair_score = s_val[:, :, tf.newaxis] + e_val[:, tf.newaxis, :]
        k = tf.shape(start_logits)[0]
        pair_score = tf.reshape(tf.where(legal, pair_score, _NEG), [k, n * n])
        pair_best = tf.cast(_first_argmax(pair_score, axis=1), tf.int32)
        best = tf.reduce_max(pair_score, axis=1)
        rows = pair_best // n
        cols = pair_best % n
        return (best, tf.gather(s_idx, rows, batch_dims=1), tf.gather(e_idx, cols, batch_dims=1),
                tf.gather(s_val, rows, batch_dims=1), tf.gather(e_val, cols, batch_dims=1))

    def serve_token_ids(self, inputs):
        outputs = self.model(inputs, training=False)
        start_logits = tf.cast(outputs["start_logits"], tf.float32)
        end_logits = tf.cast(outputs["end_logits"], tf.float32)
        mask = tf.cast(inputs["input_mask"], tf.int32)
        length = tf.reduce_sum(mask, axis=1, keepdims=True)
        position = tf.range(tf.shape(mask)[1])[tf.newaxis, :]
        # The context: type 1, real, before the window's last [SEP].
        context = (tf.equal(inputs["input_type_ids"], 1) & tf.equal(mask, 1)
                   & (position < length - 1))
        padding = tf.equal(mask, 0)
        best, start, end, _, _ = self._best_spans(
            tf.where(padding, -1e4, start_logits), tf.where(padding, -1e4, end_logits),
            context, context)
        found = best > _NEG / 2
        result = {"start_logits": start_logits, "end_logits": end_logits,
                  "start_index": tf.where(found, start, -1), "end_index": tf.where(found, end, -1),
                  "score": tf.where(found, best, -float("inf"))}
        if self.version_2:
            null_score = start_logits[:, 0] + end_logits[:, 0]
            score_diff = null_score - tf.where(found, best, 0.0)
            result.update(null_score=null_score, score_diff=score_diff,
                          is_impossible=score_diff > self.threshold)
        return result

    # --- the raw-text graph, step by step (the module docstring's 1-5) -----

    def answer(self, question, context):
        """`serving_default`'s outputs for a batch of questions and their
        contexts (see the module docstring)."""
        batch = tf.shape(context, out_type=tf.int64)[0]
        # Invalid UTF-8 is dropped up front, as the Python reader's decoding does.
        context = tf.strings.unicode_transcode(context, "UTF-8", "UTF-8", errors="ignore")
        doc = self._doc_pieces(context, batch)
        query = self.tokenizer(question)[:, :self.max_query_length]
        q_len = query.row_lengths()
        windows = self._windows(doc, q_len)
        is_max = self._max_context(windows)
        k = tf.shape(windows.index, out_type=tf.int64)[0]  # the number of windows
        inputs, max_ctx, in_ctx = self._pack(windows, k, query, is_max)
        start_logits, end_logits = self._window_logits(inputs)
        best = self._best_window(windows, k, start_logits, end_logits, max_ctx, in_ctx, batch)
        text, start_char, end_char = self._answer_text(doc, windows, q_len, best, batch)
        text = tf.where(best.found, text, "")
        start_char = tf.where(best.found, start_char, -1)
        end_char = tf.where(best.found, end_char, -1)
        score = tf.where(best.found, best.score, -float("inf"))
        result = {"start_char": start_char, "end_char": end_char, "score": score,
                  "start_logit": best.start_logit, "end_logit": best.end_logit}
        if self.version_2:
            null_k = start_logits[:, 0] + end_logits[:, 0]
            null_score = tf.math.unsorted_segment_min(null_k, windows.example, batch)
            # predict "" iff the null score - the score of best non-null > threshold
            score_diff = null_score - tf.where(best.found, best.score, 0.0)
            impossible = score_diff > self.threshold
            result.update(null_score=null_score, score_diff=score_diff,
                          is_impossible=impossible, best_answer=text)
            text = tf.where(impossible, "", text)
        result["answer"] = text
        return result

    def _doc_pieces(self, context, batch) -> "_DocPieces":
        """1. and 2.: the context's doc tokens with their byte offsets, and their
        WordPieces, per word and per example."""
        words, word_begin, word_end = tf_text.regex_split_with_offsets(
            context, DOC_SPLIT_PATTERN, "")
        word_example = words.value_rowids()
        flat_words = words.flat_values
        word_ids, piece_begin, piece_end, word_aligned = self._tokenize_words(flat_words)
        piece_word = word_ids.value_rowids()  # global word index of each piece
        pieces_per_word = word_ids.row_lengths()
        doc_len = tf.math.unsorted_segment_sum(pieces_per_word, word_example, batch)
        doc_ids = tf.RaggedTensor.from_row_lengths(word_ids.flat_values, doc_len)
        return _DocPieces(context, flat_words, word_begin, word_end, word_ids, piece_begin,
                          piece_end, word_aligned, piece_word, doc_len, doc_ids,
                          doc_ids.row_starts())

    def _windows(self, doc, q_len) -> "_Windows":
        """3. Windows: starts 0, s, 2s, ... until one reaches the end (at least one)."""
        max_doc = self.seq_length - q_len - 3
        stride = tf.minimum(max_doc, self.doc_stride)
        extra = tf.maximum(doc.length - max_doc, 0)
        num_windows = 1 + (extra + stride - 1) // stride
        windows = tf.ragged.range(num_windows)  # [B, (n)]
        win_example = windows.value_rowids()
        win_index = windows.flat_values
        win_start = win_index * tf.gather(stride, win_example)
        win_len = tf.minimum(tf.gather(max_doc, win_example),
                             tf.gather(doc.length, win_example) - win_start)
        positions = tf.ragged.range(win_start, win_start + win_len)  # [K, (len)]
        pos_window = positions.value_rowids()
        pos = positions.flat_values
        global_piece = pos + tf.gather(tf.gather(doc.starts, win_example), pos_window)
        window_doc = positions.with_flat_values(tf.gather(doc.ids.flat_values, global_piece))
        return _Windows(windows, win_example, win_index, win_start, win_len, positions,
                        pos_window, pos, window_doc)

    def _max_context(self, w) -> tf.RaggedTensor:
        """Whether each window token is in its max-context window (google's
        _check_is_max_context): the score over every window of the example that
        holds the token, the first best window wins."""
        starts_b = w.ragged.with_flat_values(w.start).to_tensor(0)  # [B, Nmax]
        lens_b = w.ragged.with_flat_values(w.length).to_tensor(0)
        valid_b = w.ragged.with_flat_values(tf.ones_like(w.start, tf.bool)).to_tensor(False)
        pos_example = tf.gather(w.example, w.pos_window)
        s_j = tf.gather(starts_b, pos_example)
        l_j = tf.gather(lens_b, pos_example)
        e_j = s_j + l_j - 1
        p = w.pos[:, tf.newaxis]
        contains = tf.gather(valid_b, pos_example) & (p >= s_j) & (p <= e_j)
        score = (tf.cast(tf.minimum(p - s_j, e_j - p), tf.float64)
                 + 0.01 * tf.cast(l_j, tf.float64))
        score = tf.where(contains, score, tf.constant(-1.0, tf.float64))
        best_window = _first_argmax(score, axis=1)
        return w.positions.with_flat_values(
            tf.equal(best_window, tf.gather(w.index, w.pos_window)))

    def _pack(self, w, k, query, is_max):
        """[CLS] query [SEP] window [SEP] for each of the `k` windows: (the model's
        inputs, whether each position is in its max-context window, whether it is
        the context)."""
        win_query = tf.gather(query, w.example)

        def column(value, dtype=tf.int32):
            return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([k, 1]), tf.cast(value, dtype)))

        word_ids_in = tf.concat([column(self.cls_id), win_query, column(self.sep_id),
                                 w.tokens, column(self.sep_id)], axis=1)
        type_ids = tf.concat([column(0), tf.zeros_like(win_query), column(0),
                              tf.ones_like(w.tokens), column(1)], axis=1)
        no = column(False, tf.bool)
        max_ctx = tf.concat([no, tf.zeros_like(win_query, tf.bool), no, is_max, no], axis=1)
        in_ctx = tf.concat([no, tf.zeros_like(win_query, tf.bool), no,
                            tf.ones_like(w.tokens, tf.bool), no], axis=1)
        # Each request is only as long as its longest window (rounded up to 16,
        # as text_layers.trim_padding): short contexts do not pay for S
        # positions, and padding never changes an answer.
        length = (text_layers.trimmed_length(word_ids_in.row_lengths(), self.seq_length)
                  if self.TRIM_PADDING else self.seq_length)
        shape = tf.stack([k, tf.cast(length, tf.int64)])
        inputs = {
            "input_word_ids": word_ids_in.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(word_ids_in).to_tensor(0, shape=shape),
            "input_type_ids": type_ids.to_tensor(0, shape=shape),
        }
        return inputs, max_ctx.to_tensor(False, shape=shape), in_ctx.to_tensor(False, shape=shape)

    def _window_logits(self, inputs):
        """The model's start and end logits per window, float32; padding can never
        be a candidate (data_prep.squad's post-processing reads only each
        window's tokens)."""
        outputs = self.model(inputs, training=False)
        padding = tf.equal(inputs["input_mask"], 0)
        start_logits = tf.where(padding, -1e4, tf.cast(outputs["start_logits"], tf.float32))
        end_logits = tf.where(padding, -1e4, tf.cast(outputs["end_logits"], tf.float32))
        return start_logits, end_logits

    def _best_window(self, w, k, start_logits, end_logits, max_ctx, in_ctx, batch,
                     ) -> "_BestSpan":
        """4. n-best starts x ends per window, legal spans only; the best window."""
        win_best, win_start_tok, win_end_tok, win_start_logit, win_end_logit = self._best_spans(
            start_logits, end_logits, in_ctx & max_ctx, in_ctx)
        ex_best = tf.math.unsorted_segment_max(win_best, w.example, batch)
        candidate = tf.where(tf.equal(win_best, tf.gather(ex_best, w.example)),
                             tf.range(k), k)
        best_k = tf.math.unsorted_segment_min(candidate, w.example, batch)  # [B]
        found = ex_best > _NEG / 2
        best_k = tf.where(found, best_k, 0)
        return _BestSpan(
            found, ex_best, best_k,
            start_tok=tf.cast(tf.gather(win_start_tok, best_k), tf.int64),
            end_tok=tf.cast(tf.gather(win_end_tok, best_k), tf.int64),
            start_logit=tf.where(found, tf.gather(win_start_logit, best_k), -float("inf")),
            end_logit=tf.where(found, tf.gather(win_end_logit, best_k), -float("inf")))

    def _answer_text(self, doc, w, q_len, best, batch):
        """5. Back to the context: WordPiece → word → characters. Returns the
        answer's text and its first and end character."""
        offset = (tf.gather(w.start, best.window)
                  - tf.gather(q_len, tf.gather(w.example, best.window)) - 2)
        example_range = tf.range(batch)
        g_start = tf.gather(doc.starts, example_range) + best.start_tok + offset
        g_end = tf.gather(doc.starts, example_range) + best.end_tok + offset
        num_pieces = tf.shape(doc.piece_word, out_type=tf.int64)[0]
        g_start = tf.clip_by_value(tf.where(best.found, g_start, 0), 0,
                                   tf.maximum(num_pieces - 1, 0))
        g_end = tf.clip_by_value(tf.where(best.found, g_end, 0), 0,
                                 tf.maximum(num_pieces - 1, 0))
        start_byte, end_byte = self._byte_span(doc, g_start, g_end)
        context = doc.context
        text = tf.strings.substr(context, start_byte, end_byte - start_byte)
        start_char = tf.cast(tf.strings.length(
            tf.strings.substr(context, tf.zeros_like(start_byte), start_byte),
            unit="UTF8_CHAR"), tf.int64)
        end_char = start_char + tf.cast(tf.strings.length(text, unit="UTF8_CHAR"), tf.int64)
        return text, start_char, end_char

    def _byte_span(self, doc, g_start, g_end):
        """The context bytes from the first character of WordPiece `g_start` to
        the last of `g_end`; whole words where google's get_final_text gives up
        (a word changed length when tokenized, or the span has an [UNK]).

        Every lookup into the batch's flat word and piece tables goes through
        `at`: an example without a legal span (found=False, its answer then
        replaced by "") points at piece 0, which a batch whose contexts are all
        empty or white space (no word), or hold no WordPiece (only characters
        the tokenizer drops), does not have. `at` reads a neutral value past a
        table's end instead of failing (CPU) or reading zeros (GPU)."""

        def at(table, index, past_end):
            size = tf.shape(table, out_type=tf.int64)[0]
            padded = tf.concat([table, tf.fill([1], tf.constant(past_end, table.dtype))], 0)
            return tf.gather(padded, tf.minimum(index, size))

        w_start = at(doc.piece_word, g_start, 0)
        w_end = at(doc.piece_word, g_end, 0)
        # Changed words and [UNK] pieces before each word / piece (one more at the end).
        bad_word = tf.concat([[0], tf.cumsum(tf.cast(tf.logical_not(doc.word_aligned),
                                                     tf.int64))], 0)
        unk = tf.concat([[0], tf.cumsum(tf.cast(tf.equal(doc.word_ids.flat_values,
                                                         self.unk_id), tf.int64))], 0)
        whole = ((at(bad_word, w_end + 1, 0) - at(bad_word, w_start, 0)) > 0) | (
            (at(unk, g_end + 1, 0) - at(unk, g_start, 0)) > 0)
        begin = doc.word_begin.flat_values

        def byte_in_word(word, chars):
            return tf.cast(tf.strings.length(
                tf.strings.substr(word, tf.zeros_like(chars), chars, unit="UTF8_CHAR")), tf.int64)

        start_byte = at(begin, w_start, 0) + tf.where(
            whole, tf.zeros_like(w_start),
            byte_in_word(at(doc.flat_words, w_start, ""), at(doc.piece_begin, g_start, 0)))
        end_byte = tf.where(
            whole, at(doc.word_end.flat_values, w_end, 0),
            at(begin, w_end, 0)
            + byte_in_word(at(doc.flat_words, w_end, ""), at(doc.piece_end, g_end, 0)))
        return start_byte, end_byte

def export_squad_model(model, vocab, export_dir, lower_case=True, max_seq_length=384,
                       doc_stride=128, max_query_length=64, n_best_size=20,
                       max_answer_length=30, version_2_with_negative=False,
                       null_score_diff_threshold=0.0, version=None,
                       max_batch_size=MAX_BATCH_SIZE, int8=False):
    """Writes the raw-text SQuAD SavedModel in TF Serving's layout
    (`export_dir/<version>/`, `serving.versions`); returns the version directory.

    Args:
        model: a `BertSpanLabeler` (dict of ids in, start/end logits out).
        vocab: vocabulary file path or list of tokens.
        The rest: as the `run_squad.py` flags of the same names (the threshold
        is the one baked into the v2.0 no-answer decision).
    """
    module = SquadServingModule(
        model, vocab, lower_case=lower_case, max_seq_length=max_seq_length,
        doc_stride=doc_stride, max_query_length=max_query_length, n_best_size=n_best_size,
        max_answer_length=max_answer_length, version_2_with_negative=version_2_with_negative,
        null_score_diff_threshold=null_score_diff_threshold, max_batch_size=max_batch_size)
    return module.save(os.fspath(export_dir), version, int8=int8)
