"""Masked-LM + next-sentence instances from tokenized documents (library code, no flags).

This is google-research/bert's `create_pretraining_data.py` algorithm, reworked
to stream: documents arrive one at a time and instances leave as they are
made, so memory does not grow with the corpus. Token ids are used throughout
(never token strings) and the `tf.train.Example` bytes are written by hand
(`pretraining_records.ExampleCodec`), which with the cached tokenizer makes it
several times faster.

What is the same as google-research/bert:
  * segments are packed from whole sentences up to a target length
    (`max_seq_length - 3`, or with probability `short_seq_prob` a random
    length in [2, max_seq_length - 3], drawn once per document pass);
  * A = a random number of leading sentences of the chunk, B = the rest
    (actual next) or a span of sentences from a random other document
    starting at a random sentence (random next), and in that case the
    chunk's unused sentences are put back;
  * the pair is truncated by repeatedly trimming the longer side, from the
    front or the back at random;
  * `[CLS] A [SEP] B [SEP]`, segment ids 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`;
  * up to `max_predictions_per_seq` positions masked, never `[CLS]`/`[SEP]`,
    80% `[MASK]` / 10% random token / 10% unchanged per position; whole-word
    masking masks all pieces of a word or none (google's greedy over shuffled
    words, skipping words that do not fit);
  * output features, names, types and shapes (see `pretraining_records.ExampleCodec`).

N-gram masking (`max_ngram_size` > 1; tensorflow/models official/nlp's
`--max_ngram_size`, SpanBERT-like spans): `choose_ngrams` masks spans of 1 to
`max_ngram_size` contiguous units (whole words with `do_whole_word_mask`,
word pieces without; never across [SEP]), the span length n drawn with
probability ∝ 1/n as official/nlp draws it, within the same budget of masked
tokens; each masked token is then [MASK] / random / kept 80/10/10 as above.
`max_ngram_size=1` runs the code above unchanged (byte-identical files).

Full-sentence packing (`packing="full_sentences"`, RoBERTa's FULL-SENTENCES
inputs, no next-sentence task; `FullSentencePacker`): each instance is
`[CLS]` + the next `max_seq_length - 2` tokens of the stream of sentences
+ `[SEP]`, the stream crossing document boundaries with a `[SEP]` between two
documents (none where a boundary falls between two instances: the closing
`[SEP]` marks it). Instances are full, so there is no padding but in a pass's
last one; unlike RoBERTa, which keeps sentences whole and pads the rest, the
sentence at an instance's end continues in the next instance (as Hugging
Face's `run_mlm.py` groups texts). Segment ids are all 0 and
`next_sentence_labels` a constant 0 (google's readers still read the files);
the set's summary says `packing: full_sentences`, and run_pretraining then
trains the masked LM alone. Each of the `dupe_factor` passes is its own
stream over the worker's documents in order, masked afresh.

What differs, on purpose (each is documented where it happens):
  1. Next-sentence labels are exactly balanced. google's code always uses a
     random B when the chunk holds one sentence (a long sentence, a short
     target, a document's last sentence), which gives 53.5% "random" on the
     shared corpus. Here the label is drawn first, from a shuffled deck of
     five "random" and five "actual" cards, so every label is a fair coin and
     the split is 50/50 to within 5 instances per worker; a one-sentence chunk
     with an "actual" label takes the document's next sentence as B (or, at
     the end of the document, the previous sentence as A).
  2. Random-next B spans come from a bounded reservoir (`RandomNextPool`) of
     candidate spans of the documents seen so far, never from the same
     document, instead of from the whole corpus in memory.
  3. The number of masked positions is `masked_lm_prob` times the number of
     maskable (non-special) tokens with unbiased random rounding (google:
     `round(len(tokens) * masked_lm_prob)`, counting [CLS]/[SEP], which gives
     ~15.2% of the maskable tokens at length 128), at least 1, at most
     `max_predictions_per_seq`.
  4. The 10% random replacements are drawn from the ordinary tokens of the
     vocabulary, never `[PAD]`/`[CLS]`/`[SEP]`/`[MASK]`/`[UNK]`/`[unusedN]`
     (google draws from the whole vocabulary, so it can insert a `[SEP]`).
  5. A word piece `##x` right after `[CLS]`/`[SEP]` (its word's head was
     truncated away) starts its own whole word; google joins it to the last
     word of A across the `[SEP]`.
  6. Instances are shuffled in a bounded buffer, not globally; the reader
     shuffles again.
"""

