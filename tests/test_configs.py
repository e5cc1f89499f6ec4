import json

import pytest

from official_bert.modeling.configs import BertConfig, ConfigError

GOOGLE_BASE = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "type_vocab_size": 2,
    "vocab_size": 30522,
}


def test_reads_google_bert_config(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(GOOGLE_BASE))
    config = BertConfig.from_json_file(path)
    assert config.hidden_size == 768 and config.num_hidden_layers == 12
    assert config.layer_norm_eps == 1e-12
    assert config.head_size == 64


def test_reads_huggingface_config_and_ignores_extra_keys(tmp_path):
    values = dict(
        GOOGLE_BASE,
        hidden_size=384,
        intermediate_size=1536,
        num_hidden_layers=6,
        layer_norm_eps=1e-7,
        architectures=["BertModel"],
        model_type="bert",
        pad_token_id=0,
        use_cache=True,
        position_embedding_type="absolute",
    )
    path = tmp_path / "config.json"
    path.write_text(json.dumps(values))
    config = BertConfig.from_json_file(path)
    assert (config.hidden_size, config.num_hidden_layers) == (384, 6)
    assert config.layer_norm_eps == 1e-7


def test_writes_google_form_and_reads_it_back(tmp_path):
    # Google's BERT computes the tanh GELU, which its bert_config.json calls "gelu".
    config = BertConfig(**dict(GOOGLE_BASE, hidden_act="gelu_tanh"))
    path = tmp_path / "out.json"
    config.to_json_file(path)
    assert json.loads(path.read_text()) == GOOGLE_BASE  # exactly Google's keys and names
    assert BertConfig.from_json_file(path) == config
    eps = BertConfig(**GOOGLE_BASE, layer_norm_eps=1e-6)
    assert eps.to_dict()["layer_norm_eps"] == 1e-6


@pytest.mark.parametrize(
    "override, key",
    [
        ({"hidden_size": 100}, "hidden_size"),  # not divisible by 12 heads
        ({"hidden_act": "gelu2"}, "hidden_act"),
        ({"num_hidden_layers": -1}, "num_hidden_layers"),
        ({"intermediate_size": 0}, "intermediate_size"),
        ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
        ({"vocab_size": "30522"}, "vocab_size"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
    ],
)
def test_invalid_values_name_the_key(override, key):
    with pytest.raises(ConfigError, match=key):
        BertConfig.from_dict(dict(GOOGLE_BASE, **override))


def test_missing_vocab_size_and_bad_files(tmp_path):
    values = dict(GOOGLE_BASE)
    del values["vocab_size"]
    with pytest.raises(ConfigError, match="vocab_size"):
        BertConfig.from_dict(values)
    with pytest.raises(ConfigError, match="does not exist"):
        BertConfig.from_json_file(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        BertConfig.from_json_file(bad)


# google-research/bert's modeling.get_activation and gelu, copied (numpy in place of TF1).
def _google_get_activation(activation_string):
    import numpy as np

    def gelu(x):
        cdf = 0.5 * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * np.power(x, 3))))
        return x * cdf

    act = activation_string.lower()
    if act == "linear":
        return None
    if act == "relu":
        return lambda x: np.maximum(x, 0)
    if act == "gelu":
        return gelu
    if act == "tanh":
        return np.tanh
    raise ValueError("Unsupported activation: %s" % act)


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_tanh", "gelu_new", "relu", "tanh"])
def test_a_written_bert_config_means_to_google_what_it_means_here(tmp_path, hidden_act):
    import numpy as np

    from official_bert.modeling import layers

    config = BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16, hidden_act=hidden_act)
    path = tmp_path / "bert_config.json"
    config.to_json_file(path)
    written = json.loads(path.read_text())["hidden_act"]
    x = np.linspace(-4, 4, 81).astype(np.float32)
    ours = np.asarray(layers.get_activation(hidden_act)(x))
    try:
        google = _google_get_activation(written)
    except ValueError as e:
        # google refuses what it cannot compute, in words (the exact GELU).
        assert hidden_act == "gelu" and "Unsupported activation: gelu_exact" in str(e)
    else:
        np.testing.assert_allclose(google(x), ours, atol=1e-6)
    # Read back, the file is the same network.
    back = BertConfig.from_json_file(path).hidden_act
    np.testing.assert_allclose(np.asarray(layers.get_activation(back)(x)), ours, atol=1e-6)


def test_a_google_config_without_hidden_act_means_what_google_reads_it_as(tmp_path):
    """google's BertConfig defaults hidden_act to "gelu", its tanh GELU; Hugging
    Face's defaults it to "gelu" too, its exact GELU."""
    import numpy as np

    from official_bert.modeling import layers

    values = {k: v for k, v in GOOGLE_BASE.items() if k != "hidden_act"}
    google, hf = tmp_path / "bert_config.json", tmp_path / "config.json"
    google.write_text(json.dumps(values))
    hf.write_text(json.dumps(dict(values, model_type="bert")))
    x = np.linspace(-4, 4, 81).astype(np.float32)
    ours = BertConfig.from_json_file(google).hidden_act
    assert ours == "gelu_tanh"
    np.testing.assert_allclose(np.asarray(layers.get_activation(ours)(x)),
                               _google_get_activation("gelu")(x), atol=1e-6)
    assert BertConfig.from_json_file(hf).hidden_act == "gelu"  # HF's default: exact erf GELU


def test_gelu_means_what_each_format_says(tmp_path):
    google, hf = tmp_path / "bert_config.json", tmp_path / "config.json"
    google.write_text(json.dumps(GOOGLE_BASE))
    hf.write_text(json.dumps(dict(GOOGLE_BASE, model_type="bert")))
    assert BertConfig.from_json_file(google).hidden_act == "gelu_tanh"  # google's modeling.gelu
    assert BertConfig.from_json_file(hf).hidden_act == "gelu"  # HF's exact erf GELU
    assert BertConfig.from_json_file(hf).to_hf_dict()["hidden_act"] == "gelu"
    assert BertConfig.from_json_file(google).to_hf_dict()["hidden_act"] == "gelu_new"
