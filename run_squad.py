"""Fine-tunes BERT on SQuAD v1.1 / v2.0 and predicts answers (google-research/bert's run_squad.py).

Flags and defaults are google's; added: --distribution_strategy, --dtype,
--jit_compile, --seed, --max_train_examples, --max_predict_examples,
--export_dir, --tune_threshold. Any checkpoint kind loads (Hugging Face
directory, Google TF1 checkpoint, official_bert checkpoint); a SQuAD head in it
(`cls/squad/*`, HF `qa_outputs`) is loaded too.

Outputs in --output_dir: checkpoints, predictions.json, nbest_predictions.json,
null_odds.json (v2.0), and when the predict file has answers eval_results.json
(the official SQuAD metric; v2.0 also HasAns/NoAns and the best threshold).

Example (v1.1):
  python run_squad.py --do_train --do_predict \\
    --init_checkpoint=path/to/all-MiniLM-L6-v2 \\
    --train_file=train-v1.1.json --predict_file=dev-v1.1.json \\
    --train_batch_size=16 --learning_rate=5e-5 --num_train_epochs=1 \\
    --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad
"""

from __future__ import annotations

import json
import math
import os
import time

from absl import flags, logging

from official_bert import app, runner

app.quiet_tensorflow()

FLAGS = flags.FLAGS

