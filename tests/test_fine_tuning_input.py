"""The shared fine-tuning input pipeline (`input_pipeline.numpy_dataset`): every example
once in evaluation, and dynamic padding that cuts only columns that are padding
in every row of a batch."""

import numpy as np
import pytest

from official_bert import configs
from official_bert.training import input_pipeline
from official_bert.configs import RunConfig


class _Context:
    num_input_pipelines, input_pipeline_id = 1, 0

    @staticmethod
    def get_per_replica_batch_size(batch_size):
        return batch_size


def _arrays(lengths, seq_length, choices=None):
    shape = (len(lengths),) + ((choices,) if choices else ()) + (seq_length,)
    mask = np.zeros(shape, np.int32)
    for i, n in enumerate(lengths):
        mask[i, ..., :n] = 1
    ids = np.where(mask == 1, np.arange(seq_length) + 5, 0).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(mask),
            "label": np.arange(len(lengths), dtype=np.int32)}


def test_padding_bucket_is_a_quarter_of_the_length():
    assert [configs.padding_bucket(n) for n in (32, 64, 128, 384, 512)] == [16, 16, 32, 96, 128]


def test_evaluation_batches_are_cut_to_their_longest_row():
    arrays = _arrays([3, 20, 7, 40, 2], seq_length=64)
    batches = list(input_pipeline.numpy_dataset(arrays, 2, False, 0, trim_padding_multiple=16)(_Context()))
    assert [b["input_word_ids"].shape[1] for b in batches] == [32, 48, 16]
    assert [b["label"].numpy().tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    kept = np.concatenate([b["input_mask"].numpy().sum(axis=1) for b in batches])
    np.testing.assert_array_equal(kept, [3, 20, 7, 40, 2])  # no token lost
    first = batches[0]["input_word_ids"].numpy()
    np.testing.assert_array_equal(first, arrays["input_word_ids"][:2, :32])


def test_multiple_choice_batches_cut_the_last_axis():
    arrays = _arrays([5, 9, 30], seq_length=64, choices=3)
    batches = list(input_pipeline.numpy_dataset(arrays, 3, False, 0, trim_padding_multiple=16)(_Context()))
    assert batches[0]["input_mask"].shape == (3, 3, 32)
    assert batches[0]["label"].shape == (3,)


def test_training_batches_without_a_multiple_keep_their_length():
    arrays = _arrays([3, 4, 5, 6], seq_length=64)
    ds = input_pipeline.numpy_dataset(arrays, 2, True, 0)(_Context())
    batch = next(iter(ds))
    assert batch["input_word_ids"].shape == (2, 64)
    cut = next(iter(input_pipeline.numpy_dataset(arrays, 2, True, 0, 16)(_Context())))
    assert cut["input_word_ids"].shape == (2, 16)


def test_each_training_epoch_sees_every_example_once():
    # Shuffling the repeated stream (repeat, then shuffle) would leave about a
    # third of the examples unseen in the first epoch; run_squad did that.
    arrays = _arrays(list(range(1, 41)), seq_length=48)
    batches = iter(input_pipeline.numpy_dataset(arrays, 8, True, seed=3)(_Context()))
    for _ in range(3):
        epoch = np.concatenate([next(batches)["label"].numpy() for _ in range(5)])
        assert sorted(epoch.tolist()) == list(range(40))
    assert epoch.tolist() != list(range(40))  # and it is shuffled


def test_accumulated_micro_batches_split_one_padded_batch():
    # --gradient_accumulation_steps: the Trainer stacks an update's micro-batches,
    # so they must have one length (each cut alone, they did not: "Cannot batch
    # tensors with different shapes"), and hold the update's batch together.
    arrays = _arrays([3, 40, 5, 6, 2, 3, 30, 4], seq_length=64)
    whole = iter(input_pipeline.numpy_dataset(arrays, 4, True, 7, 16)(_Context()))
    micro = input_pipeline.numpy_dataset(arrays, 4, True, 7, 16, micro_batches=2)(_Context())
    stacked = iter(micro.batch(2, drop_remainder=True))  # as the Trainer stacks them
    for _ in range(4):
        batch, pair = next(whole), next(stacked)
        assert pair["input_word_ids"].shape[:2] == (2, 2)
        for key, value in batch.items():
            np.testing.assert_array_equal(np.reshape(pair[key].numpy(), value.shape), value)


@pytest.mark.parametrize("strategy,expected", [("one_device", 32), ("tpu", None)])
def test_dynamic_padding_is_off_on_tpu(strategy, expected):
    settings = RunConfig(output_dir="/tmp/x", max_seq_length=128,
                              distribution_strategy=strategy)
    assert settings.padding_multiple() == expected
    settings.dynamic_padding = False
    assert settings.padding_multiple() is None
