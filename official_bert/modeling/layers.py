"""Keras layers of the BERT encoder: embeddings, self-attention, Transformer block.

Numerics under mixed precision: LayerNorm and the attention softmax always run in
float32 and their results are cast back to the layer's compute dtype, so a
`mixed_float16` / `mixed_bfloat16` model stays close to the float32 one.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from official_bert.modeling.configs import ACTIVATIONS

# Added to the attention scores of padding positions before the softmax, as
# google-research/bert does. Large enough that exp() underflows to exactly 0 in
# float32, small enough to be representable in float16.
_MASK_BIAS = -10000.0


def gelu_exact(x):
    """GELU, x * Phi(x), with Phi the standard normal CDF (erf form)."""
    return keras.activations.gelu(x, approximate=False)


def gelu_tanh(x):
    """GELU's tanh approximation, as google-research/bert's `gelu`."""
    return keras.activations.gelu(x, approximate=True)


def get_activation(name: str):
    """Maps a config's `hidden_act` to a function."""
    table = {
        "gelu": gelu_exact,
        "gelu_tanh": gelu_tanh,
        "gelu_new": gelu_tanh,
        "gelu_pytorch_tanh": gelu_tanh,
        "gelu_fast": gelu_tanh,
        "relu": keras.activations.relu,
        "silu": keras.activations.silu,
        "swish": keras.activations.silu,
        "tanh": keras.activations.tanh,
    }
    if name not in table:
        raise ValueError(
            f"Unknown activation {name!r}; use one of {', '.join(ACTIVATIONS)}"
        )
    return table[name]


def _initializer(stddev):
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="official_bert")
class Float32LayerNorm(keras.layers.LayerNormalization):
    """LayerNorm computed in float32 whatever the policy; returns the input dtype.

    Under `mixed_float16` the mean/variance of H values lose precision in
    float16, so the statistics (and the affine parameters) stay float32.

    Args: those of `keras.layers.LayerNormalization` (`epsilon`, ...); its
    `get_config` is inherited unchanged. A `dtype` given is overridden by
    float32.

    The casts happen in `call` (the input reaches it uncast: `autocast` is
    off), not around `__call__`: there they would be separate ops in a
    functional model's graph, and reloading a saved model would add one more
    cast per save.
    """

    def __init__(self, **kwargs):
        kwargs["dtype"] = "float32"
        kwargs["autocast"] = False
        super().__init__(**kwargs)

    def call(self, inputs):
        outputs = super().call(ops.cast(inputs, "float32"))
        return ops.cast(outputs, inputs.dtype)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, dtype=inputs.dtype)


class _ArgumentsLayer(keras.layers.Layer):
    """A layer whose config is the arguments it was made with: `_keep` sets
    each as an attribute (what `build` and `call` read) and `get_config`
    returns them, so an argument is named once, not in two lists to keep equal."""

    def _keep(self, **arguments) -> None:
        self._argument_names = tuple(arguments)
        for name, value in arguments.items():
            setattr(self, name, value)

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in self._argument_names})
        return config


