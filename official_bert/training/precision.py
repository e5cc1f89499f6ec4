"""--dtype at run time: the Keras policy a run builds its model under, and the
log line that says what the model computes in.

The flag's values and their policies are `configs.DTYPE_POLICIES`
(`RunConfig.dtype_policy` checks a value without TensorFlow).
"""

from __future__ import annotations

import keras
from absl import logging


def use_policy(policy: str | None) -> None:
    """Builds every later model under a mixed-precision policy (--dtype's,
    `RunConfig.dtype_policy`); None (float32, Keras' default) sets none."""
    if policy:
        keras.mixed_precision.set_global_policy(policy)


def log_precision(model, dtype: str) -> None:
    """Logs the dtype `model` computes in (its encoder's layers', which its
    heads follow) and keeps its variables in, for --dtype."""
    layer = getattr(getattr(model, "encoder", model), "embeddings", model)
    logging.info("%s computes in %s, variables in %s (--dtype=%s)", type(model).__name__,
                 layer.compute_dtype, layer.variable_dtype, dtype)