from __future__ import annotations

import bisect
import itertools
import random
from typing import Iterator, Sequence

from data_prep.configs import PretrainingDataConfig
from data_prep.pretraining_records import ExampleCodec, GenerationStats
from official_bert.errors import BadFileError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class VocabInfo:
    """What generation needs from a vocabulary (token → id mapping)."""

    def __init__(self, vocab: dict, name: str = "the vocabulary"):
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise BadFileError(name, f"lacks the special token(s) {', '.join(missing)}",
                               fix="BERT needs [PAD] [UNK] [CLS] [SEP] [MASK]: use the "
                                   "checkpoint's vocab.txt, or build one with `bert "
                                   "build-vocab` (it adds them)")
        self.size = max(vocab.values()) + 1
        self.pad_id = vocab["[PAD]"]
        self.unk_id = vocab["[UNK]"]
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self.mask_id = vocab["[MASK]"]
        self.is_continuation = bytearray(self.size)
        self.random_ids = []
        for token, i in vocab.items():
            if token.startswith("##"):
                self.is_continuation[i] = 1
            if not (len(token) > 2 and token.startswith("[") and token.endswith("]")):
                self.random_ids.append(i)
        self.random_ids.sort()
        if not self.random_ids:
            raise BadFileError(name, "has no ordinary tokens (only [bracketed] special "
                               "ones)", fix="use a WordPiece vocabulary")


class RandomNextPool:
    """A bounded, uniform sample of candidate "random next" B spans.

    google-research/bert keeps every document in memory and, for a random
    next sentence, picks a random other document and a random sentence in it,
    then takes sentences from there until the B target length. Streaming, we
    cannot look at every document, so each document contributes
    `spans_per_document` (or, if shorter, one per sentence) candidate spans —
    each from a random start sentence, as many sentences as needed to reach
    `max_num_tokens` tokens — and a reservoir sample (Algorithm R) keeps
    `capacity` of all spans seen so far, uniformly. A random B is the prefix
    of a random span, from a different document, that reaches the target
    length, exactly as google builds B from its random start. Memory:
    `capacity` × about `max_num_tokens` ids.
    """

    def __init__(self, capacity: int, spans_per_document: int, max_num_tokens: int):
        self.capacity = capacity
        self.spans_per_document = spans_per_document
        self.max_num_tokens = max_num_tokens
        self.max_span_tokens = 2 * max_num_tokens
        self.items: list[tuple[int, list[int], list[int]]] = []
        self.seen = 0

    def add_document(self, doc_id: int, document: Sequence[Sequence[int]],
                     rng: random.Random) -> None:
        n = len(document)
        for _ in range(min(n, self.spans_per_document)):
            start = rng.randrange(n)
            flat: list[int] = []
            ends: list[int] = []
            for j in range(start, n):
                flat.extend(document[j])
                if len(flat) >= self.max_num_tokens:
                    del flat[self.max_span_tokens:]  # bound memory on huge sentences
                    ends.append(len(flat))
                    break
                ends.append(len(flat))
            if not flat:  # only empty lines (another worker's document, lazily tokenized)
                continue
            span = (doc_id, flat, ends)
            self.seen += 1
            if len(self.items) < self.capacity:
                self.items.append(span)
            else:
                r = rng.randrange(self.seen)
                if r < self.capacity:
                    self.items[r] = span

    def random_b(self, doc_id: int, target_b_length: int, rng: random.Random):
        """Tokens of a random B of at least `target_b_length` tokens (if the
        span allows), never from `doc_id`; None if no other document is known."""
        items = self.items
        if not items:
            return None
        for _ in range(10):
            span = items[rng.randrange(len(items))]
            if span[0] != doc_id:
                break
        else:
            others = [s for s in items if s[0] != doc_id]
            if not others:
                return None
            span = others[rng.randrange(len(others))]
        _, flat, ends = span
        m = bisect.bisect_left(ends, target_b_length)
        if m >= len(ends):
            m = len(ends) - 1
        return flat[: ends[m]]


