r"""Learn a WordPiece vocabulary with Google's BERT layout from a text corpus.

The layout is that of Google's released vocabularies (e.g. uncased_L-12_H-768_A-12):

    0        [PAD]
    1..99    [unused0] .. [unused98]
    100      [UNK]
    101      [CLS]
    102      [SEP]
    103      [MASK]
    104..    [unused99] .. [unused{num_unused-1}]
    then     single characters, then learned word pieces (suffixes as "##piece")

With `--num_unused` below 99 the four specials follow the unused slots
directly (so [UNK] = num_unused + 1). The file has exactly `--vocab_size`
lines: if the corpus supports fewer learned pieces (a small corpus), the rest
are more `[unusedN]` slots at the end, and a warning says so and what to do
instead (`small_corpus_warning`: a smaller --vocab_size, more text, or
`bert extend-vocab` on a public checkpoint's vocabulary).

Words are counted with the project's own basic tokenizer
(`official_bert.text.tokenization.BasicTokenizer`: clean-up, lower-casing and
accent stripping with `--do_lower_case`, punctuation split), so the
vocabulary fits exactly the text `FullTokenizer` will give it. The pieces are
learned by tensorflow-text's WordPiece trainer
(`tensorflow_text.tools.wordpiece_vocab`: `wordpiece_tokenizer_learner_lib.learn`,
the learner behind `bert_vocab_from_dataset`), fed the word counts directly.

The command is `bert build-vocab` (`official_bert/commands/build_vocab.py`):
  bert build-vocab --input_file=/tmp/corpus.txt \
      --output_file=/tmp/vocab.txt --vocab_size=30522 --do_lower_case
"""

from __future__ import annotations

import collections
import logging
from typing import Sequence

from data_prep.configs import BuildVocabConfig
from official_bert import file_sets, io, outputs
from official_bert.errors import BadFileError, UserError
from official_bert.progress import Progress

_log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# The defaults are the command's (`configs.BuildVocabConfig`), stated once there.
_DEFAULTS = BuildVocabConfig()


def reserved_tokens(num_unused: int = _DEFAULTS.num_unused) -> list[str]:
    """[PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK], [unused99..]: Google's order."""
    before = min(num_unused, 99)
    return (["[PAD]"] + [f"[unused{i}]" for i in range(before)]
            + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            + [f"[unused{i}]" for i in range(before, num_unused)])


def count_words(files: Sequence[str], do_lower_case: bool,
                max_lines: int | None = None) -> collections.Counter:
    """Word counts of the files, words as BERT's basic tokenizer makes them."""
    from data_prep.fast_tokenization import CachedBasicTokenizer

    basic = CachedBasicTokenizer(do_lower_case=do_lower_case)
    counts: collections.Counter = collections.Counter()
    n = 0
    progress = Progress(len(files), "files")
    for done, path in enumerate(files, 1):
        if progress.update(done - 1):
            _log.info("progress: counting words: %s", progress.line())
        with io.open_file(path, "rb") as f:
            for lineno, raw in enumerate(io.text_lines(f), 1):  # a BOM is dropped
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise BadFileError(path, f"is not UTF-8 ({e.reason} at byte {e.start} "
                                       "of the line)", line=lineno,
                                       fix="convert the file to UTF-8") from None
                counts.update(basic.tokens(line))
                n += 1
                if max_lines and n >= max_lines:
                    return counts
    return counts


def learn_vocab(word_counts, vocab_size: int = _DEFAULTS.vocab_size,
                num_unused: int = _DEFAULTS.num_unused,
                lower_thresh: int = _DEFAULTS.lower_thresh,
                slack_ratio: float = _DEFAULTS.slack_ratio,
                max_unique_chars: int = _DEFAULTS.max_unique_chars) -> tuple[list[str], int]:
    """Word counts → (vocabulary of exactly `vocab_size` tokens, number learned)."""
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    if num_unused < 0:
        raise UserError(f"--num_unused={num_unused}; use 0 or more")
    reserved = reserved_tokens(num_unused)
    if vocab_size <= len(reserved):
        raise UserError(f"--vocab_size={vocab_size} leaves no room for word pieces after "
                        f"{len(reserved)} reserved tokens; lower --num_unused")
    if not word_counts:
        raise UserError("--input_file holds no words (empty or blank files)")
    vocab = learner.learn(
        dict(word_counts), vocab_size, reserved, lower_thresh=lower_thresh,
        slack_ratio=slack_ratio, max_unique_chars=max_unique_chars,
        include_joiner_token=True, joiner="##")
    vocab = list(vocab)
    if len(vocab) > vocab_size:
        # The trainer's threshold search can end just above the target. Its
        # learned pieces come last, most frequent first: drop the rarest ones,
        # but never a single character (or ##character), so coverage stays.
        def is_alphabet(token):
            return len(token) == 1 or (token.startswith("##") and len(token) == 3)

        excess = len(vocab) - vocab_size
        keep = []
        for token in reversed(vocab[len(reserved):]):
            if excess and not is_alphabet(token):
                excess -= 1
            else:
                keep.append(token)
        if excess:
            raise UserError(f"the corpus alphabet alone needs {len(keep) + len(reserved)} "
                            f"tokens, more than --vocab_size={vocab_size}; lower "
                            "--max_unique_chars")
        vocab = vocab[:len(reserved)] + keep[::-1]
    learned = len(vocab) - len(reserved)
    extra = vocab_size - len(vocab)
    if extra:
        vocab.extend(f"[unused{i}]" for i in range(num_unused, num_unused + extra))
    return vocab, learned


