"""The classifier's SavedModel, and `ClassifierPredictor` to call one from Python.

An `ExportModule` (`serving.base`; TF Serving's layout `export_dir/<version>/`,
written atomically by `serving.versions`; the vocabulary asset; the warm-up
file; the input checks).
Signatures:

    serving_default   raw text in, tokenized in the graph (tensorflow-text ops,
                      the same ids as `FullTokenizer`):
        inputs:  text_a  string [batch]
                 text_b  string [batch]            (pair tasks only)
        outputs: probabilities float32 [batch, classes]  (in label order) and
                 label         string  [batch]     (the most probable label)
                 or, for regression, score float32 [batch]
    serve_ids         the same outputs from packed ids (as the training data):
        inputs:  input_word_ids, input_mask, input_type_ids  int32 [batch, seq]
                 (`[CLS] a [SEP] b [SEP]`, type 1 on b and its [SEP], padding 0;
                 seq at most the model's positions)
    preprocess        what serving_default feeds the model:
        inputs:  as serving_default
        outputs: input_word_ids, input_mask, input_type_ids  int32 [batch, seq_length]

A model trained with `--long_document=windows` is exported as
`WindowedClassifierServing`: serving_default takes the whole text, makes
the windows in the graph (max_seq_length - 2 tokens every doc_stride, at
most max_windows, as `data_prep.glue_features.convert_examples_windows` does) and
returns the pooled outputs; serve_ids takes a document's packed windows,
int32 [batch, windows, seq] (rows of padding after its last window), and
`metadata()` adds long_document, doc_stride, window_pooling and max_windows.

(`serve_ids` was called `token_ids` before the serving contract.) A
single-sentence model has no `text_b` input (TF Serving rejects a request
that sends one); `bert predict` says so in a sentence. The loaded object also
has `metadata()` → {task, labels, seq_length, lower_case, pair,
max_batch_size, text_inputs}. Loading needs only TensorFlow and
tensorflow-text (`import tensorflow_text` before `tf.saved_model.load`, for
the WordPiece ops), not this project:

    import tensorflow as tf, tensorflow_text
    serve = tf.saved_model.load("export/1764000000").signatures["serving_default"]
    serve(text_a=tf.constant(["a charming journey"]))["probabilities"]

    saved_model_cli run --dir export/1764000000 --tag_set serve --signature_def serve_ids \\
        --input_exprs 'input_word_ids=[[101,1037,102]];input_mask=[[1,1,1]];input_type_ids=[[0,0,0]]'
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the WordPiece ops a loaded export runs)

from official_bert import checkpoints, io
from official_bert.modeling.configs import BertConfig
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.modeling.heads import BertClassifier, pool_window_logits
from official_bert.run_directory import CLASSIFIER_CONFIG, run_of
from official_bert.run_directory.latest import readable
from official_bert.serving.base import MAX_BATCH_SIZE, ExportModule
from official_bert.serving.versions import latest_version_dir
from official_bert.text import text_layers


class ClassifierServing(ExportModule):
    """The classifier with its in-graph preprocessing (see the module docstring).

    Args:
        model: a `BertClassifier` (or any model: encoder dict → logits).
        vocab: vocabulary file or token list.
        lower_case: bool.
        seq_length: int. Packed length (the fine-tuning `max_seq_length`).
        labels: label strings in class order, or None for regression.
        pair: True when the task has a second text (`text_b`).
        max_batch_size: requests with more examples are refused.
    """

    TASK = "classification"

    def __init__(self, model, vocab, lower_case, seq_length, labels, pair,
                 max_batch_size=MAX_BATCH_SIZE):
        inputs = {"text_a": 1, "text_b": 1} if pair else {"text_a": 1}
        super().__init__(model, vocab, lower_case, seq_length, max_batch_size=max_batch_size,
                         text_inputs=inputs)
        self.pair = bool(pair)
        self.regression = labels is None
        self._labels = [str(label) for label in labels] if labels is not None else []
        text_specs = [tf.TensorSpec([None], tf.string, name=name) for name in inputs]
        self.preprocess = tf.function(
            (lambda text_a, text_b: self._pack(text_a, text_b)) if self.pair else
            (lambda text_a: self._pack(text_a)), input_signature=text_specs)

    def _pack(self, text_a, text_b=None):
        texts = [text_a] if text_b is None else [text_a, text_b]
        return self.pack([self.tokenizer(t) for t in texts])

    def serve_text(self, text_a, text_b=None):
        # The padding no row of the batch needs is cut off before the model.
        return self.serve_token_ids(text_layers.trim_padding(self._pack(text_a, text_b)))

    def serve_token_ids(self, inputs):
        return self._outputs(self.model(inputs, training=False))

    def _outputs(self, logits):
        if self.regression:
            return {"score": logits[:, 0]}
        probabilities = tf.nn.softmax(logits, axis=-1)
        best = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"probabilities": probabilities,
                "label": tf.gather(tf.constant(self._labels, tf.string), best)}

    def metadata_entries(self):
        return {"labels": tf.constant(self._labels, tf.string), "pair": self.pair}

    def extra_signatures(self):
        return {"preprocess": self.preprocess}

    def warmup_texts(self):
        texts = {"text_a": "a charming and often affecting journey"}
        if self.pair:
            texts["text_b"] = "the journey is charming"
        return texts


class WindowedClassifierServing(ClassifierServing):
    """`ClassifierServing` for documents longer than the model (single text).

    Args:
        as `ClassifierServing`, and
        windows: {"doc_stride", "max_windows", "window_pooling"} as the model
            was trained (`ClassificationConfig.windows`).
    """

    IDS_RANK = 3  # serve_ids: [batch, windows, seq]

    def __init__(self, model, vocab, lower_case, seq_length, labels, windows,
                 max_batch_size=MAX_BATCH_SIZE):
        super().__init__(model, vocab, lower_case, seq_length, labels, pair=False,
                         max_batch_size=max_batch_size)
        self.doc_stride = int(windows["doc_stride"])
        self.max_windows = int(windows["max_windows"])
        self.window_pooling = str(windows["window_pooling"])

    def serve_text(self, text_a, text_b=None):
        ids = self.tokenizer(text_a)  # [batch, (tokens)]
        length = tf.cast(ids.row_lengths(), tf.int32)
        window = self.seq_length - 2
        # glue_features.window_spans: starts 0, s, 2s, ... until one reaches the end.
        stride = min(self.doc_stride, window)
        count = 1 + (tf.maximum(length - window, 0) + stride - 1) // stride
        windows = tf.ragged.range(tf.minimum(count, self.max_windows))  # [batch, (windows)]
        document = tf.cast(windows.value_rowids(), tf.int32)
        start = windows.flat_values * stride
        size = tf.minimum(window, tf.gather(length, document) - start)
        positions = tf.ragged.range(start, start + size)  # [windows, (tokens)]
        offsets = tf.gather(tf.cast(ids.row_starts(), tf.int32), document)
        pieces = positions.with_flat_values(tf.gather(
            ids.flat_values, positions.flat_values + tf.repeat(offsets, positions.row_lengths())))
        packed = text_layers.trim_padding(self.pack([pieces]))
        logits = self.model(packed, training=False)  # [windows, classes]
        return self._outputs(pool_window_logits(logits, document, tf.shape(length)[0],
                                                self.window_pooling))

    def metadata_entries(self):
        return {**super().metadata_entries(), "long_document": "windows",
                "doc_stride": self.doc_stride, "max_windows": self.max_windows,
                "window_pooling": self.window_pooling}


def export_classifier(model, vocab_file: str, do_lower_case: bool, seq_length: int,
                      labels, pair: bool, export_dir: str, version: int | None = None,
                      max_batch_size: int = MAX_BATCH_SIZE, windows: dict | None = None,
                      int8: bool = False) -> str:
    """Writes the classifier SavedModel in TF Serving's layout; returns its version dir.

    Args:
        model: a trained `BertClassifier`.
        vocab_file: the vocabulary it was trained with (or its token list).
        do_lower_case: its casing.
        seq_length: the fine-tuning `max_seq_length`.
        labels: label strings in class-id order (None for regression).
        pair: whether the task takes `text_b`.
        export_dir: the TF Serving model directory (versions inside).
        version: the version number (default: seconds since the epoch).
        max_batch_size: requests with more examples are refused.
        windows: the window settings of a --long_document=windows model
            (`WindowedClassifierServing`), or None.
    """
    num_outputs = 1 if labels is None else len(labels)
    if getattr(model, "num_classes", num_outputs) != num_outputs:
        raise ValueError(f"the model has {model.num_classes} outputs but {num_outputs} "
                         f"label(s) were given ({labels})")
    if windows:
        module = WindowedClassifierServing(model, vocab_file, do_lower_case, seq_length, labels,
                                           windows, max_batch_size=max_batch_size)
    else:
        module = ClassifierServing(model, vocab_file, do_lower_case, seq_length, labels, pair,
                                   max_batch_size=max_batch_size)
    return module.save(export_dir, version, int8=int8)


class ClassifierPredictor:
    """A classifier to call from Python: an export or a `run_classifier.py` run.

    Args:
        path: a SavedModel of `export_classifier` (a version directory, or the
            TF Serving directory, whose latest version is used), its int8
            `model.tflite` (`--quantize`), or a `run_classifier.py --output_dir`
            (its latest checkpoint).

    Attributes: `pair` (takes text_b), `regression`, `labels`, `source`.

    Example:
    >>> predictor = ClassifierPredictor("/tmp/sst2_export")  # doctest: +SKIP
    >>> predictor.predict(["a charming journey"])["label"]  # doctest: +SKIP
    array([b'1'], dtype=object)
    """

    def __init__(self, path: str):
        saved_model = latest_version_dir(path)
        if str(path).endswith(".tflite"):
            self._load_tflite(path)
        elif saved_model is not None:
            self._load_saved_model(saved_model)
        elif io.isdir(path) and run_of(path).is_classifier_run():
            self._load_run(path)
        else:
            raise ValueError(f"{path} is neither a SavedModel (saved_model.pb, or "
                             "numbered versions) nor a run_classifier.py --output_dir "
                             f"({CLASSIFIER_CONFIG})")

    def _load_saved_model(self, path):
        loaded = tf.saved_model.load(path)
        if "serving_default" not in loaded.signatures:
            raise ValueError(f"{path} has no serving_default signature")
        self._serve = loaded.signatures["serving_default"]
        inputs = self._serve.structured_input_signature[1]
        if "text_a" not in inputs:
            raise ValueError(f"{path} is not a classifier export (its serving_default takes "
                             f"{', '.join(sorted(inputs))}, not text_a)")
        self.pair = "text_b" in inputs
        self.regression = "score" in self._serve.structured_outputs
        self.labels = []
        self.max_batch_size = MAX_BATCH_SIZE
        if hasattr(loaded, "metadata"):
            metadata = loaded.metadata()
            self.labels = [b.decode() for b in metadata["labels"].numpy().tolist()]
            if "max_batch_size" in metadata:
                self.max_batch_size = int(metadata["max_batch_size"])
        self.source = f"SavedModel {path}"
        self._loaded = loaded  # keeps the resources alive

    def _load_tflite(self, path):
        """The int8 model.tflite of an export (`--quantize`): the SavedModel beside
        it tokenizes (its `preprocess` signature, padded to the file's fixed
        length) and says the labels; the TFLite interpreter runs the model."""
        from official_bert.serving import edge

        version = os.path.dirname(os.path.abspath(path))
        if latest_version_dir(version) != version:
            raise ValueError(f"{path} is not in an export's version folder (beside "
                             "saved_model.pb, which tokenizes for it)")
        self._load_saved_model(version)
        if "preprocess" not in self._loaded.signatures:
            raise ValueError(f"{path}: its export has no preprocess signature (a "
                             "--long_document=windows model): use the SavedModel")
        preprocess, run = self._loaded.signatures["preprocess"], edge.tflite_runner(path)
        labels = np.asarray(self.labels, dtype=object)

        def serve(**texts):
            out = run({k: v.numpy() for k, v in preprocess(**texts).items()})
            if self.regression:
                return {"score": tf.constant(out["score"])}
            probabilities = out["probabilities"]
            return {"probabilities": tf.constant(probabilities),
                    "label": tf.constant(labels[probabilities.argmax(-1)].astype(str))}

        self._serve = serve
        self.source = f"TFLite {path}"

    def _load_run(self, path):
        run = run_of(path)  # (a directory: read, never written)
        config = json.loads(io.read_text(run.classifier_config))
        if run.latest_checkpoint() is None:
            raise ValueError(f"{path} holds no checkpoint yet: train it first (--do_train)")
        bert_config = BertConfig.from_json_file(run.bert_config)
        labels = config.get("labels")
        encoder = BertEncoder.from_bert_config(bert_config)
        model = BertClassifier(encoder, 1 if labels is None else len(labels))
        model(dummy_inputs())
        # (The run may be training: its latest complete checkpoint, step logged.)
        checkpoint = tf.train.Checkpoint(model=model)
        latest, status = run.read_latest(lambda prefix: checkpoint.read(readable(prefix)))
        status.expect_partial()
        try:
            status.assert_existing_objects_matched()
        except AssertionError as e:
            raise checkpoints.CheckpointError(f"{latest} does not fit the classifier in "
                                              f"{path}: {str(e).splitlines()[0]}") from None
        vocab, lower_case = run.vocab, config.get("do_lower_case", True)
        if config.get("long_document") == "windows":
            model.window_pooling = config["window_pooling"]
            module = WindowedClassifierServing(model, vocab, lower_case,
                                               config["max_seq_length"], labels, config)
        else:
            module = ClassifierServing(model, vocab, lower_case, config["max_seq_length"],
                                       labels, config["pair"])
        self._serve = module.serve
        self.max_batch_size = module.max_batch_size
        self.pair = bool(config["pair"])
        self.regression = bool(config.get("regression", labels is None))
        self.labels = labels or []
        self.source = f"checkpoint {latest}"

    def predict(self, texts_a, texts_b=None) -> dict:
        """Numpy outputs of serving_default (probabilities and label, or score),
        in calls of at most the export's `max_batch_size` examples."""
        if texts_b is not None and not self.pair:
            raise ValueError("this model is single-sentence: it takes text_a only, no text_b")
        if texts_b is None and self.pair:
            raise ValueError("this model is a pair task: it needs text_a and text_b")
        texts_a = list(texts_a)
        texts_b = None if texts_b is None else list(texts_b)
        parts = []
        for start in range(0, max(len(texts_a), 1), self.max_batch_size):
            kwargs = {"text_a": tf.constant(texts_a[start:start + self.max_batch_size],
                                            tf.string)}
            if texts_b is not None:
                kwargs["text_b"] = tf.constant(texts_b[start:start + self.max_batch_size],
                                               tf.string)
            parts.append({k: v.numpy() for k, v in self._serve(**kwargs).items()})
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
