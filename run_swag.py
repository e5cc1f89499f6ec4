"""Multiple choice (SWAG) with BERT.

Reads SWAG's CSV (`video-id, fold-ind, startphrase, sent1, sent2, gold-source,
ending0..endingN, label`; any number of endings, read from the header). Each
choice is packed `[CLS] sent1 [SEP] sent2 ending_k [SEP]`; all choices of an
example go through the encoder, a single learned vector V scores each
choice's pooled C, and a softmax over the choices is trained with
cross-entropy on the gold (the BERT paper's SWAG set-up).

Outputs in `--output_dir`: checkpoints, `eval_results.txt` (eval_accuracy,
eval_loss, global_step, num_examples), `test_results.tsv` (one line per
predict example: the probability of each choice, tab-separated, as
run_classifier's test_results.tsv). `--export_dir` writes a raw-text SavedModel
(context, start, endings → probabilities; see `official_bert/export_tasks.py`).

Example (HellaSwag laid out as SWAG):
  python run_swag.py --do_train --do_eval \
    --train_file=../shared/data/multiple_choice/hellaswag_as_swag-train.csv \
    --eval_file=../shared/data/multiple_choice/hellaswag_as_swag-dev.csv \
    --max_train_examples=2000 --init_checkpoint=$MINILM --max_seq_length=128 \
    --train_batch_size=16 --learning_rate=5e-5 --num_train_epochs=1 --output_dir=/tmp/swag
"""

from __future__ import annotations

import os
import time

from absl import flags, logging

from official_bert import app

app.quiet_tensorflow()

FLAGS = flags.FLAGS

flags.DEFINE_string("train_file", None, "SWAG CSV to train on.")
flags.DEFINE_string("eval_file", None, "SWAG CSV (with labels) to evaluate on.")
flags.DEFINE_string("predict_file", None, "SWAG CSV to predict (label column optional).")
flags.DEFINE_string("output_dir", None, "Checkpoints, results and predictions go here.")
flags.DEFINE_string("init_checkpoint", None,
                    "Pre-trained checkpoint: Hugging Face dir, Google TF1 bert_model.ckpt, "
                    "or official_bert dir.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (default: beside the checkpoint).")
flags.DEFINE_string("vocab_file", None, "vocab.txt (default: beside the checkpoint).")
flags.DEFINE_bool("do_lower_case", None,
                  "Lower-case the input (default: what the checkpoint says, else True).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per packed choice.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on --eval_file.")
flags.DEFINE_bool("do_predict", False, "Predict --predict_file.")
flags.DEFINE_integer("train_batch_size", 16, "Global batch size (examples, not choices).")
flags.DEFINE_integer("eval_batch_size", 8, "Batch size for evaluation.")
flags.DEFINE_integer("predict_batch_size", 8, "Batch size for prediction.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (AdamW).")
flags.DEFINE_float("num_train_epochs", 3.0, "Epochs.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of steps of linear warm-up.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between checkpoints.")
flags.DEFINE_integer("log_steps", 50, "Steps between progress lines.")
flags.DEFINE_integer("max_train_examples", None, "Train on the first N rows only.")
flags.DEFINE_integer("seed", 42, "Random seed (initialization, dropout, shuffling).")
flags.DEFINE_enum("distribution_strategy", "one_device",
                  ["one_device", "mirrored", "multi_worker_mirrored", "tpu"], "tf.distribute strategy.")
flags.DEFINE_integer("num_gpus", 0, "GPUs to use.")
flags.DEFINE_string("tpu", None, "TPU address for --distribution_strategy=tpu.")
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16", "float16"],
                  "Compute dtype (mixed precision for bfloat16/float16).")
flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.")
flags.DEFINE_string("export_dir", None, "Write a raw-text SavedModel to export_dir/<version>/.")


def _policy():
    return {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}[FLAGS.dtype]


