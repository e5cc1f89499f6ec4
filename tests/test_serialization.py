"""Every public Keras layer and model of the project serializes.

For each head, the encoder, the encoder's layers and the text layers: the
config round-trips (`cls.from_config(m.get_config()).get_config() ==
m.get_config()`), and a `.keras` file saved and loaded back gives the same
outputs (to 1e-6) on fixed inputs. Layers are saved inside a small functional
model (only a `keras.Model` has `.save`). All models are tiny (`tiny_config`).
"""

import copy
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from support import tiny_config
from official_bert.modeling import heads
from official_bert.modeling import layers as bert_layers
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.text import text_layers

BATCH, SEQ, CHOICES = 2, 8, 3
VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "hello", "world", "un", "##aff", "##able", "cafe", ",", "!", "?", "a", "b",
]  # fmt: skip
TEXTS_A = ["Hello, world!", "unaffable café", "a b a b a b a b a b"]
TEXTS_B = ["b?", "", "world"]


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(7)


def _encoder(**overrides):
    return BertEncoder.from_bert_config(tiny_config(**overrides))


def _encoder_inputs(*leading):
    """Fixed int32 ids / mask / segments of shape [*leading, SEQ], with padding."""
    shape = tuple(leading) + (SEQ,)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 64, size=shape).astype("int32")
    lengths = rng.integers(3, SEQ + 1, size=leading)
    lengths.flat[0] = SEQ  # one full row
    mask = (np.arange(SEQ) < lengths[..., None]).astype("int32")
    types = ((np.arange(SEQ) >= 3) & (mask == 1)).astype("int32")
    return {
        "input_word_ids": tf.constant(ids * mask),
        "input_mask": tf.constant(mask),
        "input_type_ids": tf.constant(types),
    }


def _assert_same_outputs(actual, expected):
    tf.nest.assert_same_structure(expected, actual)
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        if isinstance(e, tf.RaggedTensor):
            assert isinstance(a, tf.RaggedTensor)
            assert a.to_list() == e.to_list()
        else:
            assert a.dtype == e.dtype
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=1e-6, rtol=0)


def _assert_config_round_trips(obj):
    config = obj.get_config()
    # A copy: a functional model's from_config consumes the dict it is given.
    assert type(obj).from_config(copy.deepcopy(config)).get_config() == config


def _json(config):
    return json.loads(json.dumps(config))


def _assert_keras_file_round_trips(model, inputs, tmp_path):
    """Saves `model` as .keras, loads it back: same class, config and outputs."""
    expected = model(inputs, training=False)
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)
    # Through JSON: the file stores a sublayer's build shape as a list, not a tuple.
    assert _json(loaded.get_config()) == _json(model.get_config())
    _assert_same_outputs(loaded(inputs, training=False), expected)
    return loaded


def _layer_model(layer, symbolic):
    """`layer` in a functional model, so that it can be saved as .keras."""
    outputs = layer(*symbolic) if isinstance(symbolic, tuple) else layer(symbolic)
    return keras.Model(symbolic, outputs)


# === Heads and the encoder ===


def _classifier():
    return heads.BertClassifier(_encoder(), num_classes=3, dropout=0.2), _encoder_inputs(BATCH)


def _regressor():
    return heads.BertClassifier(_encoder(), num_classes=1), _encoder_inputs(BATCH)


def _multiple_choice():
    return heads.BertMultipleChoice(_encoder(), dropout=0.3), _encoder_inputs(BATCH, CHOICES)


def _token_classifier():
    return heads.BertTokenClassifier(_encoder(), num_labels=5, dropout=0.2), _encoder_inputs(BATCH)


def _span_labeler():
    return heads.BertSpanLabeler(_encoder()), _encoder_inputs(BATCH)


