"""A checkpoint with a domain's frequent words added to its vocabulary: the job of
`bert extend-vocab`.

From any checkpoint the project reads and a domain corpus, `extend_vocab` writes a
new checkpoint directory (Hugging Face's layout, which every command loads with
--init_checkpoint; `checkpoints.write_huggingface` is the writer):

    vocab.txt              the old vocabulary with every id unchanged; the new words
                           first in its [unusedN] slots (in id order), the rest appended
    config.json            vocab_size grown by the appended words (if any)
    model.safetensors      the encoder and any heads (BertForPreTraining's names); each
                           new word's word-embedding row, and its masked-LM output bias
                           when the checkpoint has that head, is the mean of its old
                           pieces' (`checkpoints.add_token_rows`); all else as read
    tokenizer_config.json  the casing
    vocab_extension.tsv    what was added: token, id, count in the corpus, old pieces

Which words, and where, is `data_prep.extend_vocab`'s choice. Fine-tuning,
continued pre-training (`bert pretrain`) and the exports started from the
directory use the extended vocabulary. Everything is checked before anything is
written, and the directory must be new or empty: nothing is overwritten.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from data_prep import build_vocab
from data_prep.extend_vocab import Extension, NewToken, plan_extension
from official_bert import checkpoints, file_sets, io, model_files
from official_bert.outputs import DIRECTORY, ensure_checked
from official_bert.checkpoints.vocabulary import MLM_OUTPUT_BIAS
from official_bert.errors import UserError

SUMMARY_FILE = "vocab_extension.tsv"


def extend_vocab(config) -> dict:
    """Writes the directory of an `ExtendVocabConfig` (module docstring);
    returns a summary dict (what the command prints)."""
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
    ensure_checked(config.output_dir, "--output_dir", DIRECTORY)  # the one output policy
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
    return _summary(plan, counts, files.config.vocab_size, vocab_size,
                    has_mlm_bias=MLM_OUTPUT_BIAS in weights)


def _checkpoint_directory(init_checkpoint: str) -> str:
    """The directory that holds --init_checkpoint (itself, or a prefix's folder)."""
    if io.isdir(init_checkpoint):
        return init_checkpoint
    return os.path.dirname(os.fspath(init_checkpoint).rstrip("/")) or "."


def _summary_table(new_tokens: Sequence[NewToken]) -> str:
    lines = ["token\tid\tcount\told_pieces"]
    lines += [f"{t.token}\t{t.id}\t{t.count}\t{' '.join(t.pieces)}" for t in new_tokens]
    return "\n".join(lines) + "\n"


def _summary(plan: Extension, counts, old_size: int, new_size: int, has_mlm_bias: bool) -> dict:
    return {
        "new_tokens": len(plan.new_tokens),
        "in_unused_slots": plan.in_unused_slots,
        "appended": len(plan.new_tokens) - plan.in_unused_slots,
        "candidates": plan.candidates,
        "vocab_size": (old_size, new_size),
        "words": sum(counts.values()),
        "distinct_words": len(counts),
        "tokens_per_word": plan.tokens_per_word,
        "mlm_output_bias": has_mlm_bias,
        "examples": [(t.token, t.count, t.pieces) for t in plan.new_tokens[:10]],
    }