def resolve_model_files():
    """(BertConfig, checkpoint or None, vocab_file, do_lower_case)."""
    from official_bert import checkpoints, tokenization
    from official_bert.configs import BertConfig

    config = BertConfig.from_json_file(FLAGS.bert_config_file) if FLAGS.bert_config_file else None
    ckpt = None
    if FLAGS.init_checkpoint:
        ckpt = checkpoints.read_checkpoint(FLAGS.init_checkpoint, config)
        config = ckpt.config
    if config is None:
        raise ValueError("pass --init_checkpoint (or --bert_config_file for a random encoder)")
    vocab_file = FLAGS.vocab_file or (ckpt.vocab_file if ckpt else None)
    if not vocab_file:
        raise ValueError("no vocab.txt beside the checkpoint; pass --vocab_file")
    do_lower_case = FLAGS.do_lower_case
    if do_lower_case is None:
        do_lower_case = True if ckpt is None or ckpt.do_lower_case is None else ckpt.do_lower_case
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} is longer than the model's "
                         f"max_position_embeddings ({config.max_position_embeddings})")
    tokenization.validate_case_matches_vocab(tokenization.load_vocab_list(vocab_file),
                                             do_lower_case)
    return config, ckpt, vocab_file, do_lower_case


class MultipleChoiceTask:
    def __init__(self, bert_config):
        self.bert_config = bert_config

    def build_model(self):
        import tensorflow as tf
        from official_bert.encoder import BertEncoder
        from official_bert.models import BertMultipleChoice

        encoder = BertEncoder.from_bert_config(self.bert_config, dtype=_policy())
        model = BertMultipleChoice(encoder, dropout=self.bert_config.hidden_dropout_prob)
        ones = tf.ones([1, 2, 8], tf.int32)
        model({"input_word_ids": ones, "input_mask": ones, "input_type_ids": ones * 0})
        return model

    def loss_normalizers(self, features):
        import tensorflow as tf
        return {"examples": tf.cast(tf.shape(features["label"])[0], tf.float32)}

    def loss_and_metrics(self, model, features, normalizers, training):
        import tensorflow as tf

        logits = model(features, training=training)
        per_example = tf.keras.losses.sparse_categorical_crossentropy(
            features["label"], logits, from_logits=True)
        loss = tf.reduce_sum(per_example) / tf.maximum(normalizers["examples"], 1.0)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                   features["label"]), tf.float32)
        return loss, {"accuracy": (tf.reduce_sum(correct), tf.cast(tf.size(correct), tf.float32))}


def numpy_dataset(arrays, batch_size, training, seed):
    import tensorflow as tf

    def dataset_fn(context):
        ds = tf.data.Dataset.from_tensor_slices(arrays)
        per_replica = context.get_per_replica_batch_size(batch_size)
        if training:
            ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
            ds = ds.shuffle(len(arrays["label"]), seed=seed).repeat()
            return ds.batch(per_replica, drop_remainder=True)
        return ds.batch(per_replica)

    return dataset_fn


def predict_probabilities(trainer, arrays, batch_size):
    """(probabilities [examples, choices], log-probability of the label) in file order."""
    import numpy as np
    import tensorflow as tf

    def output_fn(model, features):
        logits = model(features, training=False)
        return {"logits": logits, "example_index": features["example_index"]}

    out = trainer.predict(numpy_dataset(arrays, batch_size, False, 0), output_fn)
    logits = out["logits"][np.argsort(out["example_index"], kind="stable")]
    log_probs = tf.nn.log_softmax(logits, axis=-1).numpy()
    return np.exp(log_probs), log_probs


