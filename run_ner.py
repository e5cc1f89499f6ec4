"""Named-entity recognition (token classification) with BERT: fine-tuning or feature-based.

Reads CoNLL files (CoNLL-2003's 4 columns with `-DOCSTART-`, WNUT-17's 2
columns; IOB1 or BIO, converted to BIO inside; see `data_prep/conll.py`).
Each word's first WordPiece carries its label (the others are ignored by the
loss and by prediction); sentences longer than `--max_seq_length` are split
into overlapping windows, never truncated.

Fine-tuning (default): a dense layer on each final token vector T_i, the whole
network trained. Feature-based (`--feature_based`, the BERT paper's §5.3): the
encoder is frozen and run once per sentence (its features cached in
`output_dir/feature_cache`), the `--layers` are combined (`--combine`
concat/sum/last) and a small task model (`--task_model` bilstm: 2 layers of
`--lstm_units` per direction, 768 in the paper; or dense) is trained on top.

Outputs in `--output_dir`: checkpoints, `eval_results.txt` (entity_f1,
precision, recall, token_accuracy, per-type `<type>_f1/_precision/_recall`,
eval_loss), `eval_predictions.conll` and `test_predictions.conll` (the input
columns with the predicted tag appended, in the file's tag scheme: conlleval
reads them), `label_list.txt`. `--export_dir` writes a raw-sentence
SavedModel (fine-tuning only; see `official_bert/export_tasks.py`).

Example (WNUT-17):
  python run_ner.py --do_train --do_eval \
    --train_file=../shared/data/ner/wnut17/wnut17train.conll \
    --eval_file=../shared/data/ner/wnut17/emerging.dev.conll \
    --init_checkpoint=$MINILM --max_seq_length=128 --train_batch_size=32 \
    --learning_rate=5e-5 --num_train_epochs=3 --output_dir=/tmp/wnut17
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time

from absl import flags, logging

from official_bert import app, runner

app.quiet_tensorflow()

FLAGS = flags.FLAGS

flags.DEFINE_string("train_file", None, "CoNLL file to train on.")
flags.DEFINE_string("eval_file", None, "CoNLL file with gold tags to evaluate on.")
flags.DEFINE_string("predict_file", None, "CoNLL file to tag (gold column optional).")
runner.define_model_flags(max_seq_length=128)
runner.define_finetuning_flags(train_batch_size=32)
runner.define_distribution_flags()
flags.DEFINE_integer("window_stride", None,
                     "Sub-tokens between the starts of a long sentence's windows "
                     "(default: half a window).")
flags.DEFINE_enum("tag_scheme", "auto", ["auto", "bio", "iob1"],
                  "The files' tag scheme (auto: I- opening an entity means IOB1).")
# Feature-based approach.
flags.DEFINE_bool("feature_based", False, "Freeze the encoder; train a task model on its features.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Encoder layers for --feature_based (-1 = last).")
flags.DEFINE_enum("combine", "concat", ["concat", "sum", "last"],
                  "How the --layers are combined (last: the deepest of them alone).")
flags.DEFINE_enum("task_model", "bilstm", ["bilstm", "dense"], "Task model for --feature_based.")
flags.DEFINE_integer("lstm_units", 768, "Units per direction (or dense width) of the task model.")
flags.DEFINE_integer("task_model_layers", 2, "Layers of the task model.")
flags.DEFINE_float("task_dropout", 0.1, "Dropout in the feature-based task model.")
flags.DEFINE_integer("feature_batch_size", 32, "Windows per encoder pass when caching features.")


# === Shared set-up ===


def _policy():
    return runner.dtype_policy(FLAGS.dtype)


def resolve_model_files():
    """(BertConfig, checkpoint or None, vocab_file, do_lower_case)."""
    files = runner.resolve_model_files(
        init_checkpoint=FLAGS.init_checkpoint, bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
        max_seq_length=FLAGS.max_seq_length)
    return files.config, files.checkpoint, files.vocab_file, files.do_lower_case


def read_labels(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def find_label_list():
    for directory in (FLAGS.output_dir, FLAGS.init_checkpoint):
        if directory:
            path = os.path.join(directory if os.path.isdir(directory) else os.path.dirname(directory),
                                "label_list.txt")
            if os.path.exists(path):
                return read_labels(path)
    raise ValueError(f"no label_list.txt in --output_dir {FLAGS.output_dir}: train first "
                     "(--do_train) or point --output_dir at a trained run")


def make_trainer(task, num_train_steps, num_warmup_steps, init_fn, train, jit_compile=None):
    settings = runner.RunSettings.from_flags(FLAGS)
    if jit_compile is not None:
        settings = dataclasses.replace(settings, jit_compile=jit_compile)
    return runner.make_trainer(task, settings, num_train_steps, num_warmup_steps, init_fn, train)


def _feature_task(num_labels, feature_dim):
    from official_bert.tasks.ner import TokenClassificationTask

    class FeatureTask(TokenClassificationTask):
        """Feature-based: `FeatureTagger` on cached per-word encoder features;
        the loss and metrics of fine-tuning, over words."""

        def __init__(self, num_labels, feature_dim):
            self.num_labels = num_labels
            self.feature_dim = feature_dim

        def build_model(self):
            import tensorflow as tf
            from official_bert.modeling.heads import FeatureTagger

            model = FeatureTagger(self.num_labels, kind=FLAGS.task_model,
                                  units=FLAGS.lstm_units, num_layers=FLAGS.task_model_layers,
                                  dropout=FLAGS.task_dropout)
            model({"features": tf.zeros([1, 2, self.feature_dim]),
                   "word_mask": tf.ones([1, 2], tf.int32)})
            return model

    return FeatureTask(num_labels, feature_dim)


# === Feature-based: cached features ===


def _cache_key(path, vocab_file, do_lower_case, layer_indexes, combine, max_examples):
    stat = os.stat(path)
    parts = [os.path.abspath(path), stat.st_size, stat.st_mtime, os.path.abspath(vocab_file),
             do_lower_case, FLAGS.init_checkpoint and os.path.abspath(FLAGS.init_checkpoint),
             layer_indexes, combine, FLAGS.max_seq_length, FLAGS.window_stride, max_examples]
    return hashlib.sha1(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def word_features(encoder, windows, sentence_lengths, layer_indexes, combine, batch_size):
    """Per-sentence [words, D] features from the frozen encoder (one pass per window).

    Returns (flat float16 [total words, D], row offsets [sentences + 1])."""
    import numpy as np
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def forward(inputs):
        outputs = encoder(inputs, training=False)["encoder_outputs"]
        chosen = [tf.cast(outputs[i], tf.float32) for i in layer_indexes]
        if combine == "concat":
            return tf.concat(chosen, axis=-1)
        if combine == "sum":
            return tf.add_n(chosen)
        deepest = max(layer_indexes, key=lambda i: i % len(outputs))
        return tf.cast(outputs[deepest], tf.float32)

    offsets = np.concatenate([[0], np.cumsum(sentence_lengths)]).astype(np.int64)
    flat = None
    start_time = time.time()
    for start in range(0, len(windows), batch_size):
        batch = windows[start:start + batch_size]
        width = max(sum(w.input_mask) for w in batch)
        inputs = {
            "input_word_ids": np.asarray([w.input_ids[:width] for w in batch], np.int32),
            "input_mask": np.asarray([w.input_mask[:width] for w in batch], np.int32),
            "input_type_ids": np.asarray([w.segment_ids[:width] for w in batch], np.int32),
        }
        values = forward(inputs).numpy()
        if flat is None:
            flat = np.zeros((offsets[-1], values.shape[-1]), np.float16)
        for row, window in enumerate(batch):
            for position, word in enumerate(window.word_index[:width]):
                if word >= 0:
                    flat[offsets[window.sentence_index] + word] = values[row, position]
        if (start // batch_size) % 50 == 0:
            logging.info("features: %d / %d windows (%.1f s)", start + len(batch), len(windows),
                         time.time() - start_time)
    return flat, offsets


def cached_word_features(split, path, sentences, windows, context):
    import numpy as np

    encoder, vocab_file, do_lower_case, layer_indexes, max_examples = context
    key = _cache_key(path, vocab_file, do_lower_case, layer_indexes, FLAGS.combine, max_examples)
    cache_dir = os.path.join(FLAGS.output_dir, "feature_cache")
    os.makedirs(cache_dir, exist_ok=True)
    # Named by file and settings, not split: eval and predict of one file share it.
    name = f"{os.path.basename(path)}-{key}"
    flat_path = os.path.join(cache_dir, f"{name}.features.npy")
    offsets_path = os.path.join(cache_dir, f"{name}.offsets.npy")
    if os.path.exists(flat_path) and os.path.exists(offsets_path):
        logging.info("Using cached %s features %s", split, flat_path)
        return np.load(flat_path, mmap_mode="r"), np.load(offsets_path)
    lengths = [len(s.words) for s in sentences]
    flat, offsets = word_features(encoder, windows, lengths, layer_indexes, FLAGS.combine,
                                  FLAGS.feature_batch_size)
    for target, value in ((offsets_path, offsets), (flat_path, flat)):
        tmp = f"{target}.tmp-{os.getpid()}.npy"
        np.save(tmp, value)
        os.replace(tmp, target)  # features last: their presence marks a complete cache
    return flat, offsets


def feature_arrays(sentences, flat, offsets, label_list):
    """(ragged features, ragged label ids) as tf.RaggedTensors."""
    import numpy as np
    import tensorflow as tf

    label_map = {label: i for i, label in enumerate(label_list)}
    labels = [label_map[t] if s.tags is not None else 0 for s in sentences for t in (s.tags or s.words)]
    features = tf.RaggedTensor.from_row_splits(np.asarray(flat), offsets)
    label_ids = tf.RaggedTensor.from_row_splits(np.asarray(labels, np.int32), offsets)
    return features, label_ids


def feature_dataset(features, label_ids, batch_size, training, seed, max_words=None):
    import tensorflow as tf

    def to_dense(f, l):
        mask = tf.ones_like(l)
        return {"features": f.to_tensor(0.0, shape=[None, max_words, None]),
                "word_mask": mask.to_tensor(0, shape=[None, max_words]),
                "label_ids": l.to_tensor(-1, shape=[None, max_words])}

    def dataset_fn(context):
        ds = tf.data.Dataset.from_tensor_slices((features, label_ids))
        per_replica = context.get_per_replica_batch_size(batch_size)
        if training:
            ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
            ds = ds.shuffle(int(features.nrows()), seed=seed).repeat()
        ds = ds.ragged_batch(per_replica, drop_remainder=training)
        ds = ds.map(lambda f, l: (tf.cast(f, tf.float32), l))
        return ds.map(to_dense)

    return dataset_fn


# === Evaluation ===


def predict_windows(trainer, windows, batch_size):
    """Predicted label id at every position of every window, [windows, seq]."""
    import numpy as np
    import tensorflow as tf

    from data_prep import conll

    arrays = conll.windows_to_arrays(windows)
    arrays["example_index"] = np.arange(len(windows), dtype=np.int32)

    def output_fn(model, features):
        logits = model(features, training=False)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        safe = tf.maximum(features["label_ids"], 0)
        return {"predictions": tf.argmax(logits, -1, output_type=tf.int32),
                "gold_log_prob": tf.gather(log_probs, safe, batch_dims=2),
                "example_index": features["example_index"]}

    out = trainer.predict(runner.numpy_dataset(arrays, batch_size, False, 0), output_fn)
    order = np.argsort(out["example_index"], kind="stable")
    labelled = arrays["label_ids"] >= 0
    loss = -float(np.sum(out["gold_log_prob"][order] * labelled) / max(labelled.sum(), 1))
    return out["predictions"][order], loss


def predict_features(trainer, features, label_ids, batch_size):
    """Per-sentence lists of predicted label ids from the feature-based model."""
    import numpy as np
    import tensorflow as tf

    max_words = int(tf.reduce_max(label_ids.row_lengths()))

    def output_fn(model, batch):
        logits = model(batch, training=False)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        safe = tf.maximum(batch["label_ids"], 0)
        return {"predictions": tf.argmax(logits, -1, output_type=tf.int32),
                "gold_log_prob": tf.gather(log_probs, safe, batch_dims=2),
                "label_ids": batch["label_ids"]}

    out = trainer.predict(feature_dataset(features, label_ids, batch_size, False, 0, max_words),
                          output_fn)
    lengths = label_ids.row_lengths().numpy()
    labelled = out["label_ids"] >= 0
    loss = -float(np.sum(out["gold_log_prob"] * labelled) / max(labelled.sum(), 1))
    return [list(out["predictions"][i, :n]) for i, n in enumerate(lengths)], loss


def evaluate_split(split, conll_file, predicted_ids, label_list, loss, global_step):
    """Scores, writes `<split>_predictions.conll`; returns eval_results entries."""
    from data_prep import conll
    from official_bert.metrics import ner as ner_metrics

    tags = [[label_list[i] for i in ids] for ids in predicted_ids]
    path = os.path.join(FLAGS.output_dir,
                        "eval_predictions.conll" if split == "eval" else "test_predictions.conll")
    conll.write_predictions(path, conll_file, tags)
    logging.info("Wrote %s", path)
    if not conll_file.has_tags:
        return None
    scores = ner_metrics.entity_scores([s.tags for s in conll_file.sentences], tags)
    results = ner_metrics.flat_results(scores)
    results["eval_loss"] = loss
    results["global_step"] = global_step
    return results


# === Main ===


def main(argv):
    del argv
    import keras

    from data_prep import conll
    from official_bert import checkpoints
    from official_bert.text import tokenization
    from official_bert.training import trainer as training
    from official_bert.modeling.configs import write_text_atomic
    from official_bert.feature_extraction import parse_layers
    from official_bert.tasks.ner import TokenClassificationTask

    runner.check_modes(do_train=FLAGS.do_train, do_eval=FLAGS.do_eval,
                       do_predict=FLAGS.do_predict, output_dir=FLAGS.output_dir,
                       train_file=FLAGS.train_file, eval_file=FLAGS.eval_file,
                       predict_file=FLAGS.predict_file)
    if FLAGS.feature_based and FLAGS.export_dir:
        raise ValueError("--export_dir is only supported for fine-tuning, not --feature_based")
    if FLAGS.feature_based and not FLAGS.init_checkpoint:
        raise ValueError("--feature_based needs a pre-trained --init_checkpoint")
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    keras.utils.set_random_seed(FLAGS.seed)
    if _policy():
        keras.mixed_precision.set_global_policy(_policy())

    bert_config, ckpt, vocab_file, do_lower_case = resolve_model_files()
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)

    train_file = None
    if FLAGS.do_train:
        train_file = conll.read_conll(FLAGS.train_file, FLAGS.tag_scheme)
        if not train_file.has_tags:
            raise ValueError(f"--train_file {FLAGS.train_file} has no tag column")
        if FLAGS.max_train_examples:
            train_file.sentences = train_file.sentences[:FLAGS.max_train_examples]
        label_list = conll.label_list_from(train_file.sentences)
        write_text_atomic(os.path.join(FLAGS.output_dir, "label_list.txt"),
                          "\n".join(label_list) + "\n")
    else:
        label_list = find_label_list()
    bert_config.to_json_file(os.path.join(FLAGS.output_dir, "bert_config.json"))
    checkpoints._copy_atomic(vocab_file, os.path.join(FLAGS.output_dir, "vocab.txt"))

    def read_checked(path):
        data = conll.read_conll(path, FLAGS.tag_scheme)
        if data.has_tags:
            conll.check_tags(data, label_list)
        return data

    eval_file = read_checked(FLAGS.eval_file) if FLAGS.do_eval else None
    predict_file = read_checked(FLAGS.predict_file) if FLAGS.do_predict else None

    def windows_of(data):
        return conll.convert_sentences(data.sentences, tokenizer, label_list,
                                       FLAGS.max_seq_length, FLAGS.window_stride)

    train_windows = windows_of(train_file) if train_file else None
    num_train_steps = num_warmup_steps = 0
    if train_file:
        long = sum(1 for i in range(1, len(train_windows))
                   if train_windows[i].sentence_index == train_windows[i - 1].sentence_index)
        logging.info("train: %d sentences, %d windows (%d extra windows of long sentences), "
                     "labels %s", len(train_file.sentences), len(train_windows), long, label_list)
        units = len(train_file.sentences) if FLAGS.feature_based else len(train_windows)
        num_train_steps = int(units / FLAGS.train_batch_size * FLAGS.num_train_epochs)
        if num_train_steps <= 0:
            raise ValueError(f"{units} training examples make no step of batch "
                             f"{FLAGS.train_batch_size}; lower --train_batch_size")
        num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)

    if FLAGS.feature_based:
        encoder, _ = checkpoints.load_encoder(FLAGS.init_checkpoint, bert_config, dtype=_policy())
        encoder.trainable = False
        layer_indexes = parse_layers(FLAGS.layers, bert_config.num_hidden_layers)
        context = (encoder, vocab_file, do_lower_case, layer_indexes, FLAGS.max_train_examples)
        prepared = {}
        for split, data, windows in (("train", train_file, train_windows),
                                     ("eval", eval_file, None), ("predict", predict_file, None)):
            if data is not None:
                windows = windows or windows_of(data)
                flat, offsets = cached_word_features(split, data.path, data.sentences, windows,
                                                     context if split == "train" else
                                                     context[:4] + (None,))
                prepared[split] = feature_arrays(data.sentences, flat, offsets, label_list)
        feature_dim = int(next(iter(prepared.values()))[0].flat_values.shape[-1])
        task = _feature_task(len(label_list), feature_dim)
        jit = FLAGS.jit_compile
        if jit and FLAGS.task_model == "bilstm":
            # XLA on CPU keeps a copy of the sequence per LSTM step in the
            # backward pass: 2 x 768-unit BiLSTMs over batch 32 took 7.2 GB at
            # 64 words (2.7 without XLA) and ran out of 24 GB on CoNLL's
            # 124-word sentence, for no gain in speed (3.8 s vs 3.6 s a step).
            logging.warning("--jit_compile is not used for the BiLSTM task model: XLA's LSTM "
                            "gradient needs memory growing with the sentence length, and is no "
                            "faster")
            jit = False
        trainer = make_trainer(task, num_train_steps, num_warmup_steps, None, FLAGS.do_train,
                               jit_compile=jit)
    else:
        task = TokenClassificationTask(bert_config, len(label_list), _policy())

        init_fn = runner.encoder_init_fn(ckpt)
        trainer = make_trainer(task, num_train_steps, num_warmup_steps, init_fn, FLAGS.do_train)

    if FLAGS.do_train:
        start = time.time()
        if FLAGS.feature_based:
            dataset_fn = feature_dataset(*prepared["train"], FLAGS.train_batch_size, True,
                                         FLAGS.seed)
        else:
            dataset_fn = runner.numpy_dataset(
                conll.windows_to_arrays(train_windows), FLAGS.train_batch_size, True, FLAGS.seed,
                runner.RunSettings.from_flags(FLAGS).padding_multiple())
        trainer.train(dataset_fn, FLAGS.train_batch_size)
        logging.info("Training took %.1f s", time.time() - start)

    global_step = int(trainer.global_step.numpy())
    for split, data, batch_size in (("eval", eval_file, FLAGS.eval_batch_size),
                                    ("predict", predict_file, FLAGS.predict_batch_size)):
        if data is None:
            continue
        if FLAGS.feature_based:
            predicted, loss = predict_features(trainer, *prepared[split], batch_size)
        else:
            windows = windows_of(data)
            per_window, loss = predict_windows(trainer, windows, batch_size)
            predicted = conll.word_predictions(windows, per_window, len(data.sentences),
                                               [len(s.words) for s in data.sentences])
        results = evaluate_split(split, data, predicted, label_list, loss, global_step)
        if split == "eval":
            path = os.path.join(FLAGS.output_dir, "eval_results.txt")
            training.write_results(path, results)
            logging.info("Eval results (%s): %s", FLAGS.eval_file, ", ".join(
                f"{k} = {results[k]:.4f}" for k in
                ("entity_f1", "precision", "recall", "token_accuracy", "eval_loss")))
        elif results is not None:
            training.write_results(os.path.join(FLAGS.output_dir, "test_results.txt"), results)

    if FLAGS.export_dir:
        from official_bert import export_tasks

        path = export_tasks.export_token_classifier(
            trainer.model, vocab_file, do_lower_case, FLAGS.max_seq_length, label_list,
            FLAGS.export_dir)
        logging.info("Exported the raw-sentence tagger to %s", path)


def entry(argv=None):
    """Console entry point (`bert ner`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
