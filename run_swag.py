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

from official_bert import app, runner

app.quiet_tensorflow()

FLAGS = flags.FLAGS

flags.DEFINE_string("train_file", None, "SWAG CSV to train on.")
flags.DEFINE_string("eval_file", None, "SWAG CSV (with labels) to evaluate on.")
flags.DEFINE_string("predict_file", None, "SWAG CSV to predict (label column optional).")
runner.define_model_flags(max_seq_length=128)
runner.define_finetuning_flags(train_batch_size=16)
runner.define_distribution_flags()


def predict_probabilities(trainer, arrays, batch_size, padding_multiple=None):
    """(probabilities [examples, choices], log-probability of the label) in file order."""
    import numpy as np
    import tensorflow as tf

    def output_fn(model, features):
        logits = model(features, training=False)
        return {"logits": logits, "example_index": features["example_index"]}

    out = trainer.predict(runner.numpy_dataset(arrays, batch_size, False, 0, padding_multiple),
                          output_fn)
    logits = out["logits"][np.argsort(out["example_index"], kind="stable")]
    log_probs = tf.nn.log_softmax(logits, axis=-1).numpy()
    return np.exp(log_probs), log_probs


def main(argv):
    del argv
    import keras
    import numpy as np

    from data_prep import swag
    from official_bert.tasks import multiple_choice
    from official_bert.text import tokenization
    from official_bert.training import trainer as training

    runner.check_modes(do_train=FLAGS.do_train, do_eval=FLAGS.do_eval,
                       do_predict=FLAGS.do_predict, output_dir=FLAGS.output_dir,
                       train_file=FLAGS.train_file, eval_file=FLAGS.eval_file,
                       predict_file=FLAGS.predict_file)
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    keras.utils.set_random_seed(FLAGS.seed)
    policy = runner.dtype_policy(FLAGS.dtype)
    if policy:
        keras.mixed_precision.set_global_policy(policy)

    files = runner.resolve_model_files(
        init_checkpoint=FLAGS.init_checkpoint, bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
        max_seq_length=FLAGS.max_seq_length)
    tokenizer = tokenization.FullTokenizer(files.vocab_file, do_lower_case=files.do_lower_case)
    files.copy_to(FLAGS.output_dir)

    # Read every input first: a bad file fails before minutes of training.
    train_examples = swag.read_swag(FLAGS.train_file) if FLAGS.do_train else None
    eval_examples = swag.read_swag(FLAGS.eval_file) if FLAGS.do_eval else None
    predict_examples = (swag.read_swag(FLAGS.predict_file, require_label=False)
                        if FLAGS.do_predict else None)

    num_train_steps = num_warmup_steps = 0
    if train_examples:
        if FLAGS.max_train_examples:
            train_examples = train_examples[:FLAGS.max_train_examples]
        num_train_steps, num_warmup_steps = runner.training_steps(
            len(train_examples), FLAGS.train_batch_size, FLAGS.num_train_epochs,
            FLAGS.warmup_proportion)
        logging.info("train: %d examples, %d choices each, %d steps",
                     len(train_examples), len(train_examples[0].endings), num_train_steps)

    settings = runner.RunSettings.from_flags(FLAGS)
    trainer = runner.make_trainer(
        multiple_choice.MultipleChoiceTask(files.config, policy), settings,
        num_train_steps, num_warmup_steps, runner.encoder_init_fn(files.checkpoint),
        train=FLAGS.do_train)

    if FLAGS.do_train:
        arrays = swag.convert_examples(train_examples, tokenizer, FLAGS.max_seq_length)
        start = time.time()
        trainer.train(runner.numpy_dataset(arrays, FLAGS.train_batch_size, True, FLAGS.seed,
                                           settings.padding_multiple()),
                      FLAGS.train_batch_size)
        logging.info("Training took %.1f s", time.time() - start)

    if FLAGS.do_eval:
        arrays = swag.convert_examples(eval_examples, tokenizer, FLAGS.max_seq_length)
        probabilities, log_probs = predict_probabilities(trainer, arrays, FLAGS.eval_batch_size,
                                                         settings.padding_multiple())
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
        from official_bert.modeling.configs import write_text_atomic

        arrays = swag.convert_examples(predict_examples, tokenizer, FLAGS.max_seq_length)
        probabilities, _ = predict_probabilities(trainer, arrays, FLAGS.predict_batch_size,
                                                 settings.padding_multiple())
        lines = ["\t".join(f"{p:.8f}" for p in row) for row in probabilities]
        path = os.path.join(FLAGS.output_dir, "test_results.tsv")
        write_text_atomic(path, "\n".join(lines) + "\n")
        logging.info("Wrote %d predictions to %s", len(lines), path)

    if FLAGS.export_dir:
        from official_bert import export_tasks

        path = export_tasks.export_multiple_choice(
            trainer.model, files.vocab_file, files.do_lower_case, FLAGS.max_seq_length, FLAGS.export_dir)
        logging.info("Exported the raw-text multiple-choice model to %s", path)


def entry(argv=None):
    """Console entry point (`bert swag`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