def choose_ngrams(units: Sequence[Sequence[int]], budget: int, max_ngram_size: int,
                  rng: random.Random) -> list[tuple[int, int]]:
    """Spans of contiguous units to mask: [(first unit, n), ...] in the order chosen.

    tensorflow/models official/nlp's `_masking_ngrams`, with its semantics:
    every run of n = 1..`max_ngram_size` units whose positions touch (so never
    across [SEP]) is a candidate; each draw picks n with probability ∝ 1/n,
    then a random candidate of that length; chosen spans never overlap and
    hold at most `budget` tokens in all. Two deliberate differences: a drawn
    candidate that overlaps or does not fit is discarded and the next one *of
    the same n* is tried (official/nlp draws n again, which under-represents
    long spans); n is drawn from `rng` (official/nlp uses the global `random`,
    so its output does not follow --random_seed).

    A candidate that does not fit now never fits later (spans only accumulate
    and the budget only shrinks), so discarding it is safe, and each n drawn
    while some span of every length still fits is exactly ∝ 1/n (the tests
    check this). Near the end of the budget only shorter spans fit, so over
    whole sequences short spans are a little more frequent than 1/n.

    Args:
      units: the maskable units in position order, each a list of token
        positions (a word's pieces, or one piece).
      budget: the most tokens to mask.
      max_ngram_size: the longest span, in units.
      rng: the generator's random source.
    """
    num_units = len(units)
    # breaks[i]: units before i that do not touch their successor (a prefix count).
    breaks = [0] * (num_units + 1)
    costs = [0] * (num_units + 1)  # tokens in units before i (a prefix sum)
    for i, unit in enumerate(units):
        touches = i + 1 < num_units and units[i + 1][0] == unit[-1] + 1
        breaks[i + 1] = breaks[i] + (not touches)
        costs[i + 1] = costs[i] + len(unit)
    taken = bytearray(num_units)
    used = 0

    def fits(start: int, n: int) -> bool:
        return (breaks[start + n - 1] == breaks[start]
                and used + costs[start + n] - costs[start] <= budget
                and not any(taken[start: start + n]))

    sizes = list(range(1, min(max_ngram_size, num_units) + 1))
    total = sum(1.0 / m for m in sizes)
    chosen: list[tuple[int, int]] = []
    random_ = rng.random
    while used < budget and sizes:
        u = random_() * total  # n with probability (1/n) / total
        for n in sizes:
            u -= 1.0 / n
            if u < 0:
                break
        # A uniformly random span of n units among those that fit: a few
        # random tries (almost always enough), else all of them listed. A span
        # that does not fit now never will, so this equals drawing from
        # official/nlp's shuffled list and discarding what does not fit.
        starts = num_units - n + 1
        for _ in range(8):
            start = int(random_() * starts)
            if fits(start, n):
                break
        else:
            fitting = [s for s in range(starts) if fits(s, n)]
            if not fitting:  # no span of n units fits any more
                sizes.remove(n)
                total = sum(1.0 / m for m in sizes)
                continue
            start = fitting[int(random_() * len(fitting))]
        cost = costs[start + n] - costs[start]
        taken[start: start + n] = b"\x01" * n
        used += cost
        chosen.append((start, n))
    return chosen


