"""The pre-training model (`heads.BertPretrainer`) and its task (`pretraining.PretrainingTask`).

The masked-LM head against a numpy computation, gathered at the masked
positions only (the vocabulary projection never runs over the sequence), its
output projection tied to the word embeddings, the heads loaded from Google
TF1, Hugging Face and this project's own checkpoints, the losses, get_config,
mixed precision, and one batch overfitted through the `Trainer`.
"""

import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from support import tiny_config
from official_bert import checkpoints
from official_bert.modeling import heads
from official_bert.tasks import pretraining
from official_bert.training import distribution
from official_bert.training import optimization
from official_bert.training import trainer as training
from official_bert.modeling.encoder import BertEncoder
from official_bert.configs import RunConfig

V, H, B, S, P = 64, 16, 2, 12, 3


def _pretrainer(seed=0, dtype=None, **overrides):
    import keras

    keras.utils.set_random_seed(seed)
    config = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **overrides)
    model = heads.BertPretrainer(BertEncoder.from_bert_config(config, dtype=dtype))
    rng = np.random.default_rng(seed)
    # Non-trivial head weights (the initializers leave biases and LayerNorm plain).
    for variable in model.head_variables().values():
        variable.assign(rng.normal(scale=0.5, size=variable.shape).astype("float32"))
    return model


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, V, size=(B, S)).astype("int32")
    return {
        "input_word_ids": ids,
        "input_mask": np.ones((B, S), "int32"),
        "input_type_ids": (np.arange(S)[None] >= S // 2).astype("int32").repeat(B, 0),
        "masked_lm_positions": np.array([[1, 4, 0], [2, 3, 9]], "int32"),
        "masked_lm_ids": rng.integers(5, V, size=(B, P)).astype("int32"),
        "masked_lm_weights": np.array([[1, 1, 0], [1, 1, 1]], "float32"),
        "next_sentence_labels": np.array([[0], [1]], "int32"),
    }


def _numpy_heads(model, sequence, pooled, positions):
    w = model.head_weights()
    gathered = np.take_along_axis(sequence, positions[..., None], axis=1)  # [B, P, H]
    h = gathered @ w["cls/predictions/transform/dense/kernel"] + w["cls/predictions/transform/dense/bias"]
    h = h * 0.5 * (1.0 + np.vectorize(math.erf)(h / math.sqrt(2.0)))  # exact GELU
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    h = (h - mean) / np.sqrt(var + 1e-12)
    h = h * w["cls/predictions/transform/LayerNorm/gamma"] + w["cls/predictions/transform/LayerNorm/beta"]
    embeddings = np.asarray(model.encoder.word_embeddings)
    mlm = h @ embeddings.T + w["cls/predictions/output_bias"]
    nsp = pooled @ w["cls/seq_relationship/output_weights"].T + w["cls/seq_relationship/output_bias"]
    return mlm, nsp


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_heads_and_losses_equal_a_numpy_computation():
    model = _pretrainer()
    features = _inputs()
    outputs = model(features)
    encoded = model.encoder({k: features[k] for k in ("input_word_ids", "input_mask",
                                                      "input_type_ids")})
    mlm, nsp = _numpy_heads(model, np.asarray(encoded["sequence_output"]),
                            np.asarray(encoded["pooled_output"]), features["masked_lm_positions"])
    assert outputs["masked_lm_logits"].shape == (B, P, V)
    assert outputs["masked_lm_logits"].dtype == tf.float32
    np.testing.assert_allclose(outputs["masked_lm_logits"], mlm, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(outputs["next_sentence_logits"], nsp, atol=2e-5, rtol=1e-5)

    # The loss: weighted masked-LM mean plus next-sentence mean (google's).
    task = pretraining.PretrainingTask(bert_config=model.encoder.config)
    normalizers = task.loss_normalizers(features)
    loss, metrics = task.loss_and_metrics(model, features, normalizers, training=False)
    labels, weights = features["masked_lm_ids"], features["masked_lm_weights"]
    mlm_xent = -np.take_along_axis(_log_softmax(mlm), labels[..., None], -1)[..., 0]
    nsp_labels = features["next_sentence_labels"][:, 0]
    nsp_xent = -_log_softmax(nsp)[np.arange(B), nsp_labels]
    expected = (mlm_xent * weights).sum() / weights.sum() + nsp_xent.mean()
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    num, den = metrics["masked_lm_accuracy"]
    assert float(den) == 5.0
    assert float(num) == float(((mlm.argmax(-1) == labels) * weights).sum())
    num, den = metrics["next_sentence_loss"]
    np.testing.assert_allclose(float(num) / float(den), nsp_xent.mean(), rtol=1e-5)


def test_vocabulary_projection_runs_at_the_masked_positions_only():
    model = _pretrainer()
    features = _inputs()
    spec = {k: tf.TensorSpec(v.shape, tf.as_dtype(v.dtype)) for k, v in features.items()
            if k in heads.PRETRAINING_INPUTS}
    graph = tf.function(lambda x: model(x)).get_concrete_function(spec).graph
    # Every op with the vocabulary as its last dimension works on B * P rows.
    vocab_ops = [op for op in graph.get_operations() for t in op.outputs
                 if t.shape.rank and t.shape[-1] == V and op.type in ("MatMul", "BatchMatMulV2")]
    assert vocab_ops, "no vocabulary projection found"
    for op in vocab_ops:
        rows = int(np.prod(op.outputs[0].shape[:-1]))
        assert rows == B * P, (op.name, op.outputs[0].shape)
    # The logits are [B, P, V] whatever the sequence length.
    longer = dict(features)
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
        longer[key] = np.concatenate([features[key], features[key]], axis=1)
    assert model(longer)["masked_lm_logits"].shape == (B, P, V)


def test_output_projection_is_the_word_embedding_variable():
    model = _pretrainer()
    embedding = model.encoder.embeddings.word_embeddings.embeddings
    assert model.mlm_output_embeddings is embedding
    # No second [V, H] matrix anywhere in the model.
    matrices = [v for v in model.trainable_variables if tuple(v.shape) == (V, H)]
    assert len(matrices) == 1 and matrices[0] is embedding
    features = _inputs()
    before = np.asarray(model(features)["masked_lm_logits"])
    # Changing the embedding of a token that is not in the input changes only
    # that token's logit: the projection reads the embedding variable.
    unused = sorted(set(range(V)) - set(features["input_word_ids"].ravel().tolist()))[0]
    value = np.asarray(embedding).copy()
    value[unused] += 1.0
    embedding.assign(value)
    after = np.asarray(model(features)["masked_lm_logits"])
    changed = np.abs(after - before).max(axis=(0, 1)) > 1e-6
    assert changed.tolist() == [i == unused for i in range(V)]
    # The MLM loss sends gradient to every row of the embedding (softmax over V).
    task = pretraining.PretrainingTask(bert_config=model.encoder.config)
    with tf.GradientTape() as tape:
        loss, _ = task.loss_and_metrics(model, features, task.loss_normalizers(features), True)
    grad = tf.convert_to_tensor(tape.gradient(loss, embedding))
    assert np.all(np.abs(np.asarray(grad)).sum(axis=1) > 0)


def _save_tf1(prefix, tensors):
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(tensors[n]) for n in names])


