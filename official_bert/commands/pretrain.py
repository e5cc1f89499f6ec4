"""Pre-trains BERT: masked LM + next sentence, on any tf.distribute strategy.

google-research/bert's `run_pretraining.py` flags, plus distribution
(`--distribution_strategy`, `--num_gpus`, `--tpu`), precision (`--dtype`),
XLA (`--jit_compile`), `--optimizer {adamw,lamb}`,
`--gradient_accumulation_steps` and `--dynamic_masking`. Input: TFRecords of
`data_prep/create_pretraining_data.py` or of google-research/bert's generator,
checked before the model is built. The output directory is itself an
`--init_checkpoint` for fine-tuning and for a second phase; running the same
command again resumes. What it writes: `official_bert/tasks/pretraining.py`.

Example (phase 1 at length 128, then phase 2 at 512 from phase 1's output):
  python run_pretraining.py --do_train --do_eval \\
    --input_file='/data/pretrain-128-*.tfrecord' --bert_config_file=bert_config.json \\
    --vocab_file=vocab.txt --max_seq_length=128 --max_predictions_per_seq=20 \\
    --train_batch_size=256 --learning_rate=1e-4 --num_train_steps=900000 \\
    --num_warmup_steps=10000 --output_dir=/runs/phase1
  python run_pretraining.py --do_train --do_eval \\
    --input_file='/data/pretrain-512-*.tfrecord' --init_checkpoint=/runs/phase1 \\
    --max_seq_length=512 --max_predictions_per_seq=80 --train_batch_size=256 \\
    --learning_rate=1e-4 --num_train_steps=100000 --num_warmup_steps=10000 \\
    --output_dir=/runs/phase2
"""

from __future__ import annotations

from absl import flags

from official_bert import app, cli_flags

# tasks.pretraining loads TensorFlow: `main` imports it once the flags are parsed, so
# that defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Input TFRecord files: comma-separated globs.")
flags.DEFINE_string("eval_input_file", None,
                    "Held-out TFRecords for --do_eval (default: --input_file).")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Masked-LM predictions per instance; must be what the files were made with "
                     "(with --dynamic_masking, the most positions masked).")
flags.DEFINE_integer("num_train_steps", 100000, "Optimizer updates in the whole run.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Updates of linear learning-rate warm-up.")
flags.DEFINE_integer("max_eval_steps", 100, "Most evaluation batches.")
flags.DEFINE_bool("dynamic_masking", False,
                  "Mask at read time, fresh every epoch (also re-masks static files). Unmasked "
                  "files are always masked at read time.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens masked by dynamic masking.")
flags.DEFINE_enum("input_format", "tfrecord", ["tfrecord", "text"],
                  "tfrecord: create_pretraining_data's files. text: --input_file is the "
                  "sentence-per-line corpus itself (a blank line between documents); instances "
                  "are made on the fly with the generator's code (needs --vocab_file).")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Mask whole words: with --input_format=text, or dynamic masking of files made "
                  "with --do_whole_word_mask.")
flags.DEFINE_integer("max_ngram_size", 1,
                     "Mask spans of up to this many contiguous words (--do_whole_word_mask) or "
                     "word pieces, length n drawn with probability proportional to 1/n "
                     "(official/nlp's flag): with --input_format=text or --dynamic_masking.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "--input_format=text: probability of a shorter target length (as "
                   "create_pretraining_data's flag).")
flags.DEFINE_integer("length_bucket_width", 0,
                     "Length bucketing of training batches: each batch holds instances whose "
                     "length rounded up to a multiple of this is the same, and is cut to it (less "
                     "padding, max_seq_length / width shapes to compile; e.g. 16 or 32). 0: every "
                     "batch is padded to --max_seq_length (--dynamic_padding does not apply to "
                     "pre-training). Not on TPU.")
cli_flags.define_run_flags(max_seq_length=128, modes=("train", "eval"), train_batch_size=32,
                           num_train_epochs=None, log_steps=100, seed=12345)


# The main/entry pair every task command ends with (deliberately the same): flags → config →
# the library.
def main(argv):
    app.refuse_arguments(argv)
    from official_bert.tasks import base, pretraining

    config = cli_flags.from_flags(pretraining.PretrainingConfig, FLAGS)
    base.run(pretraining.PretrainingTask(config, cli_flags.run_config(FLAGS)))


def entry(argv=None):
    """Console entry point (`bert pretrain`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
