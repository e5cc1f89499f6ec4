import keras
import numpy as np
import pytest

from official_bert.training import optimization
from official_bert.training.optimization import OptimizerConfig, WarmupLinearDecay


def test_warmup_then_linear_decay_values():
    schedule = WarmupLinearDecay(1e-4, total_steps=100, warmup_steps=10)
    got = [float(schedule(s)) for s in (0, 1, 5, 10, 20, 55, 99, 100, 120)]
    expected = [0.0, 1e-5, 5e-5, 1e-4, 1e-4 * 80 / 90, 1e-4 * 45 / 90, 1e-4 / 90, 0.0, 0.0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-12)
    no_warmup = WarmupLinearDecay(2e-5, total_steps=4, warmup_steps=0)
    np.testing.assert_allclose([float(no_warmup(s)) for s in range(5)],
                               [2e-5, 1.5e-5, 1e-5, 5e-6, 0.0], rtol=1e-5)


def test_weight_decay_skips_layer_norm_and_bias():
    keras.utils.set_random_seed(0)
    dense = keras.layers.Dense(3)
    norm = keras.layers.LayerNormalization()
    dense.build((None, 3))
    norm.build((None, 3))
    variables = dense.trainable_variables + norm.trainable_variables
    before = [np.array(v) for v in variables]
    optimizer = optimization.create_optimizer(OptimizerConfig(
        learning_rate=0.5, num_train_steps=10, num_warmup_steps=0, weight_decay=0.1))
    optimizer.build(variables)
    # Zero gradients: only weight decay moves a variable.
    optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])
    after = {v.path: np.array(v) for v in variables}
    kernel = [p for p in after if p.endswith("kernel")][0]
    np.testing.assert_allclose(after[kernel], before[0] * (1 - 0.5 * 0.1), rtol=1e-6)
    for path, old in zip([v.path for v in variables][1:], before[1:]):
        np.testing.assert_array_equal(after[path], old, err_msg=path)


def test_adamw_matches_adam_algorithm_one():
    # Against a numpy AdamW (Kingma & Ba's Algorithm 1 plus decoupled decay, as
    # torch.optim.AdamW): epsilon on the bias-corrected sqrt(v_hat). Small and
    # often-zero gradients (an embedding row a batch rarely holds) are where
    # Keras's own Adam, epsilon on the uncorrected sqrt(v), differs.
    rng = np.random.default_rng(0)
    grads = rng.normal(scale=3e-5, size=(12, 4)).astype("float32")
    grads[rng.random(grads.shape) < 0.6] = 0.0
    lr, wd, eps, b1, b2 = 1e-3, 0.01, 1e-6, 0.9, 0.999
    variable = keras.Variable(np.ones(4, "float32"))
    optimizer = optimization.AdamWeightDecay(learning_rate=lr, weight_decay=wd, epsilon=eps,
                                             beta_1=b1, beta_2=b2)
    keras_adam = keras.optimizers.AdamW(learning_rate=lr, weight_decay=wd, epsilon=eps)
    keras_variable = keras.Variable(np.ones(4, "float32"))
    p, m, v = np.ones(4), np.zeros(4), np.zeros(4)
    for t, g in enumerate(grads.astype("float64"), start=1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        optimizer.apply_gradients([(grads[t - 1], variable)])
        keras_adam.apply_gradients([(grads[t - 1], keras_variable)])
    np.testing.assert_allclose(np.array(variable), p, rtol=0, atol=2e-7)
    assert np.abs(np.array(keras_variable) - p).max() > 1e-5  # the difference is real


def _small_model_variables(seed=0):
    # A kernel and a bias (Dense) and a LayerNorm gamma and beta, all away
    # from their initial values so that every norm matters.
    rng = np.random.default_rng(seed)
    dense = keras.layers.Dense(3)
    norm = keras.layers.LayerNormalization()
    dense.build((None, 4))
    norm.build((None, 3))
    variables = dense.trainable_variables + norm.trainable_variables
    assert [v.name for v in variables] == ["kernel", "bias", "gamma", "beta"]
    for v, value in zip(variables, (rng.normal(size=(4, 3)), rng.normal(scale=0.1, size=3),
                                    1 + rng.normal(scale=0.1, size=3),
                                    rng.normal(scale=0.1, size=3))):
        v.assign(value.astype("float32"))
    return variables


def _numpy_lamb(params, grads, lr, wd, eps=1e-6, b1=0.9, b2=0.999, excluded=()):
    """BERT's LAMB (tensorflow/models' `LAMB`) in float64, one list of steps."""
    params = {k: np.asarray(p, "float64") for k, p in params.items()}
    m = {k: np.zeros_like(p) for k, p in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    for t, step_grads in enumerate(grads, start=1):
        for k, g in step_grads.items():
            g = np.asarray(g, "float64")
            m[k] = b1 * m[k] + (1 - b1) * g
            v[k] = b2 * v[k] + (1 - b2) * g * g
            r = (m[k] / (1 - b1 ** t)) / (np.sqrt(v[k] / (1 - b2 ** t)) + eps)
            trust = 1.0
            if k not in excluded:
                r = r + wd * params[k]
                w_norm, r_norm = np.linalg.norm(params[k]), np.linalg.norm(r)
                trust = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
            params[k] = params[k] - lr * trust * r
    return params


@pytest.mark.parametrize("steps", [1, 2])
def test_lamb_matches_numpy_lamb(steps):
    lr, wd = 0.01, 0.5  # decay large enough to change ||r|| and so the trust ratio
    variables = _small_model_variables()
    names = [v.name for v in variables]
    rng = np.random.default_rng(1)
    grads = [{n: rng.normal(scale=s, size=v.shape).astype("float32")
              for n, v, s in zip(names, variables, (1.0, 0.3, 0.2, 1e-3))}
             for _ in range(steps)]
    start = {n: np.array(v) for n, v in zip(names, variables)}
    optimizer = optimization.Lamb(learning_rate=lr, weight_decay=wd)
    for step_grads in grads:
        optimizer.apply_gradients([(step_grads[n], v) for n, v in zip(names, variables)])
    got = {n: np.array(v) for n, v in zip(names, variables)}
    no_adaptation = ("bias", "gamma", "beta")
    expected = _numpy_lamb(start, grads, lr, wd, excluded=no_adaptation)
    for n in names:
        np.testing.assert_allclose(got[n], expected[n], rtol=0, atol=1e-6, err_msg=n)
    # The checks have teeth: without the decay in r (and so in ||r||) the
    # kernel moves elsewhere, and the excluded parameters would move
    # elsewhere with decay and a trust ratio of their own.
    undecayed = _numpy_lamb(start, grads, lr, 0.0, excluded=no_adaptation)
    assert np.abs(got["kernel"] - undecayed["kernel"]).max() > 1e-3
    adapted = _numpy_lamb(start, grads, lr, wd)
    for n in no_adaptation:
        assert np.abs(adapted[n] - expected[n]).max() > 1e-3, n


def test_lamb_decay_is_inside_the_trust_ratio():
    # Zero gradients: r = weight_decay * w, so the trust ratio is
    # 1 / weight_decay and the kernel shrinks by the learning rate itself,
    # whatever the decay rate. Keras's Lamb shrinks it by lr * weight_decay
    # (decoupled decay, then a zero update). LayerNorm and bias do not move.
    lr, wd = 0.1, 0.01

    def one_zero_step(optimizer):
        variables = _small_model_variables()
        before = [np.array(v) for v in variables]
        optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])
        return before, [np.array(v) for v in variables]

    before, ours = one_zero_step(optimization.Lamb(learning_rate=lr, weight_decay=wd))
    np.testing.assert_allclose(ours[0], before[0] * (1 - lr), rtol=1e-6)
    for new, old, name in zip(ours[1:], before[1:], ["bias", "gamma", "beta"]):
        np.testing.assert_array_equal(new, old, err_msg=name)
    _, theirs = one_zero_step(keras.optimizers.Lamb(learning_rate=lr, weight_decay=wd))
    for new, old in zip(theirs, before):  # every variable, LayerNorm and bias too
        np.testing.assert_allclose(new, old * (1 - lr * wd), rtol=1e-6)


