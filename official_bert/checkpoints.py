"""Checkpoint I/O: one loader for every kind of BERT checkpoint, and exporters.

Kinds read by `read_checkpoint(path)`:

* ``huggingface``: a directory with `config.json` and `model.safetensors`
  (`BertModel`, or `BertFor*` with `bert.`-prefixed names and head weights),
  read with `safetensors.numpy` (no torch).
* ``google_tf1``: Google's original TF1 checkpoints, `bert_model.ckpt.*` with
  `bert_config.json` and `vocab.txt` (names like
  `bert/encoder/layer_0/attention/self/query/kernel`).
* ``official_bert``: this project's own object-based TF2 checkpoints, written
  by `tf.train.Checkpoint(encoder=..., ...)`, with `bert_config.json` beside.

Whatever the kind, the weights come back as one dictionary of numpy arrays
under Google's TF1 names (the *canonical names*), kernels as [in, out]. Heads
use google-research/bert's names too: `cls/predictions/...` (masked LM),
`cls/seq_relationship/...` (next sentence), `output_weights`/`output_bias`
(run_classifier), `cls/squad/...` (run_squad).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re

import numpy as np
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

from official_bert import io
from official_bert.errors import BadFileError
from official_bert.modeling.configs import TANH_GELUS, BertConfig, ConfigError
from official_bert.modeling.encoder import BertEncoder, dummy_inputs

HUGGINGFACE = "huggingface"
GOOGLE_TF1 = "google_tf1"
OFFICIAL_BERT = "official_bert"

# Buffers in Hugging Face files that are not parameters.
_HF_IGNORED = re.compile(r"(^|\.)(position_ids|num_batches_tracked)$")


class CheckpointError(BadFileError):
    """A checkpoint is missing, damaged, of an unknown kind, or does not fit the model."""

    subject = "the checkpoint"


@dataclasses.dataclass
class BertCheckpoint:
    """What `read_checkpoint` found.

    Attributes:
        kind: one of "huggingface", "google_tf1", "official_bert".
        path: the path given.
        config: the encoder's `BertConfig`.
        weights: canonical name → numpy array, encoder and any heads.
        vocab_file: `vocab.txt` beside the checkpoint, or None.
        do_lower_case: the casing the checkpoint was trained with, when the
            files say so (Hugging Face `tokenizer_config.json`, or "uncased" /
            "cased" in a Google checkpoint's directory name), else None.
    """

    kind: str
    path: str
    config: BertConfig
    weights: dict
    vocab_file: str | None = None
    do_lower_case: bool | None = None

    def head_weights(self, prefix: str) -> dict:
        """The weights whose canonical name starts with `prefix`."""
        return {k: v for k, v in self.weights.items() if k.startswith(prefix)}


# === Name mapping ===
#
# (Hugging Face regex, canonical template, transpose?). HF's nn.Linear keeps
# weights as [out, in]; TF kernels are [in, out]. Google's NSP, classifier and
# SQuAD heads store their matrices as [classes, H] like HF, so no transpose.
_HF_TO_CANONICAL = [
    (r"embeddings\.word_embeddings\.weight", "bert/embeddings/word_embeddings", False),
    (r"embeddings\.position_embeddings\.weight", "bert/embeddings/position_embeddings", False),
    (r"embeddings\.token_type_embeddings\.weight", "bert/embeddings/token_type_embeddings", False),
    (r"embeddings\.LayerNorm\.(?:weight|gamma)", "bert/embeddings/LayerNorm/gamma", False),
    (r"embeddings\.LayerNorm\.(?:bias|beta)", "bert/embeddings/LayerNorm/beta", False),
    (r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.weight", r"bert/encoder/layer_\1/attention/self/\2/kernel", True),
    (r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.bias", r"bert/encoder/layer_\1/attention/self/\2/bias", False),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.weight", r"bert/encoder/layer_\1/attention/output/dense/kernel", True),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.bias", r"bert/encoder/layer_\1/attention/output/dense/bias", False),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(?:weight|gamma)", r"bert/encoder/layer_\1/attention/output/LayerNorm/gamma", False),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(?:bias|beta)", r"bert/encoder/layer_\1/attention/output/LayerNorm/beta", False),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.weight", r"bert/encoder/layer_\1/intermediate/dense/kernel", True),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.bias", r"bert/encoder/layer_\1/intermediate/dense/bias", False),
    (r"encoder\.layer\.(\d+)\.output\.dense\.weight", r"bert/encoder/layer_\1/output/dense/kernel", True),
    (r"encoder\.layer\.(\d+)\.output\.dense\.bias", r"bert/encoder/layer_\1/output/dense/bias", False),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.(?:weight|gamma)", r"bert/encoder/layer_\1/output/LayerNorm/gamma", False),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.(?:bias|beta)", r"bert/encoder/layer_\1/output/LayerNorm/beta", False),
    (r"pooler\.dense\.weight", "bert/pooler/dense/kernel", True),
    (r"pooler\.dense\.bias", "bert/pooler/dense/bias", False),
    # Heads of BertForPreTraining / BertForMaskedLM / BertForNextSentencePrediction.
    (r"cls\.predictions\.transform\.dense\.weight", "cls/predictions/transform/dense/kernel", True),
    (r"cls\.predictions\.transform\.dense\.bias", "cls/predictions/transform/dense/bias", False),
    (r"cls\.predictions\.transform\.LayerNorm\.(?:weight|gamma)", "cls/predictions/transform/LayerNorm/gamma", False),
    (r"cls\.predictions\.transform\.LayerNorm\.(?:bias|beta)", "cls/predictions/transform/LayerNorm/beta", False),
    (r"cls\.predictions\.bias", "cls/predictions/output_bias", False),
    (r"cls\.seq_relationship\.weight", "cls/seq_relationship/output_weights", False),
    (r"cls\.seq_relationship\.bias", "cls/seq_relationship/output_bias", False),
    # BertForSequenceClassification / BertForQuestionAnswering.
    (r"classifier\.weight", "output_weights", False),
    (r"classifier\.bias", "output_bias", False),
    (r"qa_outputs\.weight", "cls/squad/output_weights", False),
    (r"qa_outputs\.bias", "cls/squad/output_bias", False),
]
_HF_PATTERNS = [(re.compile(p + "$"), t, tr) for p, t, tr in _HF_TO_CANONICAL]
# The MLM decoder is tied to the word embeddings in every BERT: not a weight.
_HF_TIED = re.compile(r"cls\.predictions\.decoder\.(weight|bias)$")


def _hf_to_canonical(name):
    """Returns (canonical name, transpose) for a Hugging Face tensor name."""
    bare = name[len("bert."):] if name.startswith("bert.") else name
    for pattern, template, transpose in _HF_PATTERNS:
        match = pattern.match(bare)
        if match:
            return match.expand(template), transpose
    return None, False


def _canonical_to_hf(canonical):
    """Inverse of `_hf_to_canonical` for encoder weights (`BertModel` names)."""
    name = canonical[len("bert/"):]
    transpose = name.endswith("/kernel")
    if name.endswith("_embeddings"):
        name += "/weight"
    name = re.sub(r"/(kernel|gamma)$", "/weight", name)
    name = re.sub(r"/beta$", "/bias", name)
    name = re.sub(r"layer_(\d+)", r"layer/\1", name)
    return name.replace("/", "."), transpose


def encoder_variables(encoder) -> dict:
    """Canonical name → the encoder's Keras variable."""
    emb = encoder.embeddings
    variables = {
        "bert/embeddings/word_embeddings": emb.word_embeddings.embeddings,
        "bert/embeddings/position_embeddings": emb.position_embeddings.embeddings,
        "bert/embeddings/token_type_embeddings": emb.token_type_embeddings.embeddings,
        "bert/embeddings/LayerNorm/gamma": emb.layer_norm.gamma,
        "bert/embeddings/LayerNorm/beta": emb.layer_norm.beta,
        "bert/pooler/dense/kernel": encoder.pooler.kernel,
        "bert/pooler/dense/bias": encoder.pooler.bias,
    }
    for i, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/layer_{i}/"
        dense_layers = {
            "attention/self/query": block.attention.query,
            "attention/self/key": block.attention.key,
            "attention/self/value": block.attention.value,
            "attention/output/dense": block.attention_output,
            "intermediate/dense": block.intermediate,
            "output/dense": block.output_dense,
        }
        for name, layer in dense_layers.items():
            variables[prefix + name + "/kernel"] = layer.kernel
            variables[prefix + name + "/bias"] = layer.bias
        for name, layer in {
            "attention/output/LayerNorm": block.attention_layer_norm,
            "output/LayerNorm": block.output_layer_norm,
        }.items():
            variables[prefix + name + "/gamma"] = layer.gamma
            variables[prefix + name + "/beta"] = layer.beta
    return variables


def get_encoder_weights(encoder) -> dict:
    """Canonical name → numpy array of the encoder's current weights."""
    return {k: np.asarray(v) for k, v in encoder_variables(encoder).items()}


def assign_encoder_weights(encoder, weights: dict) -> None:
    """Sets every encoder variable from canonical-named arrays.

    Raises `CheckpointError` listing every missing or mis-shaped name; names
    outside the encoder (heads) are left for the task models.
    """
    variables = encoder_variables(encoder)
    missing = sorted(set(variables) - set(weights))
    mismatched = [
        f"{name}: checkpoint {tuple(np.shape(weights[name]))} vs model "
        f"{tuple(variables[name].shape)}"
        for name in variables
        if name in weights
        and tuple(np.shape(weights[name])) != tuple(variables[name].shape)
    ]
    if missing or mismatched:
        lines = []
        if missing:
            lines.append(f"missing from the checkpoint: {', '.join(missing)}")
        if mismatched:
            lines.append("shape mismatch: " + "; ".join(mismatched))
        raise CheckpointError(
            None, "does not fit the encoder config (" + " | ".join(lines) + ")",
            fix="check that --bert_config_file matches the checkpoint")
    for name, variable in variables.items():
        variable.assign(np.asarray(weights[name], dtype=variable.dtype))


# === Locating files ===


def _find_beside(path, names):
    """The first of `names` in `path` (a directory) or beside it (a prefix)."""
    folder = path if io.isdir(path) else os.path.dirname(path) or "."
    for name in names:
        candidate = io.join(folder, name)
        if io.exists(candidate):
            return candidate
    return None


# === Checkpoints of a run directory, and damaged ones ===


def run_checkpoints(directory) -> list:
    """The checkpoint prefixes the `checkpoint` state file of `directory`
    lists, oldest first ([] without one)."""
    state_file = io.join(directory, "checkpoint")
    if not io.exists(state_file):
        return []
    try:
        state = tf.train.get_checkpoint_state(directory)
        if state is None:  # TensorFlow logs a parse error and returns None
            raise ValueError("not a CheckpointState text proto, or no model_checkpoint_path")
    except (tf.errors.OpError, ValueError) as e:  # text_format.ParseError is a ValueError
        # (Treating it as "no checkpoint" would start the run over and overwrite
        # the checkpoints it has.)
        indexes = sorted(io.glob(io.join(glob.escape(str(directory)), "*.index")),
                         key=lambda p: (len(p), p))
        newest = os.path.basename(indexes[-1])[:-len(".index")] if indexes else None
        raise CheckpointError(
            state_file, f"is not a readable checkpoint state file ({_first_line(e)})",
            fix=(f"write it again as the one line  model_checkpoint_path: \"{newest}\"  to "
                 f"resume from {newest}" if newest else "delete it to start the run over")
        ) from None
    paths = list(state.all_model_checkpoint_paths)
    if state.model_checkpoint_path and (not paths or paths[-1] != state.model_checkpoint_path):
        paths.append(state.model_checkpoint_path)
    return [p if os.path.isabs(p) or "://" in p else io.join(directory, p) for p in paths]


def latest_checkpoint(directory) -> str | None:
    """The newest checkpoint of a run directory whose files are there.

    `tf.train.latest_checkpoint` gives up (None) when the newest one's files
    are gone; this takes the one before, so that deleting a damaged checkpoint
    (as `damaged_checkpoint_error` says) resumes from the previous one.
    """
    for prefix in reversed(run_checkpoints(directory)):
        if io.exists(prefix + ".index"):
            return prefix
    return None


def checkpoint_files(prefix) -> list:
    """The files of the TensorFlow checkpoint `prefix` (.index, .data-*)."""
    return [prefix + ".index"] + io.glob(glob.escape(prefix) + ".data-*")


def _first_line(error: BaseException) -> str:
    text = str(getattr(error, "message", None) or error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:200]


def checkpoint_damage(prefix) -> tuple | None:
    """(file, what is wrong) when the checkpoint `prefix` cannot be read back
    whole (its index, then every tensor: a truncated or corrupt file), else None."""
    index = prefix + ".index"
    if not io.exists(index):
        return index, "is missing"
    try:
        reader = _reader(prefix)
    except (tf.errors.OpError, ValueError, IndexError) as e:
        return index, f"is damaged: truncated or corrupt ({_first_line(e)})"
    data_files = io.glob(glob.escape(prefix) + ".data-*")
    try:
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, ValueError, IndexError) as e:
        where = data_files[0] if len(data_files) == 1 else prefix + ".data-*"
        return where, f"is damaged: truncated or corrupt ({_first_line(e)})"
    return None


