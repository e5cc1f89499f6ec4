"""Sentence(-pair) classification and regression: GLUE and your own data.

The model is `modeling.heads.BertClassifier` (a dense layer on the pooled
[CLS] vector); the loss is softmax cross-entropy, or mean squared error for
regression (`num_classes=1`, STS-B), summed over the global batch and divided
by its number of examples.

Files in --output_dir besides the checkpoints: `classifier_config.json` (task,
labels, casing, length: what `bert predict` needs), `features/` (cached
TFRecords), `eval_results.txt` (eval_accuracy, eval_loss, the task's metrics;
MNLI adds `eval_mismatched_*`), `test_results[_<split>].tsv` (the probability
of each label, in label order; the score for regression) and, for a GLUE
task, the leaderboard's file of each test set (`CoLA.tsv`, ..., `MNLI-m.tsv`,
`MNLI-mm.tsv`, `AX.tsv`: `index<TAB>prediction`, `data_prep.glue.submission_text`),
which `bert glue-submission` collects into the zip gluebenchmark.com takes.
"""

from __future__ import annotations

import dataclasses
import json

import tensorflow as tf
from absl import logging

from data_prep import fast_tokenization, glue, glue_features
from official_bert import io
from official_bert.errors import UserError
from official_bert.metrics import classification as metrics
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.modeling.heads import WINDOW_POOLINGS, BertClassifier
from official_bert.run_directory import CLASSIFIER_CONFIG
from official_bert.serving import classification as serving
from official_bert.tasks import base, families, teacher
from official_bert.configs import LONG_DOCUMENTS, ClassificationConfig, RunConfig
from official_bert.training import distillation