def main(argv):
    del argv
    import keras
    import numpy as np

    from data_prep import swag
    from official_bert import checkpoints, distribution, optimization, tokenization, training

    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise ValueError("at least one of --do_train, --do_eval, --do_predict must be set")
    for flag, needed in (("train_file", FLAGS.do_train), ("eval_file", FLAGS.do_eval),
                         ("predict_file", FLAGS.do_predict)):
        if needed and not getattr(FLAGS, flag):
            raise ValueError(f"--{flag} is required with --do_{flag.split('_')[0]}")
    if not FLAGS.output_dir:
        raise ValueError("--output_dir is required")
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    keras.utils.set_random_seed(FLAGS.seed)
    if _policy():
        keras.mixed_precision.set_global_policy(_policy())

    bert_config, ckpt, vocab_file, do_lower_case = resolve_model_files()
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    bert_config.to_json_file(os.path.join(FLAGS.output_dir, "bert_config.json"))
    checkpoints._copy_atomic(vocab_file, os.path.join(FLAGS.output_dir, "vocab.txt"))

    # Read every input first: a bad file fails before minutes of training.
    train_examples = swag.read_swag(FLAGS.train_file) if FLAGS.do_train else None
    eval_examples = swag.read_swag(FLAGS.eval_file) if FLAGS.do_eval else None
    predict_examples = (swag.read_swag(FLAGS.predict_file, require_label=False)
                        if FLAGS.do_predict else None)

    num_train_steps = num_warmup_steps = 0
    if train_examples:
        if FLAGS.max_train_examples:
            train_examples = train_examples[:FLAGS.max_train_examples]
        num_train_steps = int(len(train_examples) / FLAGS.train_batch_size * FLAGS.num_train_epochs)
        if num_train_steps <= 0:
            raise ValueError(f"{len(train_examples)} training examples make no step of batch "
                             f"{FLAGS.train_batch_size}; lower --train_batch_size")
        num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
        logging.info("train: %d examples, %d choices each, %d steps",
                     len(train_examples), len(train_examples[0].endings), num_train_steps)

    strategy = distribution.get_strategy(FLAGS.distribution_strategy, FLAGS.num_gpus, FLAGS.tpu)
    config = training.TrainingConfig(
        output_dir=FLAGS.output_dir, num_train_steps=max(num_train_steps, 1),
        save_checkpoints_steps=FLAGS.save_checkpoints_steps, log_steps=FLAGS.log_steps,
        steps_per_loop=FLAGS.log_steps, jit_compile=FLAGS.jit_compile,
        tokens_per_example=FLAGS.max_seq_length)
    optimizer_fn = None
    if FLAGS.do_train:
        optimizer_fn = lambda: optimization.create_optimizer(optimization.OptimizerConfig(
            learning_rate=FLAGS.learning_rate, num_train_steps=num_train_steps,
            num_warmup_steps=num_warmup_steps))

    def init_fn(model):
        if ckpt is not None:
            checkpoints.assign_encoder_weights(model.encoder, ckpt.weights)
            logging.info("Initialized the encoder from %s", FLAGS.init_checkpoint)

    trainer = training.Trainer(MultipleChoiceTask(bert_config), strategy, config,
                               optimizer_fn=optimizer_fn, init_fn=init_fn,
                               loss_scale=FLAGS.dtype == "float16")

    if FLAGS.do_train:
        arrays = swag.convert_examples(train_examples, tokenizer, FLAGS.max_seq_length)
        start = time.time()
        trainer.train(numpy_dataset(arrays, FLAGS.train_batch_size, True, FLAGS.seed),
                      FLAGS.train_batch_size)
        logging.info("Training took %.1f s", time.time() - start)

    if FLAGS.do_eval:
        arrays = swag.convert_examples(eval_examples, tokenizer, FLAGS.max_seq_length)
        probabilities, log_probs = predict_probabilities(trainer, arrays, FLAGS.eval_batch_size)
        labels = arrays["label"]
        results = {
            "eval_accuracy": float(np.mean(np.argmax(probabilities, -1) == labels)),
            "eval_loss": float(-np.mean(log_probs[np.arange(len(labels)), labels])),
            "global_step": int(trainer.global_step.numpy()),
            "num_examples": len(labels),
        }
        training.write_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), results)
        logging.info("Eval results: %s", results)

    if FLAGS.do_predict:
        from official_bert.configs import write_text_atomic

        arrays = swag.convert_examples(predict_examples, tokenizer, FLAGS.max_seq_length)
        probabilities, _ = predict_probabilities(trainer, arrays, FLAGS.predict_batch_size)
        lines = ["\t".join(f"{p:.8f}" for p in row) for row in probabilities]
        path = os.path.join(FLAGS.output_dir, "test_results.tsv")
        write_text_atomic(path, "\n".join(lines) + "\n")
        logging.info("Wrote %d predictions to %s", len(lines), path)

    if FLAGS.export_dir:
        from official_bert import export_tasks

        path = export_tasks.export_multiple_choice(
            trainer.model, vocab_file, do_lower_case, FLAGS.max_seq_length, FLAGS.export_dir)
        logging.info("Exported the raw-text multiple-choice model to %s", path)


if __name__ == "__main__":
    app.run(main)
