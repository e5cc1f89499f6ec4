"""Extracts per-token (or pooled sentence) vectors from a BERT checkpoint.

google-research/bert's `extract_features.py`, with its flags and its JSON-lines
output, for any checkpoint kind (Hugging Face directory, Google TF1 checkpoint,
official_bert run), plus `--pooling=cls|mean` for sentence vectors. Input: one
example a line; `text_a ||| text_b` for a pair. The output format:
`official_bert/tasks/features.py`.

Example:
  python extract_features.py --input_file=sentences.txt --output_file=out.jsonl \\
    --init_checkpoint=path/to/all-MiniLM-L6-v2 --layers=-1 --pooling=mean
"""

from __future__ import annotations

from absl import flags, logging

from official_bert import app, cli_flags

# tasks.features loads TensorFlow: `main` imports it once the flags are parsed, so
# that defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Text file, one example a line ('a ||| b' for pairs).")
flags.DEFINE_string("output_file", None, "JSON-lines file to write.")
flags.DEFINE_string("layers", "-1,-2,-3,-4",
                    "Comma-separated layer indexes (-1 = last Transformer block).")
flags.DEFINE_integer("batch_size", 32, "Examples per forward pass.")
flags.DEFINE_enum("pooling", "none", ["none", "cls", "mean"],
                  "none: a vector per token; cls: the [CLS] vector; mean: the mean over tokens.")
cli_flags.define_model_flags(max_seq_length=128)
cli_flags.define_dtype_flag()
# google-research/bert's TPU flags of this script: accepted so its commands run unchanged,
# unused (the encoder runs on this machine's device; embeddings are looked up either way):
# `main` logs each one given, once.
GOOGLE_TPU_FLAGS = ("use_tpu", "master", "num_tpu_cores", "use_one_hot_embeddings")
flags.DEFINE_bool("use_tpu", False, "google-research/bert's flag; unused here.")
flags.DEFINE_string("master", None, "google-research/bert's flag; unused here.")
flags.DEFINE_integer("num_tpu_cores", 8, "google-research/bert's flag; unused here.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "google-research/bert's flag; unused here.")


# The main/entry pair every task command ends with (deliberately the same): flags → config →
# the library.
def main(argv):
    app.refuse_arguments(argv)
    from official_bert.tasks import features

    for name in GOOGLE_TPU_FLAGS:
        if FLAGS[name].present:
            logging.info("--%s is not used: extract_features runs the encoder on this "
                         "machine's device", name)
    features.run(cli_flags.from_flags(features.FeatureExtractionConfig, FLAGS))


def entry(argv=None):
    """Console entry point (`bert extract-features`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