def truncation(len_a: int, len_b: int, max_num_tokens: int) -> tuple[int, int]:
    """How many tokens google's `truncate_seq_pair` removes from A and from B.

    It removes one token at a time from the longer side (B on ties) until the
    pair fits, so the counts do not depend on the random choices; only where
    each token comes from (front or back, a fair coin each) does. The caller
    draws that as a binomial count.
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0
    drop_a = drop_b = 0
    if len_a > len_b:
        d = min(excess, len_a - len_b)
        drop_a, excess = d, excess - d
    elif len_b > len_a:
        d = min(excess, len_b - len_a)
        drop_b, excess = d, excess - d
    # Equal lengths now: B first, then alternating.
    return drop_a + excess // 2, drop_b + (excess + 1) // 2


class InstanceMaker:
    """Turns tokenized documents into serialized examples (one worker's state)."""

    def __init__(self, config: PretrainingDataConfig, vocab: VocabInfo, rng: random.Random,
                 stats: GenerationStats | None = None):
        config.validate()
        self.config = config
        self.vocab = vocab
        self.rng = rng
        self.stats = stats or GenerationStats()
        self.max_num_tokens = config.max_seq_length - 3  # [CLS], [SEP], [SEP]
        self.pool = RandomNextPool(config.random_next_pool_size,
                                   config.random_next_spans_per_document, self.max_num_tokens)
        self.codec = ExampleCodec(config.max_seq_length, config.max_predictions_per_seq,
                                  vocab.size)
        self._deck: list[bool] = []

    # ---------------------------------------------------------------- NSP labels
    def _next_is_random(self) -> bool:
        # A shuffled deck of 5 "random" and 5 "actual": each label is a fair
        # coin, and the split is balanced to within 5 per worker.
        if not self._deck:
            self._deck = [True] * 5 + [False] * 5
            self.rng.shuffle(self._deck)
        return self._deck.pop()

    # ---------------------------------------------------------------- pairs
    def pairs(self, doc_id: int, document: Sequence[Sequence[int]]
              ) -> Iterator[tuple[list[int], list[int], bool]]:
        """(tokens_a, tokens_b, is_random_next) for one pass over a document.

        `document` is a list of sentences (lists of ids), at least two.
        """
        rng = self.rng
        max_num_tokens = self.max_num_tokens
        # We *usually* want to fill up the entire sequence since we are padding
        # to `max_seq_length` anyways, so short sequences are generally wasted
        # computation. However, we *sometimes*
        # (i.e., short_seq_prob == 0.1 == 10% of the time) want to use shorter
        # sequences to minimize the mismatch between pre-training and fine-tuning.
        # The `target_seq_length` is just a rough target however, whereas
        # `max_seq_length` is a hard limit.
        target_seq_length = max_num_tokens
        if rng.random() < self.config.short_seq_prob:
            target_seq_length = rng.randint(2, max_num_tokens)

        # We DON'T just concatenate all of the tokens from a document into a long
        # sequence and choose an arbitrary split point because this would make the
        # next sentence prediction task too easy. Instead, we split the input into
        # segments "A" and "B" based on the actual "sentences" provided by the user
        # input.
        chain = itertools.chain.from_iterable
        n = len(document)
        chunk: list[Sequence[int]] = []
        current_length = 0
        i = 0
        while i < n:
            segment = document[i]
            chunk.append(segment)
            current_length += len(segment)
            if i == n - 1 or current_length >= target_seq_length:
                # `a_end` is how many segments from `chunk` go into the `A` (first) sentence.
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                is_random_next = self._next_is_random()
                tokens_b = None
                if is_random_next:
                    tokens_a = list(chain(chunk[:a_end]))
                    tokens_b = self.pool.random_b(doc_id, target_seq_length - len(tokens_a), rng)
                    if tokens_b is None:  # this worker has seen no other document
                        self.stats.random_next_unavailable += 1
                        is_random_next = False
                    else:
                        # We didn't actually use these segments so we "put them back" so
                        # they don't go to waste.
                        i -= len(chunk) - a_end
                if not is_random_next:
                    if len(chunk) == 1:
                        # google-research/bert makes every one-sentence chunk a random
                        # next (53.5% random labels on the shared corpus). To keep the
                        # labels a fair coin, an "actual next" one-sentence chunk takes
                        # the document's next sentence as B, or, for the document's last
                        # sentence, the sentence before it as A.
                        if i + 1 < n:
                            i += 1
                            chunk.append(document[i])
                        else:
                            chunk.insert(0, document[i - 1])
                        a_end = 1
                    tokens_a = list(chain(chunk[:a_end]))
                    tokens_b = list(chain(chunk[a_end:]))
                yield tokens_a, tokens_b, is_random_next
                chunk = []
                current_length = 0
            i += 1

    def _truncate(self, tokens_a: list[int], tokens_b: list[int]):
        drop_a, drop_b = truncation(len(tokens_a), len(tokens_b), self.max_num_tokens)
        getrandbits = self.rng.getrandbits
        # We want to sometimes truncate from the front and sometimes from the
        # back to add more randomness and avoid biases: each removed token is
        # from the front with probability 1/2, so the front count is binomial.
        if drop_a:
            front = getrandbits(drop_a).bit_count()
            tokens_a = tokens_a[front: len(tokens_a) - (drop_a - front)]
        if drop_b:
            front = getrandbits(drop_b).bit_count()
            tokens_b = tokens_b[front: len(tokens_b) - (drop_b - front)]
        return tokens_a, tokens_b

    # ---------------------------------------------------------------- masking
    def _num_to_predict(self, num_candidates: int) -> int:
        expected = num_candidates * self.config.masked_lm_prob
        k = int(expected)
        if self.rng.random() < expected - k:  # unbiased rounding
            k += 1
        return max(1, min(k, self.config.max_predictions_per_seq, num_candidates))

    def _mask(self, tokens: list[int], len_a: int, len_b: int):
        """Masks `tokens` in place; returns (positions, original ids)."""
        num_candidates = len_a + len_b
        k = self._num_to_predict(num_candidates)
        random_ = self.rng.random
        if self.config.max_ngram_size > 1:
            positions = self._ngram_positions(tokens, len_a, len_b, k)
        elif not self.config.do_whole_word_mask:
            # k distinct candidates, uniformly (Floyd's algorithm: k draws, no
            # shuffle of all candidates as google does; same distribution).
            picks = set()
            for j in range(num_candidates - k, num_candidates):
                t = int(random_() * (j + 1))
                picks.add(j if t in picks else t)
            positions = sorted([p + 1 if p < len_a else p + 2 for p in picks])
        else:
            positions = self._whole_word_positions(tokens, len_a, len_b, k)
        labels = [tokens[p] for p in positions]
        random_ids = self.vocab.random_ids
        n_random_ids = len(random_ids)
        mask_id = self.vocab.mask_id
        n_mask = n_random = 0
        for p in positions:
            u = random_()
            if u < 0.8:  # 80% of the time, replace with [MASK]
                tokens[p] = mask_id
                n_mask += 1
            elif u >= 0.9:  # 10% of the time, replace with random word
                tokens[p] = random_ids[int(random_() * n_random_ids)]
                n_random += 1
            # else (10% of the time): keep the original
        stats = self.stats
        stats.masked_as_mask += n_mask
        stats.masked_as_random += n_random
        stats.masked_as_kept += len(positions) - n_mask - n_random
        return positions, labels

    def _word_groups(self, tokens: Sequence[int], len_a: int, len_b: int) -> list[list[int]]:
        """Positions of A and B grouped into words ("##" pieces join the piece before,
        never across [CLS]/[SEP])."""
        is_cont = self.vocab.is_continuation
        groups: list[list[int]] = []
        for start, end in ((1, 1 + len_a), (len_a + 2, len_a + 2 + len_b)):
            first = True
            for pos in range(start, end):
                if is_cont[tokens[pos]] and not first:
                    groups[-1].append(pos)
                else:
                    groups.append([pos])
                first = False
        return groups

    def _whole_word_positions(self, tokens, len_a, len_b, k) -> list[int]:
        # Whole Word Masking means that if we mask all of the wordpieces
        # corresponding to an original word. When a word has been split into
        # WordPieces, the first token does not have any marker and any subsequence
        # tokens are prefixed with ##. So whenever we see the ## token, we
        # append it to the previous set of word indexes.
        #
        # Note that Whole Word Masking does *not* change the training code
        # at all -- we still predict each WordPiece independently, softmaxed
        # over the entire vocabulary.
        groups = self._word_groups(tokens, len_a, len_b)
        self.rng.shuffle(groups)
        positions: list[int] = []
        for group in groups:
            if len(positions) >= k:
                break
            # If adding a whole-word mask would exceed the maximum number of
            # predictions, then just skip this candidate.
            if len(positions) + len(group) > k:
                self.stats.whole_word_candidates_skipped += 1
                continue
            positions.extend(group)
        positions.sort()
        return positions

    def _ngram_positions(self, tokens, len_a, len_b, k) -> list[int]:
        """Positions of `choose_ngrams`' spans of whole words (with
        do_whole_word_mask) or of word pieces (without)."""
        if self.config.do_whole_word_mask:
            units = self._word_groups(tokens, len_a, len_b)
        else:
            units = [[p] for p in itertools.chain(range(1, 1 + len_a),
                                                  range(len_a + 2, len_a + 2 + len_b))]
        positions: list[int] = []
        count_ngram = self.stats.count_ngram
        for start, n in choose_ngrams(units, k, self.config.max_ngram_size, self.rng):
            count_ngram(n)
            for unit in units[start: start + n]:
                positions.extend(unit)
        positions.sort()
        return positions

    # ---------------------------------------------------------------- examples
    def examples(self, doc_id: int, document: Sequence[Sequence[int]]) -> Iterator[bytes]:
        """Serialized examples for one pass over `document` (≥ 2 sentences)."""
        config = self.config
        vocab = self.vocab
        cls_id, sep_id = vocab.cls_id, vocab.sep_id
        stats = self.stats
        codec = self.codec
        dynamic = config.dynamic_masking
        wwm = config.do_whole_word_mask
        for tokens_a, tokens_b, is_random_next in self.pairs(doc_id, document):
            tokens_a, tokens_b = self._truncate(tokens_a, tokens_b)
            len_a, len_b = len(tokens_a), len(tokens_b)
            assert len_a >= 1 and len_b >= 1
            tokens = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]
            stats.instances += 1
            stats.random_next += is_random_next
            stats.real_tokens += len(tokens)
            stats.maskable_tokens += len_a + len_b
            if dynamic:
                word_starts = None
                if wwm:
                    is_cont = vocab.is_continuation
                    word_starts = [0 if is_cont[t] else 1 for t in tokens]
                    word_starts[len_a + 2] = 1  # a "##" piece after [SEP] starts a word
                    word_starts[1] = 1
                yield codec.dynamic(tokens, len_a, len_b, is_random_next, word_starts)
            else:
                positions, labels = self._mask(tokens, len_a, len_b)
                stats.masked += len(positions)
                yield codec.static(tokens, len_a, len_b, positions, labels, is_random_next)


