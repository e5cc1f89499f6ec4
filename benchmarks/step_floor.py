"""The fastest a pre-training step can be on this machine: its matmuls alone.

    python benchmarks/step_floor.py --num_layers=12 --hidden_size=768 --num_heads=12 \
        --batch_size=8 --seq_length=128 --json_output=floor.json

Any TensorFlow BERT step (ours, keras-hub's, with or without XLA) must at least
run the step's matrix products — forward, and both products of each backward
(input gradient and weight gradient), at their real shapes — and the AdamW
update of every parameter. This script times exactly that and nothing else:

- `matmuls`: the products of one step in one `tf.function` (12 layers of Q, K,
  V, output, the two feed-forward products and the batched attention products;
  the masked-LM transform and vocabulary products at the masked positions),
  each layer with its own weights, the backward products fed random gradients;
- `adamw`: Keras `AdamW.apply_gradients` (with global-norm clipping, as the
  runners train) on variables of the model's shapes (110M for BERT-Base);

and reports `floor_tokens_per_second = tokens / (matmuls + adamw)`. No
softmax, layer norm, GELU, dropout, embedding lookup or loss is in it, so a
real step is slower. A speed target above this floor cannot be met by removing
overhead; only faster products (another precision, another matmul library)
would. `--elementwise` also times that other work alone (`step_elementwise`:
the model's own LayerNorm, softmax, GELU, dropout, bias adds, embeddings and
loss, forward and backward, no product), so that a step's time splits into
products, optimizer, element-wise work and the rest.
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks import common  # noqa: E402

FLAGS = flags.FLAGS
common.add_model_flags(flags)
flags.DEFINE_integer("masked_positions", 20, "Masked-LM predictions per sequence.")
flags.DEFINE_bool("elementwise", False, "Also time the step's element-wise work with the model's "
                  "own pieces (softmax, LayerNorm, GELU, dropout, bias adds, embeddings, loss; "
                  "forward and backward), and report floor + element-wise.")
flags.DEFINE_float("dropout", 0.1, "Dropout rate of the element-wise part.")


def step_matmuls(config, batch, seq, masked, dtype, jit_compile):
    """A tf.function running a step's products, and their FLOP count."""
    import tensorflow as tf

    h, inter, heads = config.hidden_size, config.intermediate_size, config.num_attention_heads
    d, t, m, v = h // heads, batch * seq, batch * masked, config.vocab_size
    g = tf.random.Generator.from_seed(0)

    def rand(*shape):
        return tf.cast(g.normal(shape, stddev=0.02), dtype)

    # (input, weight, output-gradient) of every dense product, per layer.
    dense_shapes = [(h, h)] * 4 + [(h, inter), (inter, h)]
    layers = [[(rand(t, a), rand(a, b), rand(t, b)) for a, b in dense_shapes]
              for _ in range(config.num_hidden_layers)]
    attention = [(rand(batch * heads, seq, d), rand(batch * heads, seq, d),
                  rand(batch * heads, seq, seq)) for _ in range(config.num_hidden_layers)]
    head = [(rand(m, h), rand(h, h), rand(m, h)), (rand(m, h), rand(h, v), rand(m, v))]

    def dense(x, w, dy):  # forward, input gradient, weight gradient
        return [tf.matmul(x, w), tf.matmul(dy, w, transpose_b=True),
                tf.matmul(x, dy, transpose_a=True)]

    @tf.function(jit_compile=jit_compile)
    def run():
        outputs = []
        for layer, (q, k, dp) in zip(layers, attention):
            for x, w, dy in layer:
                outputs += dense(x, w, dy)
            # scores = q k^T, context = p v: forward and the four backward products.
            # (q, k stand in for every [n, s, d] operand, dp for every [n, s, s] one.)
            outputs += [tf.matmul(q, k, transpose_b=True), tf.matmul(dp, k),
                        tf.matmul(k, q, transpose_b=True), tf.matmul(dp, q, transpose_a=True),
                        tf.matmul(dp, q), tf.matmul(dp, k, transpose_a=True)]
        for x, w, dy in head:
            outputs += dense(x, w, dy)
        return [tf.reduce_sum(o[..., :1]) for o in outputs]

    dense_flops = sum(2 * t * a * b for a, b in dense_shapes) * 3
    attention_flops = 2 * (2 * batch * heads * seq * seq * d) * 3
    head_flops = (2 * m * h * h + 2 * m * h * v) * 3
    flops = config.num_hidden_layers * (dense_flops + attention_flops) + head_flops
    return run, flops