class ClassificationTask(base.Task):
    """Fine-tunes, evaluates, predicts and exports a `BertClassifier`.

    Features: the encoder's inputs plus `label` (int32 class id, or float score).

    Args:
        config: a `ClassificationConfig`.
        run_config: the `RunConfig`.
        num_classes: for using the model and loss alone (tests, benchmarks):
            the number of outputs (1 = regression) when no labels are read.
        bert_config: likewise, the encoder's `BertConfig`.

    Example (the model and loss alone):
    >>> from official_bert.modeling.configs import BertConfig
    >>> task = ClassificationTask(num_classes=3, bert_config=BertConfig(
    ...     vocab_size=100, hidden_size=32, num_hidden_layers=1,
    ...     num_attention_heads=4, intermediate_size=64))
    >>> task.build_model().num_classes
    3
    """

    spec = families.CLASSIFICATION

    def __init__(self, config: ClassificationConfig | None = None,
                 run_config: RunConfig | None = None, *, num_classes: int | None = None,
                 model_files=None, run_directory=None, bert_config=None):
        super().__init__(config, run_config, model_files=model_files,
                         run_directory=run_directory, bert_config=bert_config)
        # The data_prep.glue.TaskSpec of --task_name (a custom task's labels settle
        # once its training file is read: `_settle_labels`).
        self.glue = _glue_task(self.config) if self.config.task_name else None
        self._num_classes = num_classes
        self.train_examples = None
        self.distill_examples = []  # --distill_text's rows (no labels)
        self._tokenizer = None  # made once, with the first features
        self.eval_sets, self.predict_sets = [], []

    # --- the model and its loss (the Trainer's protocol) ------------------------

    @property
    def num_classes(self) -> int:
        if self._num_classes is not None:
            return self._num_classes
        return 1 if self.glue.is_regression else len(self.glue.labels)

    @property
    def is_regression(self) -> bool:
        return self.num_classes == 1

    def build_model(self, bert_config=None):
        bert_config = bert_config or self.bert_config
        encoder = BertEncoder.from_bert_config(bert_config, dtype=self.run_config.dtype_policy)
        model = BertClassifier(encoder, self.num_classes,
                               dropout=bert_config.hidden_dropout_prob,
                               window_pooling=self.config.window_pooling)
        model(dummy_inputs())
        return model

    def per_example_loss(self, logits, labels):
        if self.is_regression:
            return tf.square(logits[:, 0] - tf.cast(labels, tf.float32))
        return tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(labels, tf.int32), logits)

    def teacher_loss(self, teacher_logits, logits, features):
        """Per example: T² · KL(teacher_T ‖ student_T), or the squared
        difference of the two scores for regression."""
        if self.is_regression:
            return tf.square(logits[:, 0] - teacher_logits[:, 0])
        return distillation.soft_targets(teacher_logits, logits,
                                         self.run_config.distill_temperature)

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["label"])[0], tf.float32)}

    def loss_and_metrics(self, model, features, normalizers, training):
        logits = model(features, training=training)
        labels = features["label"]
        per_example = teacher.mixed_loss(self, self.per_example_loss(logits, labels), logits,
                                         features)
        # The training file's rows (all of them, unless --distill_text adds more).
        labelled = features.get(teacher.LABELLED, tf.ones(tf.shape(labels), tf.float32))
        loss = tf.reduce_sum(per_example) / tf.maximum(normalizers["examples"], 1.0)
        count = tf.reduce_sum(labelled)
        if self.is_regression:
            return loss, {"mse": (tf.reduce_sum(per_example * labelled), count)}
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                   tf.cast(labels, tf.int32)), tf.float32)
        return loss, {"accuracy": (tf.reduce_sum(correct * labelled), count)}

    # --- inputs ---------------------------------------------------------------------

    @classmethod
    def check_flags(cls, config, run_config):
        if not config.task_name:
            raise UserError(f"--task_name is required; known tasks: "
                            f"{', '.join(glue.known_task_names())}")
        spec = _glue_task(config)
        for name in ("max_eval_examples", "max_predict_examples"):
            value = getattr(config, name)
            if value is not None and value <= 0:
                raise UserError(f"--{name} must be positive, got {value}")
        _check_window_flags(config, spec)

    @classmethod
    def run_files(cls, config, run_config) -> base.RunFiles:
        glue_task = _glue_task(config)
        distill = [run_config.distill_text] if run_config.distill_text else []
        training = ([path for _, path, _ in _split_files(config, glue_task, "train")]
                    if run_config.do_train else [])
        files = super().run_files(config, run_config)
        return dataclasses.replace(
            files, inputs=(("data_dir", config.data_dir), *files.inputs),
            training=(*training, *distill),
            results=tuple(f"test_results{'_' + suffix if suffix else ''}.tsv"
                          for suffix, _ in glue_task.test_files) + tuple(
                              name for _, name in glue_task.submission_files))

    def _read_split(self, split: str, limit: int | None) -> list:
        """[(suffix, path, examples)] for every file of the split that exists."""
        out = []
        for suffix, path, required in _split_files(self.config, self.glue, split):
            if not required and not io.exists(path):
                logging.info("%s not found: skipping the %s set", path, suffix)
                continue
            examples = glue.read_split(self.glue, path, split)
            if limit:
                examples = examples[:limit]
            logging.info("%s %s: %d examples from %s", split, suffix or self.glue.name,
                         len(examples), path)
            out.append((suffix, path, examples))
        return out

    def read_inputs(self):
        run = self.run_config
        if run.do_train:
            [(_, train_path, self.train_examples)] = self._read_split("train",
                                                                      run.max_train_examples)
        self._settle_labels()
        if self.train_examples and self.glue.labels:
            glue.check_labels(self.train_examples, self.glue.labels, train_path)
        if run.do_train and run.distill_text:
            self.distill_examples = glue.read_unlabelled(self.glue, run.distill_text)
            logging.info("distill_text: %d examples from %s", len(self.distill_examples),
                         run.distill_text)
        if run.do_eval:
            self.eval_sets = self._read_split("dev", self.config.max_eval_examples)
        if run.do_predict:
            self.predict_sets = self._read_split("test", self.config.max_predict_examples)
        labels = list(self.glue.labels) if self.glue.labels else None
        return base.InputRecord(
            record=self._record_files(),
            identity={"task_name": self.glue.name, "labels": labels,
                      "regression": self.glue.is_regression, "windows": self.config.windows})

    def _settle_labels(self):
        """The final label list; a trained run directory's labels bind."""
        saved = self.run_directory.trained_text(CLASSIFIER_CONFIG)
        saved = json.loads(saved) if saved is not None else None
        spec = self.glue
        if spec.name == glue.CUSTOM and spec.labels is None and not spec.is_regression:
            if saved and saved.get("labels"):
                spec = spec.with_labels(saved["labels"])
            elif self.train_examples:
                spec = spec.with_labels(glue.labels_from_examples(self.train_examples))
            else:
                raise UserError("the labels are unknown: pass --labels (every label, in class "
                                "order) or train in this --output_dir first")
            logging.info("labels: %s", ", ".join(spec.labels))
        if saved is not None:
            labels = list(spec.labels) if spec.labels else None
            if saved.get("labels") != labels:
                raise UserError(f"--output_dir {self.run_config.output_dir} holds a model "
                                f"trained with labels {saved.get('labels')}, not {labels}; "
                                "use another --output_dir")
            self._check_saved_windows(saved)
        self.glue = spec

    def _check_saved_windows(self, saved: dict) -> None:
        """A trained run is evaluated, predicted and exported as it was trained:
        with the same --long_document settings (else its export would quietly
        read only the first --max_seq_length tokens, or windows it never saw)."""
        names = ("doc_stride", "window_pooling", "max_windows")
        trained = ({k: saved.get(k) for k in names} if saved.get("long_document") == "windows"
                   else None)
        if trained != self.config.windows:
            flags = (" ".join(f"--{k}={v}" for k, v in trained.items()) if trained else "")
            raise UserError(f"--output_dir {self.run_config.output_dir} holds a model trained with "
                            f"--long_document={'windows ' + flags if trained else 'truncate'}; "
                            "pass the same flags (or use another --output_dir)")

    def _record_files(self) -> dict:
        saved = self.run_directory.trained_text(CLASSIFIER_CONFIG)
        if saved is not None:
            # A trained run keeps the file it was trained with (its labels were
            # checked by `_settle_labels`; its max_seq_length is the training one).
            return {CLASSIFIER_CONFIG: saved}
        spec = self.glue
        custom = spec.name == "custom"
        config = {"task_name": spec.name, "labels": list(spec.labels) if spec.labels else None,
                  "regression": spec.is_regression, "pair": spec.is_pair,
                  "metric_kind": spec.metric_kind, "max_seq_length": self.run_config.max_seq_length,
                  "do_lower_case": self.model_files.do_lower_case,
                  "text_a_column": spec.columns.text_a if custom else None,
                  "text_b_column": spec.columns.text_b if custom else None}
        if self.config.windows:
            config.update(long_document="windows", **self.config.windows)
        return {CLASSIFIER_CONFIG: json.dumps(config, indent=2) + "\n"}

    # --- data -----------------------------------------------------------------------

    def _features(self, examples, split: str) -> dict:
        files = self.model_files
        if self._tokenizer is None:
            self._tokenizer = fast_tokenization.CachedTokenizer(
                files.vocab_file, do_lower_case=files.do_lower_case)
        windows = self.config.windows
        if windows:  # not cached: converting windows is as quick as reading them back
            arrays, cut = glue_features.convert_examples_windows(
                examples, self._tokenizer, self.run_config.max_seq_length, self.glue.labels,
                windows["doc_stride"], windows["max_windows"])
            logging.info("%s: %d documents in %d windows", split, len(examples),
                         int(arrays["input_mask"][:, :, 0].sum()))
            if cut:
                logging.warning("%s: %d of %d documents need more than --max_windows=%d "
                                "windows: their ends are not read", split, cut,
                                len(examples), windows["max_windows"])
            return arrays
        cache_dir = self.run_directory.features if self.config.cache_features else None
        arrays = glue_features.cached_features(examples, self._tokenizer, files.vocab_file,
                                               files.do_lower_case,
                                               self.run_config.max_seq_length,
                                               self.glue.labels, cache_dir, split,
                                               log=logging.info)
        full = glue_features.truncated_fraction(arrays)
        if full > 0.05:
            logging.warning("%s: %.0f%% of the examples fill all %d tokens (truncated); a "
                            "larger --max_seq_length may help", split, 100 * full,
                            self.run_config.max_seq_length)
        return arrays

    def train_dataset(self):
        return base.TrainingSet(
            self._features(self.train_examples, "train"),
            self._features(self.distill_examples, "distill_text")
            if self.distill_examples else None)

    # --- evaluation, prediction, export ---------------------------------------------

    def evaluate(self, trainer) -> dict:
        results = {}
        for suffix, path, examples in self.eval_sets:
            name = "dev" + (f"_{suffix}" if suffix else "")
            arrays = self._features(examples, name)
            logits = base.predict_logits(trainer, arrays, self.run_config.eval_batch_size,
                                         self.run_config)
            split_results = metrics.evaluate_logits(self.glue.metric_kind, logits,
                                                    arrays["label"])
            prefix = f"eval_{suffix}_" if suffix else "eval_"
            results.update({prefix + k: v for k, v in split_results.items()})
            results[f"{prefix}num_examples" if suffix else "num_examples"] = len(examples)
            logging.info("%s (%s): %s", name, path, split_results)
        return results

    def predict(self, trainer) -> None:
        for suffix, path, examples in self.predict_sets:
            arrays = self._features(examples, "test" + (f"_{suffix}" if suffix else ""))
            logits = base.predict_logits(trainer, arrays, self.run_config.predict_batch_size,
                                         self.run_config)
            rows = logits[:, :1] if self.is_regression else metrics.softmax(logits)
            out = self.run_directory.file(f"test_results{'_' + suffix if suffix else ''}.tsv")
            io.atomic_write(out, "".join("\t".join(f"{p:.8f}" for p in row) + "\n"
                                         for row in rows))
            logging.info("Wrote %d predictions of %s to %s", len(rows), path, out)
            name = glue.submission_file(self.glue, suffix)
            if name:
                predictions = (logits[:, 0] if self.is_regression else
                               [self.glue.labels[i] for i in logits.argmax(-1)])
                io.atomic_write(self.run_directory.file(name),
                                glue.submission_text(self.glue, examples, predictions))
                logging.info("Wrote GLUE's %s (bert glue-submission zips it)",
                             self.run_directory.file(name))

    def evaluation_arrays(self):
        if not self.eval_sets:
            return None
        suffix, _, examples = self.eval_sets[0]
        return self._features(examples, "dev" + (f"_{suffix}" if suffix else ""))

    def export(self, model, export_dir, version):
        return serving.export_classifier(
            model, self.model_files.vocab_file, self.model_files.do_lower_case,
            self.run_config.max_seq_length, self.glue.labels, self.glue.is_pair, export_dir,
            version=version, windows=self.config.windows,
            int8=self.run_config.quantize)


