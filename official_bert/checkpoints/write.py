"""Writing an encoder: this project's checkpoint (`save_checkpoint`), a Hugging
Face directory (`export_huggingface` of an encoder, `write_huggingface` of
canonical weights, heads included), google-research/bert's TF1 files
(`export_google`). Each output appears complete or not at all."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

from official_bert import file_sets, io
from official_bert.checkpoints.bert_checkpoint import CheckpointError
from official_bert.configs import EXACT_GELU_CHOICES
from official_bert.checkpoints.canonical_names import (GOOGLE_HEAD_NAMES, assign_encoder_weights,
                                                       canonical_to_hf, get_encoder_weights,
                                                       hf_to_canonical)
from official_bert.modeling.configs import TANH_GELUS
from official_bert.modeling.encoder import BertEncoder


def save_checkpoint(encoder, output_dir, vocab_file=None, step=None):
    """Writes an official_bert checkpoint of the encoder alone.

    Also writes `bert_config.json` (and copies `vocab.txt`) beside it so the
    directory is self-describing. Returns the checkpoint prefix.
    """
    io.makedirs(output_dir)
    encoder.config.to_json_file(io.join(output_dir, "bert_config.json"))
    if vocab_file:
        io.atomic_copy(vocab_file, io.join(output_dir, "vocab.txt"))
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(encoder=encoder), output_dir, max_to_keep=1
    )
    return manager.save(checkpoint_number=step)


def export_huggingface(encoder, output_dir, vocab_file=None, do_lower_case=None):
    """Writes the encoder as a Hugging Face `BertModel` directory
    (`write_huggingface` of its weights)."""
    return write_huggingface(get_encoder_weights(encoder), encoder.config, output_dir,
                             vocab_file, do_lower_case)


# The heads a Hugging Face directory holds beside the encoder, under Hugging Face's
# names (BertForPreTraining's masked LM and next sentence, the classifier, the span
# head); their canonical names and layouts come from canonical_names' one table.
_HF_HEADS = ("cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
             "cls.predictions.transform.LayerNorm.weight",
             "cls.predictions.transform.LayerNorm.bias", "cls.predictions.bias",
             "cls.seq_relationship.weight", "cls.seq_relationship.bias",
             "classifier.weight", "classifier.bias", "qa_outputs.weight", "qa_outputs.bias")
_HEADS_TO_HF = {hf_to_canonical(name)[0]: (name, hf_to_canonical(name)[1])
                for name in _HF_HEADS}


def write_huggingface(weights, config, output_dir, vocab_file=None, do_lower_case=None,
                      files=None):
    """Writes canonical weights as a Hugging Face directory.

    The encoder alone is a `BertModel` (its names unprefixed); with heads (the
    canonical names of `_HEADS_TO_HF`), the encoder's names take `bert.` and the
    heads sit beside it as in `BertForPreTraining` (the masked LM's output matrix
    is the word embeddings, tied, so it is not written). `model.safetensors`
    (float32), `config.json` (with `config`'s vocab_size), `vocab.txt` (copied from
    `vocab_file`), `tokenizer_config.json` (when `do_lower_case` is known) and
    `files` (name → text) are written to a hidden staging directory first, so a
    crash never leaves a half-written file. A new or empty `output_dir` (or one
    the output policy cleared for replacing, `official_bert.outputs`) is staged
    beside it and published whole (`io.publish_directory`: of two writers one
    wins); into an existing directory the files are published together
    (`file_sets.publish_together`).
    """
    output_dir = os.fspath(output_dir)
    heads = sorted(name for name in weights if not name.startswith("bert/"))
    unknown = [name for name in heads if name not in _HEADS_TO_HF]
    if unknown:
        raise ValueError(f"no Hugging Face name for the weights {', '.join(unknown)}")
    tensors = {}
    for canonical, value in weights.items():
        if canonical in _HEADS_TO_HF:
            hf_name, transpose = _HEADS_TO_HF[canonical]
        else:
            hf_name, transpose = canonical_to_hf(canonical)
            hf_name = ("bert." if heads else "") + hf_name
        value = np.asarray(value).astype(np.float32)
        tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
    hf_config = config.to_hf_dict()
    if any(name.startswith("cls/predictions/") for name in heads):
        hf_config["architectures"] = ["BertForPreTraining" if "cls/seq_relationship/output_bias"
                                      in heads else "BertForMaskedLM"]
    whole = (io.plan_in_force().is_claimed(output_dir) or not io.isdir(output_dir)
             or not io.listdir(output_dir))
    name = os.path.basename(output_dir.rstrip("/"))
    staging = (io.make_temporary_dir(os.path.dirname(output_dir.rstrip("/")) or ".", name)
               if whole else io.make_temporary_dir(output_dir, "export"))
    try:
        files = {"config.json": json.dumps(hf_config, indent=2, sort_keys=True) + "\n",
                 **(files or {})}
        if do_lower_case is not None:
            files["tokenizer_config.json"] = json.dumps(
                {"do_lower_case": do_lower_case, "tokenizer_class": "BertTokenizer"},
                indent=2) + "\n"
        # As bytes through io, so a full disk is `DiskFullError`, not a SafetensorError.
        files["model.safetensors"] = safetensors_numpy.save(tensors, metadata={"format": "pt"})
        for file_name, data in files.items():
            io.atomic_write(io.join(staging, file_name), data)
        if vocab_file:
            io.atomic_copy(vocab_file, io.join(staging, "vocab.txt"))
        if whole:
            try:
                io.publish_directory(staging, output_dir)
            except FileExistsError:
                raise io.written_meanwhile(output_dir) from None
        else:
            file_sets.publish_together({io.join(output_dir, n): io.join(staging, n)
                                        for n in io.listdir(staging)})
    finally:
        io.remove_tree(staging)
    return output_dir


# === google-research/bert's TF1 files ===


GOOGLE_CHECKPOINT = "bert_model.ckpt"
# What a model with the exact (erf) GELU may be written as for google's
# modeling.py, whose only GELU is the tanh approximation: `--exact_gelu_as`'s
# choices, `configs.EXACT_GELU_CHOICES`.


class ExactGeluError(CheckpointError):
    """The model uses the exact GELU, which google's modeling.py cannot compute."""