def step_elementwise(config, batch, seq, masked, dtype_name, dropout, jit_compile):
    """A tf.function running a step's work *between* the products, forward and
    backward, with the model's own pieces and nothing else: per layer the
    attention softmax in float32 over the masked scores, its dropout, the six
    bias adds, GELU (erf), the two residual adds with their dropout and
    `Float32LayerNorm`; the embedding gather, sums, LayerNorm and dropout; the
    masked-LM transform's bias, GELU and LayerNorm, the vocabulary bias and the
    cross-entropy. Activations in the compute dtype (bfloat16 under
    `--dtype=bfloat16`, float32 otherwise), as the model computes them."""
    import keras
    import tensorflow as tf
    from keras import ops

    from official_bert.modeling import layers as bert_layers

    compute = dtype_name
    h, inter, heads = config.hidden_size, config.intermediate_size, config.num_attention_heads
    t, m, v, n_layers = batch * seq, batch * masked, config.vocab_size, config.num_hidden_layers
    g = tf.random.Generator.from_seed(1)

    def rand(*shape, dtype=compute):
        return tf.cast(g.normal(shape), dtype)

    def norm(width):
        layer = bert_layers.Float32LayerNorm(epsilon=1e-12)
        layer.build((None, width))
        return layer

    dropouts = keras.layers.Dropout(dropout, dtype=keras.DTypePolicy(compute))
    # Per layer: the Q, K, V products' outputs (their bias adds), the attention output and
    # second feed-forward product (bias, dropout, residual, LayerNorm), the first
    # feed-forward product (bias, GELU); biases: Q, K, V, output, feed-forward out, in.
    layers = [dict(scores=rand(batch, heads, seq, seq), qkv=[rand(t, h) for _ in range(3)],
                   attended=rand(t, h), residual=rand(t, h), ff1=rand(t, inter), ff2=rand(t, h),
                   biases=[rand(h) for _ in range(5)] + [rand(inter)],
                   norms=[norm(h), norm(h)]) for _ in range(n_layers)]
    table = tf.Variable(rand(v, h, dtype="float32"))
    ids = tf.random.stateless_uniform((batch, seq), (0, 1), maxval=v, dtype=tf.int32)
    positions, types = rand(seq, h), rand(t, h)
    head = dict(x=rand(m, h), bias=rand(h), norm=norm(h), logits=rand(m, v), vocab_bias=rand(v),
                labels=tf.random.stateless_uniform((m,), (0, 2), maxval=v, dtype=tf.int32))
    embedding_norm = norm(h)
    mask_bias = tf.zeros((batch, 1, 1, seq))
    sources = [table, positions, types, head["x"], head["bias"], head["logits"],
               head["vocab_bias"], *[w.value for w in embedding_norm.trainable_variables],
               *[w.value for w in head["norm"].trainable_variables]]
    for layer in layers:
        sources += [layer["scores"], *layer["qkv"], layer["attended"], layer["residual"],
                    layer["ff1"], layer["ff2"], *layer["biases"]]
        sources += [w.value for n in layer["norms"] for w in n.trainable_variables]

    def forward():
        outputs = []
        x = ops.cast(tf.gather(table, ids), compute) + positions + tf.reshape(types, (batch, seq, h))
        outputs.append(dropouts(embedding_norm(x), training=True))
        for layer in layers:
            b = layer["biases"]
            scores = ops.cast(layer["scores"], "float32") + mask_bias
            probs = ops.cast(ops.softmax(scores, axis=-1), compute)
            outputs.append(dropouts(probs, training=True))
            outputs += [x + bias for x, bias in zip(layer["qkv"], b[:3])]
            first, second = layer["norms"]
            a = first(dropouts(layer["attended"] + b[3], training=True) + layer["residual"])
            outputs.append(bert_layers.gelu_exact(layer["ff1"] + b[5]))
            outputs.append(second(dropouts(layer["ff2"] + b[4], training=True) + a))
        outputs.append(head["norm"](bert_layers.gelu_exact(head["x"] + head["bias"])))
        logits = ops.cast(head["logits"] + head["vocab_bias"], "float32")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(head["labels"],
                                                                             logits))
        return outputs, loss

    # The gradients arriving at each output from the products after it (random).
    incoming = [tf.cast(g.normal(o.shape), o.dtype) for o in forward()[0]]

    @tf.function(jit_compile=jit_compile)
    def run():
        with tf.GradientTape() as tape:
            tape.watch(sources)
            outputs, loss = forward()
        grads = tape.gradient([*outputs, loss], sources,
                              output_gradients=[*incoming, tf.ones_like(loss)])
        # The outputs too: in a step they feed the next products, so all of the forward
        # runs (returning only gradients would let the graph skip what they do not need).
        return [tf.reduce_sum(tf.cast(tf.convert_to_tensor(x)[..., :1], "float32"))
                for x in [*grads, *outputs] if x is not None] + [loss]

    return run