def _feature_tagger(kind):
    def make():
        rng = np.random.default_rng(1)
        inputs = {
            "features": tf.constant(rng.normal(size=(BATCH, 5, 16)).astype("float32")),
            "word_mask": tf.constant([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], tf.int32),
        }
        model = heads.FeatureTagger(num_labels=4, kind=kind, units=6, num_layers=2,
                                    dropout=0.2, name=f"tagger_{kind}")
        return model, inputs
    return make


def _pretrainer():
    inputs = dict(_encoder_inputs(BATCH),
                  masked_lm_positions=tf.constant([[1, 2, 0], [3, 4, 0]], tf.int32))
    return heads.BertPretrainer(_encoder()), inputs


def _encoder_alone():
    encoder = BertEncoder.from_bert_config(tiny_config(hidden_act="gelu_tanh"), name="my_encoder")
    return encoder, _encoder_inputs(BATCH)


def _mixed_precision_classifier():
    encoder = BertEncoder.from_bert_config(tiny_config(), dtype="mixed_bfloat16")
    return heads.BertClassifier(encoder, num_classes=2), _encoder_inputs(BATCH)


MODELS = {
    "BertClassifier": _classifier,
    "BertClassifier-regression": _regressor,
    "BertClassifier-mixed_bfloat16": _mixed_precision_classifier,
    "BertMultipleChoice": _multiple_choice,
    "BertTokenClassifier": _token_classifier,
    "BertSpanLabeler": _span_labeler,
    "FeatureTagger-bilstm": _feature_tagger("bilstm"),
    "FeatureTagger-dense": _feature_tagger("dense"),
    "BertPretrainer": _pretrainer,
    "BertEncoder": _encoder_alone,
}


@pytest.mark.parametrize("case", list(MODELS))
def test_model_round_trips(case, tmp_path):
    model, inputs = MODELS[case]()
    model(inputs, training=False)
    _assert_config_round_trips(model)
    loaded = _assert_keras_file_round_trips(model, inputs, tmp_path)
    assert loaded.name == model.name
    assert loaded.dtype_policy.name == model.dtype_policy.name
    if hasattr(model, "encoder"):
        assert loaded.encoder.get_config() == model.encoder.get_config()
        assert loaded.encoder.embeddings.dtype_policy.name == model.encoder.embeddings.dtype_policy.name


def test_head_configs_mirror_init_arguments():
    encoder = _encoder()
    cases = [
        (heads.BertClassifier(encoder, num_classes=4, dropout=0.25, window_pooling="max",
                              seed=3, name="c"),
         {"num_classes": 4, "dropout": 0.25, "window_pooling": "max", "seed": 3}),
        (heads.BertMultipleChoice(encoder, dropout=0.25, seed=3, name="c"),
         {"dropout": 0.25, "seed": 3}),
        (heads.BertTokenClassifier(encoder, num_labels=7, dropout=0.25, seed=None, name="c"),
         {"num_labels": 7, "dropout": 0.25, "seed": None}),
        (heads.BertSpanLabeler(encoder, seed=5, name="c"), {"seed": 5}),
        (heads.BertPretrainer(encoder, name="c"), {}),
    ]
    for model, arguments in cases:
        config = model.get_config()
        assert set(config) == {"encoder", "name", "trainable", "dtype", *arguments}
        assert {k: config[k] for k in arguments} == arguments
        assert config["encoder"]["config"] == encoder.get_config()
    tagger = heads.FeatureTagger(num_labels=3, kind="dense", units=5, num_layers=1, dropout=0.0)
    config = tagger.get_config()
    assert {k: config[k] for k in ("num_labels", "kind", "units", "num_layers", "dropout")} == {
        "num_labels": 3, "kind": "dense", "units": 5, "num_layers": 1, "dropout": 0.0}


