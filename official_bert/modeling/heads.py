"""Every head around a `BertEncoder`: the Keras models that tasks train.

Each model keeps its encoder as `.encoder` (the `Trainer` checkpoints it on
its own, and runners load pre-trained weights into it). What a task does with
a head (its loss, metrics, data and predictions) lives in `official_bert.tasks`.
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from official_bert.configs import NER_TASK_MODELS, WINDOW_POOLINGS
from official_bert.errors import BadFileError
from official_bert.modeling import layers as bert_layers
from official_bert.modeling.encoder import ENCODER_INPUTS, dummy_inputs
from official_bert.modeling.initializers import TorchNormal


def _initializer(encoder):
    """The pre-training heads' initializer: google-research/bert's
    `truncated_normal(stddev=initializer_range)` (its values have a standard
    deviation of 0.88 x initializer_range, the tails being cut at 2 sigma)."""
    return keras.initializers.TruncatedNormal(stddev=encoder.config.initializer_range)


def _fine_tuning_initializer(encoder, seed=None):
    """A new fine-tuning head's kernel: N(0, initializer_range), untruncated, as
    Hugging Face initializes `BertFor*` heads; with a `seed` (the run's
    `--seed`), the very numbers transformers draws for that seed
    (`initializers.TorchNormal`), else from Keras' global seed.

    Why not google's truncated normal: at fine-tuning learning rates (2e-5 to
    5e-5 for a few hundred steps) a fresh head moves by less than its initial
    scale, so the scale it starts with bounds the logits it can reach through
    the LayerNorm-bounded T_i. Measured on all-MiniLM-L6-v2: 100 WNUT-17 steps
    with heads of std 0.0177 (truncated) ended at a training loss of 0.611,
    the same draws scaled to 0.02 at 0.569 (three seeds each), which is where
    transformers ends with the same data order and dropout.
    """
    if seed is None:
        return keras.initializers.RandomNormal(stddev=encoder.config.initializer_range)
    return TorchNormal(stddev=encoder.config.initializer_range, seed=int(seed))


def _head_policy(encoder):
    """The dtype policy of the encoder's layers, for the heads on top of it: a
    functional encoder built with `dtype="mixed_float16"` reports float32 as
    its own policy, so the heads read the policy of its embeddings layer."""
    return encoder.embeddings.dtype_policy


class SerializableHead(keras.Model):
    """What every head shares for saving as `.keras`: its config is its
    constructor's arguments. A subclass returns its own arguments from
    `head_config`; this class adds the encoder (heads around one) and
    `keras.Model`'s `name`, `trainable` and `dtype`, and `from_config`
    deserializes the nested encoder and dtype policy before calling the
    constructor."""

    def head_config(self) -> dict:
        """The subclass's own constructor arguments, by their `__init__` names."""
        return {}

    def get_config(self):
        config = {**self.head_config(), "name": self.name, "trainable": self.trainable,
                  "dtype": keras.dtype_policies.serialize(self.dtype_policy)}
        if getattr(self, "encoder", None) is not None:
            config["encoder"] = keras.saving.serialize_keras_object(self.encoder)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("encoder"), dict):
            config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