class FullSentencePacker:
    """One stream of documents cut into full instances (the module docstring's
    full-sentence packing): `add` a document, get the instances it completed.

    Args:
      length: tokens per instance between [CLS] and the closing [SEP]
        (`max_seq_length - 2`).
      sep_id: the [SEP] put between two documents within an instance.
    """

    def __init__(self, length: int, sep_id: int):
        self.length = length
        self.sep_id = sep_id
        self.content: list[int] = []
        self.started = False

    def add(self, document: Sequence[Sequence[int]]) -> list[list[int]]:
        full = []
        if self.started and self.content:
            self.content.append(self.sep_id)  # a document boundary inside the instance
            if len(self.content) == self.length:
                full.append(self.content)
                self.content = []
        self.started = True
        for sentence in document:
            start = 0
            while start < len(sentence):  # a sentence is split only where an instance ends
                take = self.length - len(self.content)
                self.content.extend(sentence[start: start + take])
                start += take
                if len(self.content) == self.length:
                    full.append(self.content)
                    self.content = []
        return full

    def finish(self) -> list[list[int]]:
        """The last, partly filled instance (if any)."""
        rest, self.content = ([self.content] if self.content else []), []
        return rest


class PackedInstanceMaker:
    """Full-sentence instances of one worker's documents (`packing="full_sentences"`).

    Shares `InstanceMaker`'s masking, statistics and codec: `dupe_factor`
    packers, one per pass, each seeing every document in order.
    """

    def __init__(self, maker: InstanceMaker):
        self.maker = maker
        length = maker.config.max_seq_length - 2  # [CLS] ... [SEP]
        self.packers = [FullSentencePacker(length, maker.vocab.sep_id)
                        for _ in range(maker.config.dupe_factor)]

    def examples(self, document: Sequence[Sequence[int]], dupe: int) -> Iterator[bytes]:
        """Serialized examples that `document` completes in pass `dupe`."""
        for content in self.packers[dupe].add(document):
            yield self._example(content)

    def finish(self) -> Iterator[bytes]:
        """Each pass's last instance."""
        for packer in self.packers:
            for content in packer.finish():
                yield self._example(content)

    def _example(self, content: list[int]) -> bytes:
        maker = self.maker
        vocab, stats = maker.vocab, maker.stats
        tokens = [vocab.cls_id, *content, vocab.sep_id]
        # The [SEP]s between documents are never masked: the masking sees the
        # text without them ([CLS] words [SEP], one segment), positions mapped back.
        text = [i for i in range(1, len(tokens) - 1) if tokens[i] != vocab.sep_id]
        stats.instances += 1
        stats.real_tokens += len(tokens)
        stats.maskable_tokens += len(text)
        if maker.config.dynamic_masking:
            word_starts = None
            if maker.config.do_whole_word_mask:
                is_cont = vocab.is_continuation
                # A piece after [CLS]/[SEP] starts a word (its head is in the instance before).
                word_starts = [1 if i == 0 or tokens[i - 1] in (vocab.cls_id, vocab.sep_id)
                               or not is_cont[t] else 0 for i, t in enumerate(tokens)]
            return maker.codec.dynamic(tokens, len(content), None, False, word_starts)
        plain = [vocab.cls_id, *(tokens[i] for i in text), vocab.sep_id]
        positions, labels = maker._mask(plain, len(text), 0)
        for p in positions:
            tokens[text[p - 1]] = plain[p]
        positions = [text[p - 1] for p in positions]
        stats.masked += len(positions)
        return maker.codec.static(tokens, len(content), None, positions, labels, False)


class ShuffleBuffer:
    """Emits items in a random order using at most `size` items of memory."""

    def __init__(self, size: int, rng: random.Random, sink):
        self.size = size
        self.rng = rng
        self.sink = sink
        self.items: list = []

    def add(self, item) -> None:
        items = self.items
        if len(items) < self.size:
            items.append(item)
            return
        j = self.rng.randrange(self.size)
        self.sink(items[j])
        items[j] = item

    def drain(self) -> None:
        self.rng.shuffle(self.items)
        for item in self.items:
            self.sink(item)
        self.items = []
