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


def test_lamb_and_bad_values():
    config = OptimizerConfig(optimizer="lamb", num_train_steps=10, num_warmup_steps=1)
    assert type(optimization.create_optimizer(config)).__name__ == "Lamb"
    with pytest.raises(ValueError, match="optimizer 'sgd' is unknown"):
        OptimizerConfig(optimizer="sgd")
    with pytest.raises(ValueError, match="num_warmup_steps"):
        OptimizerConfig(num_train_steps=10, num_warmup_steps=20)
