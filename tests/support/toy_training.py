"""A toy task and runner for training-loop tests (run in a subprocess so the
CPU can be split into logical devices before TensorFlow starts).

Usage: python tests/support/toy_training.py OUTPUT_DIR STRATEGY STEPS ACCUM [KILL_AT]
Prints one line per step: "step loss". TOY_DROPOUT sets the dropout rate (0.1);
TOY_JIT=1 compiles the training step with XLA.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf

from official_bert.modeling.configs import BertConfig
from official_bert.modeling.encoder import BertEncoder
from official_bert.training import distribution, optimization
from official_bert.training import trainer as training

CONFIG = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=32,
                    max_position_embeddings=16,
                    hidden_dropout_prob=float(os.environ.get("TOY_DROPOUT", 0.1)),
                    attention_probs_dropout_prob=float(os.environ.get("TOY_DROPOUT", 0.1)))
GLOBAL_BATCH = 8
SEQ = 12


class ToyModel(keras.Model):
    def __init__(self, encoder, **kwargs):
        inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in encoder.input}
        logits = keras.layers.Dense(2, name="head")(encoder(inputs)["pooled_output"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder


class ToyTask:
    def build_model(self):
        keras.utils.set_random_seed(7)
        return ToyModel(BertEncoder.from_bert_config(CONFIG))

    def loss_normalizers(self, features):
        # Token-weighted loss: the denominator differs between replicas.
        return {"tokens": tf.reduce_sum(features["input_mask"])}

    def loss_and_metrics(self, model, features, normalizers, training):
        inputs = {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
        logits = model(inputs, training=training)
        weights = tf.cast(tf.reduce_sum(features["input_mask"], axis=1), tf.float32)
        per_example = tf.keras.losses.sparse_categorical_crossentropy(
            features["label"], logits, from_logits=True)
        loss = tf.reduce_sum(per_example * weights) / normalizers["tokens"]
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), features["label"]), tf.float32)
        return loss, {"accuracy": (tf.reduce_sum(correct), tf.cast(tf.size(correct), tf.float32))}


def make_dataset(micro_batch):
    rng = np.random.default_rng(0)
    n = 64
    ids = rng.integers(5, 50, size=(n, SEQ)).astype("int32")
    lengths = rng.integers(4, SEQ + 1, size=n)
    mask = (np.arange(SEQ)[None] < lengths[:, None]).astype("int32")
    ids *= mask
    label = (ids[:, 1] % 2).astype("int32")
    ds = tf.data.Dataset.from_tensor_slices(dict(
        input_word_ids=ids, input_mask=mask,
        input_type_ids=np.zeros_like(ids), label=label))
    return ds.repeat().shuffle(64, seed=3).batch(micro_batch, drop_remainder=True)


def main():
    out, strategy_name, steps, accum = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    kill_at = int(sys.argv[5]) if len(sys.argv) > 5 else None
    strategy = distribution.get_strategy(
        strategy_name, num_cpu_devices=2 if strategy_name == "mirrored" else 0)
    replicas = strategy.num_replicas_in_sync
    micro = GLOBAL_BATCH // replicas // accum
    config = training.TrainingConfig(output_dir=out, num_train_steps=steps, log_steps=1,
                                     steps_per_loop=1, save_checkpoints_steps=2,
                                     gradient_accumulation_steps=accum,
                                     jit_compile=os.environ.get("TOY_JIT") == "1")
    trainer = training.Trainer(
        ToyTask(), strategy, config,
        optimizer_fn=lambda: optimization.create_optimizer(optimization.OptimizerConfig(
            learning_rate=1e-2, num_train_steps=steps, num_warmup_steps=1)))

    def hook(step, results):
        print(f"{step} {results['loss']:.9f}", flush=True)
        if kill_at is not None and step == kill_at:
            os.kill(os.getpid(), 9)

    trainer.train(lambda ctx: make_dataset(micro), GLOBAL_BATCH, hooks=[hook])


if __name__ == "__main__":
    main()