@dataclasses.dataclass
class HeadRestore:
    """What a task head's `load_head_weights` did with each of its weights,
    under the checkpoint's (Google's) names and layouts; true when the head
    was restored.

    Attributes:
        restored: (name, shape) read from the checkpoint.
        initialized: (name, shape, why) left at their initial values; why is
            "not in the checkpoint", "zeros: not in the checkpoint" or "the
            checkpoint's does not fit".
        skipped: (name, the checkpoint's shape, the head's shape): in the
            checkpoint with a shape that does not fit this head (a 3-class
            MNLI head given to a 2-class task).
        other_heads: the checkpoint's other non-encoder weights (another
            task's or pre-training's heads).
        heads: a model of several heads: those restored whole, by name
            (`BertPretrainer`'s "masked_lm", "next_sentence").

    Example:
    >>> report = HeadRestore(restored=[("output_weights", (2, 8))],
    ...                      initialized=[("output_bias", (2,), "zeros: not in the checkpoint")])
    >>> bool(report), report.lines()[0]
    (True, 'restored output_weights (2, 8) from the checkpoint')
    """

    restored: list = dataclasses.field(default_factory=list)
    initialized: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    other_heads: list = dataclasses.field(default_factory=list)
    heads: list = dataclasses.field(default_factory=list)

    def __bool__(self):
        return bool(self.restored)

    def lines(self) -> list:
        """One log line per head weight."""
        return ([f"restored {name} {shape} from the checkpoint" for name, shape in self.restored]
                + [f"initialized {name} {shape} ({why})" for name, shape, why in self.initialized])

    def what_the_checkpoint_holds(self) -> str:
        """Why the head could not be restored, for the refusal to evaluate it."""
        if self.skipped:
            name, got, wanted = self.skipped[0]  # the kernel when it is there
            return f"holds a head of shape {got} ({name}) that does not fit this task's {wanted}"
        if self.other_heads:
            shown = ", ".join(self.other_heads[:3]) + (", ..." if len(self.other_heads) > 3 else "")
            return (f"holds no {' or '.join(name for name, *_ in self.initialized)} "
                    f"for this task (only other heads: {shown})")
        return "holds an encoder only"


def _load_dense_head(dense, weights, kernel_name, bias_name, hidden) -> HeadRestore:
    """Assigns a checkpoint's [out, H] `kernel_name` (transposed) and `bias_name`
    to `dense` when present with its shape (a missing bias starts at zeros);
    returns what it did (a `HeadRestore`, true when the kernel was restored)."""
    wanted = {kernel_name: (dense.units, hidden), bias_name: (dense.units,)}
    found = {name: tuple(np.shape(weights[name])) for name in wanted if name in weights}
    report = HeadRestore(other_heads=sorted(
        name for name in weights if not name.startswith("bert/") and name not in wanted))
    report.skipped = [(name, found[name], wanted[name]) for name in found
                      if found[name] != wanted[name]]
    if kernel_name not in found or report.skipped:
        report.initialized = [
            (name, shape, "the checkpoint's does not fit" if name in found else
             "not in the checkpoint") for name, shape in wanted.items()]
        return report
    if not dense.built:
        dense.build((None, hidden))
    dense.kernel.assign(weights[kernel_name].T)
    report.restored.append((kernel_name, wanted[kernel_name]))
    if bias_name in found:
        dense.bias.assign(weights[bias_name])
        report.restored.append((bias_name, wanted[bias_name]))
    else:
        dense.bias.assign(np.zeros([dense.units], np.float32))
        report.initialized.append((bias_name, wanted[bias_name], "zeros: not in the checkpoint"))
    return report


# === Classification ===


def pool_window_logits(logits, document, num_documents, pooling="mean"):
    """Each document's logits from its windows' logits.

    "mean": the average over the document's windows; "max": per class the
    largest (so a label shown by any one window wins). Used in training (the
    loss is the document's, on the pooled logits), evaluation, prediction and
    the SavedModel alike.

    Args:
        logits: float32 [windows, classes], the windows of all documents.
        document: int32 [windows], the document (0 .. num_documents-1) of each
            window; every document has at least one.
        num_documents: the number of documents.
        pooling: "mean" or "max".

    Returns:
        float32 [num_documents, classes].

    Example:
    >>> pool_window_logits(tf.constant([[1., 0.], [3., -2.], [5., 5.]]),
    ...                    tf.constant([0, 0, 1]), 2, "mean").numpy().tolist()
    [[2.0, -1.0], [5.0, 5.0]]
    """
    if pooling == "mean":
        return tf.math.unsorted_segment_mean(logits, document, num_documents)
    if pooling == "max":
        return tf.math.unsorted_segment_max(logits, document, num_documents)
    raise ValueError(f"pooling={pooling!r}: one of {WINDOW_POOLINGS}")


