import numpy as np
import keras
import pytest
import tensorflow as tf

from support import tiny_config
from official_bert.modeling import layers
from official_bert.modeling.encoder import BertEncoder, dummy_inputs


def _inputs(seed=0, batch=2, seq=10, vocab=64, pad_from=7):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, size=(batch, seq)).astype("int32")
    mask = np.ones((batch, seq), "int32")
    mask[0, pad_from:] = 0
    ids[0, pad_from:] = 0
    types = np.zeros((batch, seq), "int32")
    types[:, seq // 2:] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def _tiny_encoder(**overrides):
    keras.utils.set_random_seed(1)
    encoder = BertEncoder.from_bert_config(tiny_config(**overrides))
    encoder(dummy_inputs())
    return encoder


def test_parameter_counts_of_known_models():
    # all-MiniLM-L6-v2 and bert-base-uncased (BertModel, with pooler).
    minilm = BertEncoder(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                         num_attention_heads=12, intermediate_size=1536)
    assert minilm.count_params() == 22_713_216
    base = BertEncoder(vocab_size=30522)
    assert base.count_params() == 109_482_240


def test_outputs_shapes_and_layers():
    encoder = _tiny_encoder()
    out = encoder(_inputs(), training=False)
    assert out["sequence_output"].shape == (2, 10, 16)
    assert out["pooled_output"].shape == (2, 16)
    assert out["embedding_output"].shape == (2, 10, 16)
    assert len(out["encoder_outputs"]) == 2
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
    # The pooler is tanh(dense(T_[CLS])).
    cls = np.asarray(out["sequence_output"])[:, 0]
    expected = np.tanh(cls @ np.asarray(encoder.pooler.kernel) + np.asarray(encoder.pooler.bias))
    np.testing.assert_allclose(out["pooled_output"], expected, atol=1e-6)


def test_padding_does_not_change_real_tokens():
    encoder = _tiny_encoder()
    inputs = _inputs(batch=1, pad_from=10)
    short = encoder(inputs, training=False)["sequence_output"]
    padded = {k: np.pad(v, ((0, 0), (0, 6))) for k, v in inputs.items()}
    padded["input_word_ids"][:, 10:] = 5  # garbage under the mask is ignored
    long = encoder(padded, training=False)["sequence_output"]
    np.testing.assert_allclose(np.asarray(long)[:, :10], short, atol=1e-6)


def test_padding_row_takes_no_gradient():
    # A loss that reads every position (as SQuAD's softmax does) trains every
    # real token's row but not [PAD]'s (id 0), as Hugging Face's padding_idx.
    encoder = _tiny_encoder()
    inputs = _inputs()
    weights = np.random.default_rng(0).standard_normal((2, 10, 16)).astype("float32")
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(encoder(inputs, training=True)["sequence_output"] * weights)
    table = encoder.word_embeddings
    grad = tf.convert_to_tensor(tape.gradient(loss, table))
    row_norms = np.linalg.norm(np.asarray(grad), axis=-1)
    assert row_norms[0] == 0.0
    assert np.all(row_norms[np.unique(inputs["input_word_ids"][inputs["input_word_ids"] > 0])] > 0)
    # The forward pass still reads the [PAD] row.
    padded_positions = encoder.embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
    table[0].assign(table[0] + 1.0)
    moved = encoder.embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
    assert not np.allclose(moved[0, 7:], padded_positions[0, 7:])
    np.testing.assert_allclose(moved[1], padded_positions[1], atol=1e-6)


def test_dropout_only_in_training():
    encoder = _tiny_encoder()
    inputs = _inputs()
    a = encoder(inputs, training=False)["sequence_output"]
    b = encoder(inputs, training=False)["sequence_output"]
    c = encoder(inputs, training=True)["sequence_output"]
    np.testing.assert_array_equal(a, b)
    assert np.abs(np.asarray(a) - np.asarray(c)).max() > 1e-3


def test_gelu_forms():
    x = np.array([-1.0, 0.0, 1.0, 2.0], "float32")
    np.testing.assert_allclose(layers.gelu_exact(x), [-0.15865525, 0.0, 0.8413447, 1.9544997], atol=1e-6)
    np.testing.assert_allclose(layers.gelu_tanh(x), [-0.15880801, 0.0, 0.841192, 1.9545977], atol=1e-6)
    exact = _tiny_encoder(hidden_act="gelu")
    approx = _tiny_encoder(hidden_act="gelu_tanh")
    a = exact(_inputs(), training=False)["sequence_output"]
    b = approx(_inputs(), training=False)["sequence_output"]
    assert 0 < np.abs(np.asarray(a) - np.asarray(b)).max() < 1e-2


def test_config_keras_file_and_savedmodel_round_trips(tmp_path):
    encoder = _tiny_encoder()
    inputs = _inputs()
    expected = encoder(inputs, training=False)
    config = encoder.get_config()
    assert config["num_hidden_layers"] == 2 and config["hidden_act"] == "gelu"
    clone = BertEncoder.from_config(config)
    assert clone.get_config() == config

    encoder.save(tmp_path / "encoder.keras")
    loaded = keras.models.load_model(tmp_path / "encoder.keras")
    np.testing.assert_allclose(loaded(inputs, training=False)["pooled_output"], expected["pooled_output"], atol=1e-6)

    class Serving(tf.Module):
        def __init__(self, model):
            self.model = model

        @tf.function(input_signature=[{k: tf.TensorSpec([None, None], tf.int32, name=k) for k in inputs}])
        def serve(self, features):
            out = self.model(features, training=False)
            return {"sequence_output": out["sequence_output"], "pooled_output": out["pooled_output"]}

    module = Serving(encoder)
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures={"serving_default": module.serve})
    restored = tf.saved_model.load(str(tmp_path / "sm"))
    out = restored.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
    np.testing.assert_allclose(out["sequence_output"], expected["sequence_output"], atol=1e-6)


def test_jit_compile_matches_eager():
    encoder = _tiny_encoder()
    inputs = _inputs()
    eager = encoder(inputs, training=False)["sequence_output"]
    compiled = tf.function(lambda x: encoder(x, training=False), jit_compile=True)
    np.testing.assert_allclose(compiled(inputs)["sequence_output"], eager, atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_close_to_float32(policy):
    reference = _tiny_encoder()
    mixed = BertEncoder.from_bert_config(tiny_config(), dtype=policy)
    mixed(dummy_inputs())
    mixed.set_weights(reference.get_weights())
    # Variables stay float32; LayerNorm runs in float32.
    assert all(w.dtype == "float32" for w in mixed.weights)
    inputs = _inputs()
    ref = reference(inputs, training=False)
    out = mixed(inputs, training=False)
    compute = policy.split("_")[1]
    assert out["sequence_output"].dtype == compute
    for key in ("sequence_output", "pooled_output"):
        diff = np.abs(np.asarray(out[key], "float32") - np.asarray(ref[key])).max()
        assert diff < 5e-2 if compute == "bfloat16" else diff < 1e-2, (key, diff)
