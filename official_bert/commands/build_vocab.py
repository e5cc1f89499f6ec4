"""Learns a WordPiece vocabulary with the layout of Google's released ones.

[PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK], then the rest of the
`--num_unused` slots, single characters and the learned word pieces: exactly
`--vocab_size` lines (a corpus too small for that many pieces is filled up
with more [unusedN], with a warning that says what to do instead). Words are
counted with BERT's own basic tokenizer (`--do_lower_case`: uncased), the pieces
learned by tensorflow-text's WordPiece trainer. The layout and the method are
described in `data_prep/build_vocab.py`, which does the work.

Example (the repository's sample_text.txt, a small corpus; a real one takes
--vocab_size=30522 and the default --num_unused):
  bert build-vocab --input_file=sample_text.txt --output_file=/tmp/vocab.txt \\
      --vocab_size=300 --num_unused=10 --do_lower_case
"""

from __future__ import annotations

import sys

from absl import flags

from data_prep.configs import BuildVocabConfig
from official_bert.commands import app, cli_flags, registry

# data_prep.build_vocab loads the tokenizer and tensorflow-text's trainer:
# `main` imports it once the flags are parsed, so that `--help` stays fast.

FLAGS = flags.FLAGS

# The config the flags come from (tests/test_settings.py checks it).
CONFIGS = (BuildVocabConfig,)


def define_flags():
    cli_flags.define_flags(BuildVocabConfig, group=__name__)
    flags.mark_flags_as_required(["input_file", "output_file"])


def main(argv):
    app.refuse_arguments(argv)
    from data_prep import build_vocab

    config = cli_flags.from_flags(BuildVocabConfig, FLAGS)
    summary = build_vocab.build_vocab(
        config.input_file, config.output_file, config.vocab_size, config.do_lower_case,
        config.num_unused, config.lower_thresh, config.slack_ratio, config.max_unique_chars,
        config.max_lines)
    print(f"wrote {config.output_file}: {summary['vocab_size']} tokens: "
          f"{summary['learned_tokens']} learned from the corpus (characters and word pieces), "
          f"{summary['reserved_tokens']} reserved ([PAD], [UNK], [CLS], [SEP], [MASK], "
          f"{config.num_unused} [unusedN]), {summary['padding_unused_tokens']} more [unusedN] "
          f"as padding; from {summary['words']} words ({summary['distinct_words']} distinct); "
          f"ids {summary['ids']}", file=sys.stderr)


if __name__ == "__main__":
    registry.run_command("build-vocab")
