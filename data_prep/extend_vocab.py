r"""Add a domain's frequent words to a checkpoint's vocabulary and weights.

A public checkpoint's WordPiece vocabulary splits a domain's own words into
pieces ("electroencephalogram" → electro ##ence ##pha ##log ##ram): longer
sequences, and a meaning the model has to assemble from pieces each time.
`extend_vocab` counts the words of a domain corpus (as BERT's basic tokenizer
makes them, with the checkpoint's casing), takes the most frequent ones, seen at
least `--min_count` times, that the vocabulary splits into two or more pieces
(at most `--num_new_tokens`), and writes a new checkpoint directory:

    vocab.txt              the old vocabulary with every id unchanged; the new words
                           first in its [unusedN] slots (in id order), the rest appended
    config.json            vocab_size grown by the appended words (if any)
    model.safetensors      each new word's word-embedding row, and its masked-LM output
                           bias when the checkpoint has that head, is the mean of its
                           old pieces' (`checkpoints.add_token_rows`); all else as read
    tokenizer_config.json  the casing
    vocab_extension.tsv    what was added: token, id, count in the corpus, old pieces

It is Hugging Face's layout (the encoder, and any heads under BertForPreTraining's
names), which every command loads with --init_checkpoint: fine-tuning, continued
pre-training (`bert pretrain`) and the exports then use the extended vocabulary.

WordPiece matches the longest token first, and a new token is a whole word (no
"##"), so only words that begin with a new token can split differently. A new
token after which such a word could no longer be split (it would become [UNK])
is left out, so the extension never makes a word of the corpus unknown.

The command is `bert extend-vocab` (`official_bert/commands/extend_vocab.py`):
  bert extend-vocab --init_checkpoint=all-MiniLM-L6-v2 --input_file=/tmp/domain.txt \
      --output_dir=/tmp/minilm_domain --num_new_tokens=500 --min_count=20
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import re
from typing import Mapping, Sequence

from data_prep import build_vocab
from data_prep.configs import ExtendVocabConfig
from official_bert import file_sets, io
from official_bert.errors import UserError
from official_bert.text.tokenization import UNK_TOKEN, WordpieceTokenizer, vocab_from_list

_log = logging.getLogger(__name__)

UNUSED = re.compile(r"\[unused\d*\]")
SUMMARY_FILE = "vocab_extension.tsv"


@dataclasses.dataclass(frozen=True)
class NewToken:
    """One added word: its id in the new vocabulary, its count in the corpus,
    and the pieces (and their old ids) the old vocabulary split it into."""

    token: str
    id: int
    count: int
    pieces: tuple[str, ...]
    piece_ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Extension:
    """The new vocabulary and what it adds.

    Attributes:
        vocab: the new vocabulary, in id order (the old ids unchanged).
        new_tokens: the added words, most frequent first.
        in_unused_slots: how many of them took an [unusedN] slot (the rest were appended).
        candidates: the corpus's words seen at least min_count times that the old
            vocabulary splits into 2 or more pieces.
        tokens_per_word: the corpus's WordPiece tokens per word, (old, new).
    """

    vocab: list
    new_tokens: list
    in_unused_slots: int
    candidates: int
    tokens_per_word: tuple


# === Choosing and placing the words (no TensorFlow) ===


def split_words(words, vocab: Sequence[str]) -> dict:
    """word → its WordPiece pieces under `vocab` ([UNK] for a word it cannot cover)."""
    tokenizer = WordpieceTokenizer(vocab_from_list(vocab))
    return {word: tokenizer.tokenize(word) for word in words}


def place_tokens(vocab: Sequence[str], words: Sequence[str]) -> tuple[list, list]:
    """(the new vocabulary, each word's id): the words in `vocab`'s [unusedN]
    slots in id order, the rest appended; every other id is unchanged."""
    new_vocab = list(vocab)
    slots = iter([i for i, token in enumerate(vocab) if UNUSED.fullmatch(token)])
    ids = []
    for word in words:
        token_id = next(slots, None)
        if token_id is None:
            token_id = len(new_vocab)
            new_vocab.append(word)
        else:
            new_vocab[token_id] = word
        ids.append(token_id)
    return new_vocab, ids


def plan_extension(counts: Mapping[str, int], vocab: Sequence[str], num_new_tokens: int,
                   min_count: int) -> Extension:
    """The words to add to `vocab` from the corpus's word `counts`, and where."""
    old_split = split_words(counts, vocab)
    candidates = sorted((word for word, count in counts.items()
                         if count >= min_count and len(old_split[word]) >= 2),
                        key=lambda word: (-counts[word], word))
    chosen = candidates[:num_new_tokens]
    while True:
        new_vocab, ids = place_tokens(vocab, chosen)
        new_split = split_words(counts, new_vocab)
        breaking = _tokens_that_make_words_unknown(old_split, new_split, set(chosen))
        if not breaking:
            break
        _log.warning("left out %d word(s) after which a longer word could not be split any "
                     "more: %s", len(breaking), ", ".join(sorted(breaking)[:10]))
        chosen = [word for word in chosen if word not in breaking]
    old_ids = {token: i for i, token in enumerate(vocab)}
    new_tokens = [NewToken(word, token_id, counts[word], tuple(old_split[word]),
                           tuple(old_ids[piece] for piece in old_split[word]))
                  for word, token_id in zip(chosen, ids)]
    total = sum(counts.values())
    per_word = tuple(sum(counts[w] * len(split[w]) for w in counts) / total
                     for split in (old_split, new_split))
    return Extension(new_vocab, new_tokens, sum(t.id < len(vocab) for t in new_tokens),
                     len(candidates), per_word)


def _tokens_that_make_words_unknown(old_split, new_split, new_tokens: set) -> set:
    """The new tokens that a word now starts with and can no longer be split
    after (it was covered by the old vocabulary, is [UNK] under the new one)."""
    breaking = set()
    for word, pieces in new_split.items():
        if pieces == [UNK_TOKEN] and old_split[word] != [UNK_TOKEN]:
            prefixes = [word[:n] for n in range(len(word), 0, -1) if word[:n] in new_tokens]
            breaking.add(prefixes[0])  # the longest: the one WordPiece matched first
    return breaking


# === The job ===


def extend_vocab(config: ExtendVocabConfig) -> dict:
    """Validates everything, plans the extension, writes the new checkpoint
    directory (module docstring); returns a summary dict."""
    from official_bert import checkpoints, model_files
    from official_bert.checkpoints.vocabulary import MLM_OUTPUT_BIAS

    config.validate()
    input_files = file_sets.expand_paths(config.input_file, "input_file")
    inputs = [("input_file", path) for path in input_files]
    outputs = {"--output_dir": config.output_dir}
    # The cheap checks before the checkpoint is read (prepare_job repeats the
    # first with the vocabulary it finds beside the checkpoint).
    io.refuse_output_over_input(outputs, inputs + [
        ("init_checkpoint", config.init_checkpoint), ("vocab_file", config.vocab_file),
        ("bert_config_file", config.bert_config_file),
        ("init_checkpoint", _checkpoint_directory(config.init_checkpoint))])
    _check_output_dir(config.output_dir)
    files = model_files.prepare_job(config, inputs=inputs, outputs=outputs)
    counts = build_vocab.count_words(input_files, files.do_lower_case)
    if not counts:
        raise UserError("--input_file holds no words (empty or blank files)")
    plan = plan_extension(counts, files.vocab, config.num_new_tokens, config.min_count)
    if not plan.new_tokens:
        raise UserError(f"no word of --input_file seen at least --min_count={config.min_count} "
                        f"times is split into 2 or more pieces by {files.vocab_file}: nothing to "
                        "add; lower --min_count or give more text")
    vocab_size = max(files.config.vocab_size, len(plan.vocab))
    weights = checkpoints.add_token_rows(files.checkpoint.weights, vocab_size,
                                         {t.id: t.piece_ids for t in plan.new_tokens})
    checkpoints.write_huggingface(
        weights, dataclasses.replace(files.config, vocab_size=vocab_size), config.output_dir,
        do_lower_case=files.do_lower_case,
        files={"vocab.txt": "".join(token + "\n" for token in plan.vocab),
               SUMMARY_FILE: _summary_table(plan.new_tokens)})
    return _summary(plan, counts, files, vocab_size,
                    has_mlm_bias=MLM_OUTPUT_BIAS in weights)


def _checkpoint_directory(init_checkpoint: str) -> str:
    """The directory that holds --init_checkpoint (itself, or a prefix's folder)."""
    if io.isdir(init_checkpoint):
        return init_checkpoint
    return os.path.dirname(os.fspath(init_checkpoint).rstrip("/")) or "."


def _check_output_dir(output_dir: str) -> None:
    """`UserError` unless --output_dir is new (and can be made) or an empty directory."""
    if io.exists(output_dir):
        if not io.isdir(output_dir) or io.listdir(output_dir):
            raise UserError(f"--output_dir={output_dir} exists and is not an empty directory: "
                            "extend-vocab never overwrites; choose a new directory")
    if not io.is_local(output_dir):
        return
    existing = os.path.abspath(io.local_path(output_dir))
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UserError(f"cannot make --output_dir={output_dir}: {existing} is a file; choose "
                        "another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"cannot write --output_dir={output_dir}: {existing} is not writable; "
                        "choose another path")


def _summary_table(new_tokens: Sequence[NewToken]) -> str:
    lines = ["token\tid\tcount\told_pieces"]
    lines += [f"{t.token}\t{t.id}\t{t.count}\t{' '.join(t.pieces)}" for t in new_tokens]
    return "\n".join(lines) + "\n"


def _summary(plan: Extension, counts: collections.Counter, files, vocab_size: int,
             has_mlm_bias: bool) -> dict:
    return {
        "new_tokens": len(plan.new_tokens),
        "in_unused_slots": plan.in_unused_slots,
        "appended": len(plan.new_tokens) - plan.in_unused_slots,
        "candidates": plan.candidates,
        "vocab_size": (files.config.vocab_size, vocab_size),
        "words": sum(counts.values()),
        "distinct_words": len(counts),
        "tokens_per_word": plan.tokens_per_word,
        "mlm_output_bias": has_mlm_bias,
        "examples": [(t.token, t.count, t.pieces) for t in plan.new_tokens[:10]],
    }