def _random_heads(seed):
    rng = np.random.default_rng(seed)
    return {
        "cls/predictions/transform/dense/kernel": rng.normal(size=(H, H)).astype("float32"),
        "cls/predictions/transform/dense/bias": rng.normal(size=H).astype("float32"),
        "cls/predictions/transform/LayerNorm/gamma": rng.normal(size=H).astype("float32"),
        "cls/predictions/transform/LayerNorm/beta": rng.normal(size=H).astype("float32"),
        "cls/predictions/output_bias": rng.normal(size=V).astype("float32"),
        "cls/seq_relationship/output_weights": rng.normal(size=(2, H)).astype("float32"),
        "cls/seq_relationship/output_bias": rng.normal(size=2).astype("float32"),
    }


def _assert_heads(model, expected):
    got = model.head_weights()
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_heads_load_from_google_and_hugging_face_checkpoints(tmp_path):
    from safetensors.numpy import load_file, save_file

    source = _pretrainer(seed=1)
    heads = _random_heads(2)
    # Google TF1: bert/... and cls/... names in a name-based checkpoint.
    google = tmp_path / "google"
    google.mkdir()
    tensors = dict(checkpoints.get_encoder_weights(source.encoder), **heads)
    tensors["global_step"] = np.array(7, "int64")
    _save_tf1(google / "bert_model.ckpt", tensors)
    (google / "bert_config.json").write_text(json.dumps(source.encoder.config.to_dict()))
    ckpt = checkpoints.read_checkpoint(str(google / "bert_model.ckpt"))
    model = _pretrainer(seed=3)
    assert model.load_head_weights(ckpt).heads == ["masked_lm", "next_sentence"]
    _assert_heads(model, heads)

    # Hugging Face BertForPreTraining: [out, in] matrices, tied decoder.
    plain = checkpoints.export_huggingface(source.encoder, tmp_path / "plain")
    hf = {"bert." + k: v for k, v in load_file(os.path.join(plain, "model.safetensors")).items()}
    hf.update({
        "cls.predictions.transform.dense.weight": heads["cls/predictions/transform/dense/kernel"].T.copy(),
        "cls.predictions.transform.dense.bias": heads["cls/predictions/transform/dense/bias"],
        "cls.predictions.transform.LayerNorm.weight": heads["cls/predictions/transform/LayerNorm/gamma"],
        "cls.predictions.transform.LayerNorm.bias": heads["cls/predictions/transform/LayerNorm/beta"],
        "cls.predictions.bias": heads["cls/predictions/output_bias"],
        "cls.predictions.decoder.weight": hf["bert.embeddings.word_embeddings.weight"],
        "cls.seq_relationship.weight": heads["cls/seq_relationship/output_weights"],
        "cls.seq_relationship.bias": heads["cls/seq_relationship/output_bias"],
    })
    folder = tmp_path / "hf"
    folder.mkdir()
    save_file(hf, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(source.encoder.config.to_hf_dict()))
    model = _pretrainer(seed=4)
    assert model.load_head_weights(checkpoints.read_checkpoint(str(folder))).heads == [
        "masked_lm", "next_sentence"]
    _assert_heads(model, heads)

    # A checkpoint of the encoder alone has no heads; nothing changes.
    before = model.head_weights()
    assert model.load_head_weights(checkpoints.read_checkpoint(plain)).heads == []
    _assert_heads(model, before)


