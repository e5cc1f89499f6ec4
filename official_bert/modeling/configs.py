"""Model configuration: `BertConfig`, read from Google's or Hugging Face's JSON.

Google's `bert_config.json` and Hugging Face's `config.json` share the same
keys for a BERT encoder; Hugging Face adds `layer_norm_eps` (and many keys that
do not change the network, such as `architectures` or `use_cache`). `BertConfig`
reads both and always writes Google's form, plus `layer_norm_eps` when it is not
BERT's 1e-12 (Google's readers ignore unknown keys).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping

from official_bert import io
from official_bert.errors import BadFileError

# Activations the encoder implements (see `layers.get_activation`), under the
# names a `BertConfig` holds (Hugging Face's). The two file formats name GELU
# differently, so the file decides what "gelu" means:
#
#   network                  BertConfig   Google bert_config.json    HF config.json
#   exact GELU, x·Φ(x)       "gelu"       "gelu_exact" (written;     "gelu"
#                                         google's code refuses it)
#   tanh approximation       "gelu_tanh"  "gelu" (as google's        "gelu_new" (and
#                                         modeling.py computes it)   gelu_pytorch_tanh)
#
# so a bert_config.json this project writes means to google-research/bert's
# `get_activation` what it means here, or is refused by it, never misread.
ACTIVATIONS = (
    "gelu",  # exact: x * Phi(x), Phi the normal CDF (erf form)
    "gelu_tanh",  # tanh approximation, as google-research/bert computes it
    "gelu_new",
    "gelu_pytorch_tanh",
    "gelu_fast",
    "relu",
    "silu",
    "swish",
    "tanh",
)


TANH_GELUS = ("gelu_tanh", "gelu_new", "gelu_pytorch_tanh", "gelu_fast")
GOOGLE_EXACT_GELU = "gelu_exact"


class ConfigError(BadFileError):
    """A configuration value or file is invalid; the message names the file and key."""

    subject = "the BERT config"


# The keys a config file must have: they shape the weights, so a default
# could only build a model the checkpoint does not fit (or silently another
# model). The others are optional, with BERT's values as defaults (a missing hidden_act is
# "gelu" in the file's format: the tanh GELU in google's bert_config.json, the exact one in
# Hugging Face's config.json; see `BertConfig.from_dict`).
REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size")
OPTIONAL_KEYS = {"hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                 "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
                 "layer_norm_eps": 1e-12}


@dataclasses.dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder, with Google's key names.

    In a config file (`from_dict`, `from_json_file`) the keys that shape the
    weights are required (`REQUIRED_KEYS`: vocab_size, hidden_size,
    num_hidden_layers, num_attention_heads, intermediate_size,
    max_position_embeddings, type_vocab_size); hidden_act, the two dropout
    probabilities, initializer_range and layer_norm_eps are optional
    (`OPTIONAL_KEYS`, BERT's values). In Python every argument but
    vocab_size has BERT-Base's default.

    Args:
        vocab_size: int. Size of the WordPiece vocabulary.
        hidden_size: int. Width H of every layer.
        num_hidden_layers: int. Number L of Transformer blocks.
        num_attention_heads: int. Number A of attention heads; must divide H.
        intermediate_size: int. Width of the feed-forward layer (4H in BERT).
        hidden_act: str. Feed-forward activation, one of `ACTIVATIONS`.
        hidden_dropout_prob: float. Dropout on embeddings and block outputs.
        attention_probs_dropout_prob: float. Dropout on attention weights.
        max_position_embeddings: int. Longest sequence the model can take.
        type_vocab_size: int. Number of segment (token type) ids.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_eps: float. LayerNorm epsilon (1e-12 in BERT).

    Example:
    >>> config = BertConfig(vocab_size=30522, hidden_size=384,
    ...                     num_hidden_layers=6, num_attention_heads=12,
    ...                     intermediate_size=1536)
    >>> config.head_size
    32
    """

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        self.validate()

    # --- validation -------------------------------------------------------

    def validate(self) -> None:
        """Raises `ConfigError` naming the first bad key."""
        for key in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(
                    None, f"has {key} = {value!r}, which must be an integer"
                )
            if value <= 0:
                raise ConfigError(
                    None, f"has {key} = {value}, which must be positive"
                )
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(
                    None, f"has {key} = {value!r}, which must be a probability in [0, 1)"
                )
        for key in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ConfigError(
                    None, f"has {key} = {value!r}, which must be a positive number"
                )
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                None, f"has hidden_size {self.hidden_size}, which is not divisible by "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(
                None, f"has the unknown hidden_act {self.hidden_act!r}",
                fix=f"use one of {', '.join(ACTIVATIONS)}"
            )

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    # --- reading ------------------------------------------------------------

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], google_names: bool = False) -> "BertConfig":
        """Builds a config from Google's or Hugging Face's dictionary.

        Keys that do not shape the encoder (`architectures`, `model_type`,
        `pad_token_id`, ...) are ignored. A missing key of `REQUIRED_KEYS` or
        a `position_embedding_type` other than "absolute" is an error; the
        `OPTIONAL_KEYS` get BERT's values.
        `google_names`: `hidden_act` as google-research/bert names it ("gelu"
        is the tanh approximation; see `ACTIVATIONS`), and, when absent, as
        google's `BertConfig` defaults it: "gelu", so the tanh GELU too (Hugging
        Face's default "gelu" is the exact one).
        """
        values = dict(values)
        if google_names and values.get("hidden_act", "gelu") == "gelu":
            values["hidden_act"] = "gelu_tanh"
        if values.get("hidden_act") == GOOGLE_EXACT_GELU:
            values["hidden_act"] = "gelu"
        missing = [key for key in REQUIRED_KEYS if key not in values]
        if missing:
            raise ConfigError(
                None, f"has no {', '.join(repr(k) for k in missing)} (a BERT config needs "
                f"{', '.join(REQUIRED_KEYS)}; only {', '.join(OPTIONAL_KEYS)} have defaults)")
        position_type = values.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ConfigError(
                None, f"has position_embedding_type {position_type!r}; only 'absolute' "
                "(BERT's learned positions) is supported")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        """Reads `bert_config.json` (Google) or `config.json` (Hugging Face).

        A file named `config.json`, or one with Hugging Face's `model_type`
        key, names activations as Hugging Face does; any other as Google's
        `bert_config.json` does (see `ACTIVATIONS`)."""
        path = os.fspath(path)
        values = io.read_json(
            path, ConfigError, what="a bert_config.json", directory_fix="check --bert_config_file",
            missing_fix="check the path given as --bert_config_file, or leave the flag out when "
            "bert_config.json or config.json lies beside --init_checkpoint")
        if not isinstance(values, dict):
            raise ConfigError(path, f"holds a JSON {type(values).__name__}, not an object of "
                              "BERT's keys")
        google_names = os.path.basename(path) != "config.json" and "model_type" not in values
        try:
            return cls.from_dict(values, google_names=google_names)
        except ConfigError as e:
            raise ConfigError(path, e.problem, fix=e.fix) from None
        except TypeError as e:  # e.g. a string where a number belongs
            raise ConfigError(path, f"does not fit BertConfig ({e})") from None

    # --- writing ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Google's `bert_config.json` keys and names (+ `layer_norm_eps` if
        not 1e-12): the tanh GELU is "gelu", the exact one "gelu_exact"."""
        values = dataclasses.asdict(self)
        if values["layer_norm_eps"] == 1e-12:
            del values["layer_norm_eps"]
        if self.hidden_act == "gelu":
            values["hidden_act"] = GOOGLE_EXACT_GELU
        elif self.hidden_act in TANH_GELUS:
            values["hidden_act"] = "gelu"
        return values

    def to_hf_dict(self) -> dict[str, Any]:
        """Hugging Face's `config.json` for a `BertModel`."""
        values = dataclasses.asdict(self)
        if self.hidden_act == "gelu_tanh":
            values["hidden_act"] = "gelu_new"
        values.update(
            architectures=["BertModel"],
            model_type="bert",
            pad_token_id=0,
            position_embedding_type="absolute",
        )
        return values

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes Google's form atomically (`official_bert.io.atomic_write`)."""
        io.atomic_write(path, self.to_json_string())
