"""Adds a domain's frequent words to a checkpoint's vocabulary, as whole tokens.

Counts the words of --input_file (the pre-training text format, or any text),
takes the most frequent ones (seen at least --min_count times) that the
checkpoint's WordPiece vocabulary splits into 2 or more pieces, at most
--num_new_tokens, and writes a new checkpoint directory --output_dir: the
vocabulary with every old id unchanged, the new words first in its [unusedN]
slots, then appended (vocab_size grows); each new word's embedding row, and its
masked-LM output bias when the checkpoint has that head, is the mean of its old
pieces'. The directory is Hugging Face's layout with vocab.txt, config.json,
tokenizer_config.json and vocab_extension.tsv (what was added): pass it as
--init_checkpoint to `bert pretrain` (continued pre-training on the domain's
text teaches the new tokens) and to every fine-tuning command. The choice of
words is described in `data_prep/extend_vocab.py`, the directory in
`official_bert/vocab_extension.py`, which does the work.

Example (`$MINILM` is the bundled all-MiniLM-L6-v2, as the README sets it; the
repository's sample_text.txt as the domain's text, where a real corpus takes
--num_new_tokens=500 --min_count=20):
  bert extend-vocab --init_checkpoint=$MINILM \\
      --input_file=sample_text.txt --output_dir=/tmp/minilm_domain \\
      --num_new_tokens=50 --min_count=3
"""

from __future__ import annotations

import sys

from absl import flags

from official_bert.commands import app, cli_flags, registry
from official_bert.configs import ExtendVocabConfig

# official_bert.vocab_extension reads checkpoints (TensorFlow): `main` imports it
# once the flags are parsed, so that `--help` stays fast.

FLAGS = flags.FLAGS

# The config the flags come from (tests/test_settings.py checks it).
CONFIGS = (ExtendVocabConfig,)


def define_flags():
    cli_flags.define_command_flags(ExtendVocabConfig, cli_flags.MODEL_FILES)


def main(argv):
    app.refuse_arguments(argv)
    from official_bert import vocab_extension

    config = cli_flags.from_flags(ExtendVocabConfig, FLAGS)
    summary = vocab_extension.extend_vocab(config)
    print(report(config.output_dir, summary), file=sys.stderr)


def report(output_dir: str, summary: dict) -> str:
    """What the command prints: what was added, and what it does to the corpus."""
    old_size, new_size = summary["vocab_size"]
    before, after = summary["tokens_per_word"]
    lines = [
        f"wrote {output_dir}: {summary['new_tokens']} new tokens of the "
        f"{summary['candidates']} words that qualify ({summary['in_unused_slots']} in "
        f"[unusedN] slots, {summary['appended']} appended; vocab_size {old_size} -> "
        f"{new_size}; masked-LM output bias "
        f"{'extended' if summary['mlm_output_bias'] else 'absent'})",
        f"the corpus: {summary['words']} words ({summary['distinct_words']} distinct), "
        f"{before:.3f} -> {after:.3f} WordPiece tokens per word",
        "most frequent: " + "; ".join(f"{token} ({count}x, was {' '.join(pieces)})"
                                      for token, count, pieces in summary["examples"]),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    registry.run_command("extend-vocab")
