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

import dataclasses
import json
import os
import re
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


@dataclasses.dataclass
class InputExample:
    unique_id: int
    text_a: str
    text_b: str | None


_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


def read_examples(input_file):
    """Reads `text` or `text_a ||| text_b` lines; names the line that is not UTF-8."""
    if not os.path.exists(input_file):
        raise FileNotFoundError(f"--input_file {input_file} does not exist")
    examples = []
    with open(input_file, "rb") as f:
        for line_number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{input_file} line {line_number} is not UTF-8 ({e.reason} at "
                    f"byte {e.start}); convert the file to UTF-8"
                ) from None
            match = _PAIR.match(line)
            text_a, text_b = (match.group(1), match.group(2)) if match else (line, None)
            examples.append(InputExample(len(examples), text_a, text_b))
    if not examples:
        raise ValueError(f"--input_file {input_file} is empty")
    return examples


def parse_layers(spec, num_layers):
    """'-1,-2' → [-1, -2], checked against the model's depth."""
    try:
        indexes = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--layers={spec!r} must be comma-separated integers") from None
    for index in indexes:
        if not -num_layers <= index < num_layers:
            raise ValueError(
                f"--layers index {index} is out of range for a model with "
                f"{num_layers} layers (use -{num_layers}..{num_layers - 1})")
    return indexes


def featurize(examples, tokenizer, max_seq_length):
    """Tokenizes and packs each example: (tokens, ids, mask, segment ids)."""
    from official_bert import tokenization

    features = []
    for example in examples:
        tokens_a = tokenizer.tokenize(example.text_a)
        tokens_b = tokenizer.tokenize(example.text_b) if example.text_b is not None else None
        tokens, mask, segments = tokenization.pack_tokens(
            tokens_a, tokens_b, max_seq_length, pad=tokenization.PAD_TOKEN)
        length = sum(mask)
        features.append((tokens[:length], tokenizer.convert_tokens_to_ids(tokens[:length]),
                         segments[:length]))
    return features


def extract(encoder, features, layer_indexes, batch_size, pooling):
    """Yields, per example, {layer index: [tokens, H] array} (or [H] pooled)."""
    import numpy as np
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def forward(inputs):
        outputs = encoder(inputs, training=False)
        return [outputs["encoder_outputs"][i] for i in layer_indexes]

    for start in range(0, len(features), batch_size):
        batch = features[start:start + batch_size]
        # Pad to the batch's longest sequence (rounded up to limit retracing):
        # padding is masked out, so the vectors do not depend on it.
        width = max(len(ids) for _, ids, _ in batch)
        width = min(-(-width // 8) * 8, encoder.config.max_position_embeddings)
        ids = np.zeros((len(batch), width), "int32")
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, (_, token_ids, segment_ids) in enumerate(batch):
            ids[row, :len(token_ids)] = token_ids
            mask[row, :len(token_ids)] = 1
            types[row, :len(token_ids)] = segment_ids
        layers = [np.asarray(x, "float32") for x in forward(
            {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})]
        for row, (tokens, _, _) in enumerate(batch):
            n = len(tokens)
            per_layer = {}
            for index, values in zip(layer_indexes, layers):
                if pooling == "cls":
                    per_layer[index] = values[row, 0]
                elif pooling == "mean":
                    per_layer[index] = values[row, :n].mean(axis=0)
                else:
                    per_layer[index] = values[row, :n]
            yield tokens, per_layer


def to_json(unique_id, tokens, per_layer, pooling):
    """google-research/bert's output record (values rounded to 6 decimals)."""
    def values(array):
        return [round(float(x), 6) for x in array.flat]

    if pooling != "none":
        return {"linex_index": unique_id, "pooling": pooling,
                "layers": [{"index": i, "values": values(v)} for i, v in per_layer.items()]}
    features = []
    for position, token in enumerate(tokens):
        features.append({"token": token, "layers": [
            {"index": i, "values": values(v[position])} for i, v in per_layer.items()]})
    return {"linex_index": unique_id, "features": features}


def main(argv):
    del argv
    from official_bert import checkpoints, tokenization
    from official_bert.configs import BertConfig

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


if __name__ == "__main__":
    flags.mark_flags_as_required(["input_file", "output_file", "init_checkpoint"])
    app.run(main)
