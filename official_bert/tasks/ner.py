"""Token classification (NER): a tag for each word, fine-tuned or feature-based.

Reads CoNLL files (`data_prep.conll`: CoNLL-2003's 4 columns with
`-DOCSTART-`, WNUT-17's 2 columns; IOB1 or BIO, converted to BIO). Each word's
first WordPiece carries its label (the others are ignored by the loss and by
prediction); sentences longer than `max_seq_length` are split into
overlapping windows, never truncated.

Fine-tuning (`NerTask`): `modeling.heads.BertTokenClassifier`, a dense layer
on each final token vector, the whole network trained. Feature-based
(`FeatureBasedNerTask`, the BERT paper's §5.3): the encoder is frozen and run
once per sentence (its features cached in `output_dir/feature_cache`), the
chosen layers are combined, and a small `FeatureTagger` (2-layer BiLSTM, or
dense) is trained on top.

Files in --output_dir: `label_list.txt`, `eval_results.txt` (entity_f1,
precision, recall, token_accuracy, per-type scores, eval_loss),
`eval_predictions.conll` / `test_predictions.conll` (the input columns with
the predicted tag appended, in the file's tag scheme: conlleval reads them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from data_prep import conll
from official_bert import checkpoints, io
from official_bert.errors import UserError
from official_bert.metrics import ner as ner_metrics
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.modeling.heads import BertTokenClassifier, FeatureTagger
from official_bert.run_directory import LABEL_LIST, run_of
from official_bert.serving import ner as serving
from official_bert.tasks import base, evaluation, families, teacher
from official_bert.configs import LAYER_COMBINATIONS, NER_TASK_MODELS, NerConfig, RunConfig
from official_bert.tasks.features import parse_layers
from official_bert.training import distillation, input_pipeline


def masked_token_loss(per_token, logits, labels, normalizer, labelled=None):
    """`per_token` losses over the labelled positions (`labels` >= 0; -1 = not
    labelled: later sub-tokens, [CLS], [SEP], padding), summed and divided by
    `normalizer` (the global batch's labelled positions), and the tags'
    accuracy there, in the rows where `labelled` ([batch]) is not 0 (those
    of --distill_text have placeholder tags).

    Returns:
        (loss, {"token_accuracy": (correct, labelled)}).
    """
    valid = labels >= 0
    weights = tf.cast(valid, tf.float32)
    loss = tf.reduce_sum(per_token * weights) / tf.maximum(normalizer, 1.0)
    scored = weights if labelled is None else weights * tf.cast(labelled, tf.float32)[:, None]
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                               tf.where(valid, labels, 0)), tf.float32)
    return loss, {"token_accuracy": (tf.reduce_sum(correct * scored), tf.reduce_sum(scored))}


class NerTask(base.Task):
    """Fine-tunes, evaluates, predicts and exports a `BertTokenClassifier`.

    Features: the encoder's inputs plus `label_ids` (int32 [batch, seq]; -1
    where no word starts).

    Args:
        config: an `NerConfig`.
        run_config: the `RunConfig`.
        bert_config: for using the model and loss alone (tests, tools), with
            `config.labels` giving the tags.
    """

    spec = families.NER

    def __init__(self, config: NerConfig | None = None, run_config: RunConfig | None = None,
                 *, model_files=None, run_directory=None, bert_config=None):
        super().__init__(config, run_config, model_files=model_files,
                         run_directory=run_directory, bert_config=bert_config)
        self.label_list = list(self.config.labels) if self.config.labels else None
        self.data = {}  # split → data_prep.conll.ConllFile
        self._split_windows = {}  # split → its windows, made once

    # --- the model and its loss (the Trainer's protocol) ------------------------

    def build_model(self, bert_config=None):
        bert_config = bert_config or self.bert_config
        encoder = BertEncoder.from_bert_config(bert_config, dtype=self.run_config.dtype_policy)
        # The pooler (C) gets no gradient from a token-level loss; the Trainer
        # needs a gradient for every trainable variable.
        encoder.pooler.trainable = False
        model = BertTokenClassifier(encoder, len(self.label_list),
                                    dropout=bert_config.hidden_dropout_prob)
        model(dummy_inputs())
        return model

    def loss_normalizers(self, features):
        return {"tokens": tf.reduce_sum(tf.cast(features["label_ids"] >= 0, tf.float32))}

    def loss_and_metrics(self, model, features, normalizers, training):
        logits = model(features, training=training)
        labels = features["label_ids"]
        per_token = keras.losses.sparse_categorical_crossentropy(
            tf.maximum(labels, 0), logits, from_logits=True)
        return masked_token_loss(teacher.mixed_loss(self, per_token, logits, features), logits,
                                 labels, normalizers["tokens"], features.get(teacher.LABELLED))

    def teacher_loss(self, teacher_logits, logits, features):
        """Per token: the soft-target loss over its tags."""
        return distillation.soft_targets(teacher_logits, logits,
                                         self.run_config.distill_temperature)

    # --- inputs ---------------------------------------------------------------------

    @classmethod
    def check_flags(cls, config, run_config):
        super().check_flags(config, run_config)  # each mode's --<mode>_file
        if config.window_stride is not None and config.window_stride <= 0:
            raise UserError(f"--window_stride must be positive, got {config.window_stride}")

    def read_inputs(self):
        run, config = self.run_config, self.config
        if run.do_train:
            train = conll.read_conll(config.train_file, config.tag_scheme)
            if not train.has_tags:
                raise UserError(f"--train_file {config.train_file} has no tag column")
            if run.max_train_examples:
                train.sentences = train.sentences[:run.max_train_examples]
            self.data["train"] = train
            if self.label_list is None:
                self.label_list = conll.label_list_from(train.sentences)
            if run.distill_text:  # its words alone: the teacher tags them
                text = conll.read_conll(run.distill_text, config.tag_scheme)
                self.data["distill_text"] = dataclasses.replace(text, sentences=[
                    dataclasses.replace(s, tags=None) for s in text.sentences])
        if self.label_list is None:
            self.label_list = self._saved_label_list()
        for split, path in (("eval", config.eval_file), ("predict", config.predict_file)):
            if getattr(run, f"do_{split}"):
                data = conll.read_conll(path, config.tag_scheme)
                if data.has_tags:
                    conll.check_tags(data, self.label_list)
                self.data[split] = data
        return base.InputRecord(record={LABEL_LIST: "".join(f"{label}\n"
                                                            for label in self.label_list)},
                                identity={"labels": list(self.label_list)})

    def _saved_label_list(self) -> list:
        for directory in (self.run_config.output_dir, self.run_config.init_checkpoint):
            if not directory:
                continue
            path = run_of(directory).label_list
            if io.exists(path):
                return [line.strip() for line in io.read_text(path).splitlines() if line.strip()]
        raise UserError(f"no {LABEL_LIST} in --output_dir {self.run_config.output_dir}: train "
                        "first (--do_train) or point --output_dir at a trained run")

    def _windows(self, split):
        if split not in self._split_windows:
            self._split_windows[split] = conll.convert_sentences(
                self.data[split].sentences, self.model_files.tokenizer(), self.label_list,
                self.run_config.max_seq_length, self.config.window_stride)
        return self._split_windows[split]

    # --- training ---------------------------------------------------------------------

    def train_dataset(self):
        windows = self._windows("train")
        extra = sum(1 for i in range(1, len(windows))
                    if windows[i].sentence_index == windows[i - 1].sentence_index)
        logging.info("train: %d sentences, %d windows (%d extra windows of long sentences), "
                     "labels %s", len(self.data["train"].sentences), len(windows), extra,
                     self.label_list)
        return base.TrainingSet(
            conll.windows_to_arrays(windows),
            conll.windows_to_arrays(self._windows("distill_text"))
            if "distill_text" in self.data else None)

    # --- evaluation, prediction, export ---------------------------------------------

    def _predict_split(self, trainer, split, batch_size):
        """(per-sentence predicted label ids, loss over the labelled words)."""
        windows = self._windows(split)
        arrays = conll.windows_to_arrays(windows)
        arrays["example_index"] = np.arange(len(windows), dtype=np.int32)
        logging.info("%s: %d sentences, %d windows", self.data[split].path,
                     len(self.data[split].sentences), len(windows))
        out = trainer.predict(input_pipeline.numpy_dataset(arrays, batch_size, False, 0),
                              _tagging_outputs("example_index"), total=len(windows),
                              unit="windows")
        order = np.argsort(out["example_index"], kind="stable")
        labelled = arrays["label_ids"] >= 0
        loss = -float(np.sum(out["gold_log_prob"][order] * labelled) / max(labelled.sum(), 1))
        sentences = self.data[split].sentences
        predicted = conll.word_predictions(windows, out["predictions"][order], len(sentences),
                                           [len(s.words) for s in sentences])
        return predicted, loss

    def _score(self, trainer, split, batch_size):
        """Writes `<split>_predictions.conll`; returns the scores (None without gold tags)."""
        data = self.data[split]
        predicted, loss = self._predict_split(trainer, split, batch_size)
        tags = [[self.label_list[i] for i in ids] for ids in predicted]
        path = self.run_directory.file("eval_predictions.conll" if split == "eval"
                                else "test_predictions.conll")
        conll.write_predictions(path, data, tags)
        logging.info("Wrote %s", path)
        if not data.has_tags:
            return None
        results = ner_metrics.flat_results(ner_metrics.entity_scores(
            [s.tags for s in data.sentences], tags))
        results["eval_loss"] = loss
        return results

    def evaluate(self, trainer) -> dict:
        return self._score(trainer, "eval", self.run_config.eval_batch_size)

    def predict(self, trainer) -> None:
        results = self._score(trainer, "predict", self.run_config.predict_batch_size)
        if results is not None:
            results["global_step"] = int(trainer.global_step.numpy())
            path = self.run_directory.file("test_results.txt")
            evaluation.write_results(path, results)
            # The gold tags of --predict_file were scored: say so, not only in the file.
            logging.info("Predict results (--predict_file's gold tags, in %s): %s", path,
                         evaluation.describe(results))

    def evaluation_arrays(self):
        return conll.windows_to_arrays(self._windows("eval")) if "eval" in self.data else None

    def export(self, model, export_dir, version):
        return serving.export_token_classifier(
            model, self.model_files.vocab_file, self.model_files.do_lower_case,
            self.run_config.max_seq_length, self.label_list, export_dir, version=version,
            int8=self.run_config.quantize)


def _tagging_outputs(index_key):
    """`Trainer.predict`'s output_fn of a tagger: argmax tags, the log-probability
    of each gold tag (for the loss), and the rows' index."""

    def output_fn(model, features):
        logits = model(features, training=False)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        safe = tf.maximum(features["label_ids"], 0)
        return {"predictions": tf.argmax(logits, -1, output_type=tf.int32),
                "gold_log_prob": tf.gather(log_probs, safe, batch_dims=2),
                index_key: features[index_key]}

    return output_fn


