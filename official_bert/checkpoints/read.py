"""Reading any kind of BERT checkpoint (`read_checkpoint`) and loading it into
an encoder (`load_encoder`); the kinds are in the package's docstring."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import numpy as np
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

from official_bert import io
from official_bert.checkpoints.bert_checkpoint import (GOOGLE_TF1, HUGGINGFACE, OFFICIAL_BERT,
                                                       BertCheckpoint, CheckpointError,
                                                       first_line)
from official_bert.checkpoints.canonical_names import (OWN_HEADS, assign_encoder_weights,
                                                       encoder_variables, get_encoder_weights,
                                                       weights_from_hf)
from official_bert.checkpoints.tf_checkpoints import (checkpoint_prefix,
                                                      damaged_checkpoint_error, open_reader)
from official_bert.modeling.configs import BertConfig
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.run_directory.latest import (checkpoint_step, latest_checkpoint, read_latest,
                                                readable)


def read_checkpoint(path, config: BertConfig | None = None) -> BertCheckpoint:
    """Reads any supported BERT checkpoint; see the package's docstring.

    Args:
        path: a Hugging Face directory, a Google TF1 checkpoint directory or
            prefix (`.../bert_model.ckpt`), or one of this project's checkpoint
            directories or prefixes.
        config: the encoder config; by default read from `config.json` /
            `bert_config.json` beside the checkpoint.

    Raises:
        CheckpointError: the path does not exist or holds no known checkpoint.
    """
    path = os.fspath(path)
    if not io.exists(path) and not io.exists(path + ".index"):
        raise CheckpointError(
            path, io.missing(path), fix="pass a Hugging Face directory "
            "(config.json + model.safetensors), a Google checkpoint "
            "(bert_model.ckpt) or an official_bert checkpoint directory")
    if io.isdir(path) and io.exists(io.join(path, "model.safetensors")):
        return _read_huggingface(path, config)
    if io.isdir(path) and latest_checkpoint(path):  # a run's directory: it may be training
        prefix, ckpt = read_latest(path, lambda prefix: _read_tensorflow(path, prefix, config))
    else:
        prefix = checkpoint_prefix(path)
        if prefix is None:
            raise CheckpointError(
                path, "holds no checkpoint", fix="expected model.safetensors (Hugging "
                "Face) or a TensorFlow checkpoint (*.index and *.data-* files)")
        ckpt = _read_tensorflow(path, prefix, config)
    return dataclasses.replace(ckpt, prefix=prefix, step=checkpoint_step(prefix))


def _read_tensorflow(path, prefix, config) -> BertCheckpoint:
    """The TensorFlow checkpoint `prefix` (of `path`, as given): google's or this project's."""
    try:
        names = open_reader(prefix).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError, IndexError) as e:
        raise (damaged_checkpoint_error(prefix, e)
               or CheckpointError(prefix, f"cannot be read ({first_line(e)})")) from None
    if any(name.startswith("bert/") for name in names):
        return _read_google_tf1(path, prefix, names, config)
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in names and any(
        name.startswith("encoder/") for name in names
    ):
        return _read_official_bert(path, prefix, config)
    raise CheckpointError(
        prefix, "is a TensorFlow checkpoint but neither Google's BERT "
        "(no 'bert/...' variables) nor an official_bert one (no 'encoder')")


def load_encoder(path, config: BertConfig | None = None, dtype=None):
    """Builds a `BertEncoder` and loads a checkpoint of any kind into it.

    Returns:
        (encoder, checkpoint): the ready encoder and the `BertCheckpoint`
        (its config, vocab file, casing and any head weights).

    `path` may be a `BertCheckpoint` read already (a job's `ModelFiles.checkpoint`):
    a run directory that trains is then read once, at one step.

    Example:
    >>> encoder, ckpt = load_encoder("path/to/all-MiniLM-L6-v2")  # doctest: +SKIP
    """
    checkpoint = path if isinstance(path, BertCheckpoint) else read_checkpoint(path, config)
    encoder = BertEncoder.from_bert_config(checkpoint.config, dtype=dtype)
    encoder(dummy_inputs())
    assign_encoder_weights(encoder, checkpoint.weights)
    extra = sorted(
        set(checkpoint.weights)
        - set(encoder_variables(encoder))
        - {k for k in checkpoint.weights if not k.startswith("bert/")}
    )
    if extra:
        raise CheckpointError(
            path, f"has encoder variables the config does not expect: {', '.join(extra)}",
            fix="check num_hidden_layers in the config")
    return encoder, checkpoint


# === Each kind ===


def _read_huggingface(path, config):
    config = _config_beside(path, config, ["config.json", "bert_config.json"])
    weights_file = io.join(path, "model.safetensors")
    try:
        if io.is_local(weights_file):
            tensors = safetensors_numpy.load_file(weights_file)  # memory-mapped
        else:
            with io.open_file(weights_file, "rb") as f:
                tensors = safetensors_numpy.load(f.read())
    except Exception as e:  # noqa: BLE001 - safetensors_rust.SafetensorError is no ValueError
        if not (type(e).__name__ == "SafetensorError" or isinstance(e, (ValueError, OSError))):
            raise
        raise CheckpointError(weights_file, f"is not a readable safetensors file, truncated "
                              f"or corrupt ({first_line(e)})",
                              fix="download or copy it again") from None
    weights, unknown = weights_from_hf(tensors)
    if unknown:
        raise CheckpointError(
            weights_file, f"has tensors that are not BERT's: {', '.join(sorted(unknown))}")
    return _checkpoint(HUGGINGFACE, path, path, config, weights)


def _read_google_tf1(path, prefix, names, config):
    config = _config_beside(prefix, config, ["bert_config.json", "config.json"])
    reader = open_reader(prefix)
    # Optimizer slots (adam_m/adam_v) and the global step are not weights.
    skip = re.compile(r"(/adam_[mv]$|^global_step$|^_CHECKPOINTABLE)")
    try:
        weights = {
            name: reader.get_tensor(name) for name in names if not skip.search(name)
        }
    except (tf.errors.OpError, ValueError, IndexError) as e:
        raise (damaged_checkpoint_error(prefix, e)
               or CheckpointError(prefix, f"cannot be read ({first_line(e)})")) from None
    return _checkpoint(GOOGLE_TF1, path, prefix, config, weights)


def _read_official_bert(path, prefix, config):
    # CheckpointManager writes into output_dir; the config sits there too.
    config = _config_beside(prefix, config, ["bert_config.json", "config.json"])
    encoder = BertEncoder.from_bert_config(config)
    encoder(dummy_inputs())
    try:
        status = tf.train.Checkpoint(encoder=encoder).read(readable(prefix))
        status.expect_partial()
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, IndexError, tf.errors.OpError) as e:
        raise (damaged_checkpoint_error(prefix, e) or CheckpointError(
            prefix, f"does not fit the encoder config ({first_line(e)})",
            fix="check that --bert_config_file is the checkpoint's")) from None
    weights = get_encoder_weights(encoder)
    weights.update(_own_head_weights(prefix))
    return _checkpoint(OFFICIAL_BERT, path, prefix, config, weights)


def _own_head_weights(prefix) -> dict:
    """The task head(s) of one of this project's training checkpoints, under
    canonical names and layouts ({} for a checkpoint of the encoder alone)."""
    reader = open_reader(prefix)
    keys = set(reader.get_variable_to_shape_map())
    weights = {}
    for attribute, (name, transpose) in OWN_HEADS.items():
        key = attribute + "/.ATTRIBUTES/VARIABLE_VALUE"
        if key in keys:
            value = reader.get_tensor(key)
            weights[name] = np.ascontiguousarray(value.T) if transpose else value
    return weights


# === The files beside a checkpoint ===


def _checkpoint(kind, path, files_at, config, weights) -> BertCheckpoint:
    """A checkpoint read from `path`; its vocabulary and casing are found beside
    `files_at` (its directory, or its prefix)."""
    return BertCheckpoint(kind=kind, path=path, config=config, weights=weights,
                          vocab_file=_find_beside(files_at, ["vocab.txt"]),
                          do_lower_case=_guess_lower_case(files_at, kind))


def _find_beside(path, names):
    """The first of `names` in `path` (a directory) or beside it (a prefix)."""
    folder = path if io.isdir(path) else os.path.dirname(path) or "."
    for name in names:
        candidate = io.join(folder, name)
        if io.exists(candidate):
            return candidate
    return None


def _config_beside(path, config, names):
    if config is not None:
        return config
    config_file = _find_beside(path, names)
    if config_file is None:
        raise CheckpointError(
            path, f"has no {' or '.join(names)} beside it", fix="pass --bert_config_file")
    return BertConfig.from_json_file(config_file)


def _guess_lower_case(path, kind):
    tokenizer_config = _find_beside(path, ["tokenizer_config.json"])
    if tokenizer_config:
        try:
            value = json.loads(io.read_text(tokenizer_config)).get("do_lower_case")
            if isinstance(value, bool):
                return value
        except (OSError, ValueError):
            pass
    name = os.path.basename(os.path.normpath(
        path if io.isdir(path) else os.path.dirname(path) or path
    )).lower()
    if "uncased" in name:
        return True
    if "cased" in name:
        return False
    return None
