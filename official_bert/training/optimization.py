"""Optimizers for BERT: AdamW or Lamb, warm-up then linear decay, clipping.

BERT's recipe: Adam with decoupled weight decay 0.01 (none on LayerNorm
parameters and biases), beta = (0.9, 0.999), epsilon 1e-6, the learning rate
rising linearly from 0 over the warm-up steps and then falling linearly to 0 at
the last step, and gradients clipped to a global norm of 1.0.

Gradient accumulation and clipping are done by `training.Trainer` (it sums the gradients of
several micro-batches before one `apply_gradients`), not by Keras's
`gradient_accumulation_steps`, which cannot run under `tf.distribute`
(MirroredStrategy raises a `merge_call` error inside its `cond`).
"""

from __future__ import annotations

import dataclasses

import keras
from keras import ops

# Substrings of variable names that get no weight decay: LayerNorm's gamma and
# beta, and every bias (the MLM output bias included).
NO_WEIGHT_DECAY = ("gamma", "beta", "bias")

OPTIMIZERS = ("adamw", "lamb")


@dataclasses.dataclass
class OptimizerConfig:
    """Optimizer and learning-rate schedule settings.

    Args:
        learning_rate: float. Peak learning rate, reached at the end of warm-up.
        num_train_steps: int. Optimizer updates in the whole run; the rate
            reaches 0 there.
        num_warmup_steps: int. Updates of linear warm-up from 0.
        optimizer: str. "adamw" (BERT) or "lamb" (large batches).
        weight_decay: float. Decoupled weight decay rate.
        beta_1: float. Adam's first-moment decay.
        beta_2: float. Adam's second-moment decay.
        epsilon: float. Adam's epsilon (1e-6 in BERT).

    Global-norm clipping is `TrainingConfig.clip_norm`: the `Trainer` clips the
    cross-replica gradient sum (Keras would clip each replica's part).
    """

    learning_rate: float = 1e-4
    num_train_steps: int = 100_000
    num_warmup_steps: int = 10_000
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"optimizer {self.optimizer!r} is unknown; use one of "
                f"{', '.join(OPTIMIZERS)}"
            )
        if self.learning_rate <= 0:
            raise ValueError(
                f"learning_rate must be positive, got {self.learning_rate}"
            )
        if self.num_train_steps <= 0:
            raise ValueError(
                f"num_train_steps must be positive, got {self.num_train_steps}"
            )
        if not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise ValueError(
                f"num_warmup_steps ({self.num_warmup_steps}) must be between 0 "
                f"and num_train_steps ({self.num_train_steps})"
            )


@keras.saving.register_keras_serializable(package="official_bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `peak`, then linear decay to 0.

    lr(step) = peak * step / warmup                      for step < warmup
             = peak * (total - step) / (total - warmup)  afterwards

    (as Hugging Face's `get_linear_schedule_with_warmup`; google-research/bert
    decays from the start, so its rate drops slightly at the end of warm-up.)

    Args:
        peak: float. The learning rate at the end of warm-up.
        total_steps: int. Step at which the rate reaches 0.
        warmup_steps: int. Length of the warm-up.

    Example:
    >>> schedule = WarmupLinearDecay(1e-4, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(s)), 7) for s in (0, 5, 10, 55, 100)]
    [0.0, 5e-05, 0.0001, 5e-05, 0.0]
    """

    def __init__(self, peak, total_steps, warmup_steps):
        self.peak = peak
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = float(max(self.warmup_steps, 1))
        decay_span = float(max(self.total_steps - self.warmup_steps, 1))
        warming = self.peak * step / warmup
        decaying = self.peak * (float(self.total_steps) - step) / decay_span
        rate = ops.where(step < self.warmup_steps, warming, decaying)
        return ops.maximum(rate, 0.0)

    def get_config(self):
        return {
            "peak": self.peak,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
        }


@keras.saving.register_keras_serializable(package="official_bert")
class AdamWeightDecay(keras.optimizers.AdamW):
    """AdamW with epsilon added to the bias-corrected sqrt(v_hat).

    Keras's Adam folds the bias correction into the step size and adds epsilon
    to the uncorrected sqrt(v), so its epsilon acts as
    epsilon / sqrt(1 - beta_2^t): 32x larger at the first step and still 2x
    after 280 steps. With BERT's epsilon of 1e-6 that is the size of the
    gradients of the word embeddings of tokens a batch rarely holds, so their
    updates come out damped. This is Adam's Algorithm 1 (as `torch.optim.AdamW`
    and the reference fine-tuning results compute it):
    m_hat / (sqrt(v_hat) + epsilon), weight decay unchanged (decoupled, times
    the learning rate).

    Example:
    >>> opt = AdamWeightDecay(learning_rate=1e-3, weight_decay=0.01, epsilon=1e-6)
    >>> v = keras.Variable([1.0, 2.0])
    >>> _ = opt.apply_gradients([(keras.ops.convert_to_tensor([0.5, -0.5]), v)])
    >>> [round(float(x), 5) for x in keras.ops.convert_to_numpy(v)]  # -lr * sign(g), less decay
    [0.99899, 2.00098]
    """

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        beta_1_power = ops.power(ops.cast(self.beta_1, variable.dtype), step)
        beta_2_power = ops.power(ops.cast(self.beta_2, variable.dtype), step)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        if self.amsgrad:
            v_hat = self._velocity_hats[self._get_variable_index(variable)]
            self.assign(v_hat, ops.maximum(v_hat, v))
            v = v_hat
        denominator = ops.add(ops.divide(ops.sqrt(v), ops.sqrt(1 - beta_2_power)), self.epsilon)
        self.assign_sub(variable, ops.divide(ops.multiply(m, lr / (1 - beta_1_power)),
                                             denominator))


def create_optimizer(config: OptimizerConfig) -> keras.optimizers.Optimizer:
    """Builds the optimizer; create it under the distribution strategy's scope.

    Example:
    >>> opt = create_optimizer(OptimizerConfig(learning_rate=2e-5,
    ...     num_train_steps=1000, num_warmup_steps=100))
    >>> type(opt).__name__
    'AdamWeightDecay'
    """
    schedule = WarmupLinearDecay(
        config.learning_rate, config.num_train_steps, config.num_warmup_steps
    )
    common = dict(
        learning_rate=schedule,
        weight_decay=config.weight_decay,
        beta_1=config.beta_1,
        beta_2=config.beta_2,
        epsilon=config.epsilon,
    )
    if config.optimizer == "lamb":
        optimizer = keras.optimizers.Lamb(**common)
    else:
        optimizer = AdamWeightDecay(**common)
    optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))
    return optimizer
