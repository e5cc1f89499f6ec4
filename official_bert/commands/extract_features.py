"""Extracts per-token (or pooled sentence) vectors from a BERT checkpoint.

google-research/bert's `extract_features.py`, with its flags and its JSON-lines
output, for any checkpoint kind (Hugging Face directory, Google TF1 checkpoint,
official_bert run), plus `--pooling=cls|mean` for sentence vectors. Input: one
example a line; `text_a ||| text_b` for a pair. The output format:
`official_bert/tasks/features.py`.

Example (`$MINILM` is the bundled all-MiniLM-L6-v2, as the README sets it):
  python extract_features.py --input_file=examples/sentences.txt \\
    --output_file=/tmp/features.jsonl --init_checkpoint=$MINILM --layers=-1 --pooling=mean
"""

from __future__ import annotations

from absl import flags, logging

from official_bert.commands import app, cli_flags, registry
from official_bert import settings
from official_bert.configs import FeatureExtractionConfig, UnusedTpuFlags

# tasks.features loads TensorFlow: `main` imports it once the flags are parsed, so
# that defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS

CONFIGS = (FeatureExtractionConfig, UnusedTpuFlags)  # its flags' definitions


def define_flags():
    cli_flags.define_command_flags(FeatureExtractionConfig, cli_flags.MODEL_FILES, cli_flags.PRECISION)
    cli_flags.define_flags(UnusedTpuFlags)


# The main every task command ends with (deliberately the same): flags → config → the
# library.
def main(argv):
    app.refuse_arguments(argv)
    from official_bert.tasks import features

    for setting in settings.settings_of(UnusedTpuFlags):
        if FLAGS[setting.name].present:
            logging.info("--%s is not used: extract_features runs the encoder on this "
                         "machine's device", setting.name)
    features.run(cli_flags.from_flags(FeatureExtractionConfig, FLAGS))


if __name__ == "__main__":
    registry.run_command("extract-features")