def damaged_checkpoint_error(prefix, error: BaseException | None = None,
                             resuming: bool = False):
    """A `CheckpointError` naming the damaged file of checkpoint `prefix` and
    whether an earlier checkpoint beside it is intact: when `resuming` a run
    in its directory, how to resume from that one; else (an
    --init_checkpoint) how to use it instead. None when the checkpoint reads
    back whole (then `error` was something else)."""
    damage = checkpoint_damage(prefix)
    if damage is None:
        return None
    path, problem = damage
    directory = os.path.dirname(prefix)
    listed = [p for p in run_checkpoints(directory) if p != prefix]
    files = ", ".join(os.path.basename(f) for f in checkpoint_files(prefix))
    earlier = next((p for p in reversed(listed)
                    if io.exists(p + ".index") and checkpoint_damage(p) is None), None)
    if resuming and earlier:
        fix = (f"the previous checkpoint {os.path.basename(earlier)} in {directory} is intact: "
               f"delete {files} there and run the same command to resume from it")
    elif resuming:
        fix = (f"no earlier checkpoint in {directory} is intact: delete {files} to start the "
               "run over, or restore the files from a copy")
    elif earlier:
        fix = (f"copy or download the checkpoint again, or pass the intact earlier one: "
               f"--init_checkpoint={earlier}")
    else:
        fix = "copy or download the checkpoint again"
    return CheckpointError(path, problem, fix=fix)