def small_corpus_warning(learned: int, reserved: int, vocab_size: int,
                         lower_thresh: int) -> str:
    """The one line for a corpus that yields fewer tokens than --vocab_size asks:
    the numbers, and the three ways out."""
    padded = vocab_size - reserved - learned
    return (f"the corpus yields only {learned} tokens (characters and word pieces seen at "
            f"least --lower_thresh={lower_thresh} times) for --vocab_size={vocab_size}: "
            f"{padded} [unusedN] pad the rest ({padded + reserved - len(SPECIAL_TOKENS)} "
            f"[unusedN] in all, {padded / vocab_size:.0%} of the file); use "
            f"--vocab_size={reserved + learned} or less, or more text, or keep a public "
            "checkpoint's vocabulary and add this corpus's words to it with `bert extend-vocab`")


def check_vocab(vocab: Sequence[str]) -> None:
    """Raises ValueError unless every special token is present exactly once."""
    counts = collections.Counter(vocab)
    missing = [t for t in SPECIAL_TOKENS if counts[t] == 0]
    if missing:
        raise ValueError(f"vocabulary lacks special token(s) {', '.join(missing)}")
    dupes = [t for t, c in counts.items() if c > 1]
    if dupes:
        raise ValueError(f"vocabulary repeats token(s) {', '.join(dupes[:5])}")


def write_vocab(vocab: Sequence[str], path: str) -> None:
    """One token a line, written atomically (`official_bert.io.atomic_output`)."""
    io.check_output_directory(path)
    with io.atomic_output(path) as f:
        for token in vocab:
            f.write(token + "\n")


def build_vocab(input_patterns: Sequence[str], output_file: str,
                vocab_size: int = _DEFAULTS.vocab_size,
                do_lower_case: bool = _DEFAULTS.do_lower_case,
                num_unused: int = _DEFAULTS.num_unused,
                lower_thresh: int = _DEFAULTS.lower_thresh,
                slack_ratio: float = _DEFAULTS.slack_ratio,
                max_unique_chars: int = _DEFAULTS.max_unique_chars,
                max_lines: int | None = _DEFAULTS.max_lines) -> dict:
    """Counts words, learns the vocabulary, writes it; returns a summary dict."""
    files = file_sets.expand_paths(input_patterns, "input_file")
    io.refuse_output_over_input({"--output_file": output_file},
                                [("input_file", path) for path in files])
    outputs.ensure_checked(output_file, "--output_file", outputs.FILE)
    io.check_output_directory(output_file)
    counts = count_words(files, do_lower_case, max_lines)
    _log.info("Learning %d tokens from %d distinct words (%d in all)", vocab_size, len(counts),
              sum(counts.values()))
    vocab, learned = learn_vocab(counts, vocab_size, num_unused, lower_thresh,
                                 slack_ratio, max_unique_chars)
    check_vocab(vocab)
    write_vocab(vocab, output_file)
    reserved = len(reserved_tokens(num_unused))
    padded = vocab_size - reserved - learned
    if padded > slack_ratio * vocab_size:
        _log.warning(small_corpus_warning(learned, reserved, vocab_size, lower_thresh))
    return {
        "vocab_size": len(vocab),
        "learned_tokens": learned,
        "reserved_tokens": reserved,
        "padding_unused_tokens": padded,
        "distinct_words": len(counts),
        "words": sum(counts.values()),
        "ids": {t: vocab.index(t) for t in SPECIAL_TOKENS},
    }