def test_heads_load_from_own_pretraining_checkpoint(tmp_path):
    source = _pretrainer(seed=5)
    tf.train.Checkpoint(model=source, encoder=source.encoder).save(str(tmp_path / "run" / "ckpt"))
    config = source.encoder.config
    run = checkpoints.read_checkpoint(str(tmp_path / "run"), config)
    assert {k for k in run.weights if k.startswith("cls/")} == set(source.head_weights())
    model = _pretrainer(seed=6)
    assert model.load_head_weights(run).heads == ["masked_lm", "next_sentence"]
    _assert_heads(model, source.head_weights())
    # A checkpoint of the encoder alone has no pre-training heads.
    checkpoints.save_checkpoint(source.encoder, tmp_path / "encoder_only")
    plain = checkpoints.read_checkpoint(str(tmp_path / "encoder_only"), config)
    assert not [k for k in plain.weights if not k.startswith("bert/")]


def test_incomplete_or_misshaped_heads_are_errors():
    model = _pretrainer()
    heads = _random_heads(0)
    partial = {k: v for k, v in heads.items() if k != "cls/predictions/output_bias"}
    with pytest.raises(ValueError, match="incomplete masked_lm head.*output_bias"):
        model.load_head_weights(partial)
    wrong = dict(heads, **{"cls/predictions/output_bias": np.zeros(V + 1, "float32")})
    with pytest.raises(ValueError, match="output_bias of shape"):
        model.load_head_weights(wrong)


def test_get_config_round_trip():
    import keras

    model = _pretrainer()
    clone = heads.BertPretrainer.from_config(model.get_config())
    clone._ensure_built()
    clone.set_weights(model.get_weights())
    features = _inputs()
    np.testing.assert_array_equal(clone(features)["masked_lm_logits"],
                                  model(features)["masked_lm_logits"])
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
    assert isinstance(restored, heads.BertPretrainer)
    assert restored.encoder.config == model.encoder.config


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_outputs_float32(policy):
    model = _pretrainer(dtype=policy)
    assert model.mlm_transform.compute_dtype == policy.split("_")[1]
    assert model.mlm_output_bias.dtype == "float32"
    outputs = model(_inputs())
    for value in outputs.values():
        assert value.dtype == tf.float32
        assert np.all(np.isfinite(value))


