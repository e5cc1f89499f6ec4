"""The BERT encoder network: embeddings, L Transformer blocks, tanh pooler."""

from __future__ import annotations

import dataclasses

import keras
from keras import ops

from official_bert.modeling import layers as bert_layers
from official_bert.modeling.configs import BertConfig

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


@keras.saving.register_keras_serializable(package="official_bert")
class BertEncoder(keras.Model):
    """A bidirectional Transformer encoder (Devlin et al., 2018).

    A functional model: a dict of three int tensors in, a dict out.

    Inputs:
        input_word_ids: [batch, seq] WordPiece ids, `[CLS] A [SEP] B [SEP]`.
        input_mask: [batch, seq] 1 for tokens, 0 for padding.
        input_type_ids: [batch, seq] segment ids, 0 for A and 1 for B.

    Outputs:
        sequence_output: [batch, seq, H], the last block's token vectors T_i.
        pooled_output: [batch, H], tanh(dense(T_[CLS])), the vector C.
        encoder_outputs: list of L tensors [batch, seq, H], each block's
            output (for the feature-based approach).
        embedding_output: [batch, seq, H], the normalized embeddings.

    Args:
        vocab_size: int. WordPiece vocabulary size.
        hidden_size: int. Width H.
        num_hidden_layers: int. Number L of Transformer blocks.
        num_attention_heads: int. Number A of heads.
        intermediate_size: int. Feed-forward width (4H).
        hidden_act: str. Feed-forward activation ("gelu" = exact erf form,
            "gelu_tanh" = google-research/bert's approximation).
        hidden_dropout_prob: float. Dropout on embeddings and residuals.
        attention_probs_dropout_prob: float. Dropout on attention weights.
        max_position_embeddings: int. Number of learned positions.
        type_vocab_size: int. Number of segment ids.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_eps: float. LayerNorm epsilon.
        dtype: None, str or `keras.DTypePolicy`, e.g. "mixed_bfloat16".

    The arguments are `BertConfig`'s fields; `BertEncoder.from_bert_config`
    builds one from a config.

    Example:
    >>> encoder = BertEncoder(vocab_size=100, hidden_size=32,
    ...     num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    >>> inputs = {
    ...     "input_word_ids": keras.ops.ones((1, 8), "int32"),
    ...     "input_mask": keras.ops.ones((1, 8), "int32"),
    ...     "input_type_ids": keras.ops.zeros((1, 8), "int32"),
    ... }
    >>> encoder(inputs)["pooled_output"].shape
    (1, 32)
    """

    def __init__(
        self,
        vocab_size,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        dtype=None,
        **kwargs,
    ):
        # Validate through the one definition of what a valid config is; the
        # arguments above are its fields, by name.
        arguments = locals()
        config = BertConfig(**{field.name: arguments[field.name]
                               for field in dataclasses.fields(BertConfig)})
        policy = keras.dtype_policies.get(dtype) if dtype else None
        policy = policy or keras.config.dtype_policy()
        embeddings, blocks, pooler = _encoder_layers(config, policy)
        inputs, outputs = _functional_graph(embeddings, blocks, pooler)
        super().__init__(inputs=inputs, outputs=outputs, dtype=policy, **kwargs)
        self.config = config
        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.pooler = pooler

    @classmethod
    def from_bert_config(cls, config: BertConfig, dtype=None, **kwargs):
        """Builds an encoder from a `BertConfig`."""
        return cls(**vars(config), dtype=dtype, **kwargs)

    @property
    def word_embeddings(self):
        """The [vocab, H] token embedding matrix (tied to the MLM output)."""
        return self.embeddings.word_embeddings.embeddings

    def get_config(self):
        # Mirrors __init__: the BertConfig fields, plus name/dtype/trainable.
        # The dtype is the policy the layers were built with: a functional
        # model drops its `dtype` argument and reports float32 as its own
        # policy, so a mixed-precision encoder would come back as float32.
        return {
            **vars(self.config),
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.embeddings.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


def _encoder_layers(config: BertConfig, policy):
    """The encoder's layers, (embeddings, Transformer blocks, pooler); their
    names are the weights' names in a checkpoint."""
    # What the embeddings and every block take alike from the config.
    shared = dict(
        hidden_size=config.hidden_size,
        dropout=config.hidden_dropout_prob,
        initializer_range=config.initializer_range,
        layer_norm_eps=config.layer_norm_eps,
        dtype=policy,
    )
    embeddings = bert_layers.BertEmbeddings(
        vocab_size=config.vocab_size,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        name="embeddings",
        **shared,
    )
    blocks = [
        bert_layers.TransformerBlock(
            num_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
            activation=config.hidden_act,
            attention_dropout=config.attention_probs_dropout_prob,
            name=f"transformer_layer_{i}",
            **shared,
        )
        for i in range(config.num_hidden_layers)
    ]
    pooler = keras.layers.Dense(
        config.hidden_size,
        activation="tanh",
        kernel_initializer=keras.initializers.TruncatedNormal(
            stddev=config.initializer_range
        ),
        dtype=policy,
        name="pooler",
    )
    return embeddings, blocks, pooler


def _functional_graph(embeddings, blocks, pooler):
    """The encoder's (inputs, outputs) as Keras symbolic tensors (the layers
    are built here, in this order)."""
    inputs = {
        name: keras.Input(shape=(None,), dtype="int32", name=name)
        for name in ENCODER_INPUTS
    }
    x = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
    embedding_output = x
    attention_bias = bert_layers.attention_bias_from_mask(inputs["input_mask"])
    encoder_outputs = []
    for block in blocks:
        x = block(x, attention_bias)
        encoder_outputs.append(x)
    outputs = {
        "sequence_output": x,
        "pooled_output": pooler(x[:, 0, :]),
        "encoder_outputs": encoder_outputs,
        "embedding_output": embedding_output,
    }
    return inputs, outputs


def dummy_inputs(batch_size=1, seq_length=8):
    """All-ones ids and mask, zero segments: builds a model's variables."""
    return {
        "input_word_ids": ops.ones((batch_size, seq_length), "int32"),
        "input_mask": ops.ones((batch_size, seq_length), "int32"),
        "input_type_ids": ops.zeros((batch_size, seq_length), "int32"),
    }