class FeatureBasedNerTask(NerTask):
    """The feature-based approach: a `FeatureTagger` on frozen encoder features.

    The encoder runs once per sentence over each split; its chosen layers,
    combined, are cached per word (float16) in `output_dir/feature_cache`
    under a key of the file, vocabulary, checkpoint and settings. Steps count
    sentences.
    """

    spec = families.FEATURE_BASED_NER

    @classmethod
    def check_flags(cls, config, run_config):
        super().check_flags(config, run_config)
        if not run_config.init_checkpoint:
            raise UserError("--feature_based needs a pre-trained --init_checkpoint")
        if run_config.export_dir:
            raise UserError("--export_dir is only supported for fine-tuning, not "
                            "--feature_based")
        if config.combine not in LAYER_COMBINATIONS:
            raise UserError(f"--combine={config.combine!r}: use "
                            f"{', '.join(LAYER_COMBINATIONS)}")
        if config.task_model not in NER_TASK_MODELS:
            raise UserError(f"--task_model={config.task_model!r}: use "
                            f"{' or '.join(NER_TASK_MODELS)}")
        # (Keras's own errors for these name no flag; 0 layers is a linear tagger.)
        for name in ("lstm_units", "feature_batch_size"):
            if getattr(config, name) <= 0:
                raise UserError(f"--{name} must be positive, got {getattr(config, name)}")
        if config.task_model_layers < 0:
            raise UserError(f"--task_model_layers cannot be negative, got "
                            f"{config.task_model_layers}")
        if not 0 <= config.task_dropout < 1:
            raise UserError(f"--task_dropout must be in [0, 1), got {config.task_dropout}")

    def build_model(self, bert_config=None):
        model = FeatureTagger(len(self.label_list), kind=self.config.task_model,
                              units=self.config.lstm_units,
                              num_layers=self.config.task_model_layers,
                              dropout=self.config.task_dropout, dtype=self.run_config.dtype_policy)
        model({"features": tf.zeros([1, 2, self.feature_dim]),
               "word_mask": tf.ones([1, 2], tf.int32)})
        return model

    def initialize(self, model, checkpoint):
        # --init_checkpoint is the frozen encoder, read by `prepare`: the task model (the
        # head) is never in it, so it is never usable untrained.
        return None

    def read_inputs(self):
        found, config = super().read_inputs(), self.config
        self.layer_indexes = parse_layers(config.layers, self.model_files.config.num_hidden_layers)
        return dataclasses.replace(found, identity={
            **found.identity, "layers": config.layers, "combine": config.combine,
            "task_model": config.task_model, "lstm_units": config.lstm_units,
            "task_model_layers": config.task_model_layers})

    def prepare(self):
        """Runs the frozen encoder over every split (or reads the cache)."""
        encoder, _ = checkpoints.load_encoder(self.run_config.init_checkpoint,
                                              self.model_files.config,
                                              dtype=self.run_config.dtype_policy)
        encoder.trainable = False
        self.prepared = {}
        for split, data in self.data.items():
            flat, offsets = self._cached_word_features(encoder, split, data)
            self.prepared[split] = _ragged_features(data.sentences, flat, offsets,
                                                    self.label_list)
        self.feature_dim = int(next(iter(self.prepared.values()))[0].flat_values.shape[-1])

    def _cached_word_features(self, encoder, split, data):
        config = self.config
        limit = self.run_config.max_train_examples if split == "train" else None
        stat = os.stat(data.path)
        key = hashlib.sha1(json.dumps(
            [os.path.abspath(data.path), stat.st_size, stat.st_mtime,
             os.path.abspath(self.model_files.vocab_file), self.model_files.do_lower_case,
             os.path.abspath(self.run_config.init_checkpoint), self.layer_indexes, config.combine,
             self.run_config.max_seq_length, config.window_stride, limit],
            default=str).encode()).hexdigest()[:16]
        # Named by file and settings, not split: eval and predict of one file share it.
        name = f"{os.path.basename(data.path)}-{key}"
        cache_dir = self.run_directory.feature_cache
        flat_path = io.join(cache_dir, f"{name}.features.npy")
        offsets_path = io.join(cache_dir, f"{name}.offsets.npy")
        if io.exists(flat_path) and io.exists(offsets_path):
            logging.info("Using cached %s features %s", split, flat_path)
            return np.load(flat_path, mmap_mode="r"), np.load(offsets_path)
        flat, offsets = _word_features(encoder, self._windows(split),
                                       [len(s.words) for s in data.sentences],
                                       self.layer_indexes, config.combine,
                                       config.feature_batch_size)
        for target, value in ((offsets_path, offsets), (flat_path, flat)):
            # Features last: their presence marks a complete cache.
            with io.atomic_output(target, "wb") as f:
                np.save(f, value)
        return flat, offsets

    def train_dataset(self):
        run = self.run_config
        return base.TrainingSet(
            dataset_fn=_feature_dataset(*self.prepared["train"], run.train_batch_size, True,
                                        run.seed, micro_batches=run.gradient_accumulation_steps),
            size=len(self.data["train"].sentences))

    def _predict_split(self, trainer, split, batch_size):
        features, label_ids = self.prepared[split]
        max_words = int(tf.reduce_max(label_ids.row_lengths()))
        out = trainer.predict(_feature_dataset(features, label_ids, batch_size, False, 0,
                                               max_words), _tagging_outputs("label_ids"),
                              total=int(label_ids.nrows()), unit="sentences")
        lengths = label_ids.row_lengths().numpy()
        labelled = out["label_ids"] >= 0
        loss = -float(np.sum(out["gold_log_prob"] * labelled) / max(labelled.sum(), 1))
        return [list(out["predictions"][i, :n]) for i, n in enumerate(lengths)], loss


