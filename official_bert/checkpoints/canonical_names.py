"""Canonical names: the one vocabulary of BERT's weights, Google's TF1 names.

Every kind of checkpoint is read into these names (kernels [in, out]) and
written from them: the map from Hugging Face's names and back, this project's
training heads' variables, the heads google-research/bert's scripts create,
and the encoder's Keras variables by name.
"""

from __future__ import annotations

import re

import numpy as np
from absl import logging

from official_bert.checkpoints.bert_checkpoint import CheckpointError


# === Hugging Face ===


# Buffers in Hugging Face files that are not parameters.
_HF_IGNORED = re.compile(r"(^|\.)(position_ids|num_batches_tracked)$")
# The MLM decoder is tied to the word embeddings in every BERT: not a weight.
_HF_TIED = re.compile(r"cls\.predictions\.decoder\.(weight|bias)$")


# (Hugging Face regex, canonical template, transpose?). HF's nn.Linear keeps
# weights as [out, in]; TF kernels are [in, out]. Google's NSP, classifier and
# SQuAD heads store their matrices as [classes, H] like HF, so no transpose.
# Every layer's tensors follow its kind, so the table is written per layer.


def _linear(hf, canonical):
    """A dense layer: HF's weight is the kernel, transposed."""
    return [(hf + r"\.weight", canonical + "/kernel", True),
            (hf + r"\.bias", canonical + "/bias", False)]


def _layer_norm(hf, canonical):
    """A LayerNorm: weight and bias (gamma and beta in older HF files)."""
    return [(hf + r"\.(?:weight|gamma)", canonical + "/gamma", False),
            (hf + r"\.(?:bias|beta)", canonical + "/beta", False)]


def _output_layer(hf, scope):
    """A head's output layer: Google's output_weights ([classes, H], as HF's) and output_bias."""
    return [(hf + r"\.weight", scope + "output_weights", False),
            (hf + r"\.bias", scope + "output_bias", False)]


# Transformer block N: `encoder.layer.N.` in HF's names, `bert/encoder/layer_N/` in Google's.
_HF_BLOCK, _BLOCK = r"encoder\.layer\.(\d+)\.", r"bert/encoder/layer_\1/"

_HF_TO_CANONICAL = [
    (r"embeddings\.word_embeddings\.weight", "bert/embeddings/word_embeddings", False),
    (r"embeddings\.position_embeddings\.weight", "bert/embeddings/position_embeddings", False),
    (r"embeddings\.token_type_embeddings\.weight", "bert/embeddings/token_type_embeddings", False),
    *_layer_norm(r"embeddings\.LayerNorm", "bert/embeddings/LayerNorm"),
    *_linear(_HF_BLOCK + r"attention\.self\.(query|key|value)", _BLOCK + r"attention/self/\2"),
    *_linear(_HF_BLOCK + r"attention\.output\.dense", _BLOCK + "attention/output/dense"),
    *_layer_norm(_HF_BLOCK + r"attention\.output\.LayerNorm",
                 _BLOCK + "attention/output/LayerNorm"),
    *_linear(_HF_BLOCK + r"intermediate\.dense", _BLOCK + "intermediate/dense"),
    *_linear(_HF_BLOCK + r"output\.dense", _BLOCK + "output/dense"),
    *_layer_norm(_HF_BLOCK + r"output\.LayerNorm", _BLOCK + "output/LayerNorm"),
    *_linear(r"pooler\.dense", "bert/pooler/dense"),
    # Heads of BertForPreTraining / BertForMaskedLM / BertForNextSentencePrediction.
    *_linear(r"cls\.predictions\.transform\.dense", "cls/predictions/transform/dense"),
    *_layer_norm(r"cls\.predictions\.transform\.LayerNorm", "cls/predictions/transform/LayerNorm"),
    (r"cls\.predictions\.bias", "cls/predictions/output_bias", False),
    *_output_layer(r"cls\.seq_relationship", "cls/seq_relationship/"),
    # BertForSequenceClassification / BertForQuestionAnswering.
    *_output_layer(r"classifier", ""),
    *_output_layer(r"qa_outputs", "cls/squad/"),
]
_HF_PATTERNS = [(re.compile(p + "$"), t, tr) for p, t, tr in _HF_TO_CANONICAL]


def hf_to_canonical(name):
    """Returns (canonical name, transpose) for a Hugging Face tensor name."""
    bare = name[len("bert."):] if name.startswith("bert.") else name
    for pattern, template, transpose in _HF_PATTERNS:
        match = pattern.match(bare)
        if match:
            return match.expand(template), transpose
    return None, False


def canonical_to_hf(canonical):
    """Inverse of `hf_to_canonical` for encoder weights (`BertModel` names)."""
    name = canonical[len("bert/"):]
    transpose = name.endswith("/kernel")
    if name.endswith("_embeddings"):
        name += "/weight"
    name = re.sub(r"/(kernel|gamma)$", "/weight", name)
    name = re.sub(r"/beta$", "/bias", name)
    name = re.sub(r"layer_(\d+)", r"layer/\1", name)
    return name.replace("/", "."), transpose


def weights_from_hf(tensors: dict) -> tuple[dict, list]:
    """Hugging Face tensors → (canonical name → array, the names that are not
    BERT's). Buffers and the MLM decoder (tied to the word embeddings) are no
    weights and are left out."""
    weights, unknown = {}, []
    for name, value in tensors.items():
        if _HF_IGNORED.search(name) or _HF_TIED.search(name):
            continue
        canonical, transpose = hf_to_canonical(name)
        if canonical is None:
            unknown.append(name)
            continue
        weights[canonical] = np.ascontiguousarray(value.T if transpose else value)
    return weights, unknown


# === The heads ===


# A `Trainer` checkpoint's head variables (`tf.train.Checkpoint(model=...)`
# attribute paths; Keras 3 tracks a Dense kernel as `_kernel`) → the canonical
# (Google / Hugging Face) names the heads read, and whether the value is
# transposed to Google's [out, in] layout. Every single-dense fine-tuning head
# is `output_*`, as Hugging Face's `classifier.*` of BertForSequence/Token
# Classification and BertForMultipleChoice; the heads check the shape.
OWN_HEADS = {
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


# === The encoder's variables ===

POOLER_NAMES = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


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
    if missing == sorted(POOLER_NAMES):
        # A masked-LM-only model (Hugging Face `BertForMaskedLM` saves no pooler): the
        # pooler keeps its fresh initialization, as google's code and transformers
        # initialize a pooler a checkpoint lacks; fine-tuning trains it.
        logging.warning("Pooler: not in the checkpoint (a masked-LM-only model, e.g. "
                        "BertForMaskedLM); initialized fresh, trained by fine-tuning")
        variables = {k: v for k, v in variables.items() if k not in POOLER_NAMES}
        missing = []
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
