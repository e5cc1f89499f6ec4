"""One replica's update: what runs on a device for a global batch.

`ReplicaStep(task, model, optimizer, config)(macro_batch)` computes the loss and
the gradients of one replica's share of the global batch and applies them, so
that the update equals one device's over the whole batch:

* the task's loss normalizers (number of examples, sum of masked-LM weights, ...)
  are summed over every replica and every accumulated micro-batch *before* the
  loss is computed;
* gradient accumulation (`gradient_accumulation_steps`) runs in a `tf.while_loop`,
  one micro-batch's activations alive at a time, then one `apply_gradients`;
* the global-batch gradient is clipped by its global norm (`clip_norm`).

The `Trainer` runs it under its strategy, `steps_per_loop` times per host call.
"""

from __future__ import annotations

import keras
import tensorflow as tf


class ReplicaStep:
    """The replica function of a training step (`strategy.run(step, (batch,))`):
    returns (loss, metrics) of the replica's share, after the update."""

    def __init__(self, task, model: keras.Model, optimizer, config):
        self.task, self.model, self.optimizer, self.config = task, model, optimizer, config

    def __call__(self, macro_batch):
        k = self.config.gradient_accumulation_steps
        normalizers = self._global_normalizers(macro_batch)
        compute = self._grads_fn()
        variables = self.model.trainable_variables
        if k == 1:
            loss, metrics, grads = compute(macro_batch, normalizers)
            grads = [tf.convert_to_tensor(g) for g in grads]
        else:
            first = tf.nest.map_structure(lambda t: t[0], macro_batch)
            loss, metrics, grads = compute(first, normalizers)
            grads = [tf.convert_to_tensor(g) for g in grads]
            # A while loop keeps one micro-batch's activations alive at a time.
            for i in tf.range(1, k):
                micro = tf.nest.map_structure(lambda t: t[i], macro_batch)
                l, m, g = compute(micro, normalizers)
                loss += l
                metrics = tf.nest.map_structure(tf.add, metrics, m)
                grads = [a + tf.convert_to_tensor(b) for a, b in zip(grads, g)]
        self.optimizer.apply_gradients(zip(self._clip(grads), variables))
        # The loss is ready after the forward pass; the budget's clock, read
        # once the loss is (`TimeBudget.advance_in_graph`), must also count the
        # backward pass, about two thirds of a step.
        with tf.control_dependencies(grads):
            loss = tf.identity(loss)
        return loss, metrics

    def _global_normalizers(self, macro_batch):
        """Task normalizers summed over micro-batches and replicas."""
        k = self.config.gradient_accumulation_steps
        if k == 1:
            local = self.task.loss_normalizers(macro_batch)
        else:
            micro = [tf.nest.map_structure(lambda t: t[i], macro_batch) for i in range(k)]
            parts = [self.task.loss_normalizers(m) for m in micro]
            local = tf.nest.map_structure(lambda *xs: tf.add_n(list(xs)), *parts)
        local = tf.nest.map_structure(lambda t: tf.cast(t, tf.float32), local)
        context = tf.distribute.get_replica_context()
        return context.all_reduce(tf.distribute.ReduceOp.SUM, local)

    def _grads_fn(self):
        model, task = self.model, self.task
        scale = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)

        def compute(features, normalizers):
            with tf.GradientTape() as tape:
                loss, metrics = task.loss_and_metrics(
                    model, features, normalizers, training=True)
                scaled = self.optimizer.scale_loss(loss) if scale else loss
            grads = tape.gradient(scaled, model.trainable_variables)
            return loss, metrics, grads

        if self.config.jit_compile:
            return tf.function(compute, jit_compile=True)
        return compute

    def _clip(self, grads):
        """Clips the global-batch gradient by its global norm.

        Gradients arrive dense: Keras 3's Adam applies an `IndexedSlices`
        embedding gradient with repeated ids differently from the same gradient
        dense (it squares the parts, not their sum), and BERT repeats ids.
        Keras would clip each replica's gradient before its cross-replica sum,
        so the sum is taken here, clipped, and handed to `apply_gradients`
        divided by the replica count (Keras sums it over replicas again).
        """
        clip_norm = self.config.clip_norm
        if clip_norm is None:
            return grads
        context = tf.distribute.get_replica_context()
        replicas = context.num_replicas_in_sync
        if replicas > 1:
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        scale = None
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            scale = tf.cast(self.optimizer.dynamic_scale, tf.float32)
            grads = [g / scale for g in grads]
        # A non-finite norm (float16 overflow) makes the grads NaN, and the
        # loss-scale optimizer then skips the step and lowers its scale.
        grads, _ = tf.clip_by_global_norm(grads, clip_norm)
        if scale is not None:
            grads = [g * scale for g in grads]
        if replicas > 1:
            grads = [g / replicas for g in grads]
        return grads
