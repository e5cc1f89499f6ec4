"""Feature-based use of BERT: per-token and pooled vectors from chosen layers.

google-research/bert's `extract_features.py` (`run`): read `text` /
`text_a ||| text_b` lines, tokenize and pack them, run the encoder, and write
each example's vectors as google's JSON record, one a line. No training, so no
run directory: the output file is written atomically and may not be an input.

Output (`pooling="none"`), one JSON object a line:
  {"linex_index": 0, "features": [{"token": "[CLS]",
      "layers": [{"index": -1, "values": [...]}, ...]}, ...]}
Output (`pooling="cls"` or `"mean"`, mean over the real tokens):
  {"linex_index": 0, "pooling": "mean", "layers": [{"index": -1, "values": [...]}]}
"""

from __future__ import annotations

import dataclasses
import json
import re
import time

import numpy as np
import tensorflow as tf
from absl import logging

from official_bert import checkpoints, io, model_files, outputs
from official_bert.errors import BadFileError, UserError
from official_bert.configs import TOKEN_POOLINGS, FeatureExtractionConfig, dtype_policy
from official_bert.text import tokenization
from official_bert.progress import Progress
from official_bert.training.precision import log_precision


def run(config: FeatureExtractionConfig) -> int:
    """Writes the features of every example; returns how many."""
    for name in ("input_file", "output_file", "init_checkpoint"):
        if not getattr(config, name):
            raise UserError(f"--{name} is required")
    if config.batch_size <= 0 or config.max_seq_length <= 0:
        raise UserError("--batch_size and --max_seq_length must be positive")
    if config.pooling not in TOKEN_POOLINGS:
        raise UserError(f"--pooling={config.pooling!r}: use {', '.join(TOKEN_POOLINGS)}")
    policy = dtype_policy(config.dtype)
    outputs.ensure_checked(config.output_file, "--output_file", outputs.FILE)
    files = model_files.prepare_job(config, inputs={"input_file": config.input_file},
                                    outputs={"--output_file": config.output_file})
    layer_indexes = parse_layers(config.layers, files.config.num_hidden_layers)
    examples = read_examples(config.input_file)
    features = featurize(examples, files.tokenizer(), config.max_seq_length)
    encoder, _ = checkpoints.load_encoder(config.init_checkpoint, config=files.config,
                                          dtype=policy)
    log_precision(encoder, config.dtype)

    start = time.time()
    logging.info("Extracting the features of %d examples (layers %s)", len(examples),
                 ",".join(map(str, layer_indexes)))
    progress = Progress(len(examples), "examples")
    with io.atomic_output(config.output_file) as out:  # never a half-written output
        results = extract(encoder, features, layer_indexes, config.batch_size, config.pooling)
        for done, (example, (tokens, per_layer)) in enumerate(zip(examples, results), 1):
            out.write(json.dumps(to_json(example.unique_id, tokens, per_layer,
                                         config.pooling)) + "\n")
            if progress.update(done):
                logging.info("extracted %s", progress.line())
    logging.info("Wrote %d examples to %s in %.1f s", len(examples), config.output_file,
                 time.time() - start)
    return len(examples)


@dataclasses.dataclass
class InputExample:
    unique_id: int
    text_a: str
    text_b: str | None


_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


def read_examples(input_file):
    """Reads `text` or `text_a ||| text_b` lines; names the line that is not UTF-8."""
    if not io.exists(input_file):
        raise BadFileError(input_file, io.missing(input_file), fix="check --input_file")
    examples = []
    lines = io.read_text(input_file).split("\n")  # "\n" only, as google reads lines
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        match = _PAIR.match(line.strip())
        text_a, text_b = (match.group(1), match.group(2)) if match else (line.strip(), None)
        examples.append(InputExample(len(examples), text_a, text_b))
    if not examples:
        raise BadFileError(input_file, "is empty", fix="give one example a line")
    return examples


def parse_layers(spec, num_layers):
    """'-1,-2' → [-1, -2], checked against the model's depth."""
    try:
        indexes = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--layers={spec!r} must be comma-separated integers") from None
    if not indexes:
        raise UserError("--layers is empty")
    for index in indexes:
        if not -num_layers <= index < num_layers:
            raise UserError(
                f"--layers index {index} is out of range for a model with "
                f"{num_layers} layers (use -{num_layers}..{num_layers - 1})")
    return indexes


def featurize(examples, tokenizer, max_seq_length):
    """Tokenizes and packs each example: (tokens, ids, mask, segment ids)."""
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
    @tf.function(reduce_retracing=True)
    def forward(inputs):
        outputs = encoder(inputs, training=False)
        return [tf.cast(outputs["encoder_outputs"][i], tf.float32) for i in layer_indexes]

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
