"""A student from a teacher: a checkpoint with a subset of its Transformer layers.

DistilBERT (Sanh et al., 2019) starts its student from the teacher's weights,
"taking one layer out of two": the student's layer j is the teacher's layer
`layers[j]`, and the embeddings, the pooler and any head are the teacher's own.
`--student_layers=0,2,4` (a setting of every command that loads a model) does
this to `--init_checkpoint` as it is read, so a student is an ordinary model
from then on: fine-tuned, distilled, saved and exported like any other.

The weights stay in the canonical names (`checkpoints.canonical_names`): only
`bert/encoder/layer_<i>/...` is renumbered, every other weight is kept as it is.
"""

from __future__ import annotations

import dataclasses
import re

from official_bert.checkpoints.bert_checkpoint import BertCheckpoint
from official_bert.errors import UserError

FLAG = "--student_layers"

# A Transformer layer's weight: its layer number, then the weight's own name.
_LAYER_WEIGHT = re.compile(r"^bert/encoder/layer_(\d+)/(.*)$")


def parse_layers(values, num_layers: int) -> list[int]:
    """The teacher's layer numbers that `--student_layers` names (strings or
    ints, 0-based), checked against the teacher's `num_layers`: `UserError`
    naming the flag for a word that is no number, a layer out of range or one
    named twice."""
    layers = []
    for value in values:
        try:
            layer = int(str(value).strip())
        except ValueError:
            raise UserError(f"{FLAG}: {value!r} is not a layer number (give the teacher's "
                            f"layers as 0-based numbers, e.g. {FLAG}=0,2,4)") from None
        if not 0 <= layer < num_layers:
            raise UserError(f"{FLAG}: layer {layer} is out of range: the teacher has "
                            f"{num_layers} layers, numbered 0 to {num_layers - 1}")
        if layer in layers:
            raise UserError(f"{FLAG}: layer {layer} is named twice; name each teacher layer "
                            "once")
        layers.append(layer)
    refuse_empty(layers)
    return layers


def refuse_empty(values) -> None:
    """`--student_layers=` (no layer) is a mistake, not "every layer" (which is
    the flag left out): `UserError` naming the flag."""
    if not values:
        raise UserError(f"{FLAG} is empty: name the teacher's layers to keep, e.g. "
                        f"{FLAG}=0,2,4, or leave the flag out to keep every layer")


def keep_layers(checkpoint: BertCheckpoint, layers: list[int]) -> BertCheckpoint:
    """`checkpoint` as a student of `len(layers)` layers: student layer j holds
    the teacher's layer `layers[j]`; embeddings, pooler and heads unchanged."""
    student_index = {teacher: student for student, teacher in enumerate(layers)}
    weights = {}
    for name, value in checkpoint.weights.items():
        found = _LAYER_WEIGHT.match(name)
        if found is None:
            weights[name] = value
        elif int(found.group(1)) in student_index:
            student = student_index[int(found.group(1))]
            weights[f"bert/encoder/layer_{student}/{found.group(2)}"] = value
    config = dataclasses.replace(checkpoint.config, num_hidden_layers=len(layers))
    return dataclasses.replace(checkpoint, config=config, weights=weights)
