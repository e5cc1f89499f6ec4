"""Training-step benchmark: tokens/s and MFU of a pre-training or fine-tuning step.

    python benchmarks/pretraining_step.py --num_layers=12 --hidden_size=768 --num_heads=12 \
        --batch_size=8 --seq_length=128 --steps=10 --json_output=pretraining.json
    python benchmarks/pretraining_step.py --task=classifier ...      # a fine-tuning step
    python benchmarks/pretraining_step.py --implementations=ours,ours_xla,keras_hub,keras_hub_xla
    python benchmarks/pretraining_step.py --implementations=ours_xla,transformers \
        --transformers_python=/tmp/hf/bin/python      # Hugging Face in the same run

Times the step the runners train with — `training.Trainer`'s replica step
(forward, backward, global-norm clipping, AdamW update) on `BertPretrainer`
(masked LM on `--masked_positions` gathered positions + next sentence) or
`BertClassifier` — on a fixed random batch, after `--warmup_steps` untimed
steps (tracing, XLA compilation). `keras_hub` runs keras-hub's
`BertBackbone` + `MaskedLMHead` (+ a 2-way NSP dense) with the same optimizer
in the same process, and `transformers` runs Hugging Face's `BertForPreTraining`
(`benchmarks/transformers_baseline.py`, in the `--transformers_python`
interpreter), as the same-run baselines.

Reports per implementation: median ms/step, p90, tokens/s, model FLOP/s ÷ the
float32 matmul rate measured in the same run by numpy and by tf.matmul (MFU),
and the process's peak memory. Prints a table and writes JSON
(`{"tokens_per_second": ..., "ms_per_step": ...}` of the first implementation
at the top level, all of them under "runs").
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile

from absl import app, flags
from official_bert.configs import RunConfig

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks import common  # noqa: E402

FLAGS = flags.FLAGS
common.add_model_flags(flags)
flags.DEFINE_enum("task", "pretraining", ["pretraining", "classifier"],
                  "The step: masked LM + next sentence, or a 2-class classifier on [CLS].")
flags.DEFINE_integer("masked_positions", 20, "Masked-LM predictions per sequence.")
flags.DEFINE_float("dropout", 0.1, "Dropout of every implementation (ours: hidden_dropout_prob "
                   "and attention_probs_dropout_prob; keras-hub: dropout; transformers: both "
                   "probabilities). 0.1 is the paper's; 0 is Cramming's pre-training.")
flags.DEFINE_list("implementations", ["ours"],
                  "Any of ours, ours_xla, keras_hub, keras_hub_xla, transformers "
                  "(--jit_compile makes 'ours' compile too; transformers needs "
                  "--transformers_python).")
common.add_transformers_flag(flags)


def synthetic_batch(batch, seq, vocab, masked, task):
    import numpy as np

    rng = np.random.default_rng(0)
    features = {
        "input_word_ids": rng.integers(1000, vocab, size=(batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "input_type_ids": (np.arange(seq)[None, :] >= seq // 2).astype("int32").repeat(batch, 0),
    }
    if task == "pretraining":
        positions = np.sort(np.stack([rng.choice(np.arange(1, seq), masked, replace=False)
                                      for _ in range(batch)]), axis=1)
        features.update(
            masked_lm_positions=positions.astype("int32"),
            masked_lm_ids=rng.integers(1000, vocab, size=(batch, masked)).astype("int32"),
            masked_lm_weights=np.ones((batch, masked), "float32"),
            next_sentence_labels=rng.integers(0, 2, size=(batch, 1)).astype("int32"))
    else:
        features["label"] = rng.integers(0, 2, size=(batch,)).astype("int32")
    return features


class ClassifierTask:
    """A 2-class fine-tuning step on the pooled [CLS] (as run_classifier's)."""

    def __init__(self, config, policy):
        self.config, self.policy = config, policy

    def build_model(self):
        from official_bert.modeling import heads
        from official_bert.modeling.encoder import BertEncoder, dummy_inputs

        encoder = BertEncoder.from_bert_config(self.config, dtype=self.policy)
        model = heads.BertClassifier(encoder, num_classes=2)
        model(dummy_inputs())
        return model

    def loss_normalizers(self, features):
        import tensorflow as tf
        return {"examples": tf.shape(features["label"])[0]}

    def loss_and_metrics(self, model, features, normalizers, training):
        import tensorflow as tf
        logits = model({k: features[k] for k in ("input_word_ids", "input_mask",
                                                 "input_type_ids")}, training=training)
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(features["label"], logits)
        return tf.reduce_sum(xent) / normalizers["examples"], {}


def time_ours(config, features, jit_compile):
    import keras
    import tensorflow as tf

    from official_bert.tasks import pretraining
    from official_bert.training import distribution
    from official_bert.training import trainer as training

    policy = None if FLAGS.dtype == "float32" else common.policy_name(FLAGS.dtype)
    keras.utils.set_random_seed(0)
    task = (pretraining.PretrainingTask(run_config=RunConfig(dtype=FLAGS.dtype),
                                        bert_config=config)
            if FLAGS.task == "pretraining" else ClassifierTask(config, policy))
    run_config = training.TrainingConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-"), num_train_steps=10**9,
        jit_compile=jit_compile)
    trainer = training.Trainer(
        task, distribution.get_strategy("one_device"), run_config,
        optimizer_fn=common.pretraining_optimizer,
        loss_scale=FLAGS.dtype == "float16")
    dataset_fn = lambda context: tf.data.Dataset.from_tensors(features).repeat()  # noqa: E731
    iterator = trainer.train_iterator(dataset_fn)
    return common.time_calls(lambda: trainer.run_train_steps(iterator, 1),
                             FLAGS.steps, FLAGS.warmup_steps)


