"""Optimizers for BERT: AdamW or LAMB, warm-up then linear decay, clipping.

BERT's recipe: Adam with decoupled weight decay 0.01 (none on LayerNorm
parameters and biases), beta = (0.9, 0.999), epsilon 1e-6, the learning rate
rising linearly from 0 over the warm-up steps and then falling linearly to 0 at
the last step, and gradients clipped to a global norm of 1.0. For very large
batches, `Lamb` is the LAMB of You et al. 2019 as tensorflow/models and NVIDIA
pre-train BERT with it (not `keras.optimizers.Lamb`).

With a time budget (`TimeBudget`, --max_train_minutes) the same shape is drawn
over the training time instead of the steps (`BudgetLinearDecay`, as Cramming
and 24hBERT schedule a budget): warm-up over the first part of the budget, 0
when it is spent. The `Trainer` advances the budget's clock, a checkpointed
variable the schedule reads inside the training step (`training.budget`).

Gradient accumulation and clipping are done by `training.Trainer` (it sums the gradients of
several micro-batches before one `apply_gradients`), not by Keras's
`gradient_accumulation_steps`, which cannot run under `tf.distribute`
(MirroredStrategy raises a `merge_call` error inside its `cond`).
"""

from __future__ import annotations

import dataclasses

import keras
from keras import ops

from official_bert.configs import OPTIMIZERS, TrainingSettings
from official_bert.errors import UserError
from official_bert.settings import default_of
from official_bert.training.budget import TimeBudget

# Substrings of variable names that get no weight decay: LayerNorm's gamma and
# beta, and every bias (the MLM output bias included).
NO_WEIGHT_DECAY = ("gamma", "beta", "bias")