def adamw_step(config, jit_compile):
    """A tf.function applying one clipped AdamW update to the model's variables."""
    import tensorflow as tf

    import keras

    from official_bert.tasks import pretraining

    keras.utils.set_random_seed(0)
    model = pretraining.PretrainingTask(bert_config=config).build_model()
    variables = model.trainable_variables
    optimizer = common.pretraining_optimizer()
    optimizer.build(variables)
    grads = [tf.random.normal(v.shape, stddev=1e-3) for v in variables]

    @tf.function(jit_compile=jit_compile)
    def run():
        clipped, _ = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(clipped, variables))
        return optimizer.iterations

    return run, sum(v.shape.num_elements() for v in variables)


def main(argv):
    del argv
    import tensorflow as tf

    common.set_threads(FLAGS.threads)
    config = common.bert_config_from_flags(FLAGS)
    dtype = {"float32": tf.float32, "bfloat16": tf.bfloat16, "float16": tf.float16}[FLAGS.dtype]
    tokens = FLAGS.batch_size * FLAGS.seq_length
    rates = common.matmul_rate()
    matmuls, matmul_flops = step_matmuls(config, FLAGS.batch_size, FLAGS.seq_length,
                                         FLAGS.masked_positions, dtype, FLAGS.jit_compile)
    matmul_stats = common.summarize_times(common.time_calls(
        lambda: [o.numpy() for o in matmuls()], FLAGS.steps, FLAGS.warmup_steps))
    adamw, parameters = adamw_step(config, FLAGS.jit_compile)
    adamw_stats = common.summarize_times(common.time_calls(
        lambda: adamw().numpy(), FLAGS.steps, FLAGS.warmup_steps))
    floor_s = (matmul_stats["ms_per_step"] + adamw_stats["ms_per_step"]) / 1000
    elementwise_ms = None
    if FLAGS.elementwise:
        elementwise = step_elementwise(config, FLAGS.batch_size, FLAGS.seq_length,
                                       FLAGS.masked_positions, FLAGS.dtype, FLAGS.dropout,
                                       FLAGS.jit_compile)
        elementwise_ms = common.summarize_times(common.time_calls(
            lambda: [o.numpy() for o in elementwise()], FLAGS.steps,
            FLAGS.warmup_steps))["ms_per_step"]
    results = dict(
        tokens_per_second=tokens / floor_s, ms_per_step=1000 * floor_s,
        matmuls_ms=matmul_stats["ms_per_step"], adamw_ms=adamw_stats["ms_per_step"],
        matmul_gflops_at_step_shapes=matmul_flops / matmul_stats["ms_per_step"] * 1e-6,
        matmul_flops=matmul_flops, parameters=parameters, dtype=FLAGS.dtype,
        jit_compile=FLAGS.jit_compile, batch_size=FLAGS.batch_size,
        seq_length=FLAGS.seq_length, config=vars(config), matmul=rates,
        load_average=os.getloadavg()[0], machine=common.machine(), elementwise_ms=elementwise_ms,
        dropout=FLAGS.dropout if FLAGS.elementwise else None)
    print(common.machine_line(results["machine"]))
    print(f"step floor, L={config.num_hidden_layers} H={config.hidden_size} "
          f"A={config.num_attention_heads}, batch {FLAGS.batch_size} x {FLAGS.seq_length}, "
          f"{FLAGS.dtype}{', XLA' if FLAGS.jit_compile else ''}; matmul 2048^2: numpy "
          f"{rates['numpy_gflops']:.1f}, tf {rates['tf_gflops']:.1f} GFLOP/s "
          f"(bfloat16 {rates['tf_bfloat16_gflops']:.1f})")
    common.print_table([
        dict(part="matmuls", ms_per_step=matmul_stats["ms_per_step"],
             gflops=results["matmul_gflops_at_step_shapes"]),
        dict(part=f"adamw ({parameters / 1e6:.1f}M)", ms_per_step=adamw_stats["ms_per_step"]),
        dict(part="floor", ms_per_step=1000 * floor_s, tokens_per_second=tokens / floor_s),
    ] + ([
        dict(part=f"element-wise (dropout {FLAGS.dropout:g})", ms_per_step=elementwise_ms),
        dict(part="floor + element-wise", ms_per_step=1000 * floor_s + elementwise_ms,
             tokens_per_second=tokens / (floor_s + elementwise_ms / 1000)),
    ] if elementwise_ms is not None else []), ["part", "ms_per_step", "gflops",
                                                "tokens_per_second"])
    common.write_json(FLAGS.json_output, results)


if __name__ == "__main__":
    app.run(main)