def _tf_checkpoint_prefix(path):
    """Resolves a TF checkpoint directory or prefix to a prefix, or None."""
    if io.isdir(path):
        latest = latest_checkpoint(path)
        if latest:
            return latest
        indexes = io.glob(io.join(path, "*.index"))
        if len(indexes) == 1:
            return indexes[0][: -len(".index")]
        if len(indexes) > 1:
            raise CheckpointError(
                path, f"holds several checkpoints "
                f"({', '.join(os.path.basename(i) for i in indexes)})",
                fix="pass the prefix of the one to load")
        return None
    if io.exists(path + ".index"):
        return path
    if path.endswith(".index") and io.exists(path):
        return path[: -len(".index")]
    return None


def _reader(prefix):
    """The reader of the checkpoint at `prefix`. Not `tf.train.load_checkpoint`:
    it takes a path that `tf.io.gfile.isdir` calls a directory for one, and
    TensorFlow's `ram://` calls every prefix of a stored name one."""
    return tf.compat.v1.train.NewCheckpointReader(prefix)


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


# === Reading ===


def read_checkpoint(path, config: BertConfig | None = None) -> BertCheckpoint:
    """Reads any supported BERT checkpoint; see the module docstring.

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
            path, "does not exist", fix="pass a Hugging Face directory "
            "(config.json + model.safetensors), a Google checkpoint "
            "(bert_model.ckpt) or an official_bert checkpoint directory")
    if io.isdir(path) and io.exists(io.join(path, "model.safetensors")):
        return _read_huggingface(path, config)
    prefix = _tf_checkpoint_prefix(path)
    if prefix is None:
        raise CheckpointError(
            path, "holds no checkpoint", fix="expected model.safetensors (Hugging "
            "Face) or a TensorFlow checkpoint (*.index and *.data-* files)")
    try:
        names = _reader(prefix).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError, IndexError) as e:
        raise (damaged_checkpoint_error(prefix, e)
               or CheckpointError(prefix, f"cannot be read ({_first_line(e)})")) from None
    if any(name.startswith("bert/") for name in names):
        return _read_google_tf1(path, prefix, names, config)
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in names and any(
        name.startswith("encoder/") for name in names
    ):
        return _read_official_bert(path, prefix, config)
    raise CheckpointError(
        prefix, "is a TensorFlow checkpoint but neither Google's BERT "
        "(no 'bert/...' variables) nor an official_bert one (no 'encoder')")


def _config_beside(path, config, names):
    if config is not None:
        return config
    config_file = _find_beside(path, names)
    if config_file is None:
        raise CheckpointError(
            path, f"has no {' or '.join(names)} beside it", fix="pass --bert_config_file")
    return BertConfig.from_json_file(config_file)


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
                              f"or corrupt ({_first_line(e)})",
                              fix="download or copy it again") from None
    weights, unknown = {}, []
    for name, value in tensors.items():
        if _HF_IGNORED.search(name) or _HF_TIED.search(name):
            continue
        canonical, transpose = _hf_to_canonical(name)
        if canonical is None:
            unknown.append(name)
            continue
        weights[canonical] = np.ascontiguousarray(value.T if transpose else value)
    if unknown:
        raise CheckpointError(
            weights_file, f"has tensors that are not BERT's: {', '.join(sorted(unknown))}")
    return BertCheckpoint(
        kind=HUGGINGFACE,
        path=path,
        config=config,
        weights=weights,
        vocab_file=_find_beside(path, ["vocab.txt"]),
        do_lower_case=_guess_lower_case(path, HUGGINGFACE),
    )


def _read_google_tf1(path, prefix, names, config):
    config = _config_beside(prefix, config, ["bert_config.json", "config.json"])
    reader = _reader(prefix)
    # Optimizer slots (adam_m/adam_v) and the global step are not weights.
    skip = re.compile(r"(/adam_[mv]$|^global_step$|^_CHECKPOINTABLE)")
    try:
        weights = {
            name: reader.get_tensor(name) for name in names if not skip.search(name)
        }
    except (tf.errors.OpError, ValueError, IndexError) as e:
        raise (damaged_checkpoint_error(prefix, e)
               or CheckpointError(prefix, f"cannot be read ({_first_line(e)})")) from None
    return BertCheckpoint(
        kind=GOOGLE_TF1,
        path=path,
        config=config,
        weights=weights,
        vocab_file=_find_beside(prefix, ["vocab.txt"]),
        do_lower_case=_guess_lower_case(prefix, GOOGLE_TF1),
    )


def _read_official_bert(path, prefix, config):
    # CheckpointManager writes into output_dir; the config sits there too.
    config = _config_beside(prefix, config, ["bert_config.json", "config.json"])
    encoder = BertEncoder.from_bert_config(config)
    encoder(dummy_inputs())
    try:
        status = tf.train.Checkpoint(encoder=encoder).read(prefix)
        status.expect_partial()
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, IndexError, tf.errors.OpError) as e:
        raise (damaged_checkpoint_error(prefix, e) or CheckpointError(
            prefix, f"does not fit the encoder config ({_first_line(e)})",
            fix="check that --bert_config_file is the checkpoint's")) from None
    weights = get_encoder_weights(encoder)
    weights.update(_own_head_weights(prefix))
    return BertCheckpoint(
        kind=OFFICIAL_BERT,
        path=path,
        config=config,
        weights=weights,
        vocab_file=_find_beside(prefix, ["vocab.txt"]),
        do_lower_case=_guess_lower_case(prefix, OFFICIAL_BERT),
    )


# A `Trainer` checkpoint's head variables (`tf.train.Checkpoint(model=...)`
# attribute paths; Keras 3 tracks a Dense kernel as `_kernel`) → the canonical
# (Google / Hugging Face) names the heads read, and whether the value is
# transposed to Google's [out, in] layout. Every single-dense fine-tuning head
# is `output_*`, as Hugging Face's `classifier.*` of BertForSequence/Token
# Classification and BertForMultipleChoice; the heads check the shape.
_OWN_HEADS = {
    "model/classifier/_kernel": ("output_weights", True),
    "model/classifier/bias": ("output_bias", False),
    "model/token_classifier/_kernel": ("output_weights", True),
    "model/token_classifier/bias": ("output_bias", False),
    "model/choice_scorer/_kernel": ("output_weights", True),
    "model/choice_scorer/bias": ("output_bias", False),
    "model/span_labeler/_kernel": ("cls/squad/output_weights", True),
    "model/span_labeler/bias": ("cls/squad/output_bias", False),
    "model/mlm_transform/_kernel": ("cls/predictions/transform/dense/kernel", False),
    "model/mlm_transform/bias": ("cls/predictions/transform/dense/bias", False),
    "model/mlm_layer_norm/gamma": ("cls/predictions/transform/LayerNorm/gamma", False),
    "model/mlm_layer_norm/beta": ("cls/predictions/transform/LayerNorm/beta", False),
    "model/mlm_output_bias": ("cls/predictions/output_bias", False),
    "model/next_sentence/_kernel": ("cls/seq_relationship/output_weights", True),
    "model/next_sentence/bias": ("cls/seq_relationship/output_bias", False),
}


def _own_head_weights(prefix) -> dict:
    """The task head(s) of one of this project's training checkpoints, under
    canonical names and layouts ({} for a checkpoint of the encoder alone)."""
    reader = _reader(prefix)
    keys = set(reader.get_variable_to_shape_map())
    weights = {}
    for attribute, (name, transpose) in _OWN_HEADS.items():
        key = attribute + "/.ATTRIBUTES/VARIABLE_VALUE"
        if key in keys:
            value = reader.get_tensor(key)
            weights[name] = np.ascontiguousarray(value.T) if transpose else value
    return weights


def load_encoder(path, config: BertConfig | None = None, dtype=None):
    """Builds a `BertEncoder` and loads a checkpoint of any kind into it.

    Returns:
        (encoder, checkpoint): the ready encoder and the `BertCheckpoint`
        (its config, vocab file, casing and any head weights).

    Example:
    >>> encoder, ckpt = load_encoder("path/to/all-MiniLM-L6-v2")  # doctest: +SKIP
    """
    checkpoint = read_checkpoint(path, config)
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


# === Writing ===


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
    """Writes the encoder as a Hugging Face `BertModel` directory.

    `model.safetensors` (float32), `config.json`, `vocab.txt` (copied from
    `vocab_file`) and `tokenizer_config.json` are written to a hidden staging
    directory inside `output_dir` first and published together
    (`io.publish_together`), so a crash never leaves a half-written file.
    """
    output_dir = os.fspath(output_dir)
    tensors = {}
    for canonical, value in get_encoder_weights(encoder).items():
        hf_name, transpose = _canonical_to_hf(canonical)
        value = value.astype(np.float32)
        tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
    staging = io.make_temporary_dir(output_dir, "export")
    try:
        files = {"config.json": json.dumps(encoder.config.to_hf_dict(), indent=2,
                                           sort_keys=True) + "\n"}
        if do_lower_case is not None:
            files["tokenizer_config.json"] = json.dumps(
                {"do_lower_case": do_lower_case, "tokenizer_class": "BertTokenizer"},
                indent=2) + "\n"
        weights_file = io.join(staging, "model.safetensors")
        if io.is_local(weights_file):
            safetensors_numpy.save_file(tensors, weights_file, metadata={"format": "pt"})
        else:
            files["model.safetensors"] = safetensors_numpy.save(
                tensors, metadata={"format": "pt"})
        for name, data in files.items():
            io.atomic_write(io.join(staging, name), data)
        if vocab_file:
            io.atomic_copy(vocab_file, io.join(staging, "vocab.txt"))
        io.publish_together({io.join(output_dir, name): io.join(staging, name)
                             for name in io.listdir(staging)})
    finally:
        io.remove_tree(staging)
    return output_dir


# The head variables google-research/bert's scripts create, outside `bert/`:
# run_pretraining.py's masked LM and next sentence, run_classifier.py's
# classifier, run_squad.py's span head. Their canonical names are google's.
GOOGLE_HEAD_NAMES = (
    "cls/predictions/transform/dense/kernel",
    "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/gamma",
    "cls/predictions/transform/LayerNorm/beta",
    "cls/predictions/output_bias",
    "cls/seq_relationship/output_weights",
    "cls/seq_relationship/output_bias",
    "output_weights",
    "output_bias",
    "cls/squad/output_weights",
    "cls/squad/output_bias",
)
GOOGLE_CHECKPOINT = "bert_model.ckpt"
# What a model with the exact (erf) GELU may be written as for google's
# modeling.py, whose only GELU is the tanh approximation (`--exact_gelu_as`).
EXACT_GELU_CHOICES = ("refuse", "tanh", "gelu_exact")


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
    config = encoder.config
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
    if io.exists(output_dir) and (not io.isdir(output_dir) or io.listdir(output_dir)):
        raise FileExistsError(output_dir)

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
        if io.exists(output_dir):  # an empty directory the user made: replaced
            if io.is_local(output_dir):
                os.rmdir(output_dir)
            else:
                io.remove_tree(output_dir)
        io.rename(staging, output_dir)
    finally:
        io.remove_tree(staging)
    return io.join(output_dir, GOOGLE_CHECKPOINT)


__all__ = [
    "BertCheckpoint",
    "CheckpointError",
    "ConfigError",
    "assign_encoder_weights",
    "encoder_variables",
    "export_google",
    "export_huggingface",
    "get_encoder_weights",
    "load_encoder",
    "read_checkpoint",
    "save_checkpoint",
]