@dataclasses.dataclass
class OptimizerConfig:
    """Optimizer and learning-rate schedule settings.

    The settings that are flags (`learning_rate`, `optimizer`) default to
    their flags' defaults (`configs.TrainingSettings`); the run's length has no
    default (a fine-tuning run derives it from its epochs). `of_run` takes
    them from a `RunConfig`.

    Args:
        num_train_steps: int. Optimizer updates in the whole run; the rate
            reaches 0 there.
        num_warmup_steps: int. Updates of linear warm-up from 0.
        learning_rate: float. Peak learning rate, reached at the end of warm-up.
        optimizer: str. One of `configs.OPTIMIZERS`: "adamw" (BERT) or "lamb"
            (BERT's LAMB, for very large pre-training batches).
        weight_decay: float. Decoupled weight decay rate.
        beta_1: float. Adam's first-moment decay.
        beta_2: float. Adam's second-moment decay.
        epsilon: float. Adam's epsilon (1e-6 in BERT).
        time_budget: a `TimeBudget`, or None. When given, the learning rate
            follows the budget's clock (`BudgetLinearDecay`), not the steps.

    Global-norm clipping is `TrainingConfig.clip_norm`: the `Trainer` clips the
    cross-replica gradient sum (Keras would clip each replica's part).
    """

    num_train_steps: int
    num_warmup_steps: int
    learning_rate: float = default_of(TrainingSettings, "learning_rate")
    optimizer: str = default_of(TrainingSettings, "optimizer")
    weight_decay: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    time_budget: TimeBudget | None = None

    @classmethod
    def of_run(cls, run_config: TrainingSettings, num_train_steps: int, num_warmup_steps: int,
               time_budget: TimeBudget | None = None) -> "OptimizerConfig":
        """The optimizer of a run: its flags (`learning_rate`, `optimizer`) from
        `run_config`'s training part, the schedule's length as the run derived it."""
        return cls(num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
                   learning_rate=run_config.learning_rate, optimizer=run_config.optimizer,
                   time_budget=time_budget)

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise UserError(
                f"--optimizer={self.optimizer!r} is unknown; use one of "
                f"{', '.join(OPTIMIZERS)}"
            )
        if not 0 < self.learning_rate < float("inf"):
            raise UserError(
                f"--learning_rate must be positive, got {self.learning_rate}"
            )
        if self.num_train_steps <= 0:
            raise UserError(
                f"--num_train_steps must be positive, got {self.num_train_steps}"
            )
        if not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise UserError(
                f"--num_warmup_steps ({self.num_warmup_steps}) must be between 0 "
                f"and the training steps ({self.num_train_steps})"
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


class BudgetLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """`WarmupLinearDecay` over a time budget: the learning rate is a function
    of the fraction f of the budget spent, not of the step.

    lr(f) = peak * f / w            for f < w (w: the warm-up fraction)
          = peak * (1 - f) / (1 - w) afterwards, and 0 from f = 1 on

    The step Keras passes is ignored; f is read from the `TimeBudget`'s
    variable each time the rate is needed (inside the training step, so it
    moves with every update). Not serializable: a schedule without its
    running clock would mean nothing.

    Args:
        peak: float. The learning rate at the end of warm-up.
        budget: the `TimeBudget` whose clock it reads.

    Example:
    >>> budget = TimeBudget(seconds=1000, warmup_fraction=0.1)
    >>> schedule = BudgetLinearDecay(1e-4, budget)
    >>> rates = []
    >>> for seconds in (0, 50, 100, 550, 1000):
    ...     _ = budget.elapsed.assign(seconds)
    ...     rates.append(round(float(schedule(0)), 7))
    >>> rates
    [0.0, 5e-05, 0.0001, 5e-05, 0.0]
    """

    def __init__(self, peak: float, budget: TimeBudget):
        self.peak = peak
        self.budget = budget

    def __call__(self, step):
        del step  # the clock, not the step, sets the rate
        spent = self.budget.fraction()
        warmup = self.budget.warmup_fraction
        warming = self.peak * spent / max(warmup, 1e-12)
        decaying = self.peak * (1.0 - spent) / max(1.0 - warmup, 1e-12)
        rate = ops.where(spent < warmup, warming, decaying)
        return ops.maximum(rate, 0.0)

    def get_config(self):
        raise TypeError("BudgetLinearDecay reads a running clock (a TimeBudget's variable) "
                        "and cannot be serialized: rebuild it with the budget")


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


@keras.saving.register_keras_serializable(package="official_bert")
class Lamb(keras.optimizers.Optimizer):
    """LAMB as BERT is pre-trained with it (You et al. 2019, arXiv:1904.00962).

    Per variable w, at step t (as tensorflow/models' `LAMB` and NVIDIA's BERT
    LAMB, bias correction included):

        m = beta_1 * m + (1 - beta_1) * g        m_hat = m / (1 - beta_1^t)
        v = beta_2 * v + (1 - beta_2) * g^2      v_hat = v / (1 - beta_2^t)
        r = m_hat / (sqrt(v_hat) + epsilon) + weight_decay * w
        trust = ||w|| / ||r||   (1.0 if either norm is 0)
        w = w - learning_rate * trust * r

    The weight decay is inside r, so it counts in ||r|| and is scaled by the
    trust ratio with the Adam step; `keras.optimizers.Lamb` instead decays w
    outside (times the learning rate only) before a trust ratio of the Adam
    step alone, and adapts LayerNorm parameters and biases too. Here the
    variables whose name matches `NO_WEIGHT_DECAY` (LayerNorm's gamma and
    beta, every bias) get neither decay nor layer adaptation: a plain
    m_hat / (sqrt(v_hat) + epsilon) step times the learning rate. That is the
    exclusion `AdamWeightDecay` gets in `create_optimizer`, set here in the
    constructor so that `Lamb()` and `Lamb.from_config` are BERT's LAMB; call
    `exclude_from_weight_decay` before `build` to choose others (one list
    serves both, as tensorflow/models' `exclude_from_layer_adaptation`
    defaults to its `exclude_from_weight_decay`).

    Args:
        learning_rate: float or `LearningRateSchedule`. The step size before
            the trust ratio.
        beta_1: float. First-moment decay.
        beta_2: float. Second-moment decay.
        epsilon: float. Added to the bias-corrected sqrt(v_hat) (1e-6 in BERT).
        weight_decay: float or None. Decay rate inside the update (None or 0:
            none).
        name: str or None. The optimizer's name.
        **kwargs: Other `keras.optimizers.Optimizer` arguments (`clipnorm`,
            `global_clipnorm`, ...).

    Example:
    >>> opt = Lamb(learning_rate=0.1, weight_decay=0.01)
    >>> kernel = keras.Variable([[3.0, 4.0]], name="kernel")
    >>> _ = opt.apply_gradients([(keras.ops.convert_to_tensor([[1.0, -1.0]]), kernel)])
    >>> # r ~ (1.03, -0.96), ||w|| = 5: a step of 0.1 * 5 along r / ||r||.
    >>> [round(float(x), 4) for x in keras.ops.convert_to_numpy(kernel)[0]]
    [2.6342, 4.3409]
    """

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        weight_decay=0.01,
        name=None,
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate, weight_decay=weight_decay, name=name, **kwargs
        )
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        # The slot names of Keras's Adam and Lamb.
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"]
        )

    def _apply_weight_decay(self, variables):
        # Keras would decay every variable by lr * weight_decay before
        # `update_step`; LAMB's decay is part of the update (and so of its
        # trust ratio), done in `update_step`.
        return

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        step = ops.cast(self.iterations + 1, dtype)
        beta_1_power = ops.power(ops.cast(self.beta_1, dtype), step)
        beta_2_power = ops.power(ops.cast(self.beta_2, dtype), step)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        m_hat = ops.divide(m, 1 - beta_1_power)
        v_hat = ops.divide(v, 1 - beta_2_power)
        update = ops.divide(m_hat, ops.add(ops.sqrt(v_hat), self.epsilon))
        # One exclusion for decay and adaptation: a LayerNorm gamma near 1 or
        # a bias near 0 has a norm that says nothing about its step size.
        if not self._use_weight_decay(variable):
            self.assign_sub(variable, ops.multiply(update, lr))
            return
        if self.weight_decay:
            update = ops.add(update, ops.multiply(variable, ops.cast(self.weight_decay, dtype)))
        w_norm = ops.sqrt(ops.sum(ops.square(variable)))
        r_norm = ops.sqrt(ops.sum(ops.square(update)))
        # A zero-initialized kernel, or a zero update, keeps the plain step.
        trust = ops.where(
            ops.logical_and(ops.greater(w_norm, 0), ops.greater(r_norm, 0)),
            ops.divide(w_norm, r_norm),
            ops.ones_like(w_norm),
        )
        self.assign_sub(variable, ops.multiply(update, ops.multiply(lr, trust)))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
            }
        )
        return config


# The class of each of --optimizer's choices, `configs.OPTIMIZERS`
# (tests/test_defaults.py checks that none lacks one).
OPTIMIZER_CLASSES = {"adamw": AdamWeightDecay, "lamb": Lamb}


def create_optimizer(config: OptimizerConfig) -> keras.optimizers.Optimizer:
    """Builds the optimizer; create it under the distribution strategy's scope.

    Example:
    >>> opt = create_optimizer(OptimizerConfig(learning_rate=2e-5,
    ...     num_train_steps=1000, num_warmup_steps=100))
    >>> type(opt).__name__
    'AdamWeightDecay'
    """
    if config.time_budget is not None:
        schedule = BudgetLinearDecay(config.learning_rate, config.time_budget)
    else:
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
    optimizer = OPTIMIZER_CLASSES[config.optimizer](**common)
    # Lamb sets the same exclusion itself (for its trust ratio too).
    optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))
    return optimizer