runner.define_model_flags(max_seq_length=384)
runner.define_distribution_flags()
flags.DEFINE_string("output_dir", None, "Checkpoints and predictions are written here.")
flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions, e.g. dev-v1.1.json.")
flags.DEFINE_integer("doc_stride", 128, "Stride between context windows, in tokens.")
flags.DEFINE_integer("max_query_length", 64, "Question tokens kept.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_predict", False, "Whether to run prediction on --predict_file.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Epochs over the training windows.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of the steps of linear warm-up.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between checkpoints.")
flags.DEFINE_integer("log_steps", 50, "Steps between progress lines.")
flags.DEFINE_integer("n_best_size", 20, "Candidates per question in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in WordPiece tokens.")
flags.DEFINE_bool("verbose_logging", False, "Log get_final_text alignment failures.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: questions may have no answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "v2.0: predict no answer when null score - best non-null score > this.")
flags.DEFINE_bool("tune_threshold", False,
                  "v2.0: apply the best_f1_thresh found on --predict_file (needs answers).")
flags.DEFINE_integer("seed", 42, "Seed for the head's initialization, dropout and shuffling.")
flags.DEFINE_integer("max_train_examples", None, "Use only the first N training questions.")
flags.DEFINE_integer("max_predict_examples", None, "Predict only the first N questions.")
flags.DEFINE_string("export_dir", None,
                    "Write a raw-text SavedModel (question, context → answer) here.")
runner.define_dynamic_padding_flag()


def validate_flags(config=None):
    """Flag checks; those that need the model's config when it is given."""
    if config is not None:
        if FLAGS.max_seq_length > config.max_position_embeddings:
            raise ValueError(
                f"Cannot use sequence length {FLAGS.max_seq_length} because the BERT model "
                f"was only trained up to sequence length {config.max_position_embeddings}")
        return
    if not FLAGS.do_train and not FLAGS.do_predict:
        raise ValueError("At least one of --do_train or --do_predict must be set.")
    if FLAGS.do_train and not FLAGS.train_file:
        raise ValueError("--do_train needs --train_file.")
    if FLAGS.do_predict and not FLAGS.predict_file:
        raise ValueError("--do_predict needs --predict_file.")
    if not FLAGS.output_dir:
        raise ValueError("--output_dir is required.")
    if not FLAGS.init_checkpoint and not FLAGS.bert_config_file:
        raise ValueError("pass --init_checkpoint (or at least --bert_config_file and --vocab_file)")
    if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
        raise ValueError(f"The max_seq_length ({FLAGS.max_seq_length}) must be greater than "
                         f"max_query_length ({FLAGS.max_query_length}) + 3")
    if FLAGS.tune_threshold and not FLAGS.version_2_with_negative:
        raise ValueError("--tune_threshold needs --version_2_with_negative")
    for name in ("doc_stride", "train_batch_size", "predict_batch_size", "n_best_size",
                 "max_answer_length"):
        if getattr(FLAGS, name) <= 0:
            raise ValueError(f"--{name} must be positive, got {getattr(FLAGS, name)}")


def main(argv):
    del argv
    from data_prep import squad

    # Mistakes in the flags and the SQuAD files surface before TensorFlow starts.
    validate_flags()
    read_stats = squad.ReadStats()
    train_examples = eval_examples = None
    if FLAGS.do_train:
        train_examples = squad.read_squad_examples(
            FLAGS.train_file, is_training=True,
            version_2_with_negative=FLAGS.version_2_with_negative, stats=read_stats)
    if FLAGS.do_predict:
        eval_examples = squad.read_squad_examples(
            FLAGS.predict_file, is_training=False,
            version_2_with_negative=FLAGS.version_2_with_negative)

    import keras
    import numpy as np
    import tensorflow as tf

    from official_bert import checkpoints
    from official_bert.metrics import squad as squad_metrics
    from official_bert.text import tokenization
    from official_bert.tasks.squad import SpanLabelingTask
    from official_bert.modeling.configs import write_text_atomic

    files = runner.resolve_model_files(
        init_checkpoint=FLAGS.init_checkpoint, bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    config, ckpt = files.config, files.checkpoint
    vocab_file, do_lower_case = files.vocab_file, files.do_lower_case
    validate_flags(config)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    files.copy_to(FLAGS.output_dir)

    keras.utils.set_random_seed(FLAGS.seed)
    policy = runner.dtype_policy(FLAGS.dtype)
    window_args = dict(max_seq_length=FLAGS.max_seq_length, doc_stride=FLAGS.doc_stride,
                       max_query_length=FLAGS.max_query_length)

    train_arrays = None
    num_train_steps, num_warmup_steps = 1, 0
    if FLAGS.do_train:
        if FLAGS.max_train_examples:
            train_examples = train_examples[:FLAGS.max_train_examples]
        feature_stats = squad.FeatureStats()
        train_features = squad.convert_examples_to_features(
            train_examples, tokenizer, is_training=True, stats=feature_stats, **window_args)
        train_arrays = squad.features_to_arrays(train_features, is_training=True)
        # google counts steps in questions (int(examples / batch * epochs)); the
        # reference implementation (and this one) in windows, rounded up.
        num_train_steps = max(1, math.ceil(
            len(train_features) * FLAGS.num_train_epochs / FLAGS.train_batch_size))
        num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
        logging.info("***** Running training *****")
        logging.info("  Num orig examples = %d (skipped: %d answer mismatches, %d empty "
                     "contexts)", len(train_examples), read_stats.answer_mismatch,
                     read_stats.empty_context)
        logging.info("  Num split examples = %d (%d windows without the answer → [CLS])",
                     len(train_features), feature_stats.windows_without_answer)
        logging.info("  Batch size = %d", FLAGS.train_batch_size)
        logging.info("  Num steps = %d (warm-up %d)", num_train_steps, num_warmup_steps)

    task = SpanLabelingTask(config, dtype=policy, seed=FLAGS.seed)

    def init_fn(model):
        if not FLAGS.init_checkpoint:
            logging.warning("no --init_checkpoint: the encoder starts from random weights")
            return
        checkpoints.assign_encoder_weights(model.encoder, ckpt.weights)
        if model.load_head_weights(ckpt):
            logging.info("Loaded the SQuAD head (cls/squad/*) from %s", FLAGS.init_checkpoint)

    trainer = runner.make_trainer(task, runner.RunSettings.from_flags(FLAGS), num_train_steps,
                                  num_warmup_steps, init_fn, train=FLAGS.do_train)
    strategy = trainer.strategy

    if FLAGS.do_train:
        global_batch = FLAGS.train_batch_size
        if global_batch % strategy.num_replicas_in_sync:
            raise ValueError(f"--train_batch_size={global_batch} is not divisible by the "
                             f"{strategy.num_replicas_in_sync} replicas")
        arrays = {k: v for k, v in train_arrays.items() if k != "unique_ids"}

        # Shuffled before it is repeated, so each epoch sees every window once
        # (shuffling the repeated stream left a third of the windows unseen in
        # a one-epoch run).
        train_dataset = runner.numpy_dataset(arrays, global_batch, training=True,
                                             seed=FLAGS.seed)
        start = time.time()
        results = trainer.train(train_dataset, global_batch)
        logging.info("Training took %.1f s; last window: %s", time.time() - start, results)

    if FLAGS.do_predict:
        if FLAGS.max_predict_examples:
            eval_examples = eval_examples[:FLAGS.max_predict_examples]
        eval_features = squad.convert_examples_to_features(
            eval_examples, tokenizer, is_training=False, **window_args)
        eval_arrays = squad.features_to_arrays(eval_features, is_training=False)
        logging.info("***** Running predictions *****")
        logging.info("  Num orig examples = %d", len(eval_examples))
        logging.info("  Num split examples = %d", len(eval_features))

        multiple = runner.RunSettings.from_flags(FLAGS).padding_multiple()
        if multiple:
            # Windows sorted by length, longest first, so each batch is cut
            # near its own length (in file order nearly every batch holds a
            # full-length window); answers are matched by unique_id.
            lengths = eval_arrays["input_mask"].sum(axis=1)
            order = np.argsort(-lengths, kind="stable")
            eval_arrays = {k: v[order] for k, v in eval_arrays.items()}
            batches = np.split(lengths[order], range(FLAGS.predict_batch_size, len(lengths),
                                                     FLAGS.predict_batch_size))
            kept = sum(runner.bucketed_length(b.max(), multiple, FLAGS.max_seq_length) * len(b)
                       for b in batches)
            logging.info("  Dynamic padding: %.1f%% of the %d-token positions computed",
                         100.0 * kept / (len(lengths) * FLAGS.max_seq_length),
                         FLAGS.max_seq_length)
        predict_dataset = runner.numpy_dataset(eval_arrays, FLAGS.predict_batch_size,
                                               training=False, seed=FLAGS.seed,
                                               trim_padding_multiple=multiple)

        def output_fn(model, features):
            inputs = {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
            outputs = model(inputs, training=False)
            # Back to full length, so batches concatenate (the post-processing
            # reads only each window's tokens, never its padding).
            cut = FLAGS.max_seq_length - tf.shape(inputs["input_mask"])[1]
            logits = {k: tf.pad(v, [[0, 0], [0, cut]]) for k, v in outputs.items()}
            return {"unique_ids": features["unique_ids"], **logits}

        start = time.time()
        raw = trainer.predict(predict_dataset, output_fn)
        logging.info("Prediction took %.1f s", time.time() - start)
        results = {int(u): (s, e) for u, s, e in zip(
            raw["unique_ids"], raw["start_logits"], raw["end_logits"])}
        predictions = squad.postprocess_predictions(
            eval_examples, eval_features, results, n_best_size=FLAGS.n_best_size,
            max_answer_length=FLAGS.max_answer_length, do_lower_case=do_lower_case,
            version_2_with_negative=FLAGS.version_2_with_negative,
            null_score_diff_threshold=FLAGS.null_score_diff_threshold,
            verbose_logging=FLAGS.verbose_logging)
        answers = {q: p.text for q, p in predictions.items()}
        dataset = squad.load_squad_json(FLAGS.predict_file)
        eval_results = None
        if squad_metrics.has_gold_answers(dataset):
            eval_results, answers = evaluate(dataset, predictions, answers, squad_metrics,
                                             squad)
        squad.write_prediction_files(predictions, FLAGS.output_dir,
                                     FLAGS.version_2_with_negative, answers)
        if eval_results is not None:
            write_text_atomic(os.path.join(FLAGS.output_dir, "eval_results.json"),
                              json.dumps(eval_results, indent=2) + "\n")
            logging.info("eval results: %s", json.dumps(eval_results))
            print(json.dumps(eval_results), flush=True)

    if FLAGS.export_dir:
        from official_bert import export_squad

        threshold = FLAGS.null_score_diff_threshold
        if FLAGS.do_predict and FLAGS.tune_threshold and eval_results:
            threshold = eval_results.get("tuned_threshold", threshold)
        export_squad.export_squad_model(
            trainer.model, tokenization.load_vocab_list(vocab_file), FLAGS.export_dir,
            lower_case=do_lower_case, version_2_with_negative=FLAGS.version_2_with_negative,
            null_score_diff_threshold=threshold, **window_args,
            n_best_size=FLAGS.n_best_size, max_answer_length=FLAGS.max_answer_length)
        logging.info("Exported the raw-text SavedModel to %s", FLAGS.export_dir)


def evaluate(dataset, predictions, answers, squad_metrics, squad):
    """The official metric on `answers`; returns (results, answers to write)."""
    if FLAGS.max_predict_examples:
        # Only part of the file was predicted: score those questions only
        # (questions skipped for an empty context still count, as 0).
        ids = set(answers)
        dataset = [{"paragraphs": [{"qas": [qa for qa in p["qas"] if qa["id"] in ids]}
                                   for p in a["paragraphs"]]} for a in dataset]
    if not FLAGS.version_2_with_negative:
        results = squad_metrics.evaluate_v1(dataset, answers)
        return results, answers
    null_odds = {q: p.score_diff for q, p in predictions.items()}
    best_non_null = {q: p.best_text for q, p in predictions.items()}
    # Official numbers on the answers as decided with --null_score_diff_threshold;
    # the threshold search uses every question's best non-null answer, so it is
    # exact for any threshold (the official script assumes predictions.json is).
    results = squad_metrics.evaluate_v2(dataset, answers, null_odds,
                                        best_thresh_preds=best_non_null)
    results["null_score_diff_threshold"] = FLAGS.null_score_diff_threshold
    if FLAGS.tune_threshold:
        threshold = squad_metrics.tuned_threshold(dataset, best_non_null, null_odds)
        answers = squad.apply_threshold(predictions, threshold)
        tuned = squad_metrics.evaluate_v2(dataset, answers, None)
        results["tuned_threshold"] = threshold
        for key in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"):
            if key in tuned:
                results[f"tuned_{key}"] = tuned[key]
    return results, answers


def entry(argv=None):
    """Console entry point (`bert squad`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
