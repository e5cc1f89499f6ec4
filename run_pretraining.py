"""Pre-trains BERT: masked LM + next sentence, on any tf.distribute strategy.

google-research/bert's `run_pretraining.py` flags (`--bert_config_file`,
`--input_file`, `--output_dir`, `--init_checkpoint`, `--max_seq_length`,
`--max_predictions_per_seq`, `--do_train`, `--do_eval`, `--train_batch_size`,
`--eval_batch_size`, `--learning_rate`, `--num_train_steps`,
`--num_warmup_steps`, `--save_checkpoints_steps`, `--iterations_per_loop`,
`--max_eval_steps`), plus distribution (`--distribution_strategy`,
`--num_gpus`, `--tpu`), precision (`--dtype`), XLA (`--jit_compile`),
`--optimizer {adamw,lamb}`, `--gradient_accumulation_steps` and
`--dynamic_masking`.

Input: TFRecords of `data_prep/create_pretraining_data.py` or of
google-research/bert's generator (static masks), or unmasked files
(`create_pretraining_data.py --dynamic_masking`) masked at read time, fresh
every epoch. Every input is checked before the model is built: a glob that
matches nothing, a file without a feature (named), a length that is not
`--max_seq_length`, a `--max_seq_length` longer than the config's positions,
a batch that the replicas (times the accumulation steps) do not divide.

Output in `--output_dir`: checkpoints every `--save_checkpoints_steps` and at
the end (`--keep_checkpoint_max` kept), TensorBoard summaries (`train/`,
`eval/`), `eval_results.txt` with `--do_eval`, and `bert_config.json` +
`vocab.txt`, so the directory is itself an `--init_checkpoint` for the
fine-tuning scripts and for a second pre-training phase. Running the same
command again resumes from the latest checkpoint (step, optimizer slots,
learning-rate position, input position) and stops at `--num_train_steps`.

Example (phase 1 at length 128, then phase 2 at 512 from phase 1's output):
  python run_pretraining.py --do_train --do_eval \
    --input_file='/data/pretrain-128-*.tfrecord' --bert_config_file=bert_config.json \
    --vocab_file=vocab.txt --max_seq_length=128 --max_predictions_per_seq=20 \
    --train_batch_size=256 --learning_rate=1e-4 --num_train_steps=900000 \
    --num_warmup_steps=10000 --output_dir=/runs/phase1
  python run_pretraining.py --do_train --do_eval \
    --input_file='/data/pretrain-512-*.tfrecord' --init_checkpoint=/runs/phase1 \
    --max_seq_length=512 --max_predictions_per_seq=80 --train_batch_size=256 \
    --learning_rate=1e-4 --num_train_steps=100000 --num_warmup_steps=10000 \
    --output_dir=/runs/phase2
"""

from __future__ import annotations

import json
import os
import time

from absl import flags, logging

from official_bert import app, runner

app.quiet_tensorflow()

FLAGS = flags.FLAGS

# google-research/bert's flags, same names and defaults.
flags.DEFINE_string("bert_config_file", None,
                    "bert_config.json of the model (default: the one beside --init_checkpoint).")
flags.DEFINE_string("input_file", None,
                    "Input TFRecord files: comma-separated globs.")
flags.DEFINE_string("output_dir", None,
                    "Checkpoints, summaries, eval_results.txt, bert_config.json and vocab.txt; "
                    "rerunning with the same directory resumes.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights: a Google TF1 bert_model.ckpt, a Hugging Face directory, or "
                    "an official_bert run directory (e.g. phase 1's --output_dir). The "
                    "pre-training heads are loaded too when the checkpoint has them.")
flags.DEFINE_integer("max_seq_length", 128,
                     "Tokens per instance; must be the length the files were made with.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Masked-LM predictions per instance; must be what the files were made with "
                     "(with --dynamic_masking, the most positions masked).")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate (on --eval_input_file, default --input_file).")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training (all replicas).")
flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for evaluation.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("num_train_steps", 100000, "Optimizer updates in the whole run.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Updates of linear learning-rate warm-up.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Updates between checkpoints.")
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "Updates per host call (capped at --log_steps).")
flags.DEFINE_integer("max_eval_steps", 100, "Most evaluation batches.")
# Beyond google's.
flags.DEFINE_string("eval_input_file", None,
                    "Held-out TFRecords for --do_eval (default: --input_file).")
flags.DEFINE_string("vocab_file", None,
                    "vocab.txt, copied to --output_dir (default: beside --init_checkpoint, else "
                    "the one the files' .summary.json names). Dynamic masking reads the "
                    "[MASK]/[CLS]/[SEP] ids and the random replacement tokens from it.")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"],
                  "AdamW (BERT), or Lamb for large batches.")
flags.DEFINE_integer("gradient_accumulation_steps", 1,
                     "Micro-batches summed per update: the batch per replica in memory is "
                     "train_batch_size / replicas / gradient_accumulation_steps.")
flags.DEFINE_bool("dynamic_masking", False,
                  "Mask at read time, fresh every epoch (also re-masks static files). Unmasked "
                  "files are always masked at read time.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens masked by dynamic masking.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept.")
flags.DEFINE_integer("log_steps", 100, "Updates between progress lines and summaries.")
flags.DEFINE_integer("seed", 12345, "Random seed: initialization, dropout, input order, masks.")
flags.DEFINE_integer("num_cpu_devices", 0,
                     "Split the CPU into this many logical devices (to run "
                     "--distribution_strategy=mirrored without GPUs, e.g. in tests).")
runner.define_distribution_flags()


def _summary_beside(files):
    """The generator's `<file>.summary.json` beside the first input that has one."""
    for path in files:
        summary = path + ".summary.json"
        if os.path.exists(summary):
            try:
                with open(summary, encoding="utf-8") as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
    return None


def check_flags():
    """Flag errors that need no file and no TensorFlow."""
    if not (FLAGS.do_train or FLAGS.do_eval):
        raise ValueError("at least one of --do_train, --do_eval must be set")
    for name in ("input_file", "output_dir"):
        if not getattr(FLAGS, name):
            raise ValueError(f"--{name} is required")
    if not (FLAGS.bert_config_file or FLAGS.init_checkpoint):
        raise ValueError("pass --bert_config_file (to train from random weights) or "
                         "--init_checkpoint")
    for name in ("max_seq_length", "max_predictions_per_seq", "train_batch_size",
                 "eval_batch_size", "num_train_steps", "save_checkpoints_steps",
                 "iterations_per_loop", "max_eval_steps", "keep_checkpoint_max", "log_steps",
                 "gradient_accumulation_steps"):
        if getattr(FLAGS, name) <= 0:
            raise ValueError(f"--{name} must be positive, got {getattr(FLAGS, name)}")
    if FLAGS.max_predictions_per_seq > FLAGS.max_seq_length:
        raise ValueError(f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq} is more "
                         f"than --max_seq_length={FLAGS.max_seq_length}")
    if not 0 <= FLAGS.num_warmup_steps <= FLAGS.num_train_steps:
        raise ValueError(f"--num_warmup_steps={FLAGS.num_warmup_steps} must be between 0 and "
                         f"--num_train_steps={FLAGS.num_train_steps}")


def load_model_files():
    """(config, checkpoint or None, vocab file or None) from the flags."""
    from official_bert import checkpoints
    from official_bert.modeling.configs import BertConfig

    config = BertConfig.from_json_file(FLAGS.bert_config_file) if FLAGS.bert_config_file else None
    ckpt = None
    if FLAGS.init_checkpoint:
        ckpt = checkpoints.read_checkpoint(FLAGS.init_checkpoint, config)
        config = ckpt.config
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} is longer than the model's "
                         f"max_position_embeddings ({config.max_position_embeddings})")
    vocab_file = FLAGS.vocab_file or (ckpt.vocab_file if ckpt else None)
    if FLAGS.vocab_file and not os.path.exists(FLAGS.vocab_file):
        raise ValueError(f"--vocab_file {FLAGS.vocab_file} does not exist")
    return config, ckpt, vocab_file


