"""Splits a SQuAD file (v1.1 or v2.0) into a training and a dev part, by article.

The first `--num_train_articles` articles go to `--train_output`, the rest to
`--dev_output`, so no context is shared between the two parts (a split by
question would put one paragraph's questions on both sides). Both files keep
the input's version; each is written whole or not at all.

Example (a dev set for tuning, the official dev set kept for the end; from `bert
download squad_v2.0 --output_dir=$DATA`):
  bert squad-split --input_file=$DATA/squad_v2.0/train-v2.0.json --num_train_articles=400 \\
      --train_output=/tmp/train-part.json --dev_output=/tmp/dev-part.json
"""

from __future__ import annotations

from absl import flags

from data_prep.configs import SquadSplitConfig
from official_bert.commands import app, cli_flags, registry

FLAGS = flags.FLAGS

# The config the flags come from (tests/test_settings.py checks it).
CONFIGS = (SquadSplitConfig,)


def define_flags():
    cli_flags.define_flags(SquadSplitConfig, group=__name__)
    flags.mark_flags_as_required(["input_file", "train_output", "dev_output",
                                  "num_train_articles"])


def main(argv):
    app.refuse_arguments(argv)
    from data_prep import squad

    config = cli_flags.from_flags(SquadSplitConfig, FLAGS)
    train, dev = squad.split_by_article(config.input_file, config.train_output,
                                        config.dev_output, config.num_train_articles)
    print(f"wrote {config.train_output} ({train} questions) and {config.dev_output} "
          f"({dev} questions)")


if __name__ == "__main__":
    registry.run_command("squad-split")
