"""What a pre-training set is made of: each instance's record and the counts.

`ExampleCodec` writes google-research/bert's pre-training features as
`tf.train.Example` bytes by hand (`tfrecord_io`), several times faster than
building protos; `GenerationStats` counts what one worker made, and
`count_summary` turns the summed counts into the fractions of the set's
summary. `pretraining_instances` makes the instances that go through them.
"""

from __future__ import annotations

import functools
import itertools
import struct
from operator import itemgetter
from typing import Sequence

from data_prep import tfrecord_io
from data_prep.configs import PretrainingDataConfig



@functools.lru_cache(maxsize=4)
def varints(n: int) -> tuple:
    """The varint encodings of 0 .. n-1, made once per process: an encoder is
    made per pass over the corpus (`stream_records`), and a 30,000-word
    vocabulary's table takes a tenth of a second, longer than a pass over a
    task's small file."""
    return tuple(tfrecord_io.varint(i) for i in range(n))

class ExampleCodec:
    """Hand-serialised `tf.train.Example`s with google-research/bert's features.

    Static (masked) instances, exactly as google's `write_instance_to_example_files`:
      input_ids            int64 [max_seq_length]   ids, 0-padded
      input_mask           int64 [max_seq_length]   1 for tokens, 0 for padding
      segment_ids          int64 [max_seq_length]   0 for [CLS] A [SEP], 1 for B [SEP]
      masked_lm_positions  int64 [max_predictions_per_seq]  sorted, 0-padded
      masked_lm_ids        int64 [max_predictions_per_seq]  original ids, 0-padded
      masked_lm_weights    float [max_predictions_per_seq]  1.0 real / 0.0 padding
      next_sentence_labels int64 [1]   1 = B is a random span, 0 = actual next
    Dynamic (unmasked) instances: input_ids, input_mask, segment_ids,
    next_sentence_labels as above, and with whole-word masking also
      word_start_mask      int64 [max_seq_length]   0 for "##" pieces, else 1
    """

    def __init__(self, max_seq_length: int, max_predictions_per_seq: int, vocab_size: int):
        self.L = L = max_seq_length
        self.P = P = max_predictions_per_seq
        self.ids = varints(max(vocab_size, L + 1))
        self.lens = varints(1 << 14)
        self.zeros = [b"\x00" * k for k in range(max(L, P) + 1)]
        self.ones = [b"\x01" * k for k in range(L + 1)]
        # Positions below 128 are one-byte varints: `bytes(positions)` encodes them.
        self.one_byte_positions = L <= 128
        self.headers = {}
        self.layout_entries = {}
        weight_entries = [
            self._entry("masked_lm_weights", tfrecord_io.float_feature(
                struct.pack("<f", 1.0) * k + b"\x00\x00\x00\x00" * (P - k)))
            for k in range(P + 1)
        ]
        self.nsp_entries = [self._int_entry("next_sentence_labels", self.ids[i]) for i in (0, 1)]
        # masked_lm_weights + next_sentence_labels, by (masked count, label).
        self.tail_entries = [(w + self.nsp_entries[0], w + self.nsp_entries[1])
                             for w in weight_entries]

    def _entry(self, key: str, feature: bytes) -> bytes:
        return tfrecord_io.feature_entry(key, feature)

    def _int_entry(self, key: str, packed: bytes) -> bytes:
        """feature_entry(key, int64_feature(packed)): a cached header + `packed`."""
        header = self.headers.get((key, len(packed)))
        if header is None:
            lens = self.lens
            n = len(packed)
            inner_len = 1 + len(lens[n]) + n
            feat_len = 1 + len(lens[inner_len]) + inner_len
            head = b"\x0a" + tfrecord_io.varint(len(key)) + key.encode()
            entry_len = len(head) + 1 + len(lens[feat_len]) + feat_len
            header = b"".join((b"\x0a", lens[entry_len], head, b"\x12", lens[feat_len],
                               b"\x1a", lens[inner_len], b"\x0a", lens[n]))
            self.headers[(key, n)] = header
        return header + packed

    def _example(self, entries) -> bytes:
        body = b"".join(entries)
        return b"\x0a" + (self.lens[len(body)] if len(body) < 16384
                          else tfrecord_io.varint(len(body))) + body

    def _layout(self, n: int, len_a: int, len_b: int | None) -> bytes:
        """The input_mask and segment_ids entries of `n` tokens, cached: they
        depend on the lengths alone."""
        key = (n, len_a, len_b)
        entries = self.layout_entries.get(key)
        if entries is None:
            if len(self.layout_entries) >= 8192:  # bounded (long sequences have many layouts)
                self.layout_entries.clear()
            pad = self.zeros[self.L - n]
            # len_b None: one segment ([CLS] text [SEP], full-sentence packing).
            segments = (self.zeros[n] if len_b is None
                        else self.zeros[len_a + 2] + self.ones[len_b + 1]) + pad
            entries = (self._int_entry("input_mask", self.ones[n] + pad)
                       + self._int_entry("segment_ids", segments))
            self.layout_entries[key] = entries
        return entries

    def _common(self, tokens: Sequence[int], len_a: int, len_b: int | None) -> list[bytes]:
        n = len(tokens)  # >= 2 ([CLS] ... [SEP]), so itemgetter gives a tuple
        # itemgetter(*tokens)(table) looks every id up in C: ~30% faster than map.
        input_ids = b"".join(itemgetter(*tokens)(self.ids)) + self.zeros[self.L - n]
        return [self._int_entry("input_ids", input_ids), self._layout(n, len_a, len_b)]

    def static(self, tokens, len_a, len_b, positions, labels, is_random_next) -> bytes:
        ids = self.ids.__getitem__
        k = len(positions)
        fill = self.zeros[self.P - k]
        entries = self._common(tokens, len_a, len_b)
        entries.append(self._int_entry("masked_lm_positions", (
            bytes(positions) if self.one_byte_positions
            else b"".join(map(ids, positions))) + fill))
        entries.append(self._int_entry("masked_lm_ids", b"".join(map(ids, labels)) + fill))
        entries.append(self.tail_entries[k][is_random_next])
        return self._example(entries)

    def dynamic(self, tokens, len_a, len_b, is_random_next, word_starts=None) -> bytes:
        entries = self._common(tokens, len_a, len_b)
        entries.append(self.nsp_entries[is_random_next])
        if word_starts is not None:
            entries.append(self._int_entry(
                "word_start_mask", bytes(word_starts) + self.zeros[self.L - len(word_starts)]))
        return self._example(entries)