@keras.saving.register_keras_serializable(package="official_bert")
class PositionEmbedding(_ArgumentsLayer):
    """Learned absolute position embeddings, sliced to the input's length.

    Args:
        max_length: int. Number of positions (`max_position_embeddings`).
        initializer_range: float. Stddev of the truncated-normal initializer.

    Example:
    >>> layer = PositionEmbedding(max_length=512)
    >>> layer(keras.ops.zeros((2, 16, 8))).shape
    (16, 8)
    """

    def __init__(self, max_length, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self._keep(max_length=max_length, initializer_range=initializer_range)

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_length, input_shape[-1]),
            initializer=_initializer(self.initializer_range),
        )

    def call(self, inputs):
        seq_length = ops.shape(inputs)[1]
        return ops.cast(self.embeddings[:seq_length], self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return (input_shape[1], input_shape[-1])



# The token id of padding: [PAD] in BERT's vocabularies, and what the packers
# (`text_layers`, `data_prep`) fill sequences up with.
PADDING_ID = 0


@keras.saving.register_keras_serializable(package="official_bert")
class BertEmbeddings(_ArgumentsLayer):
    """Token + segment + learned position embeddings, LayerNorm, dropout.

    Args:
        vocab_size: int. WordPiece vocabulary size.
        hidden_size: int. Embedding width H.
        max_position_embeddings: int. Number of learned positions.
        type_vocab_size: int. Number of segment ids.
        dropout: float. Dropout rate after the LayerNorm.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_eps: float. LayerNorm epsilon.

    Call arguments:
        input_word_ids: int tensor [batch, seq].
        input_type_ids: int tensor [batch, seq].

    Example:
    >>> layer = BertEmbeddings(vocab_size=100, hidden_size=8)
    >>> ids = keras.ops.ones((2, 5), "int32")
    >>> layer(ids, keras.ops.zeros((2, 5), "int32")).shape
    (2, 5, 8)
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        max_position_embeddings=512,
        type_vocab_size=2,
        dropout=0.1,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._keep(vocab_size=vocab_size, hidden_size=hidden_size,
                   max_position_embeddings=max_position_embeddings,
                   type_vocab_size=type_vocab_size, dropout=dropout,
                   initializer_range=initializer_range, layer_norm_eps=layer_norm_eps)

        # === Layers ===
        init = _initializer(initializer_range)
        self.word_embeddings = keras.layers.Embedding(
            vocab_size,
            hidden_size,
            embeddings_initializer=init,
            dtype=self.dtype_policy,
            name="word_embeddings",
        )
        self.position_embeddings = PositionEmbedding(
            max_position_embeddings,
            initializer_range,
            dtype=self.dtype_policy,
            name="position_embeddings",
        )
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size,
            hidden_size,
            embeddings_initializer=init,
            dtype=self.dtype_policy,
            name="token_type_embeddings",
        )
        self.layer_norm = Float32LayerNorm(
            epsilon=layer_norm_eps, name="layer_norm"
        )
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, input_shape):
        self.word_embeddings.build(input_shape)
        self.token_type_embeddings.build(input_shape)
        embedded_shape = tuple(input_shape) + (self.hidden_size,)
        self.position_embeddings.build(embedded_shape)
        self.layer_norm.build(embedded_shape)

    def call(self, input_word_ids, input_type_ids, training=None):
        x = self.word_embeddings(input_word_ids)
        # Padding (id 0, what every packer here pads with) takes no gradient
        # into its embedding row, as torch's `nn.Embedding(padding_idx=0)` in
        # Hugging Face's BERT. A loss that reads padded positions (SQuAD's
        # softmax runs over all of them) would otherwise train the [PAD] row
        # (and its gradient, summed over every padded position of the batch,
        # would enter the clipping norm: ~1% of it early in SQuAD fine-tuning).
        is_padding = ops.expand_dims(ops.equal(input_word_ids, PADDING_ID), -1)
        x = ops.where(is_padding, ops.stop_gradient(x), x)
        x = x + self.token_type_embeddings(input_type_ids)
        x = x + self.position_embeddings(x)[None, :, :]
        x = self.layer_norm(x)
        return self.dropout_layer(x, training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.hidden_size,)



@keras.saving.register_keras_serializable(package="official_bert")
class MultiHeadSelfAttention(_ArgumentsLayer):
    """Scaled dot-product self-attention over A heads, with a padding mask.

    Query, key and value are separate H→H projections (as in every BERT
    checkpoint); scores are scaled by 1/sqrt(H/A), padding positions get a
    -10000 bias, and the softmax runs in float32.

    Args:
        hidden_size: int. Width H.
        num_heads: int. Number A of heads; must divide H.
        attention_dropout: float. Dropout on the attention probabilities.
        initializer_range: float. Stddev of the truncated-normal initializer.

    Call arguments:
        x: float tensor [batch, seq, H].
        attention_bias: float tensor [batch, 1, 1, seq], 0 for tokens and
            -10000 for padding (see `attention_bias_from_mask`).

    Returns:
        The attended values before the output projection, [batch, seq, H].
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        attention_dropout=0.1,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(
                f"hidden_size {hidden_size} is not divisible by "
                f"num_heads {num_heads}"
            )
        self._keep(hidden_size=hidden_size, num_heads=num_heads,
                   attention_dropout=attention_dropout, initializer_range=initializer_range)
        self.head_size = hidden_size // num_heads

        # === Layers ===
        def dense(name):
            return keras.layers.Dense(
                hidden_size,
                kernel_initializer=_initializer(initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.dropout_layer = keras.layers.Dropout(
            attention_dropout, dtype=self.dtype_policy, name="attention_dropout"
        )

    def build(self, input_shape):
        for layer in (self.query, self.key, self.value):
            layer.build(input_shape)

    def _split_heads(self, x):
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, seq, self.num_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))  # [batch, heads, seq, size]

    def call(self, x, attention_bias, training=None):
        query = self._split_heads(self.query(x))
        key = self._split_heads(self.key(x))
        value = self._split_heads(self.value(x))
        # Scale the query rather than the [seq, seq] scores: fewer multiplies.
        query = query * ops.cast(1.0 / math.sqrt(self.head_size), query.dtype)
        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        # Keras autocasts the bias to the compute dtype: add it in float32.
        scores = ops.cast(scores, "float32") + ops.cast(attention_bias, "float32")
        probs = ops.softmax(scores, axis=-1)
        probs = self.dropout_layer(
            ops.cast(probs, self.compute_dtype), training=training
        )
        context = ops.matmul(probs, value)  # [batch, heads, seq, size]
        context = ops.transpose(context, (0, 2, 1, 3))
        batch, seq = ops.shape(context)[0], ops.shape(context)[1]
        return ops.reshape(context, (batch, seq, self.hidden_size))

    def compute_output_shape(self, input_shape):
        return input_shape



def attention_bias_from_mask(input_mask):
    """[batch, seq] 1/0 mask → [batch, 1, 1, seq] float32 additive bias."""
    mask = ops.cast(input_mask, "float32")
    return (1.0 - mask)[:, None, None, :] * _MASK_BIAS


@keras.saving.register_keras_serializable(package="official_bert")
class TransformerBlock(_ArgumentsLayer):
    """One post-LayerNorm Transformer encoder block, as in BERT.

    x → self-attention → dense → dropout → LayerNorm(x + ·) = h
    h → dense 4H + activation → dense H → dropout → LayerNorm(h + ·)

    Args:
        hidden_size: int. Width H.
        num_heads: int. Number of attention heads.
        intermediate_size: int. Feed-forward width (4H in BERT).
        activation: str. Feed-forward activation (see `get_activation`).
        dropout: float. Dropout on the two residual branches.
        attention_dropout: float. Dropout on the attention probabilities.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_eps: float. LayerNorm epsilon.

    Example:
    >>> block = TransformerBlock(hidden_size=8, num_heads=2,
    ...                          intermediate_size=32)
    >>> x = keras.ops.ones((1, 4, 8))
    >>> bias = attention_bias_from_mask(keras.ops.ones((1, 4)))
    >>> block(x, bias).shape
    (1, 4, 8)
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        intermediate_size,
        activation="gelu",
        dropout=0.1,
        attention_dropout=0.1,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._keep(hidden_size=hidden_size, num_heads=num_heads,
                   intermediate_size=intermediate_size, activation=activation, dropout=dropout,
                   attention_dropout=attention_dropout, initializer_range=initializer_range,
                   layer_norm_eps=layer_norm_eps)

        # === Layers ===
        def dense(units, name, activation=None):
            return keras.layers.Dense(
                units,
                activation=activation,
                kernel_initializer=_initializer(initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        self.attention = MultiHeadSelfAttention(
            hidden_size,
            num_heads,
            attention_dropout,
            initializer_range,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.attention_output = dense(hidden_size, "attention_output")
        self.attention_dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.attention_layer_norm = Float32LayerNorm(
            epsilon=layer_norm_eps, name="attention_layer_norm"
        )
        self.intermediate = dense(
            intermediate_size, "intermediate", get_activation(activation)
        )
        self.output_dense = dense(hidden_size, "output")
        self.output_dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.output_layer_norm = Float32LayerNorm(
            epsilon=layer_norm_eps, name="output_layer_norm"
        )

    def build(self, input_shape):
        self.attention.build(input_shape)
        self.attention_output.build(input_shape)
        self.attention_layer_norm.build(input_shape)
        self.intermediate.build(input_shape)
        self.output_dense.build(
            tuple(input_shape[:-1]) + (self.intermediate_size,)
        )
        self.output_layer_norm.build(input_shape)

    def call(self, x, attention_bias, training=None):
        attended = self.attention(x, attention_bias, training=training)
        attended = self.attention_output(attended)
        attended = self.attention_dropout_layer(attended, training=training)
        x = self.attention_layer_norm(x + attended)
        hidden = self.output_dense(self.intermediate(x))
        hidden = self.output_dropout_layer(hidden, training=training)
        return self.output_layer_norm(x + hidden)

    def compute_output_shape(self, input_shape):
        return input_shape