@keras.saving.register_keras_serializable(package="official_bert")
class BertClassifier(SerializableHead):
    """Sentence(-pair) classification or regression on the pooled `[CLS]` vector C.

    Dropout on C, then one dense layer H → `num_classes` (google-research/bert's
    `output_weights` / `output_bias`). With `num_classes=1` the single output
    is a regression score (STS-B, trained with mean squared error).

    Inputs: the encoder's dict of int32 [batch, seq] (`input_word_ids`,
    `input_mask`, `input_type_ids`; other keys are ignored). Output: float32
    logits [batch, num_classes] whatever the dtype policy.

    Documents longer than the model (`run_classifier.py --long_document=windows`):
    given [batch, windows, seq] inputs, each document's windows (those with a
    token; all-padding rows are skipped, not computed) are classified and
    their logits pooled (`pool_window_logits`, `window_pooling`) into the
    document's [batch, num_classes] logits. The weights are the same either
    way: a checkpoint serves both.

    Args:
        encoder: a `BertEncoder`.
        num_classes: int. Number of labels; 1 for regression.
        dropout: float. Dropout rate on C (`hidden_dropout_prob` in BERT).
        window_pooling: "mean" or "max": how windows' logits are pooled.
        seed: int or None. The run's `--seed`: the new head is drawn as
            transformers draws it for that seed (`initializers.TorchNormal`);
            None draws from Keras' global seed.

    `load_head_weights(checkpoint)` reads a fine-tuned classifier's head
    (Google `output_weights`/`output_bias`, Hugging Face `classifier.*`).

    Example:
    >>> from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    >>> encoder = BertEncoder(vocab_size=100, hidden_size=32,
    ...     num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    >>> classifier = BertClassifier(encoder, num_classes=3)
    >>> classifier(dummy_inputs(batch_size=2)).shape
    TensorShape([2, 3])
    """

    def __init__(self, encoder, num_classes, dropout=0.1, window_pooling="mean", seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        if int(num_classes) < 1:
            raise ValueError(f"num_classes={num_classes}; need at least 1 (1 = regression)")
        if window_pooling not in WINDOW_POOLINGS:
            raise ValueError(f"window_pooling={window_pooling!r}: one of {WINDOW_POOLINGS}")
        self.encoder = encoder
        self.num_classes = int(num_classes)
        self.dropout_rate = float(dropout)
        self.seed = seed
        self.window_pooling = window_pooling
        policy = _head_policy(encoder)
        self.dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.classifier = keras.layers.Dense(
            self.num_classes, kernel_initializer=_fine_tuning_initializer(encoder, seed),
            dtype=policy, name="classifier")

    def call(self, inputs, training=False):
        if inputs["input_word_ids"].shape.rank == 3:
            return self._call_windows(inputs, training)
        pooled = self.encoder({k: inputs[k] for k in ENCODER_INPUTS},
                              training=training)["pooled_output"]
        logits = self.classifier(self.dropout(pooled, training=training))
        return tf.cast(logits, tf.float32)

    def _call_windows(self, inputs, training):
        """[batch, windows, seq] → the documents' pooled logits [batch, classes]."""
        real = tf.reduce_any(tf.not_equal(inputs["input_mask"], 0), axis=-1)
        where = tf.where(real)  # [windows with a token, 2]: (document, window)
        logits = self.call({k: tf.gather_nd(inputs[k], where) for k in ENCODER_INPUTS},
                           training=training)
        return pool_window_logits(logits, tf.cast(where[:, 0], tf.int32),
                                  tf.shape(real)[0], self.window_pooling)

    def head_config(self):
        return dict(num_classes=self.num_classes, dropout=self.dropout_rate, seed=self.seed,
                    window_pooling=self.window_pooling)

    def load_head_weights(self, checkpoint) -> HeadRestore:
        """Loads `output_weights` [num_classes, H] / `output_bias` (Google's
        run_classifier, Hugging Face `classifier.*`, a run of this project)
        when present with this head's shape.

        Returns a `HeadRestore`, false (nothing loaded) when the checkpoint has
        no classifier head, or one for another number of classes (e.g. an MNLI
        model reused for RTE: the encoder is kept, the head starts fresh).
        """
        return _load_dense_head(self.classifier, checkpoint.weights, "output_weights",
                                "output_bias", self.encoder.config.hidden_size)


# === Multiple choice ===


@keras.saving.register_keras_serializable(package="official_bert")
class BertMultipleChoice(SerializableHead):
    """One logit per choice: a single learned vector V on each choice's pooled C.

    Inputs: dict of int32 [batch, num_choices, seq] `input_word_ids`,
    `input_mask`, `input_type_ids` (any number of choices). The choices are
    reshaped to [batch * num_choices, seq] for the encoder; the logits come
    back as float32 [batch, num_choices] (softmax over them gives the choice
    probabilities, as in the BERT paper's SWAG set-up).

    Args:
        encoder: a `BertEncoder`.
        dropout: float. Dropout on C before the scoring vector.
        seed: int or None. The run's `--seed`: the new head is drawn as
            transformers draws it for that seed (`initializers.TorchNormal`);
            None draws from Keras' global seed.
    """

    def __init__(self, encoder, dropout=0.1, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.dropout_rate = float(dropout)
        self.seed = seed
        self.dropout = keras.layers.Dropout(dropout, dtype=_head_policy(encoder))
        self.choice_scorer = keras.layers.Dense(
            1, kernel_initializer=_fine_tuning_initializer(encoder, seed),
            dtype=_head_policy(encoder), name="multiple_choice_scorer")

    def call(self, inputs, training=False):
        ids = inputs["input_word_ids"]
        num_choices = tf.shape(ids)[1]
        flat = {k: tf.reshape(inputs[k], [-1, tf.shape(inputs[k])[-1]]) for k in ENCODER_INPUTS}
        pooled = self.encoder(flat, training=training)["pooled_output"]
        logits = self.choice_scorer(self.dropout(pooled, training=training))
        return tf.cast(tf.reshape(logits, [-1, num_choices]), tf.float32)

    def head_config(self):
        return dict(dropout=self.dropout_rate, seed=self.seed)

    def load_head_weights(self, checkpoint) -> HeadRestore:
        """Loads `output_weights` [1, H] / `output_bias` (Hugging Face
        `BertForMultipleChoice`'s `classifier.*`, a run of this project) when present."""
        return _load_dense_head(self.choice_scorer, checkpoint.weights, "output_weights",
                                "output_bias", self.encoder.config.hidden_size)


# === Token classification ===


@keras.saving.register_keras_serializable(package="official_bert")
class BertTokenClassifier(SerializableHead):
    """A dense layer on each final token vector T_i (BERT's NER head).

    Inputs: the encoder's dict of int32 [batch, seq]. Output: float32 logits
    [batch, seq, num_labels].

    Args:
        encoder: a `BertEncoder`.
        num_labels: int. Number of tags.
        dropout: float. Dropout on T_i before the dense layer.
        seed: int or None. The run's `--seed`: the new head is drawn as
            transformers draws it for that seed (`initializers.TorchNormal`);
            None draws from Keras' global seed.
    """

    def __init__(self, encoder, num_labels, dropout=0.1, seed=None, **kwargs):
        super().__init__(**kwargs)
        if int(num_labels) < 1:
            raise ValueError(f"num_labels={num_labels}; need at least 1")
        self.encoder = encoder
        self.num_labels = int(num_labels)
        self.dropout_rate = float(dropout)
        self.seed = seed
        self.dropout = keras.layers.Dropout(dropout, dtype=_head_policy(encoder))
        self.token_classifier = keras.layers.Dense(
            self.num_labels, kernel_initializer=_fine_tuning_initializer(encoder, seed),
            dtype=_head_policy(encoder), name="token_classifier")

    def call(self, inputs, training=False):
        inputs = {k: inputs[k] for k in ENCODER_INPUTS}
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        logits = self.token_classifier(self.dropout(sequence, training=training))
        return tf.cast(logits, tf.float32)

    def head_config(self):
        return dict(num_labels=self.num_labels, dropout=self.dropout_rate, seed=self.seed)

    def load_head_weights(self, checkpoint) -> HeadRestore:
        """Loads `output_weights` [num_labels, H] / `output_bias` (Hugging Face
        `BertForTokenClassification`'s `classifier.*`, a run of this project)
        when present with this head's shape."""
        return _load_dense_head(self.token_classifier, checkpoint.weights, "output_weights",
                                "output_bias", self.encoder.config.hidden_size)


@keras.saving.register_keras_serializable(package="official_bert")
class FeatureTagger(SerializableHead):
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
        if kind not in NER_TASK_MODELS:
            raise ValueError(f"task model {kind!r} is unknown; use {' or '.join(NER_TASK_MODELS)}")
        self.num_labels = int(num_labels)
        self.kind = kind
        self.units = int(units)
        self.num_layers = int(num_layers)
        self.dropout_rate = float(dropout)
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

    def head_config(self):
        return dict(num_labels=self.num_labels, kind=self.kind, units=self.units,
                    num_layers=self.num_layers, dropout=self.dropout_rate)


# === Span labeling (SQuAD) ===


@keras.saving.register_keras_serializable(package="official_bert")
class BertSpanLabeler(SerializableHead):
    """Start and end logits for each token: one dense layer H → 2 on T_i.

    The start vector S and end vector E of the BERT paper are the two columns
    of the kernel (google-research/bert's `cls/squad/output_weights` [2, H]
    transposed, and `cls/squad/output_bias`); no dropout on T_i, as in google's
    and Hugging Face's SQuAD heads.

    Inputs: the encoder's dict of int32 [batch, seq]. Outputs: dict of float32
    `start_logits` and `end_logits`, [batch, seq].

    Args:
        encoder: a `BertEncoder`.
        seed: int or None. The run's `--seed`: the new head is drawn as
            transformers draws it for that seed (`initializers.TorchNormal`);
            None draws from Keras' global seed.
    """

    def __init__(self, encoder, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.seed = seed
        self.span_labeler = keras.layers.Dense(
            2, kernel_initializer=_fine_tuning_initializer(encoder, seed),
            dtype=_head_policy(encoder), name="span_labeler")

    def call(self, inputs, training=False):
        inputs = {k: inputs[k] for k in ENCODER_INPUTS}
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        logits = tf.cast(self.span_labeler(sequence), tf.float32)
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def head_config(self):
        return dict(seed=self.seed)

    def load_head_weights(self, checkpoint) -> HeadRestore:
        """Loads `cls/squad/*` (Google's run_squad, HF `qa_outputs`, a run of
        this project) when present with this head's shape."""
        return _load_dense_head(self.span_labeler, checkpoint.weights,
                                "cls/squad/output_weights", "cls/squad/output_bias",
                                self.encoder.config.hidden_size)


# === Pre-training ===

# What `BertPretrainer` reads: the encoder's inputs plus the gathered positions.
PRETRAINING_INPUTS = ENCODER_INPUTS + ("masked_lm_positions",)
# The two heads under google-research/bert's names (see `checkpoints`).
MASKED_LM_HEAD = ("cls/predictions/transform/dense/kernel",
                  "cls/predictions/transform/dense/bias",
                  "cls/predictions/transform/LayerNorm/gamma",
                  "cls/predictions/transform/LayerNorm/beta",
                  "cls/predictions/output_bias")
NEXT_SENTENCE_HEAD = ("cls/seq_relationship/output_weights",
                      "cls/seq_relationship/output_bias")


def _google_shape(name, variable) -> tuple:
    """A pre-training head variable's shape in Google's layout (its
    seq_relationship kernel is stored transposed)."""
    shape = tuple(variable.shape)
    return shape[::-1] if name == "cls/seq_relationship/output_weights" else shape


@keras.saving.register_keras_serializable(package="official_bert")
class BertPretrainer(SerializableHead):
    """BERT's pre-training model: masked-LM and next-sentence heads on an encoder.

    Masked LM (google-research/bert's `cls/predictions`): the final token
    vectors T_i are gathered at `masked_lm_positions` only (the vocabulary
    projection is the costliest matmul; it never runs over the whole
    sequence), then dense H → H with the config's `hidden_act`, LayerNorm
    (float32, epsilon `layer_norm_eps`: 1e-12 in BERT), and the output
    projection TIED to the encoder's word-embedding matrix E (the same
    variable, not a copy) plus an output bias b: `logits = h Eᵀ + b`.

    Next sentence (`cls/seq_relationship`): a 2-way dense layer on the pooled
    `[CLS]` vector C; label 0 = B follows A, 1 = B is a random span.

    Inputs: dict of int32 `input_word_ids`, `input_mask`, `input_type_ids`
    [batch, seq] and `masked_lm_positions` [batch, max_predictions_per_seq].
    Outputs: dict of float32 `masked_lm_logits` [batch, max_predictions_per_seq,
    vocab_size] and `next_sentence_logits` [batch, 2] (float32 whatever the
    dtype policy, so the losses are computed in float32).

    Args:
        encoder: a `BertEncoder`; its config gives the activation, the
            LayerNorm epsilon and the initializer range, its dtype policy the
            heads' compute dtype.

    `load_head_weights` reads the heads from a Google TF1 / Hugging Face
    (`BertForPreTraining`) checkpoint or one of this project's pre-training
    runs; `head_weights` returns them under Google's names.

    Example:
    >>> from official_bert.modeling.encoder import BertEncoder
    >>> encoder = BertEncoder(vocab_size=100, hidden_size=32,
    ...     num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    >>> pretrainer = BertPretrainer(encoder)
    >>> outputs = pretrainer({
    ...     "input_word_ids": keras.ops.ones((2, 16), "int32"),
    ...     "input_mask": keras.ops.ones((2, 16), "int32"),
    ...     "input_type_ids": keras.ops.zeros((2, 16), "int32"),
    ...     "masked_lm_positions": keras.ops.ones((2, 3), "int32"),
    ... })
    >>> outputs["masked_lm_logits"].shape, outputs["next_sentence_logits"].shape
    (TensorShape([2, 3, 100]), TensorShape([2, 2]))
    """

    def __init__(self, encoder, **kwargs):
        policy = _head_policy(encoder)
        kwargs.setdefault("dtype", policy)
        super().__init__(**kwargs)
        config = encoder.config
        self.encoder = encoder
        self.mlm_transform = keras.layers.Dense(
            config.hidden_size, activation=bert_layers.get_activation(config.hidden_act),
            kernel_initializer=_initializer(encoder), dtype=policy, name="mlm_transform")
        self.mlm_layer_norm = bert_layers.Float32LayerNorm(
            epsilon=config.layer_norm_eps, name="mlm_layer_norm")
        self.mlm_output_bias = self.add_weight(
            name="mlm_output_bias", shape=(config.vocab_size,), initializer="zeros",
            dtype="float32", autocast=False)  # added to the float32 logits
        self.next_sentence = keras.layers.Dense(
            2, kernel_initializer=_initializer(encoder), dtype=policy, name="next_sentence")

    @property
    def mlm_output_embeddings(self):
        """The [vocab, H] matrix of the MLM output projection: the encoder's
        word embeddings themselves (tied)."""
        return self.encoder.word_embeddings

    def call(self, inputs, training=False):
        outputs = self.encoder({k: inputs[k] for k in ENCODER_INPUTS}, training=training)
        return self.heads_on(outputs, inputs["masked_lm_positions"])

    def heads_on(self, outputs, masked_lm_positions):
        """The two heads' logits on the encoder's `outputs` (a caller that also
        needs the encoder's vectors, as general distillation does, runs the
        encoder once)."""
        sequence = outputs["sequence_output"]
        positions = tf.cast(masked_lm_positions, tf.int32)
        gathered = tf.gather(sequence, positions, batch_dims=1)  # [B, P, H]
        hidden = self.mlm_layer_norm(self.mlm_transform(gathered))
        width = tf.shape(hidden)[-1]
        flat = tf.reshape(hidden, [-1, width])  # [B * P, H]
        embeddings = tf.cast(self.mlm_output_embeddings, flat.dtype)
        logits = tf.matmul(flat, embeddings, transpose_b=True)  # [B * P, V]
        logits = tf.cast(logits, tf.float32) + self.mlm_output_bias
        logits = tf.reshape(logits, tf.concat([tf.shape(positions), [-1]], axis=0))
        logits.set_shape(positions.shape.concatenate([self.encoder.config.vocab_size]))
        next_sentence = tf.cast(self.next_sentence(outputs["pooled_output"]), tf.float32)
        return {"masked_lm_logits": logits, "next_sentence_logits": next_sentence}

    # --- head weights under Google's names ------------------------------------

    def _ensure_built(self):
        if not self.next_sentence.built:
            inputs = dict(dummy_inputs())
            inputs["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
            self(inputs)

    def head_variables(self) -> dict:
        """Google's canonical name → variable. The NSP kernel is stored
        [2, H] under that name (the variable is its [H, 2] transpose)."""
        self._ensure_built()
        return {
            "cls/predictions/transform/dense/kernel": self.mlm_transform.kernel,
            "cls/predictions/transform/dense/bias": self.mlm_transform.bias,
            "cls/predictions/transform/LayerNorm/gamma": self.mlm_layer_norm.gamma,
            "cls/predictions/transform/LayerNorm/beta": self.mlm_layer_norm.beta,
            "cls/predictions/output_bias": self.mlm_output_bias,
            "cls/seq_relationship/output_weights": self.next_sentence.kernel,
            "cls/seq_relationship/output_bias": self.next_sentence.bias,
        }

    def head_weights(self) -> dict:
        """The heads as numpy arrays under Google's names and layouts."""
        weights = {k: np.asarray(v) for k, v in self.head_variables().items()}
        weights["cls/seq_relationship/output_weights"] = np.ascontiguousarray(
            weights["cls/seq_relationship/output_weights"].T)
        return weights

    def load_head_weights(self, checkpoint) -> HeadRestore:
        """Loads `cls/predictions/*` and `cls/seq_relationship/*` when present.

        Args:
            checkpoint: a `checkpoints.BertCheckpoint` (Google TF1, Hugging
                Face `BertForPreTraining` / `BertForMaskedLM`, or one of this
                project's pre-training runs), or a dict of canonical name → array.

        Returns:
            A `HeadRestore` whose `heads` are the heads loaded: a sublist of
            ["masked_lm", "next_sentence"] (a checkpoint of `BertModel` alone
            has neither), each weight in `restored` or `initialized`.

        A head the checkpoint lacks keeps its initial weights (a sentence
        encoder such as all-MiniLM-L6-v2 ships neither): the transform drawn
        as google's (truncated normal, `initializer_range`), LayerNorm 1 and
        0, output bias 0, while the output projection is the encoder's word
        embeddings whatever the checkpoint holds (tied: there is no separate
        output matrix to load or to miss).

        Raises:
            ValueError: a head is only partly present or has the wrong shape.
        """
        weights = getattr(checkpoint, "weights", checkpoint)
        source = getattr(checkpoint, "path", None) or "the checkpoint"  # named in errors
        variables = self.head_variables()
        hidden = self.encoder.config.hidden_size
        report = HeadRestore()
        for head, names in (("masked_lm", MASKED_LM_HEAD), ("next_sentence", NEXT_SENTENCE_HEAD)):
            present = [n for n in names if n in weights]
            if not present:
                report.initialized += [(name, _google_shape(name, variables[name]),
                                        "not in the checkpoint") for name in names]
                continue
            if len(present) != len(names):
                missing = sorted(set(names) - set(present))
                raise BadFileError(source, f"holds an incomplete {head} head: "
                                   f"{', '.join(missing)} missing")
            values = {}
            for name in names:
                value = np.asarray(weights[name])
                if name == "cls/seq_relationship/output_weights":
                    if value.shape != (2, hidden):
                        raise BadFileError(source, f"has {name} of shape {value.shape}; "
                                           f"expected (2, {hidden})")
                    value = value.T
                expected = tuple(variables[name].shape)
                if value.shape != expected:
                    raise BadFileError(source, f"has {name} of shape {value.shape}; the model "
                                       f"expects {expected}", fix="check the config's "
                                       "vocab_size/hidden_size")
                values[name] = value
            for name, value in values.items():
                variables[name].assign(value.astype(variables[name].dtype))
                report.restored.append((name, tuple(np.shape(weights[name]))))
            report.heads.append(head)
        return report