def check_vocab(vocab_file, config):
    from official_bert.text import tokenization

    size = len(tokenization.load_vocab_list(vocab_file))
    if size > config.vocab_size:
        raise ValueError(f"{vocab_file} has {size} tokens but the config's vocab_size is "
                         f"{config.vocab_size}: ids would fall outside the embeddings")


def make_dataset_fn(files, batch_size, training, vocab_file, config, drop_remainder=True):
    """A `dataset_fn` for `Trainer` (per-replica batches of `batch_size` / replicas)."""
    from official_bert.training import input_pipeline

    def dataset_fn(context=None):
        return input_pipeline.pretraining_dataset(
            files, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, batch_size,
            is_training=training, dynamic_masking=True if FLAGS.dynamic_masking else None,
            vocab_file=vocab_file, vocab_size=config.vocab_size,
            masked_lm_prob=FLAGS.masked_lm_prob, input_context=context, seed=FLAGS.seed,
            drop_remainder=drop_remainder)

    return dataset_fn


def init_fn_for(ckpt):
    """Loads the encoder and, when present, the pre-training heads."""
    from official_bert import checkpoints

    def init_fn(model):
        if ckpt is None:
            return
        checkpoints.assign_encoder_weights(model.encoder, ckpt.weights)
        source = ckpt.path if ckpt.kind == checkpoints.OFFICIAL_BERT else ckpt
        heads = model.load_head_weights(source)
        logging.info("Initialized the encoder%s from %s (%s checkpoint)",
                     " and the " + " and ".join(heads) + " head(s)" if heads else "",
                     ckpt.path, ckpt.kind)
        if len(heads) < 2:
            logging.info("Heads not in the checkpoint start from random weights.")

    return init_fn


