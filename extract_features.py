"""Extracts per-token (or pooled sentence) vectors from a BERT checkpoint.

google-research/bert's `extract_features.py`, with its flags and its JSON-lines
output, for any checkpoint kind (Hugging Face directory, Google TF1 checkpoint,
official_bert checkpoint), plus `--pooling=cls|mean` for sentence vectors.

Input: one example a line; `text_a ||| text_b` for a pair.
Output (`--pooling=none`), one JSON object a line:
  {"linex_index": 0, "features": [{"token": "[CLS]",
      "layers": [{"index": -1, "values": [...]}, ...]}, ...]}
Output (`--pooling=cls` or `mean`, mean over the real tokens):
  {"linex_index": 0, "pooling": "mean", "layers": [{"index": -1, "values": [...]}]}

Example:
  python extract_features.py --input_file=sentences.txt --output_file=out.jsonl \
    --init_checkpoint=path/to/all-MiniLM-L6-v2 --layers=-1 --pooling=mean
"""

from __future__ import annotations

import json
import os
import time

from absl import flags, logging

from official_bert import app

app.quiet_tensorflow()

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Text file, one example a line ('a ||| b' for pairs).")
flags.DEFINE_string("output_file", None, "JSON-lines file to write.")
flags.DEFINE_string("init_checkpoint", None,
                    "Checkpoint: Hugging Face dir, Google TF1 bert_model.ckpt, or official_bert dir.")
flags.DEFINE_string("vocab_file", None, "vocab.txt (default: the one beside the checkpoint).")
flags.DEFINE_string("bert_config_file", None,
                    "bert_config.json / config.json (default: the one beside the checkpoint).")
flags.DEFINE_string("layers", "-1,-2,-3,-4",
                    "Comma-separated layer indexes (-1 = last Transformer block).")
flags.DEFINE_integer("max_seq_length", 128, "Longest packed sequence; longer input is truncated.")
flags.DEFINE_bool("do_lower_case", None,
                  "Lower-case and strip accents (default: what the checkpoint says, else True).")
flags.DEFINE_integer("batch_size", 32, "Examples per forward pass.")
flags.DEFINE_enum("pooling", "none", ["none", "cls", "mean"],
                  "none: a vector per token; cls: the [CLS] vector; mean: the mean over tokens.")


def main(argv):
    del argv
    from official_bert import checkpoints
    from official_bert.text import tokenization
    from official_bert.modeling.configs import BertConfig
    from official_bert.feature_extraction import (extract, featurize, parse_layers,
                                                  read_examples, to_json)

    config = BertConfig.from_json_file(FLAGS.bert_config_file) if FLAGS.bert_config_file else None
    encoder, ckpt = checkpoints.load_encoder(FLAGS.init_checkpoint, config=config)
    vocab_file = FLAGS.vocab_file or ckpt.vocab_file
    if not vocab_file:
        raise ValueError(f"no vocab.txt beside {FLAGS.init_checkpoint}; pass --vocab_file")
    do_lower_case = FLAGS.do_lower_case
    if do_lower_case is None:
        do_lower_case = True if ckpt.do_lower_case is None else ckpt.do_lower_case
    if FLAGS.max_seq_length > encoder.config.max_position_embeddings:
        raise ValueError(
            f"--max_seq_length={FLAGS.max_seq_length} is longer than the model's "
            f"max_position_embeddings ({encoder.config.max_position_embeddings})")
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    layer_indexes = parse_layers(FLAGS.layers, encoder.config.num_hidden_layers)
    examples = read_examples(FLAGS.input_file)
    features = featurize(examples, tokenizer, FLAGS.max_seq_length)

    start = time.time()
    tmp = f"{FLAGS.output_file}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            results = extract(encoder, features, layer_indexes, FLAGS.batch_size, FLAGS.pooling)
            for done, (example, (tokens, per_layer)) in enumerate(zip(examples, results), 1):
                record = to_json(example.unique_id, tokens, per_layer, FLAGS.pooling)
                out.write(json.dumps(record) + "\n")
                if done % 1000 == 0:
                    logging.info("%d / %d examples, %.1f examples/s", done, len(examples),
                                 done / (time.time() - start))
        os.replace(tmp, FLAGS.output_file)  # never a half-written output file
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    logging.info("Wrote %d examples to %s in %.1f s", len(examples), FLAGS.output_file,
                 time.time() - start)


def entry(argv=None):
    """Console entry point (`bert extract-features`)."""
    flags.mark_flags_as_required(["input_file", "output_file", "init_checkpoint"])
    app.run(main, argv)


if __name__ == "__main__":
    entry()