class GenerationStats:
    """Counters of one worker (summed over workers for the summary)."""

    FIELDS = ("documents", "documents_empty", "documents_one_sentence", "sentences", "tokens",
              "bad_lines_skipped", "instances", "random_next", "random_next_unavailable",
              "real_tokens", "maskable_tokens", "masked", "masked_as_mask",
              "masked_as_random", "masked_as_kept", "whole_word_candidates_skipped")

    def __init__(self):
        for f in self.FIELDS:
            setattr(self, f, 0)
        # With n-gram masking: masked spans by length (index n - 1).
        self.masked_ngrams_by_size: list[int] = []

    def count_ngram(self, n: int) -> None:
        counts = self.masked_ngrams_by_size
        if len(counts) < n:
            counts.extend([0] * (n - len(counts)))
        counts[n - 1] += 1

    def as_dict(self) -> dict:
        out = {f: getattr(self, f) for f in self.FIELDS}
        if self.masked_ngrams_by_size:
            out["masked_ngrams_by_size"] = list(self.masked_ngrams_by_size)
        return out

    @classmethod
    def total(cls, results: Sequence[dict]) -> dict:
        """The sum of several workers' `as_dict()`s."""
        out = {f: sum(r[f] for r in results) for f in cls.FIELDS}
        sizes = [r["masked_ngrams_by_size"] for r in results if "masked_ngrams_by_size" in r]
        if sizes:
            out["masked_ngrams_by_size"] = [sum(c) for c in
                                            itertools.zip_longest(*sizes, fillvalue=0)]
        return out


def count_summary(stats: dict, config: PretrainingDataConfig) -> dict:
    """Derived fractions for the summary (from summed `GenerationStats`)."""
    instances = stats["instances"]
    masked = stats["masked"]
    out = dict(stats)
    out["next_sentence_random_fraction"] = (stats["random_next"] / instances
                                            if instances and config.packing == "sentence_pairs"
                                            else None)
    out["padding_fraction"] = (1 - stats["real_tokens"] / (instances * config.max_seq_length)
                               if instances else None)
    out["tokens_per_instance"] = stats["real_tokens"] / instances if instances else None
    if config.dynamic_masking:
        out["masked_fraction"] = None  # masked at read time
    else:
        out["masked_fraction"] = masked / stats["maskable_tokens"] if instances else None
        out["masked_per_instance"] = masked / instances if instances else None
        out["masked_as_mask_fraction"] = stats["masked_as_mask"] / masked if masked else None
        out["masked_as_random_fraction"] = stats["masked_as_random"] / masked if masked else None
        out["masked_as_kept_fraction"] = stats["masked_as_kept"] / masked if masked else None
        sizes = stats.get("masked_ngrams_by_size")
        if sizes and sum(sizes):
            out["masked_ngram_size_fractions"] = [c / sum(sizes) for c in sizes]
    return out