def _train(tmp_path, config, features, steps, learning_rate, policy=None, log_steps=10):
    trainer = training.Trainer(
        pretraining.PretrainingTask(
            run_config=RunConfig(dtype=policy.split("_")[1] if policy else "float32"),
            bert_config=config),
        distribution.get_strategy("one_device"),
        training.TrainingConfig(output_dir=str(tmp_path), num_train_steps=steps,
                                log_steps=log_steps, steps_per_loop=log_steps,
                                save_checkpoints_steps=steps),
        optimizer_fn=lambda: optimization.create_optimizer(optimization.OptimizerConfig(
            learning_rate=learning_rate, num_train_steps=steps, num_warmup_steps=min(5, steps))),
        loss_scale=policy == "mixed_float16")
    log = []
    trainer.train(lambda ctx: tf.data.Dataset.from_tensors(features).repeat(),
                  len(features["input_word_ids"]), hooks=[lambda step, r: log.append(r)])
    return trainer, log


def test_bfloat16_training_steps_are_finite(tmp_path):
    config = tiny_config(vocab_size=V, hidden_size=H, num_hidden_layers=1)
    trainer, log = _train(tmp_path, config, _inputs(), steps=3, learning_rate=1e-3,
                          policy="mixed_bfloat16", log_steps=1)
    assert len(log) == 3
    assert all(np.isfinite(r["loss"]) and np.isfinite(r["masked_lm_loss"]) for r in log)
    assert trainer.model.mlm_transform.compute_dtype == "bfloat16"
    assert all(v.dtype == "float32" for v in trainer.model.trainable_variables)


def test_overfits_one_batch(tmp_path):
    """One fixed batch, repeated: the masked-LM loss falls to a fraction of ln V."""
    config = tiny_config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    rng = np.random.default_rng(0)
    batch, seq, preds = 8, 16, 4
    ids = rng.integers(5, V, size=(batch, seq)).astype("int32")
    positions = np.stack([rng.choice(np.arange(1, seq), preds, replace=False)
                          for _ in range(batch)]).astype("int32")
    features = {
        "input_word_ids": ids, "input_mask": np.ones_like(ids),
        "input_type_ids": np.zeros_like(ids), "masked_lm_positions": positions,
        "masked_lm_ids": np.take_along_axis(ids, positions, 1),
        "masked_lm_weights": np.ones((batch, preds), "float32"),
        "next_sentence_labels": rng.integers(0, 2, size=(batch, 1)).astype("int32"),
    }
    features["input_word_ids"] = features["input_word_ids"].copy()
    np.put_along_axis(features["input_word_ids"], positions, 3, axis=1)  # [MASK]-like id

    _, log = _train(tmp_path, config, features, steps=60, learning_rate=1e-2)
    first, last = log[0]["masked_lm_loss"], log[-1]["masked_lm_loss"]
    assert first > 0.8 * math.log(V)
    assert last < 0.1 * first, [r["masked_lm_loss"] for r in log]
    assert log[-1]["masked_lm_accuracy"] == 1.0
    assert log[-1]["next_sentence_accuracy"] == 1.0


@pytest.mark.parametrize("head", ["classifier", "multiple_choice", "token", "span"])
def test_task_heads_compute_in_the_encoders_mixed_policy(head):
    # A functional encoder given dtype="mixed_float16" reports float32 for
    # itself; each head must still compute in float16 and return float32.
    encoder = BertEncoder.from_bert_config(
        tiny_config(vocab_size=V, hidden_size=H, num_hidden_layers=1), dtype="mixed_float16")
    model, dense = {
        "classifier": lambda: (m := heads.BertClassifier(encoder, 3), m.classifier),
        "multiple_choice": lambda: (m := heads.BertMultipleChoice(encoder), m.choice_scorer),
        "token": lambda: (m := heads.BertTokenClassifier(encoder, 5), m.token_classifier),
        "span": lambda: (m := heads.BertSpanLabeler(encoder), m.span_labeler),
    }[head]()
    inputs = _inputs()
    if head == "multiple_choice":  # [batch, choices, seq]
        inputs = {k: tf.stack([v, v], axis=1) for k, v in inputs.items()}
    outputs = model({k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
    assert dense.compute_dtype == "float16" and dense.kernel.dtype == "float32"
    for value in tf.nest.flatten(outputs):
        assert value.dtype == tf.float32 and np.all(np.isfinite(value))