def _check_window_flags(config, spec) -> None:
    """The flags of --long_document=windows (one line each)."""
    if config.long_document not in LONG_DOCUMENTS:
        raise UserError(f"--long_document={config.long_document!r}: use truncate (the "
                        "first --max_seq_length tokens) or windows")
    if config.window_pooling not in WINDOW_POOLINGS:
        raise UserError(f"--window_pooling={config.window_pooling!r}: use "
                        f"{' or '.join(WINDOW_POOLINGS)}")
    if config.windows is None:
        return
    if config.doc_stride <= 0:  # one larger than a window is a window (run_squad's rule)
        raise UserError(f"--doc_stride must be positive, got {config.doc_stride}")
    if config.max_windows <= 0:
        raise UserError(f"--max_windows must be positive, got {config.max_windows}")
    if spec.is_pair:
        raise UserError(f"--long_document=windows reads one long text; {spec.name} "
                        "is a pair task (text_a and text_b): use --long_document=truncate")


def _glue_task(config) -> glue.TaskSpec:
    """The data_prep.glue.TaskSpec of --task_name (a custom task's: its columns and labels)."""
    if (config.task_name or "").strip().lower() == glue.CUSTOM:
        return glue.custom_task(config.text_a_column, config.text_b_column,
                                config.label_column, config.labels, config.regression)
    spec = glue.get_task(config.task_name)
    if config.labels and tuple(config.labels) != spec.labels:
        raise UserError(f"--labels does not apply to {spec.name}, whose labels are "
                        f"fixed: {', '.join(spec.labels or ['(regression score)'])}")
    return spec


def _split_files(config, spec, split: str) -> list:
    """[(suffix, path, required)] of `split` ("train", "dev", "test")."""
    explicit = {"train": config.train_file, "dev": config.eval_file,
                "test": config.predict_file}[split]
    names = {"train": [("", spec.train_file)], "dev": list(spec.dev_files),
             "test": list(spec.test_files)}[split]
    flag = {"train": "train_file", "dev": "eval_file", "test": "predict_file"}[split]
    files = []
    for position, (suffix, name) in enumerate(names):
        if position == 0 and explicit:
            files.append((suffix, explicit, True))
        elif config.data_dir:
            files.append((suffix, glue.find_data_file(config.data_dir, name), position == 0))
        elif position == 0:
            raise UserError(f"pass --data_dir (with {name}) or --{flag}")
    return files
