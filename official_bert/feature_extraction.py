"""Feature-based use of BERT: per-token and pooled vectors from chosen layers.

The library half of `extract_features.py` (google-research/bert's tool): read
`text` / `text_a ||| text_b` lines, tokenize and pack them, run the encoder, and
turn each example's vectors into google's JSON record.
"""

from __future__ import annotations

import dataclasses
import os
import re


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
    from official_bert.text import tokenization

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
