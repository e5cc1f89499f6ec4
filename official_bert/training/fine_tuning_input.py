"""In-memory features (fine-tuning) → a `dataset_fn` for the `Trainer`.

The fine-tuning tasks read their files into numpy arrays of one length
(`data_prep`'s features); `numpy_dataset` batches them, shuffled and repeated
for training or every example once in order otherwise, optionally cutting each
batch's padding (`bucketed_length`'s rule) and splitting it for gradient
accumulation. Pre-training's TFRecords are `input_pipeline`'s.
"""

from __future__ import annotations

import tensorflow as tf

from official_bert.text import text_layers


def bucketed_length(longest: int, multiple: int, full: int) -> int:
    """The length `text_layers.trim_padding` cuts a batch to: its longest
    sequence rounded up to `multiple`, at most `full`."""
    return min(full, -(-max(int(longest), 1) // multiple) * multiple)


def numpy_dataset(arrays: dict, batch_size: int, training: bool, seed: int,
                  trim_padding_multiple: int | None = None, micro_batches: int = 1):
    """A `dataset_fn` over in-memory feature arrays (all of one length).

    Training: sharded per input pipeline, shuffled, repeated, batched with
    `drop_remainder`. Evaluation/prediction: every example once, in order, the
    last batch smaller (so no example is dropped or padded into a metric).
    With `trim_padding_multiple`, each batch's sequence features
    (the packed inputs and NER's `label_ids`) are cut to its longest sequence rounded up to that
    multiple (`text_layers.trim_padding`); only for outputs that do not have
    the sequence length (losses, per-example scores). With `micro_batches`
    (--gradient_accumulation_steps), each training batch is then split into
    that many (`split_into_micro_batches`): an update still sees `batch_size`
    examples.
    """
    # (A teacher's outputs, `tasks.teacher.OUTPUTS`, stay whole: its loss cuts them.)
    sequence_keys = text_layers.PACKED_KEYS + ("label_ids",)

    def trim(batch):
        return text_layers.trim_padding(batch, trim_padding_multiple, keys=sequence_keys)

    num_examples = len(next(iter(arrays.values())))

    def dataset_fn(context):
        ds = tf.data.Dataset.from_tensor_slices(arrays)
        per_replica = context.get_per_replica_batch_size(batch_size)
        if training:
            ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
            ds = ds.shuffle(num_examples, seed=seed).repeat()
            ds = ds.batch(per_replica, drop_remainder=True)
        else:
            ds = ds.batch(per_replica)
        if trim_padding_multiple:
            ds = ds.map(trim, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        if training:
            ds = split_into_micro_batches(ds, micro_batches)
        return ds.prefetch(2)

    return dataset_fn


def split_into_micro_batches(ds, micro_batches: int):
    """`ds`'s batches, each split into `micro_batches` consecutive batches of
    the same shape (gradient accumulation). The `Trainer` stacks the
    micro-batches of one update, so they must have one length: a batch is
    padded (or trimmed) whole and then split, never each micro-batch alone.
    The batch size must be a multiple of `micro_batches` (the runner checks
    --train_batch_size)."""
    if micro_batches == 1:
        return ds

    def split(batch):
        return tf.nest.map_structure(
            lambda t: tf.reshape(t, tf.concat([[micro_batches, -1], tf.shape(t)[1:]], 0)),
            batch)

    return ds.map(split, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()