def test_lamb_differs_from_keras_lamb():
    # Same inputs, Keras's `Lamb` (decay outside the trust ratio, LayerNorm
    # and bias adapted): the kernel and the excluded parameters both differ.
    rng = np.random.default_rng(2)
    grads = [[rng.normal(size=v.shape).astype("float32") for v in _small_model_variables()]
             for _ in range(2)]
    results = []
    for optimizer in (optimization.Lamb(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6),
                      keras.optimizers.Lamb(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6)):
        optimizer.exclude_from_weight_decay(var_names=list(optimization.NO_WEIGHT_DECAY))
        variables = _small_model_variables()
        for step_grads in grads:
            optimizer.apply_gradients(zip(step_grads, variables))
        results.append([np.array(v) for v in variables])
    for ours, theirs, name in zip(*results, ["kernel", "bias", "gamma", "beta"]):
        assert np.abs(ours - theirs).max() > 1e-4, name


def test_lamb_config_round_trip():
    optimizer = optimization.create_optimizer(OptimizerConfig(
        optimizer="lamb", learning_rate=2e-3, num_train_steps=50, num_warmup_steps=5,
        weight_decay=0.02, beta_2=0.98, epsilon=1e-8))
    config = optimizer.get_config()
    assert (config["weight_decay"], config["beta_1"], config["beta_2"], config["epsilon"]) == (
        0.02, 0.9, 0.98, 1e-8)
    restored = optimization.Lamb.from_config(dict(config))  # from_config edits its argument
    assert restored.get_config() == config
    assert isinstance(restored._learning_rate, WarmupLinearDecay)
    # Through Keras's registry too, and the LayerNorm/bias exclusion comes
    # with the class, not with `create_optimizer`.
    revived = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(revived) is optimization.Lamb
    variables = _small_model_variables()
    before = [np.array(v) for v in variables]
    revived.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])
    for v, old in zip(variables[1:], before[1:]):
        np.testing.assert_array_equal(np.array(v), old, err_msg=v.name)


def test_lamb_and_bad_values():
    config = OptimizerConfig(optimizer="lamb", num_train_steps=10, num_warmup_steps=1)
    optimizer = optimization.create_optimizer(config)
    assert type(optimizer) is optimization.Lamb
    assert not isinstance(optimizer, keras.optimizers.Lamb)
    assert isinstance(optimizer._learning_rate, WarmupLinearDecay)
    assert (optimizer.weight_decay, optimizer.epsilon) == (0.01, 1e-6)
    with pytest.raises(ValueError, match="--optimizer='sgd' is unknown"):
        OptimizerConfig(optimizer="sgd", num_train_steps=10, num_warmup_steps=1)
    with pytest.raises(ValueError, match="num_warmup_steps"):
        OptimizerConfig(num_train_steps=10, num_warmup_steps=20)
