"""Inference benchmark: latency and throughput of the encoder, Keras and SavedModel.

    python benchmarks/inference.py --num_layers=12 --hidden_size=768 --num_heads=12 \
        --batch_size=1 --seq_length=128 --steps=20 --json_output=inference.json
    python benchmarks/inference.py ... --saved_model=/tmp/bert_sm   # also time an export
    python benchmarks/inference.py ... --transformers_python=/tmp/hf/bin/python  # and HF's

Random weights (speed does not depend on them). Prints a table and writes
{"tokens_per_second", "ms_per_step", "p50_ms", "p90_ms", ...} as JSON; with
--saved_model, the SavedModel's numbers come under "saved_model".
"""

import os
import sys

from absl import app, flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks import common  # noqa: E402

FLAGS = flags.FLAGS
common.add_model_flags(flags, dict(batch_size=1, steps=20))
flags.DEFINE_string("saved_model", None,
                    "Export the encoder as a SavedModel here (if absent) and time it too.")
common.add_transformers_flag(flags)


def _inputs(batch, seq, vocab):
    import numpy as np

    rng = np.random.default_rng(0)
    return {
        "input_word_ids": rng.integers(1000, vocab, size=(batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "input_type_ids": np.zeros((batch, seq), "int32"),
    }


def main(argv):
    del argv
    import keras
    import tensorflow as tf

    from official_bert.modeling.encoder import BertEncoder

    common.set_threads(FLAGS.threads)
    rates = common.matmul_rate()
    config = common.bert_config_from_flags(FLAGS)
    keras.config.set_dtype_policy(common.policy_name(FLAGS.dtype))
    encoder = BertEncoder.from_bert_config(config)
    inputs = _inputs(FLAGS.batch_size, FLAGS.seq_length, config.vocab_size)
    tokens = FLAGS.batch_size * FLAGS.seq_length
    flops = tokens * common.encoder_forward_flops_per_token(
        config.num_hidden_layers, config.hidden_size, config.intermediate_size, FLAGS.seq_length)

    @tf.function(jit_compile=FLAGS.jit_compile)
    def forward(features):
        return encoder(features, training=False)["sequence_output"]

    def call(features):
        return forward(features).numpy()

    rows, results = [], {}
    seconds = common.time_calls(lambda: call(inputs), FLAGS.steps, FLAGS.warmup_steps)
    keras_stats = common.summarize_times(seconds)
    keras_stats["tokens_per_second"] = tokens / (keras_stats["ms_per_step"] / 1000)
    keras_stats["mfu_numpy"] = flops / (keras_stats["ms_per_step"] / 1000) / (rates["numpy_gflops"] * 1e9)
    results.update(keras_stats)
    rows.append(dict(path="keras", **keras_stats))

    if FLAGS.saved_model:
        if not os.path.exists(os.path.join(FLAGS.saved_model, "saved_model.pb")):
            signature = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in inputs}

            class Serving(tf.Module):
                def __init__(self, model):
                    super().__init__()
                    self.model = model

                @tf.function(input_signature=[signature], jit_compile=FLAGS.jit_compile)
                def serve(self, features):
                    return {"sequence_output": self.model(features, training=False)["sequence_output"]}

            module = Serving(encoder)
            tf.saved_model.save(module, FLAGS.saved_model, signatures={"serving_default": module.serve})
        loaded = tf.saved_model.load(FLAGS.saved_model)
        serve = loaded.signatures["serving_default"]
        tensors = {k: tf.constant(v) for k, v in inputs.items()}
        seconds = common.time_calls(lambda: serve(**tensors)["sequence_output"].numpy(),
                                    FLAGS.steps, FLAGS.warmup_steps)
        sm = common.summarize_times(seconds)
        sm["tokens_per_second"] = tokens / (sm["ms_per_step"] / 1000)
        results["saved_model"] = sm
        rows.append(dict(path="saved_model", **sm))

    hf_seconds = common.time_transformers(FLAGS, "inference")
    if hf_seconds:
        hf = common.summarize_times(hf_seconds)
        hf["tokens_per_second"] = tokens / (hf["ms_per_step"] / 1000)
        results["transformers"] = hf
        rows.append(dict(path="transformers (eager)", **hf))

    results.update(
        config=vars(config), batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
        dtype=FLAGS.dtype, jit_compile=FLAGS.jit_compile, threads=FLAGS.threads,
        matmul=rates, peak_memory_mb=common.peak_memory_mb(),
    )
    print(f"matmul 2048^2 float32: numpy {rates['numpy_gflops']:.1f} GFLOP/s, "
          f"tf {rates['tf_gflops']:.1f} GFLOP/s; peak memory {results['peak_memory_mb']:.0f} MB")
    common.print_table(rows, ["path", "ms_per_step", "p50_ms", "p90_ms", "tokens_per_second"])
    common.write_json(FLAGS.json_output, results)


if __name__ == "__main__":
    app.run(main)