def gelu_tanh_difference(encoder, seed=0) -> float:
    """The largest |difference| in `sequence_output` between `encoder` and the
    same weights with the tanh GELU, on a fixed random batch (2 x 32 tokens):
    what running an exact-GELU model under google's `gelu` changes."""
    config = dataclasses.replace(encoder.config, hidden_act="gelu_tanh")
    tanh_encoder = BertEncoder.from_bert_config(config)
    length = min(32, config.max_position_embeddings)
    rng = np.random.default_rng(seed)
    inputs = {"input_word_ids": rng.integers(1, config.vocab_size, (2, length)).astype("int32"),
              "input_mask": np.ones((2, length), "int32"),
              "input_type_ids": np.zeros((2, length), "int32")}
    tanh_encoder(inputs)
    assign_encoder_weights(tanh_encoder, get_encoder_weights(encoder))
    exact = np.asarray(encoder(inputs, training=False)["sequence_output"], "float32")
    tanh = np.asarray(tanh_encoder(inputs, training=False)["sequence_output"], "float32")
    return float(np.max(np.abs(exact - tanh)))


def export_google(encoder, output_dir, vocab_file=None, heads=None, exact_gelu_as="refuse"):
    """Writes the encoder (and heads) as google-research/bert's TF1 checkpoint.

    `output_dir` (new, or an empty directory) gets `bert_model.ckpt.index`,
    `bert_model.ckpt.data-00000-of-00001` (float32 variables under the names
    google's `modeling.py` and scripts create, kernels [in, out]; no optimizer
    slots, no global step), `bert_config.json` and `vocab.txt`: what google's
    `--init_checkpoint=$DIR/bert_model.ckpt --bert_config_file=... --vocab_file=...`
    read. Everything is staged in a hidden directory beside it and renamed
    into place, so the directory appears complete or not at all.

    Args:
        encoder: a `BertEncoder`.
        output_dir: the directory to create.
        vocab_file: copied as `vocab.txt` (None: none written).
        heads: canonical name → array of head weights to write too (only
            `GOOGLE_HEAD_NAMES`; others are refused), e.g. a checkpoint's
            `cls/predictions/...` and `cls/seq_relationship/...`.
        exact_gelu_as: for an encoder with the exact (erf) GELU, which
            google's code does not have ("gelu" there is the tanh
            approximation): "refuse" (`ExactGeluError`), "tanh" (write
            "gelu": google's code runs it with the tanh GELU, outputs differ
            by `gelu_tanh_difference`), or "gelu_exact" (this project's name:
            read exactly here, refused by google's `get_activation` with
            "Unsupported activation", never run as another network).

    Returns:
        The checkpoint prefix, `output_dir/bert_model.ckpt`.
    """
    output_dir = os.fspath(output_dir)
    heads = dict(heads or {})
    unknown = sorted(set(heads) - set(GOOGLE_HEAD_NAMES))
    if unknown:
        raise ValueError(f"not google-research/bert head names: {', '.join(unknown)}")
    if exact_gelu_as not in EXACT_GELU_CHOICES:
        raise ValueError(f"exact_gelu_as={exact_gelu_as!r}: one of {EXACT_GELU_CHOICES}")
    config_dict = _google_config(encoder.config, exact_gelu_as)
    if not io.plan_in_force().is_claimed(output_dir) and io.exists(output_dir) and (
            not io.isdir(output_dir) or io.listdir(output_dir)):
        raise FileExistsError(output_dir)  # the output policy's claim may replace it

    tensors = {name: np.asarray(value, np.float32)
               for name, value in get_encoder_weights(encoder).items()}
    tensors.update({name: np.asarray(value, np.float32) for name, value in heads.items()})
    names = sorted(tensors)
    parent = os.path.dirname(output_dir.rstrip("/")) or "."
    staging = io.make_temporary_dir(parent, os.path.basename(output_dir.rstrip("/")))
    try:
        # SaveV2 is what TF1's Saver runs: a V2 checkpoint, one data shard.
        tf.raw_ops.SaveV2(prefix=io.join(staging, GOOGLE_CHECKPOINT),
                          tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tensors[n] for n in names])
        io.atomic_write(io.join(staging, "bert_config.json"),
                        json.dumps(config_dict, indent=2, sort_keys=True) + "\n")
        if vocab_file:
            io.atomic_copy(vocab_file, io.join(staging, "vocab.txt"))
        io.publish_directory(staging, output_dir)
    finally:
        io.remove_tree(staging)
    return io.join(output_dir, GOOGLE_CHECKPOINT)


def _google_config(config, exact_gelu_as: str) -> dict:
    """The `bert_config.json` content google's modeling.py reads for `config`
    (see `export_google` for `exact_gelu_as`)."""
    config_dict = config.to_dict()
    if config.hidden_act == "gelu":  # the exact GELU (BertConfig names it as Hugging Face)
        if exact_gelu_as == "refuse":
            raise ExactGeluError(
                None, "the model uses the exact (erf) GELU, which google-research/bert's "
                "modeling.py does not have (its \"gelu\" is the tanh approximation)",
                fix="pass --exact_gelu_as=tanh to write \"gelu\" (google's code then runs "
                    "the tanh GELU: outputs change slightly, the command says by how much) or "
                    "--exact_gelu_as=gelu_exact (exact here; google's get_activation refuses it)")
        if exact_gelu_as == "tanh":
            config_dict["hidden_act"] = "gelu"
    elif config.hidden_act not in TANH_GELUS + ("relu", "tanh"):
        raise CheckpointError(
            None, f"the model's activation {config.hidden_act!r} is not one google's "
            "modeling.py has (gelu = tanh GELU, relu, tanh)")
    return config_dict
