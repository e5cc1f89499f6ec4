"""The draw of a new fine-tuning head, seed for seed the one transformers makes.

Hugging Face's `BertFor*.from_pretrained` (after `set_seed(seed)`, as its
example scripts call it) draws the one missing `Linear` of a task head,
`[out, H]`, as the first `out * H` normals of PyTorch's CPU generator:
`torch.manual_seed(seed)` then `normal_(0, initializer_range)`. `TorchNormal`
makes the same numbers without torch (to the last bit of float32 but for
PyTorch's vectorized cos/sin: at most 1 ulp), so `run_squad.py --seed=42`
starts from the head that transformers' `run_qa.py --seed 42` starts from.

Why it matters: on the SQuAD v1.1 acceptance recipe one epoch is decided by
the head the seed draws far more than by the data order or the dropout masks
(docs/fine_tune.md, "SQuAD: seeds"), so seed-for-seed comparisons with the
reference need the same head; with another generator the same seeds were a
different sample of heads.
"""

from __future__ import annotations

import keras
import numpy as np


def torch_normal(seed: int, shape, stddev: float, mean: float = 0.0) -> np.ndarray:
    """`torch.manual_seed(seed); torch.empty(shape).normal_(mean, stddev)` in numpy.

    PyTorch's CPU generator is the 32-bit Mersenne Twister with the reference
    seeding (`init_genrand`, as numpy's legacy seeding); a float uniform keeps
    24 bits of one draw; `normal_` on a float32 tensor of 16 or more values
    fills it with uniforms and turns each block of 16 into normals by
    Box-Muller, u1 from the first 8 and u2 from the last 8 (a tail that is not
    a whole block is redrawn as the last 16 values, overlapping the block
    before).

    Args:
        seed: int, as given to `torch.manual_seed`.
        shape: the tensor's shape as torch has it (a `Linear`'s weight is
            `[out, in]`; Keras' kernel is its transpose). At least 16 values.
        stddev: float, the standard deviation.
        mean: float.

    Returns:
        float32 numpy array of `shape`.

    Example:
    >>> [round(float(v), 6) for v in torch_normal(42, (2, 384), 0.02)[0, :3]]
    [0.038538, 0.029746, 0.018014]
    """
    size = int(np.prod(shape))
    if size < 16:
        raise ValueError(f"torch_normal draws tensors of 16 or more values, not {tuple(shape)}")
    generator = np.random.MT19937()
    generator._legacy_seeding(int(seed) & 0xFFFFFFFF)  # torch.manual_seed's init_genrand
    tail = size % 16
    raw = generator.random_raw(size + (16 if tail else 0))
    uniform = ((raw & ((1 << 24) - 1)).astype(np.float32) * np.float32(2.0 ** -24))
    values = uniform[:size].copy()
    whole = size - tail
    values[:whole] = _box_muller_16(uniform[:whole].reshape(-1, 16)).reshape(-1)
    if tail:
        values[size - 16:] = _box_muller_16(uniform[size:].reshape(1, 16)).reshape(-1)
    return (values * np.float32(stddev) + np.float32(mean)).reshape(shape)


def _box_muller_16(blocks):
    """PyTorch's `normal_fill_16` on [n, 16] uniforms (standard normals)."""
    radius = np.sqrt(np.float32(-2.0) * np.log(np.float32(1.0) - blocks[:, :8]))
    theta = np.float32(2.0 * np.pi) * blocks[:, 8:]
    return np.concatenate([radius * np.cos(theta), radius * np.sin(theta)], axis=1)


@keras.saving.register_keras_serializable(package="official_bert")
class TorchNormal(keras.initializers.Initializer):
    """A Dense kernel `[in, out]` drawn as PyTorch draws the `[out, in]` weight
    of a fresh `Linear` right after `torch.manual_seed(seed)`: N(0, stddev),
    untruncated (see `torch_normal`).

    Args:
        stddev: float. The standard deviation (`initializer_range`).
        seed: int. The run's seed (`--seed`).

    Example:
    >>> dense = keras.layers.Dense(2, kernel_initializer=TorchNormal(0.02, seed=42))
    >>> dense.build((None, 384))
    >>> bool(np.allclose(dense.kernel.numpy(), torch_normal(42, (2, 384), 0.02).T))
    True
    """

    def __init__(self, stddev: float = 0.02, seed: int = 0):
        self.stddev = stddev
        self.seed = seed

    def __call__(self, shape, dtype=None):
        if len(shape) != 2:
            raise ValueError(f"TorchNormal draws 2-D kernels, not shape {tuple(shape)}")
        kernel = torch_normal(self.seed, (shape[1], shape[0]), self.stddev).T
        return keras.ops.convert_to_tensor(np.ascontiguousarray(kernel), dtype=dtype or "float32")

    def get_config(self):
        return {"stddev": self.stddev, "seed": self.seed}
