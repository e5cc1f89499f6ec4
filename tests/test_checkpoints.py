import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from support import tiny_config
from official_bert import checkpoints
from official_bert.checkpoints import CheckpointError
from official_bert.modeling.encoder import BertEncoder, dummy_inputs


def _fixture_inputs(example):
    return {
        "input_word_ids": np.array([example["input_ids"]], "int32"),
        "input_mask": np.array([example["attention_mask"]], "int32"),
        "input_type_ids": np.array([example["token_type_ids"]], "int32"),
    }


def _tiny_encoder(seed=3, **overrides):
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder.from_bert_config(tiny_config(**overrides))
    encoder(dummy_inputs())
    return encoder


def _write_vocab(path, size=64):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"tok{i}" for i in range(size - len(tokens))]
    path.write_text("\n".join(tokens) + "\n")
    return path


# --- the real checkpoint --------------------------------------------------


def test_minilm_parity_with_reference(minilm_encoder, parity_fixture):
    assert minilm_encoder.count_params() == 22_713_216
    worst = {"embedding_output": 0.0, "sequence_output": 0.0, "pooled_output": 0.0}
    for example in parity_fixture["examples"]:
        out = minilm_encoder(_fixture_inputs(example), training=False)
        n = len(example["tokens"])
        for key, ref_key in [("embedding_output", "embedding_output"),
                             ("sequence_output", "last_hidden_state")]:
            got = np.asarray(out[key])[0, :n]
            worst[key] = max(worst[key], np.abs(got - np.array(ref_key and example[ref_key])).max())
        worst["pooled_output"] = max(
            worst["pooled_output"],
            np.abs(np.asarray(out["pooled_output"])[0] - np.array(example["pooled_output"])).max())
    assert all(v <= 1e-4 for v in worst.values()), worst


def test_minilm_checkpoint_metadata(minilm_dir):
    ckpt = checkpoints.read_checkpoint(minilm_dir)
    assert ckpt.kind == checkpoints.HUGGINGFACE
    assert ckpt.do_lower_case is True
    assert os.path.basename(ckpt.vocab_file) == "vocab.txt"
    assert (ckpt.config.num_hidden_layers, ckpt.config.hidden_size) == (6, 384)
    assert not ckpt.head_weights("cls/")  # a BertModel: no heads


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_minilm_mixed_precision_within_1e_2(minilm_dir, minilm_encoder, parity_fixture, policy):
    mixed, _ = checkpoints.load_encoder(minilm_dir, dtype=policy)
    inputs = _fixture_inputs(parity_fixture["examples"][6])
    ref = minilm_encoder(inputs, training=False)
    out = mixed(inputs, training=False)
    pooled = np.abs(np.asarray(out["pooled_output"], "float32") - np.asarray(ref["pooled_output"])).max()
    assert pooled <= 1e-2
    # Token vectors are unbounded (|x| up to ~10): compare relative to their scale.
    seq_ref = np.asarray(ref["sequence_output"])
    seq = np.abs(np.asarray(out["sequence_output"], "float32") - seq_ref).max()
    assert seq / np.abs(seq_ref).max() <= 1e-2


def test_huggingface_round_trip_is_exact(minilm_dir, minilm_encoder, tmp_path):
    out_dir = checkpoints.export_huggingface(
        minilm_encoder, tmp_path / "hf", vocab_file=minilm_dir / "vocab.txt", do_lower_case=True)
    original = load_file(str(minilm_dir / "model.safetensors"))
    exported = load_file(os.path.join(out_dir, "model.safetensors"))
    original.pop("embeddings.position_ids")
    assert set(exported) == set(original)
    for name, value in original.items():
        np.testing.assert_array_equal(exported[name], value, err_msg=name)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["model_type"] == "bert" and config["num_hidden_layers"] == 6
    reloaded, ckpt = checkpoints.load_encoder(out_dir)
    assert ckpt.do_lower_case is True and ckpt.vocab_file.endswith("vocab.txt")
    for a, b in zip(reloaded.weights, minilm_encoder.weights):
        np.testing.assert_array_equal(a, b)


# --- Google's TF1 checkpoints ---------------------------------------------


def _save_tf1(prefix, tensors):
    """Writes a name-based checkpoint exactly as TF1's Saver does."""
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=str(prefix),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[n]) for n in names],
    )


