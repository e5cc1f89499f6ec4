"""Task heads around a `BertEncoder`.

Each model keeps its encoder as `.encoder` (the `Trainer` checkpoints it on
its own, and runners load pre-trained weights into it).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from official_bert.encoder import ENCODER_INPUTS


def _initializer(encoder):
    return keras.initializers.TruncatedNormal(stddev=encoder.config.initializer_range)


# === Multiple choice ===


@keras.saving.register_keras_serializable(package="official_bert")
class BertMultipleChoice(keras.Model):
    """One logit per choice: a single learned vector V on each choice's pooled C.

    Inputs: dict of int32 [batch, num_choices, seq] `input_word_ids`,
    `input_mask`, `input_type_ids` (any number of choices). The choices are
    reshaped to [batch * num_choices, seq] for the encoder; the logits come
    back as float32 [batch, num_choices] (softmax over them gives the choice
    probabilities, as in the BERT paper's SWAG set-up).

    Args:
        encoder: a `BertEncoder`.
        dropout: float. Dropout on C before the scoring vector.
    """

    def __init__(self, encoder, dropout=0.1, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.dropout_rate = dropout
        self.dropout = keras.layers.Dropout(dropout, dtype=encoder.dtype_policy)
        self.choice_scorer = keras.layers.Dense(
            1, kernel_initializer=_initializer(encoder), dtype=encoder.dtype_policy,
            name="multiple_choice_scorer")

    def call(self, inputs, training=False):
        ids = inputs["input_word_ids"]
        num_choices = tf.shape(ids)[1]
        flat = {k: tf.reshape(inputs[k], [-1, tf.shape(inputs[k])[-1]]) for k in ENCODER_INPUTS}
        pooled = self.encoder(flat, training=training)["pooled_output"]
        logits = self.choice_scorer(self.dropout(pooled, training=training))
        return tf.cast(tf.reshape(logits, [-1, num_choices]), tf.float32)


# === Token classification ===


@keras.saving.register_keras_serializable(package="official_bert")
class BertTokenClassifier(keras.Model):
    """A dense layer on each final token vector T_i (BERT's NER head).

    Inputs: the encoder's dict of int32 [batch, seq]. Output: float32 logits
    [batch, seq, num_labels].

    Args:
        encoder: a `BertEncoder`.
        num_labels: int. Number of tags.
        dropout: float. Dropout on T_i before the dense layer.
    """

    def __init__(self, encoder, num_labels, dropout=0.1, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.num_labels = num_labels
        self.dropout = keras.layers.Dropout(dropout, dtype=encoder.dtype_policy)
        self.token_classifier = keras.layers.Dense(
            num_labels, kernel_initializer=_initializer(encoder),
            dtype=encoder.dtype_policy, name="token_classifier")

    def call(self, inputs, training=False):
        inputs = {k: inputs[k] for k in ENCODER_INPUTS}
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        logits = self.token_classifier(self.dropout(sequence, training=training))
        return tf.cast(logits, tf.float32)


@keras.saving.register_keras_serializable(package="official_bert")
class FeatureTagger(keras.Model):
    """The feature-based approach's task model (BERT paper §5.3): fixed BERT
    features of each word in, a 2-layer BiLSTM (or a dense layer) and a
    softmax classifier on top.

    Inputs: dict with `features` float [batch, words, D] and `word_mask`
    int32 [batch, words]. Output: float32 logits [batch, words, num_labels].

    Args:
        num_labels: int.
        kind: "bilstm" or "dense".
        units: int. LSTM units per direction (768 in the paper) or dense width.
        num_layers: int. Stacked BiLSTM (or dense) layers.
        dropout: float. Dropout on the features and between layers.
    """

    def __init__(self, num_labels, kind="bilstm", units=768, num_layers=2, dropout=0.1, **kwargs):
        super().__init__(**kwargs)
        if kind not in ("bilstm", "dense"):
            raise ValueError(f"task model {kind!r} is unknown; use bilstm or dense")
        self.kind = kind
        self.dropout = keras.layers.Dropout(dropout)
        if kind == "bilstm":
            self.hidden = [keras.layers.Bidirectional(
                keras.layers.LSTM(units, return_sequences=True), name=f"bilstm_{i}")
                for i in range(num_layers)]
        else:
            self.hidden = [keras.layers.Dense(units, activation="relu", name=f"dense_{i}")
                           for i in range(num_layers)]
        self.classifier = keras.layers.Dense(num_labels, name="classifier")

    def call(self, inputs, training=False):
        x = tf.cast(inputs["features"], self.compute_dtype)
        mask = tf.cast(inputs["word_mask"], tf.bool)
        x = self.dropout(x, training=training)
        for layer in self.hidden:
            x = layer(x, mask=mask, training=training) if self.kind == "bilstm" else layer(x)
            x = self.dropout(x, training=training)
        return tf.cast(self.classifier(x), tf.float32)


# === Span labeling (SQuAD) ===


@keras.saving.register_keras_serializable(package="official_bert")
class BertSpanLabeler(keras.Model):
    """Start and end logits for each token: one dense layer H → 2 on T_i.

    The start vector S and end vector E of the BERT paper are the two columns
    of the kernel (google-research/bert's `cls/squad/output_weights` [2, H]
    transposed, and `cls/squad/output_bias`); no dropout on T_i, as in google's
    and Hugging Face's SQuAD heads.

    Inputs: the encoder's dict of int32 [batch, seq]. Outputs: dict of float32
    `start_logits` and `end_logits`, [batch, seq].

    Args:
        encoder: a `BertEncoder`.
    """

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.span_labeler = keras.layers.Dense(
            2, kernel_initializer=_initializer(encoder), dtype=encoder.dtype_policy,
            name="span_labeler")

    def call(self, inputs, training=False):
        inputs = {k: inputs[k] for k in ENCODER_INPUTS}
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        logits = tf.cast(self.span_labeler(sequence), tf.float32)
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def load_head_weights(self, checkpoint) -> bool:
        """Loads `cls/squad/*` (HF `qa_outputs`) from a `BertCheckpoint` when present."""
        weights = checkpoint.head_weights("cls/squad/")
        if "cls/squad/output_weights" not in weights:
            return False
        hidden = self.encoder.config.hidden_size
        kernel = weights["cls/squad/output_weights"]
        if kernel.shape != (2, hidden):
            raise ValueError(f"cls/squad/output_weights has shape {kernel.shape}; "
                             f"expected (2, {hidden})")
        if not self.span_labeler.built:
            self.span_labeler.build((None, None, hidden))
        self.span_labeler.kernel.assign(kernel.T)
        self.span_labeler.bias.assign(weights.get("cls/squad/output_bias", tf.zeros([2])))
        return True