def main(argv):
    del argv
    check_flags()
    import keras
    import tensorflow as tf

    from official_bert.tasks import pretraining
    from official_bert.training import distribution
    from official_bert.training import input_pipeline
    from official_bert.training import optimization
    from official_bert.training import trainer as training

    # The strategy first: splitting the CPU must come before TensorFlow starts.
    strategy = distribution.get_strategy(
        FLAGS.distribution_strategy, FLAGS.num_gpus, FLAGS.tpu,
        num_cpu_devices=FLAGS.num_cpu_devices)
    replicas = strategy.num_replicas_in_sync
    is_chief = distribution.is_chief(strategy)
    config, ckpt, vocab_file = load_model_files()

    # Check every input before building the model.
    def expand(flag, value):
        try:
            return input_pipeline.expand_file_patterns(value)
        except (OSError, ValueError) as e:
            raise ValueError(f"--{flag}: {e}") from None

    train_files = expand("input_file", FLAGS.input_file)
    eval_files = expand("eval_input_file", FLAGS.eval_input_file) if FLAGS.eval_input_file \
        else train_files
    summary = _summary_beside(train_files)
    if vocab_file is None and summary and os.path.exists(str(summary.get("vocab_file"))):
        vocab_file = summary["vocab_file"]
    if vocab_file:
        check_vocab(vocab_file, config)
    else:
        logging.warning("No vocabulary (--vocab_file): the output directory gets no vocab.txt, "
                        "and dynamic masking assumes Google's layout ([MASK]=103)")
    step_batch = FLAGS.train_batch_size
    if FLAGS.do_train and step_batch % (replicas * FLAGS.gradient_accumulation_steps):
        raise ValueError(
            f"--train_batch_size={step_batch} is not divisible by the {replicas} replica(s) "
            f"x --gradient_accumulation_steps={FLAGS.gradient_accumulation_steps}")
    if FLAGS.do_eval and FLAGS.eval_batch_size % replicas:
        raise ValueError(f"--eval_batch_size={FLAGS.eval_batch_size} is not divisible by the "
                         f"{replicas} replica(s)")
    micro_batch = step_batch // FLAGS.gradient_accumulation_steps
    train_fn = make_dataset_fn(train_files, micro_batch, True, vocab_file, config)
    eval_fn = make_dataset_fn(eval_files, FLAGS.eval_batch_size, False, vocab_file, config,
                              drop_remainder=replicas > 1)
    checks = [("input_file", train_fn)] if FLAGS.do_train else []
    if FLAGS.do_eval:
        checks.append(("eval_input_file" if FLAGS.eval_input_file else "input_file", eval_fn))
    for flag, dataset_fn in checks:
        try:
            dataset_fn()  # reads the first record of every file: names, kinds, lengths
        except tf.errors.OpError as e:
            raise ValueError(f"--{flag}: {e.message.splitlines()[0]}") from None
    static = "masked_lm_ids" in input_pipeline.inspect_file(train_files[0])[1]
    masking = ("static (from the files)" if static and not FLAGS.dynamic_masking
               else "dynamic (at read time)")
    logging.info("%d train file(s), %d eval file(s); masking: %s; %d replica(s), batch %d "
                 "(%d per replica x %d accumulation steps)", len(train_files), len(eval_files),
                 masking, replicas, step_batch, micro_batch // replicas,
                 FLAGS.gradient_accumulation_steps)

    policy = runner.dtype_policy(FLAGS.dtype)
    if policy:
        keras.mixed_precision.set_global_policy(policy)
    if is_chief:
        # bert_config.json and vocab.txt: the directory is an --init_checkpoint.
        os.makedirs(FLAGS.output_dir, exist_ok=True)
        if vocab_file:
            runner.ModelFiles(config, ckpt, vocab_file, True).copy_to(FLAGS.output_dir)
        else:
            config.to_json_file(os.path.join(FLAGS.output_dir, "bert_config.json"))
        if summary and isinstance(summary.get("config", {}).get("do_lower_case"), bool):
            from official_bert.modeling.configs import write_text_atomic

            # The casing the data was tokenized with, for the fine-tuning scripts.
            write_text_atomic(os.path.join(FLAGS.output_dir, "tokenizer_config.json"), json.dumps(
                {"do_lower_case": summary["config"]["do_lower_case"],
                 "tokenizer_class": "BertTokenizer"}, indent=2) + "\n")

    train_config = training.TrainingConfig(
        output_dir=FLAGS.output_dir, num_train_steps=FLAGS.num_train_steps,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max, log_steps=FLAGS.log_steps,
        steps_per_loop=min(FLAGS.iterations_per_loop, FLAGS.log_steps),
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        jit_compile=FLAGS.jit_compile, tokens_per_example=FLAGS.max_seq_length)
    optimizer_fn = None
    if FLAGS.do_train:
        optimizer_fn = lambda: optimization.create_optimizer(optimization.OptimizerConfig(
            learning_rate=FLAGS.learning_rate, num_train_steps=FLAGS.num_train_steps,
            num_warmup_steps=FLAGS.num_warmup_steps, optimizer=FLAGS.optimizer))
    trainer = training.Trainer(
        pretraining.PretrainingTask(config, policy, seed=FLAGS.seed), strategy, train_config,
        optimizer_fn=optimizer_fn, init_fn=init_fn_for(ckpt), loss_scale=FLAGS.dtype == "float16")

    if FLAGS.do_train:
        start = time.time()
        trainer.train(train_fn, step_batch)
        logging.info("Training took %.1f s; at step %d", time.time() - start,
                     int(trainer.global_step.numpy()))

    if FLAGS.do_eval:
        results = trainer.evaluate(eval_fn, steps=FLAGS.max_eval_steps)
        logging.info("Eval results: %s", results)
        if is_chief:
            training.write_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), results)
            writer = tf.summary.create_file_writer(os.path.join(FLAGS.output_dir, "eval"))
            with writer.as_default(step=results["global_step"]):
                for name, value in results.items():
                    if name != "global_step":
                        tf.summary.scalar(name, value)
            writer.flush()


def entry(argv=None):
    """Console entry point (`bert pretrain`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