def test_saved_head_keeps_pretrained_encoder_weights(tmp_path):
    """The encoder's weights, not just the head's, come back from the file."""
    model, inputs = _span_labeler()
    model(inputs)
    for variable in model.encoder.weights:
        variable.assign(tf.random.normal(variable.shape, stddev=0.5, seed=3))
    loaded = _assert_keras_file_round_trips(model, inputs, tmp_path)
    for a, b in zip(loaded.encoder.get_weights(), model.encoder.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_loaded_pretrainer_keeps_tied_embeddings(tmp_path):
    model, inputs = _pretrainer()
    model(inputs)
    loaded = _assert_keras_file_round_trips(model, inputs, tmp_path)
    assert loaded.mlm_output_embeddings is loaded.encoder.word_embeddings


# === Encoder layers ===


def _floats(*shape, seed=2):
    return tf.constant(np.random.default_rng(seed).normal(size=shape).astype("float32"))


def _bias():
    mask = _encoder_inputs(BATCH)["input_mask"]
    return bert_layers.attention_bias_from_mask(mask)


LAYERS = {
    "PositionEmbedding": lambda: (
        bert_layers.PositionEmbedding(max_length=16, initializer_range=0.5),
        _floats(BATCH, SEQ, 16),
        keras.Input((None, 16)),
    ),
    "BertEmbeddings": lambda: (
        bert_layers.BertEmbeddings(vocab_size=64, hidden_size=16, max_position_embeddings=16,
                                   type_vocab_size=2, dropout=0.2, initializer_range=0.5),
        (_encoder_inputs(BATCH)["input_word_ids"], _encoder_inputs(BATCH)["input_type_ids"]),
        (keras.Input((None,), dtype="int32"), keras.Input((None,), dtype="int32")),
    ),
    "MultiHeadSelfAttention": lambda: (
        bert_layers.MultiHeadSelfAttention(hidden_size=16, num_heads=4, attention_dropout=0.2,
                                           initializer_range=0.5),
        (_floats(BATCH, SEQ, 16), _bias()),
        (keras.Input((None, 16)), keras.Input((1, 1, None))),
    ),
    "TransformerBlock": lambda: (
        bert_layers.TransformerBlock(hidden_size=16, num_heads=4, intermediate_size=32,
                                     activation="gelu_tanh", dropout=0.2, attention_dropout=0.2,
                                     initializer_range=0.5, layer_norm_eps=1e-6),
        (_floats(BATCH, SEQ, 16), _bias()),
        (keras.Input((None, 16)), keras.Input((1, 1, None))),
    ),
    "Float32LayerNorm": lambda: (
        bert_layers.Float32LayerNorm(epsilon=1e-5, beta_initializer="ones",
                                     gamma_initializer=keras.initializers.RandomNormal(seed=1)),
        _floats(BATCH, SEQ, 16),
        keras.Input((None, 16)),
    ),
    # A float16 input: normalized in float32, returned in float16.
    "Float32LayerNorm-float16": lambda: (
        bert_layers.Float32LayerNorm(epsilon=1e-12),
        tf.cast(_floats(BATCH, SEQ, 16) * 100, tf.float16),
        keras.Input((None, 16), dtype="float16"),
    ),
}


@pytest.mark.parametrize("case", list(LAYERS))
def test_layer_round_trips(case, tmp_path):
    layer, inputs, symbolic = LAYERS[case]()
    _assert_config_round_trips(layer)
    model = _layer_model(layer, symbolic)
    _assert_config_round_trips(model)
    loaded = _assert_keras_file_round_trips(model, inputs, tmp_path)
    (restored,) = [l for l in loaded.layers if type(l) is type(layer)]
    assert restored.get_config() == layer.get_config()


def test_transformer_block_weights_come_back(tmp_path):
    layer, inputs, symbolic = LAYERS["TransformerBlock"]()
    model = _layer_model(layer, symbolic)
    loaded = _assert_keras_file_round_trips(model, inputs, tmp_path)
    assert len(loaded.weights) == len(model.weights) == 16
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


# === Text layers ===


def _strings():
    return tf.constant(TEXTS_A)


def test_tokenizer_layer_round_trips(tmp_path):
    tokenizer = text_layers.BertTokenizerLayer(VOCAB, lower_case=True,
                                               max_input_chars_per_word=9, name="tok")
    _assert_config_round_trips(tokenizer)
    text = keras.Input((), dtype="string")
    model = keras.Model(text, tokenizer(text))
    loaded = _assert_keras_file_round_trips(model, _strings(), tmp_path)
    assert loaded.get_layer("tok").vocabulary == VOCAB
    assert loaded(_strings()).to_list()[1] == [7, 8, 9, 10]


def test_pack_inputs_round_trips(tmp_path):
    packer = text_layers.BertPackInputs(seq_length=7, start_of_sequence_id=2,
                                        end_of_segment_id=3, padding_id=0)
    _assert_config_round_trips(packer)
    tokenizer = text_layers.BertTokenizerLayer(VOCAB)
    a, b = keras.Input((), dtype="string"), keras.Input((), dtype="string")
    model = keras.Model([a, b], packer([tokenizer(a), tokenizer(b)]))
    inputs = [_strings(), tf.constant(TEXTS_B)]
    loaded = _assert_keras_file_round_trips(model, inputs, tmp_path)
    assert loaded(inputs)["input_word_ids"].numpy().tolist()[0] == [2, 5, 11, 3, 15, 13, 3]


def test_preprocessor_and_encoder_round_trip(tmp_path):
    """Raw text to the pooled vector: one .keras file, no vocabulary file."""
    preprocessor = text_layers.BertPreprocessor(VOCAB, lower_case=True, seq_length=SEQ)
    _assert_config_round_trips(preprocessor)
    encoder = _encoder(vocab_size=len(VOCAB))
    a, b = keras.Input((), dtype="string"), keras.Input((), dtype="string")
    packed = preprocessor([a, b])
    model = keras.Model([a, b], {"packed": packed,
                                 "pooled": encoder(packed)["pooled_output"]})
    inputs = [_strings(), tf.constant(TEXTS_B)]
    _assert_keras_file_round_trips(model, inputs, tmp_path)


@pytest.mark.slow  # 8 s or more here
def test_bfloat16_serving_copies_of_every_head():
    """`serving.base.with_weights_in(model, "bfloat16")` (--serving_dtype): a copy
    of each head whose matrices are stored in bfloat16, answering as the float32
    model within bfloat16's rounding; the original is left as it was."""
    import tensorflow as tf

    from official_bert.serving.base import with_weights_in

    encoder = _encoder()
    inputs = dummy_inputs(batch_size=2)
    choices = {k: tf.stack([v, v], axis=1) for k, v in inputs.items()}
    cases = [(encoder, inputs, "pooled_output"),
             (heads.BertClassifier(encoder, num_classes=3), inputs, None),
             (heads.BertMultipleChoice(encoder), choices, None),
             (heads.BertTokenClassifier(encoder, num_labels=4), inputs, None),
             (heads.BertSpanLabeler(encoder, seed=1), inputs, "start_logits"),
             (heads.BertPretrainer(encoder), {**inputs, "masked_lm_positions":
                                              tf.constant([[1, 2], [3, 4]])}, "masked_lm_logits")]
    for model, model_inputs, key in cases:
        expected = model(model_inputs)
        copy = with_weights_in(model, "bfloat16")
        got = copy(model_inputs)
        expected, got = (expected[key], got[key]) if key else (expected, got)
        assert got.dtype == (tf.bfloat16 if model is encoder else tf.float32)  # heads cast
        np.testing.assert_allclose(tf.cast(got, tf.float32).numpy(), expected.numpy(),
                                   atol=5e-2, rtol=5e-2)
        assert {w.dtype for w in copy.weights if len(w.shape) == 2} == {"bfloat16"}, model
        assert {w.dtype for w in model.weights} == {"float32"}
    assert with_weights_in(encoder, "float32") is encoder
    with pytest.raises(ValueError, match="no BERT encoder"):
        with_weights_in(heads.FeatureTagger(num_labels=3), "bfloat16")