def test_google_tf1_checkpoint_loads_exactly(tmp_path):
    source = _tiny_encoder()
    rng = np.random.default_rng(0)
    tensors = {}
    # Google's own names, spelled out (not derived from our mapping).
    tensors["bert/embeddings/word_embeddings"] = np.asarray(source.embeddings.word_embeddings.embeddings)
    tensors["bert/embeddings/token_type_embeddings"] = np.asarray(source.embeddings.token_type_embeddings.embeddings)
    tensors["bert/embeddings/position_embeddings"] = np.asarray(source.embeddings.position_embeddings.embeddings)
    tensors["bert/embeddings/LayerNorm/gamma"] = rng.normal(size=16).astype("float32")
    tensors["bert/embeddings/LayerNorm/beta"] = rng.normal(size=16).astype("float32")
    for i in range(2):
        p = f"bert/encoder/layer_{i}/"
        for sub, (n_in, n_out) in {
            "attention/self/query": (16, 16), "attention/self/key": (16, 16),
            "attention/self/value": (16, 16), "attention/output/dense": (16, 16),
            "intermediate/dense": (16, 32), "output/dense": (32, 16),
        }.items():
            tensors[p + sub + "/kernel"] = rng.normal(size=(n_in, n_out)).astype("float32")
            tensors[p + sub + "/bias"] = rng.normal(size=n_out).astype("float32")
        for sub in ("attention/output/LayerNorm", "output/LayerNorm"):
            tensors[p + sub + "/gamma"] = rng.normal(size=16).astype("float32")
            tensors[p + sub + "/beta"] = rng.normal(size=16).astype("float32")
    tensors["bert/pooler/dense/kernel"] = rng.normal(size=(16, 16)).astype("float32")
    tensors["bert/pooler/dense/bias"] = rng.normal(size=16).astype("float32")
    tensors["cls/seq_relationship/output_weights"] = rng.normal(size=(2, 16)).astype("float32")
    tensors["cls/seq_relationship/output_bias"] = rng.normal(size=2).astype("float32")
    # Optimizer slots and the step, as in Google's released files, are skipped.
    tensors["bert/pooler/dense/kernel/adam_m"] = np.zeros((16, 16), "float32")
    tensors["global_step"] = np.array(1000, "int64")

    folder = tmp_path / "uncased_L-2_H-16_A-4"
    folder.mkdir()
    _save_tf1(folder / "bert_model.ckpt", tensors)
    config = dict(tiny_config().to_dict(), hidden_act="gelu")  # as Google's files say it
    (folder / "bert_config.json").write_text(json.dumps(config))
    _write_vocab(folder / "vocab.txt")

    encoder, ckpt = checkpoints.load_encoder(folder / "bert_model.ckpt")
    assert ckpt.kind == checkpoints.GOOGLE_TF1
    assert ckpt.do_lower_case is True  # from the directory name
    # google-research/bert's "gelu" is the tanh approximation.
    assert ckpt.config.hidden_act == "gelu_tanh"
    weights = checkpoints.get_encoder_weights(encoder)
    for name, value in tensors.items():
        if name.startswith("bert/") and not name.endswith("adam_m"):
            np.testing.assert_array_equal(weights[name], value, err_msg=name)
    assert set(ckpt.head_weights("cls/")) == {
        "cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"}
    # The directory alone also works.
    again, _ = checkpoints.load_encoder(folder)
    np.testing.assert_array_equal(again.pooler.kernel, tensors["bert/pooler/dense/kernel"])


# --- own checkpoints and BertFor* files -------------------------------------


def test_own_checkpoint_round_trip(tmp_path):
    source = _tiny_encoder()
    prefix = checkpoints.save_checkpoint(source, tmp_path / "run", step=7)
    assert prefix.endswith("ckpt-7")
    encoder, ckpt = checkpoints.load_encoder(tmp_path / "run")
    assert ckpt.kind == checkpoints.OFFICIAL_BERT
    for a, b in zip(encoder.weights, source.weights):
        np.testing.assert_array_equal(a, b)