def time_keras_hub(config, features, jit_compile):
    """keras-hub's BERT with the same optimizer, masked positions and NSP head."""
    import keras

    try:
        import keras_hub
    except ImportError:
        raise SystemExit("error: the keras_hub implementations need keras-hub: "
                         "pip install -e '.[bench]'") from None
    import tensorflow as tf

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings)
    mlm_head = keras_hub.layers.MaskedLMHead(
        vocabulary_size=config.vocab_size, token_embedding=backbone.token_embedding,
        activation="gelu")
    nsp_head = keras.layers.Dense(2)
    classifier_head = keras.layers.Dense(2)
    optimizer = keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6,
                                       global_clipnorm=1.0)
    inputs = {"token_ids": features["input_word_ids"], "padding_mask": features["input_mask"],
              "segment_ids": features["input_type_ids"]}

    def loss_fn():
        outputs = backbone(inputs, training=True)
        if FLAGS.task == "pretraining":
            logits = mlm_head(outputs["sequence_output"],
                              mask_positions=features["masked_lm_positions"])
            mlm = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                features["masked_lm_ids"], logits))
            nsp = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                features["next_sentence_labels"][:, 0], nsp_head(outputs["pooled_output"])))
            return mlm + nsp
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            features["label"], classifier_head(outputs["pooled_output"])))

    loss_fn()  # builds the heads
    variables = (backbone.trainable_variables + mlm_head.trainable_variables
                 + nsp_head.trainable_variables + classifier_head.trainable_variables)
    optimizer.build(variables)

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn()
        grads = tape.gradient(loss, variables)
        pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
        optimizer.apply_gradients(pairs)
        return loss

    return common.time_calls(lambda: float(step()), FLAGS.steps, FLAGS.warmup_steps)


def main(argv):
    del argv
    import keras

    common.set_threads(FLAGS.threads)
    config = dataclasses.replace(common.bert_config_from_flags(FLAGS),
                                 hidden_dropout_prob=FLAGS.dropout,
                                 attention_probs_dropout_prob=FLAGS.dropout)
    if FLAGS.dtype != "float32":
        keras.config.set_dtype_policy(common.policy_name(FLAGS.dtype))
    tokens = FLAGS.batch_size * FLAGS.seq_length
    masked = FLAGS.masked_positions if FLAGS.task == "pretraining" else 0
    flops_per_token = common.pretraining_flops_per_token(
        config.num_hidden_layers, config.hidden_size, config.intermediate_size,
        FLAGS.seq_length, config.vocab_size, masked)
    features = synthetic_batch(FLAGS.batch_size, FLAGS.seq_length, config.vocab_size,
                               FLAGS.masked_positions, FLAGS.task)
    rates = common.matmul_rate()
    runs, rows = {}, []
    for name in FLAGS.implementations:
        jit = name.endswith("_xla") or FLAGS.jit_compile
        if name.startswith("ours"):
            seconds = time_ours(config, features, jit)
        elif name.startswith("keras_hub"):
            seconds = time_keras_hub(config, features, jit)
        elif name == "transformers":
            if not FLAGS.transformers_python:
                raise ValueError("--implementations=transformers needs --transformers_python")
            jit = False
            seconds = common.time_transformers(FLAGS, FLAGS.task, FLAGS.dropout)
        else:
            raise ValueError(f"--implementations: unknown {name!r}")
        stats = common.summarize_times(seconds)
        step_s = stats["ms_per_step"] / 1000
        stats["tokens_per_second"] = tokens / step_s
        stats["mfu_numpy"] = tokens * flops_per_token / step_s / (rates["numpy_gflops"] * 1e9)
        stats["mfu_tf"] = tokens * flops_per_token / step_s / (rates["tf_gflops"] * 1e9)
        stats["jit_compile"] = jit
        runs[name] = stats
        rows.append(dict(implementation=name, **stats))
    first = runs[FLAGS.implementations[0]]
    results = dict(
        tokens_per_second=first["tokens_per_second"], ms_per_step=first["ms_per_step"],
        runs=runs, task=FLAGS.task, config=vars(config), batch_size=FLAGS.batch_size,
        seq_length=FLAGS.seq_length, masked_positions=masked, dtype=FLAGS.dtype,
        threads=FLAGS.threads, matmul=rates, flops_per_token=flops_per_token,
        peak_memory_mb=common.peak_memory_mb(), load_average=os.getloadavg()[0],
        machine=common.machine())
    print(common.machine_line(results["machine"]))
    print(f"{FLAGS.task} step, L={config.num_hidden_layers} H={config.hidden_size} "
          f"A={config.num_attention_heads}, batch {FLAGS.batch_size} x {FLAGS.seq_length} tokens"
          f"{f', {masked} masked' if masked else ''}, {FLAGS.dtype}, dropout {FLAGS.dropout:g}; "
          f"{flops_per_token / 1e6:.0f} MFLOP/token")
    print(f"matmul 2048^2 float32: numpy {rates['numpy_gflops']:.1f} GFLOP/s, "
          f"tf {rates['tf_gflops']:.1f} GFLOP/s (bfloat16: tf "
          f"{rates['tf_bfloat16_gflops']:.1f}); peak memory {results['peak_memory_mb']:.0f} MB; "
          f"load average {results['load_average']:.1f}")
    common.print_table(rows, ["implementation", "ms_per_step", "p90_ms", "tokens_per_second",
                              "mfu_numpy", "mfu_tf"])
    common.write_json(FLAGS.json_output, results)


if __name__ == "__main__":
    app.run(main)
