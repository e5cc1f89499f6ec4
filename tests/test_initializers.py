"""`TorchNormal`: a new fine-tuning head drawn as transformers draws it.

The known answers are PyTorch 2.13's own numbers (`torch.manual_seed(seed)`
then `torch.empty(shape).normal_(0, std)`), printed once with torch; the
project does not import torch. PyTorch computes cos/sin with vector math, so
values agree to a few float32 ulps (rtol 5e-7), not bit for bit.
"""

import keras
import numpy as np
import pytest

from support import tiny_config
from official_bert.modeling import heads
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.modeling.initializers import TorchNormal, torch_normal

# torch.manual_seed(42); torch.empty(2, 384).normal_(0, 0.02): transformers'
# BertForQuestionAnswering `qa_outputs.weight` at --seed 42 (all-MiniLM-L6-v2).
TORCH_SEED_42_ROW_0_FIRST_4 = [0.038538303, 0.029745681, 0.018014343, -0.042110417]
TORCH_SEED_42_ROW_1_LAST_3 = [-0.032068677, -0.008596436, 0.011523175]
# torch.manual_seed(2**31 + 5); torch.empty(9, 40).normal_(0, 1): 360 values,
# not a whole number of blocks of 16 (the last 16 are redrawn).
TORCH_TAIL_FIRST_3 = [1.5191803, -1.6993324, -0.4651806]
TORCH_TAIL_LAST_10 = [-0.2885846, 0.5111913, -0.3096781, -0.5012977, -2.4340644,
                      -0.8081707, -0.2943531, -0.5277297, -0.9383673, 0.0128864]


def test_torch_normal_gives_pytorchs_numbers():
    head = torch_normal(42, (2, 384), 0.02)
    assert head.dtype == np.float32
    np.testing.assert_allclose(head[0, :4], TORCH_SEED_42_ROW_0_FIRST_4, rtol=5e-7, atol=1e-9)
    np.testing.assert_allclose(head[1, -3:], TORCH_SEED_42_ROW_1_LAST_3, rtol=5e-7, atol=1e-9)
    tail = torch_normal(2**31 + 5, (9, 40), 1.0).reshape(-1)
    np.testing.assert_allclose(tail[:3], TORCH_TAIL_FIRST_3, rtol=5e-7, atol=1e-7)
    np.testing.assert_allclose(tail[-10:], TORCH_TAIL_LAST_10, rtol=5e-7, atol=1e-7)


def test_torch_normal_is_a_standard_normal_scaled():
    values = torch_normal(0, (4096, 16), 0.02).reshape(-1)
    assert abs(values.mean()) < 0.02 * 0.02
    assert abs(values.std() / 0.02 - 1.0) < 0.01
    assert np.abs(values).max() > 4 * 0.02  # untruncated
    assert not np.array_equal(torch_normal(1, (2, 384), 0.02), torch_normal(2, (2, 384), 0.02))
    with pytest.raises(ValueError, match="16 or more"):
        torch_normal(0, (3, 5), 0.02)


def test_every_fine_tuning_head_draws_the_seeds_torch_weight():
    keras.utils.set_random_seed(1)
    encoder = BertEncoder.from_bert_config(tiny_config())
    hidden, std = encoder.config.hidden_size, encoder.config.initializer_range
    cases = [(heads.BertSpanLabeler(encoder, seed=42), "span_labeler", 2),
             (heads.BertClassifier(encoder, 3, seed=42), "classifier", 3),
             (heads.BertTokenClassifier(encoder, 5, seed=42), "token_classifier", 5)]
    for model, layer, out in cases:
        model(dummy_inputs())
        kernel = getattr(model, layer).kernel.numpy()
        np.testing.assert_array_equal(kernel, torch_normal(42, (out, hidden), std).T)
        assert not getattr(model, layer).bias.numpy().any()
    choice = heads.BertMultipleChoice(encoder, seed=42)
    choice({k: v[:, None] for k, v in dummy_inputs().items()})
    np.testing.assert_array_equal(choice.choice_scorer.kernel.numpy(),
                                  torch_normal(42, (1, hidden), std).T)
    # No seed: Keras' global seed, as before.
    unseeded = heads.BertSpanLabeler(encoder)
    unseeded(dummy_inputs())
    assert not np.array_equal(unseeded.span_labeler.kernel.numpy(),
                              torch_normal(42, (2, hidden), std).T)


def test_initializer_round_trips():
    initializer = TorchNormal(stddev=0.05, seed=7)
    revived = keras.initializers.deserialize(keras.initializers.serialize(initializer))
    np.testing.assert_array_equal(revived((8, 4)).numpy(), initializer((8, 4)).numpy())
