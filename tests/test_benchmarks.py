"""The benchmarks' arithmetic (their timings are never asserted)."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks import common, step_floor  # noqa: E402
from official_bert.modeling.configs import BertConfig  # noqa: E402


def test_step_floor_runs_exactly_the_counted_matmul_flops():
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32)
    batch, seq, masked = 2, 8, 3
    import tensorflow as tf

    run, flops = step_floor.step_matmuls(config, batch, seq, masked, tf.float32,
                                         jit_compile=False)
    per_token = common.pretraining_flops_per_token(2, 16, 32, seq, 50, masked)
    assert flops == batch * seq * per_token
    # Every product is run: 6 dense kinds x 3 products and 6 attention products per
    # layer, 2 head denses x 3, each reduced to one finite number.
    outputs = run()
    assert len(outputs) == 2 * (6 * 3 + 6) + 2 * 3
    assert np.all(np.isfinite([o.numpy() for o in outputs]))