def _word_features(encoder, windows, sentence_lengths, layer_indexes, combine, batch_size):
    """Per-sentence [words, D] features from the frozen encoder (one pass per window).

    Returns (flat float16 [total words, D], row offsets [sentences + 1])."""

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


def _ragged_features(sentences, flat, offsets, label_list):
    """(ragged features, ragged label ids) as tf.RaggedTensors."""
    label_map = {label: i for i, label in enumerate(label_list)}
    labels = [label_map[t] if s.tags is not None else 0
              for s in sentences for t in (s.tags or s.words)]
    features = tf.RaggedTensor.from_row_splits(np.asarray(flat), offsets)
    label_ids = tf.RaggedTensor.from_row_splits(np.asarray(labels, np.int32), offsets)
    return features, label_ids


def _feature_dataset(features, label_ids, batch_size, training, seed, max_words=None,
                     micro_batches=1):
    def to_dense(f, labels):
        mask = tf.ones_like(labels)
        return {"features": f.to_tensor(0.0, shape=[None, max_words, None]),
                "word_mask": mask.to_tensor(0, shape=[None, max_words]),
                "label_ids": labels.to_tensor(-1, shape=[None, max_words])}

    def dataset_fn(context):
        ds = tf.data.Dataset.from_tensor_slices((features, label_ids))
        per_replica = context.get_per_replica_batch_size(batch_size)
        if training:
            ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
            ds = ds.shuffle(int(features.nrows()), seed=seed).repeat()
        ds = ds.ragged_batch(per_replica, drop_remainder=training)
        ds = ds.map(lambda f, labels: (tf.cast(f, tf.float32), labels))
        ds = ds.map(to_dense)  # each batch padded to its longest sentence
        return input_pipeline.split_into_micro_batches(ds, micro_batches) if training else ds

    return dataset_fn