def test_bert_for_pretraining_names_and_heads(tmp_path):
    source = _tiny_encoder()
    exported = checkpoints.export_huggingface(source, tmp_path / "plain")
    tensors = load_file(os.path.join(exported, "model.safetensors"))
    tensors = {"bert." + k: v for k, v in tensors.items()}
    rng = np.random.default_rng(1)
    transform = rng.normal(size=(16, 16)).astype("float32")  # HF [out, in]
    tensors.update({
        "cls.predictions.transform.dense.weight": transform,
        "cls.predictions.transform.dense.bias": np.zeros(16, "float32"),
        "cls.predictions.transform.LayerNorm.weight": np.ones(16, "float32"),
        "cls.predictions.transform.LayerNorm.bias": np.zeros(16, "float32"),
        "cls.predictions.bias": np.arange(64, dtype="float32"),
        "cls.predictions.decoder.weight": tensors["bert.embeddings.word_embeddings.weight"],
        "cls.seq_relationship.weight": rng.normal(size=(2, 16)).astype("float32"),
        "cls.seq_relationship.bias": np.zeros(2, "float32"),
        "bert.embeddings.position_ids": np.arange(32)[None],
    })
    folder = tmp_path / "pretraining"
    folder.mkdir()
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(tiny_config().to_hf_dict()))
    encoder, ckpt = checkpoints.load_encoder(folder)
    np.testing.assert_array_equal(
        ckpt.weights["cls/predictions/transform/dense/kernel"], transform.T)
    np.testing.assert_array_equal(ckpt.weights["cls/predictions/output_bias"], np.arange(64))
    assert ckpt.weights["cls/seq_relationship/output_weights"].shape == (2, 16)
    for a, b in zip(encoder.weights, source.weights):
        np.testing.assert_array_equal(a, b)


def test_a_masked_lm_only_model_loads_with_a_fresh_pooler(tmp_path, caplog):
    """Hugging Face `BertForMaskedLM` saves no pooler: every other weight loads
    exactly, the pooler keeps its fresh initialization, and the log says so.
    One more name missing is still refused."""
    source = _tiny_encoder(seed=3)
    exported = checkpoints.export_huggingface(source, tmp_path / "plain")
    tensors = load_file(os.path.join(exported, "model.safetensors"))
    no_pooler = {k: v for k, v in tensors.items() if not k.startswith("pooler.")}
    assert len(no_pooler) == len(tensors) - 2
    folder = tmp_path / "mlm"
    folder.mkdir()
    save_file(no_pooler, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(tiny_config().to_hf_dict()))
    keras.utils.set_random_seed(11)
    fresh = BertEncoder.from_bert_config(tiny_config())
    fresh(dummy_inputs())
    fresh_pooler = np.asarray(fresh.pooler.kernel)
    keras.utils.set_random_seed(11)
    with caplog.at_level("WARNING"):
        encoder, _ = checkpoints.load_encoder(folder)
    assert "Pooler: not in the checkpoint" in caplog.text
    np.testing.assert_array_equal(encoder.pooler.kernel, fresh_pooler)
    assert not np.array_equal(encoder.pooler.kernel, source.pooler.kernel)
    for a, b in zip(encoder.embeddings.weights + encoder.transformer_layers[0].weights,
                    source.embeddings.weights + source.transformer_layers[0].weights):
        np.testing.assert_array_equal(a, b)
    damaged = {k: v for k, v in no_pooler.items() if not k.startswith("embeddings.LayerNorm")}
    save_file(damaged, str(folder / "model.safetensors"))
    with pytest.raises(CheckpointError, match="missing from the checkpoint: .*LayerNorm"):
        checkpoints.load_encoder(folder)


# --- bad input ---------------------------------------------------------------


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoints.read_checkpoint(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        checkpoints.read_checkpoint(tmp_path / "empty")


def test_config_that_does_not_fit_lists_the_names(tmp_path):
    exported = checkpoints.export_huggingface(_tiny_encoder(), tmp_path / "hf")
    deeper = tiny_config(num_hidden_layers=3)
    with pytest.raises(CheckpointError, match="missing from the checkpoint: .*layer_2/"):
        checkpoints.load_encoder(exported, config=deeper)
    wider = tiny_config(intermediate_size=48)
    with pytest.raises(CheckpointError, match=r"shape mismatch: .*intermediate/dense/kernel: checkpoint \(16, 32\) vs model \(16, 48\)"):
        checkpoints.load_encoder(exported, config=wider)
    shallower = tiny_config(num_hidden_layers=1)
    with pytest.raises(CheckpointError, match="does not expect: .*layer_1"):
        checkpoints.load_encoder(exported, config=shallower)


def test_unknown_tensors_are_listed(tmp_path):
    exported = checkpoints.export_huggingface(_tiny_encoder(), tmp_path / "hf")
    tensors = load_file(os.path.join(exported, "model.safetensors"))
    tensors["lm_head.dense.weight"] = np.zeros((2, 2), "float32")
    save_file(tensors, os.path.join(exported, "model.safetensors"))
    with pytest.raises(CheckpointError, match="lm_head.dense.weight"):
        checkpoints.read_checkpoint(exported)
