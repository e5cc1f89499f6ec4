"""The export base every task's SavedModel subclasses: TF Serving's layout,
two signatures, the input checks, the vocabulary asset and the warm-up file.

Modelled on tensorflow/models' `official/nlp/serving/serving_modules.py`: a
task's module (`classification.ClassifierServing`, `squad.SquadServingModule`,
`multiple_choice.MultipleChoiceServing`, `ner.TokenClassifierServing`,
`encoder.EncoderServing`, `pretraining.PretrainingServing`) subclasses
`ExportModule` and defines only its two signature functions:

    serve_text(self, <one tf.string input per text field>) -> dict of outputs
    serve_token_ids(self, inputs: dict of int32 ids) -> dict of outputs

Everything else lives here, once:

* **Signatures.** `serving_default` is `serve_text` (raw text, tokenized in
  the graph with tensorflow-text ops); `serve_ids` is `serve_token_ids`
  (int32 `input_word_ids`, `input_mask`, `input_type_ids`, [batch, seq]; for
  multiple choice [batch, choices, seq]), for clients that tokenize
  themselves. A task may add more (`extra_signatures`, e.g. the classifier's
  `preprocess`). `metadata()` (not a signature) returns the task, the packed
  length, the casing, the batch limit and the task's own entries (labels, ...).
* **Input checks, in the graph** (TF Serving feeds tensors of any shape:
  it does not check them against the signature). A request is refused with
  an `InvalidArgumentError` that says what is wrong when: a text input is not
  of its declared rank (a vector of strings [batch], or [batch, choices] for
  the multiple-choice endings) — a scalar or a [batch, 1] column is refused;
  the inputs hold different numbers of examples; it holds more than
  `max_batch_size` examples (default `MAX_BATCH_SIZE` = 256: refused, not
  split; send larger sets in several requests, or export with a larger
  limit); the three id tensors differ in shape, or are longer than the
  model's `max_position_embeddings`, or hold no token; an id is outside its embedding table
  (`input_word_ids` not in [0, vocab_size), `input_type_ids` not in
  [0, type_vocab_size)) or `input_mask` is not 0 or 1 — without the check
  the model would answer anyway: a negative id wraps around on CPU, and a
  GPU reads zeros for an id past the table.
* **Layout.** `save(export_dir, version)` writes `export_dir/<version>/`,
  staged and published atomically by `serving.versions` (how, and why it is
  safe for a model server polling `export_dir`, is said there). A version
  holds

      saved_model.pb, variables/
      assets/vocab.txt                          the vocabulary, line i = id i
      assets.extra/tf_serving_warmup_requests   TF Serving's warm-up records

* **Warm-up.** `assets.extra/tf_serving_warmup_requests` is a TFRecord file of
  `tensorflow.serving.PredictionLog` records (one `PredictRequest` per
  signature and batch size in `WARMUP_BATCH_SIZES`), which TF Serving replays
  when it loads the version, so the first real request does not pay for
  graph optimization and memory allocation. The records are encoded by
  `serving.prediction_log` (the protobuf wire format of the few fields a
  request uses), so every export has the file without `tensorflow-serving-api`.

The SavedModel loads without this project: `import tensorflow_text` (which
registers the tokenizer's ops) and `tf.saved_model.load`, or TF Serving's
model server, the stock `tensorflow/serving` image included, which links
tensorflow-text's ops. A binary without them (a model server built without
tensorflow-text, the `saved_model_cli` script) cannot load a graph that has
them at all, not even to call `serve_ids` (`saved_model_cli show` reads the
file and works on any export; `run` fails with "Op type not registered
'NormalizeUTF8'"): `export_ids_only` (`bert export-ids-only`) writes a copy
with only the ids signature for such binaries.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import tempfile

import numpy as np
import tensorflow as tf
from absl import logging
import tensorflow_text  # noqa: F401  (registers the text ops of an export loaded from disk)

from official_bert import io
from official_bert.errors import BadFileError, UserError
from official_bert.modeling import heads
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.serving import edge, prediction_log
from official_bert.serving.variables import IDS_KEYS, track_captured_variables  # noqa: F401
from official_bert.serving.versions import (check_export_version_free, check_saved_model,
                                            latest_version_dir, publish_new_version,
                                            staging_dir)
from official_bert.text import text_layers, tokenization

MAX_BATCH_SIZE = 256
WARMUP_BATCH_SIZES = (1, 8)
WARMUP_FILE = "tf_serving_warmup_requests"


class Untracked:
    """Holds an object out of a SavedModel's object graph. A Keras model kept
    as a `tf.Module` attribute would be saved with its wrapper variables, a
    second copy of every weight beside the wrapped `tf.Variable`s the
    functions read (`track_captured_variables`): the export twice its size."""

    def __init__(self, value):
        self.value = value


class XlaCompiled:
    """A Keras model whose call is one XLA cluster (`tf.function(jit_compile=True)`),
    standing in for the model inside the serving functions; other attributes
    (`config`, `encoder`, ...) are the model's. XLA compiles once per input
    shape: the first request of each new batch size and trimmed length pays
    for a compilation (about a second for BERT-Base on CPU)."""

    def __init__(self, model):
        self._model = model
        self._call = tf.function(lambda inputs: model(inputs, training=False),
                                 jit_compile=True, autograph=False)

    def __call__(self, inputs, training=False):
        del training  # serving is inference
        return self._call(inputs)

    def __getattr__(self, name):
        return getattr(self._model, name)


def with_weights_in(model, dtype: str):
    """`model` itself for "float32"; for "bfloat16" a copy (a `BertEncoder`, or
    a head around one) built under Keras' `bfloat16` policy, its weights stored
    in bfloat16 (LayerNorm's stay float32; outputs are cast to float32).

    For serving on CPUs with AVX512-BF16 or AMX (`--serving_dtype=bfloat16`): a
    `mixed_bfloat16` model keeps float32 variables and casts every weight to
    bfloat16 in every request, which at batch 1 costs as much as the bfloat16
    matmuls save (benchmarks/README.md); stored in bfloat16 they are read as
    they are.
    """
    if dtype == "float32":
        return model
    if dtype != "bfloat16":  # (the flag's values: `configs.SERVING_DTYPES`)
        raise ValueError(f"serving dtype {dtype!r}: use float32 or bfloat16")
    if isinstance(model, BertEncoder):
        copy = BertEncoder.from_config({**model.get_config(), "dtype": dtype})
    else:
        if not isinstance(getattr(model, "encoder", None), BertEncoder):
            raise ValueError(f"a {type(model).__name__} has no BERT encoder to serve in {dtype}")
        copy = type(model).from_config({**model.get_config(),
                                        "encoder": with_weights_in(model.encoder, dtype)})
        inputs = dummy_inputs()  # builds the head's layers, as the original's are
        if isinstance(model, heads.BertMultipleChoice):
            inputs = {k: v[:, tf.newaxis] for k, v in inputs.items()}
        if isinstance(model, heads.BertPretrainer):
            inputs["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
        copy(inputs)
    copy.set_weights(model.get_weights())
    return copy


def _vocab_tokens(vocab) -> list:
    if isinstance(vocab, (str, bytes)) or hasattr(vocab, "__fspath__"):
        return tokenization.load_vocab_list(vocab)
    return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in vocab]


def _assert(condition, message: str, *values):
    """A runtime check TF Serving cannot skip (the condition is never folded:
    its operands are shapes only known when a request arrives)."""
    return tf.debugging.Assert(condition, [message, *values], summarize=8)


def _runtime_rank(value):
    """The rank of `value` as the request has it. `tf.rank` would be folded to
    the signature's declared rank by the graph optimizer (so a [batch, 1]
    column would pass); this counts the dimensions of the actual shape."""
    return tf.reduce_sum(tf.cast(tf.shape(value) >= 0, tf.int32))


class ExportModule(tf.Module):
    """The base of every task's SavedModel (see the module docstring).

    Subclasses define `serve_text` and `serve_token_ids`, and may override
    `TASK`, `TEXT_INPUTS` (name → rank, in signature order), `IDS_RANK`,
    `metadata_entries`, `warmup_texts`, `warmup_ids` and `extra_signatures`.

    Args:
        model: the Keras model (ids dict in).
        vocab: vocabulary file or token list (id = position).
        lower_case: bool, the model's casing.
        seq_length: int. The packed length (the fine-tuning `max_seq_length`).
        max_batch_size: int. Requests with more examples are refused.
        text_inputs: dict name → rank of serving_default's inputs (default
            the class's `TEXT_INPUTS`).
        jit_compile: bool. The model's call in every signature compiled by
            XLA (`XlaCompiled`); the text ops and checks stay in TensorFlow.
    """

    TASK = "bert"
    TEXT_INPUTS: dict = {"text": 1}
    IDS_RANK = 2

    def __init__(self, model, vocab, lower_case=True, seq_length=128,
                 max_batch_size=MAX_BATCH_SIZE, text_inputs=None, name=None,
                 jit_compile=False):
        super().__init__(name=name)
        if int(max_batch_size) < 1:
            raise ValueError(f"max_batch_size={max_batch_size}: must be at least 1")
        self._model = Untracked(model)
        self._compiled = Untracked(XlaCompiled(model) if jit_compile else None)
        self.jit_compile = bool(jit_compile)
        self.seq_length = int(seq_length)
        self.lower_case = bool(lower_case)
        self.max_batch_size = int(max_batch_size)
        self._vocab = tuple(_vocab_tokens(vocab))
        self.tokenizer = text_layers.BertTokenizerLayer(list(self._vocab), lower_case=lower_case,
                                                        name="tokenizer")
        # Tracked here too, so the SavedModel keeps the tables whatever Keras tracks.
        self._vocab_table = self.tokenizer._vocab_table
        self._lower_table = self.tokenizer._lower_table
        self.cls_id = self.tokenizer.token_id(tokenization.CLS_TOKEN)
        self.sep_id = self.tokenizer.token_id(tokenization.SEP_TOKEN)
        self.unk_id = self.tokenizer.token_id(tokenization.UNK_TOKEN)
        self.pad_id = self.tokenizer.token_to_id.get(tokenization.PAD_TOKEN, 0)
        self.packer = text_layers.BertPackInputs(self.seq_length, self.cls_id, self.sep_id,
                                                 self.pad_id, name="packer")
        config = getattr(getattr(model, "encoder", model), "config", None)
        self.max_positions = int(getattr(config, "max_position_embeddings", self.seq_length))
        # The id ranges serve_ids checks (`_id_value_checks`): an id outside them is
        # an out-of-range gather, which wraps negative ids around on CPU and reads
        # zeros on a GPU.
        self.vocab_size = int(getattr(config, "vocab_size", None) or len(self._vocab))
        type_vocab_size = getattr(config, "type_vocab_size", None)
        self.type_vocab_size = int(type_vocab_size) if type_vocab_size else None
        self._text_inputs = tuple((str(k), int(v)) for k, v in
                                  (text_inputs or self.TEXT_INPUTS).items())

        names = [name for name, _ in self._text_inputs]
        text_specs = [tf.TensorSpec([None] * rank, tf.string, name=name)
                      for name, rank in self._text_inputs]
        ids_specs = [tf.TensorSpec([None] * self.IDS_RANK, tf.int32, name=k) for k in IDS_KEYS]
        self.serve = tf.function(_named(self._checked_text, names), input_signature=text_specs)
        self.serve_ids = tf.function(_named(self._checked_ids, list(IDS_KEYS)),
                                     input_signature=ids_specs)
        self.metadata = tf.function(self._metadata, input_signature=[])

    @property
    def model(self):
        """What the signatures call: the Keras model (kept out of the object
        graph: see `Untracked`), or its `XlaCompiled` wrapper."""
        return self._compiled.value or self._model.value

    @property
    def keras_model(self):
        """The Keras model itself (its variables are the export's)."""
        return self._model.value

    # --- what a task defines ------------------------------------------------------

    def serve_text(self, **texts) -> dict:
        raise NotImplementedError(f"{type(self).__name__} must define serve_text")

    def serve_token_ids(self, inputs: dict) -> dict:
        raise NotImplementedError(f"{type(self).__name__} must define serve_token_ids")

    def metadata_entries(self) -> dict:
        """The task's own `metadata()` entries (Python values)."""
        return {}

    def extra_signatures(self) -> dict:
        """Signatures besides serving_default and serve_ids."""
        return {}

    def warmup_texts(self) -> dict:
        """One example of serving_default's inputs (name → value), for the warm-up."""
        return {name: "the warm-up request of a new version" if rank == 1 else
                ["the first choice", "the second choice"] for name, rank in self._text_inputs}

    def warmup_ids(self) -> dict:
        """One example of serve_ids' inputs (name → nested list), for the warm-up:
        [CLS] [UNK]... [SEP] at the full packed length."""
        length = min(self.seq_length, self.max_positions)
        row = [self.cls_id] + [self.unk_id] * (length - 2) + [self.sep_id]
        ids = {"input_word_ids": row, "input_mask": [1] * length, "input_type_ids": [0] * length}
        if self.IDS_RANK == 3:
            ids = {k: [v, v] for k, v in ids.items()}
        return ids

    # --- helpers for tasks ----------------------------------------------------------

    def pack(self, segments) -> dict:
        """Tokenized segments (ragged [batch, (ids)], one or two) → the packed
        [batch, seq_length] ids, `[CLS] A [SEP] B [SEP]` (google's truncation)."""
        return self.packer(list(segments))

    @property
    def text_input_names(self) -> list:
        return [name for name, _ in self._text_inputs]

    # --- the checks and signatures --------------------------------------------------

    def _checked_text(self, *texts):
        texts = dict(zip(self.text_input_names, texts))
        # The ranks first: the other checks (and the task's ops) run only once
        # they hold, so the error says what is wrong.
        ranks = []
        for name, rank in self._text_inputs:
            actual = _runtime_rank(texts[name])
            ranks.append(_assert(
                tf.equal(actual, rank),
                f"{name} must be a {'vector' if rank == 1 else 'matrix'} of strings "
                f"{'[batch]' if rank == 1 else '[batch, choices]'} (one "
                f"{'string' if rank == 1 else 'row'} per example, e.g. "
                f"{{\"instances\": [...]}} in TF Serving's REST API); got a tensor of rank",
                actual))
        checks, first = [], None
        with tf.control_dependencies(ranks):
            for name, _ in self._text_inputs:
                batch = _batch_size(texts[name])
                checks.append(self._batch_check(name, batch))
                if first is None:
                    first = (name, batch)
                else:
                    checks.append(_assert(
                        tf.equal(batch, first[1]),
                        f"{first[0]} and {name} must hold the same number of examples; "
                        "they hold", first[1], batch))
        with tf.control_dependencies(checks):
            texts = {name: tf.identity(value) for name, value in texts.items()}
        return self.serve_text(**texts)

    def _batch_check(self, name, batch):
        return _assert(
            batch <= self.max_batch_size,
            f"{name} holds more examples than this export's max_batch_size "
            f"({self.max_batch_size}): send at most {self.max_batch_size} per request; "
            "examples in the request:", batch)

    def _checked_ids(self, input_word_ids, input_mask, input_type_ids):
        inputs = {"input_word_ids": input_word_ids, "input_mask": input_mask,
                  "input_type_ids": input_type_ids}
        rank = self.IDS_RANK
        layout = "[batch, seq]" if rank == 2 else "[batch, choices, seq]"
        ranks = []
        for name, value in inputs.items():
            actual = _runtime_rank(value)
            ranks.append(_assert(tf.equal(actual, rank),
                                 f"{name} must be int32 {layout}; got a tensor of rank", actual))
        checks = []
        with tf.control_dependencies(ranks):
            shape = tf.shape(input_word_ids)
            for name, value in inputs.items():
                checks.append(_assert(
                    tf.reduce_all(tf.equal(tf.shape(value), shape)),
                    f"{name} must have the shape of input_word_ids; shapes:",
                    tf.shape(value), shape))
            checks.append(self._batch_check("input_word_ids", _batch_size(input_word_ids)))
            length = shape[-1]
            checks.append(_assert(
                length <= self.max_positions,
                f"input_word_ids is longer than the model's {self.max_positions} positions; "
                "length:", length))
            # (Without it, a task's head slicing out position 0 fails with a
            # strided-slice error that names no input.)
            checks.append(_assert(
                length >= 1,
                "input_word_ids must be at least one token long ([CLS] at least: the model "
                "reads its vector); length:", length))
            checks += self._id_value_checks(inputs)
        with tf.control_dependencies(checks):
            inputs = {name: tf.identity(value) for name, value in inputs.items()}
        return self.serve_token_ids(inputs)

    def _id_value_checks(self, inputs) -> list:
        """The values of serve_ids' inputs: word ids in [0, vocab_size), type ids
        in [0, type_vocab_size), the mask 0 or 1. (The model gathers rows of its
        embedding tables by them; an id outside a table is not an error there:
        on CPU a negative id wraps around, on a GPU any outside id reads zeros.)
        Each message names the input, its range, and the smallest and largest
        value of the request; a TF Serving client gets it as the error text (no
        apostrophes: the Assert op escapes them)."""
        ranges = [("input_word_ids", self.vocab_size,
                   f"in [0, {self.vocab_size}) (vocab_size: ids of the vocabulary, line i of "
                   "assets/vocab.txt is id i)"),
                  ("input_mask", 2, "0 or 1 (1 for a token, 0 for padding)"),
                  ("input_type_ids", self.type_vocab_size,
                   f"in [0, {self.type_vocab_size}) (type_vocab_size: segment ids, 0 for the "
                   "first text, 1 for the second)")]
        checks = []
        for name, size, what in ranges:
            if size is None:
                continue
            # An empty request passes: the minimum of nothing is int32's largest
            # value, the maximum its smallest.
            low, high = tf.reduce_min(inputs[name]), tf.reduce_max(inputs[name])
            checks.append(_assert(
                tf.logical_and(low >= 0, high < size),
                f"{name} must be {what}; the smallest and largest {name} of the request:",
                low, high))
        return checks

    def _metadata(self):
        entries = {"task": self.TASK, "seq_length": self.seq_length,
                   "lower_case": self.lower_case, "max_batch_size": self.max_batch_size,
                   "text_inputs": self.text_input_names}
        entries.update(self.metadata_entries())
        return {k: v if isinstance(v, tf.Tensor) else tf.constant(v)
                for k, v in entries.items()}

    def signatures(self) -> dict:
        return {"serving_default": self.serve, "serve_ids": self.serve_ids,
                **self.extra_signatures()}

    # --- writing ------------------------------------------------------------------------

    def save(self, export_dir: str, version: int | None = None, int8: bool = False) -> str:
        """Writes `export_dir/<version>/` atomically (see the module docstring);
        with `int8`, the version also holds `model.tflite`, the ids signature with
        int8 weights (`serving.edge.write_int8_model`), published with the rest so
        that a model server never sees the version without it. Returns the
        version directory."""
        export_dir = str(export_dir)
        check_export_version_free(export_dir, version)
        track_captured_variables(self, [self.keras_model])
        staging = staging_dir(export_dir)
        try:
            with _asset_files({"vocab.txt": "".join(t + "\n" for t in self._vocab)}) as paths:
                self.vocab_file = tf.saved_model.Asset(paths["vocab.txt"])
                tf.saved_model.save(self, staging, signatures=self.signatures())
            write_warmup_requests(staging, self.warmup_requests())
            if int8:
                edge.write_int8_model(self, staging)
            published = publish_new_version(staging, export_dir, version)
            if int8:
                logging.info("%s", edge.describe_tflite(io.join(published, edge.SERVING_TFLITE)))
            return published
        finally:
            io.remove_tree(staging)

    def warmup_requests(self) -> list:
        """[(signature name, inputs dict of numpy arrays)] for the warm-up file."""
        requests = []
        texts, ids = self.warmup_texts(), self.warmup_ids()
        for batch in WARMUP_BATCH_SIZES:
            batch = min(batch, self.max_batch_size)
            requests.append(("serving_default", {
                k: np.asarray([v] * batch, dtype=object) for k, v in texts.items()}))
            requests.append(("serve_ids", {
                k: np.asarray([v] * batch, dtype=np.int32) for k, v in ids.items()}))
        return requests


@contextlib.contextmanager
def _asset_files(files: dict):
    """{name: text} written to a local scratch directory for `tf.saved_model.Asset`
    (which copies them into the SavedModel's assets/); removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="official_bert_assets_") as scratch:
        paths = {}
        for name, text in files.items():
            paths[name] = os.path.join(scratch, name)
            with open(paths[name], "w", encoding="utf-8") as f:
                f.write(text)
        yield paths


def _named(function, names):
    """`function(*args)` with the signature `(names...)`, so that a tf.function
    of it is called with the inputs' names and its SignatureDef uses them."""

    def call(*args):
        return function(*args)

    call.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    call.__name__ = getattr(function, "__name__", "call").lstrip("_")
    return call


def _batch_size(value):
    """The first dimension of `value`, 0 for a scalar (no error before the
    rank check has said what is wrong)."""
    return tf.reduce_max(tf.concat([tf.shape(value)[:1], [0]], 0))


def write_warmup_requests(version_path: str, requests) -> str:
    """Writes `assets.extra/tf_serving_warmup_requests` (one PredictionLog
    record per (signature name, inputs) request) into a SavedModel directory;
    returns its path."""
    directory = io.join(version_path, "assets.extra")
    io.makedirs(directory)
    path = io.join(directory, WARMUP_FILE)
    with tf.io.TFRecordWriter(path) as writer:
        for signature, inputs in requests:
            writer.write(prediction_log.encode(signature, inputs))
    return path


def read_warmup_requests(version_path: str) -> list:
    """[(signature name, {input: numpy array})] of a version's warm-up file;
    `BadFileError` naming the record that is not a PredictionLog request."""
    path = io.join(version_path, "assets.extra", WARMUP_FILE)
    if not io.exists(path):
        raise BadFileError(path, "does not exist: the export has no warm-up file")
    requests = []
    try:
        for number, record in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
            try:
                _, signature, inputs = prediction_log.decode(record)
            except prediction_log.DecodeError as e:
                raise BadFileError(path, f"is not a warm-up request: {e}", record=number) from None
            requests.append((signature, inputs))
    except tf.errors.DataLossError as e:
        raise BadFileError(path, f"is not a TFRecord file ({e.message})") from None
    return requests


def export_ids_only(saved_model: str, export_dir: str, version: int | None = None) -> str:
    """Writes a copy of an export with only its ids signature (as
    `serving_default` and `serve_ids`), for a model server without the
    tensorflow-text ops, which cannot load a graph that has them even to call
    `serve_ids`. Same layout, atomic write, vocabulary asset and warm-up
    (serve_ids requests).

    Args:
        saved_model: an export (a version directory, or the TF Serving
            directory, whose latest version is used).
        export_dir: the TF Serving directory to write `<version>/` into.
    """
    source = latest_version_dir(str(saved_model))
    if source is None:
        raise UserError(f"{saved_model} is not a SavedModel export (no saved_model.pb, no "
                        "numbered versions)")
    check_saved_model(source)
    loaded = tf.saved_model.load(source)
    if "serve_ids" not in loaded.signatures:
        raise UserError(f"{source} has no serve_ids signature")
    function = loaded.signatures["serve_ids"]
    root = tf.Module()
    root.serving_variables = list(function.variables)
    root.serve_ids = function
    warmup = []
    if io.exists(io.join(source, "assets.extra", WARMUP_FILE)):
        warmup = [(name, inputs) for name, inputs in read_warmup_requests(source)
                  if name == "serve_ids"]
        warmup += [("serving_default", inputs) for _, inputs in warmup]
    vocab = io.join(source, "assets", "vocab.txt")
    if io.exists(vocab):  # for the clients, which tokenize themselves
        root.vocab_file = tf.saved_model.Asset(vocab)
    check_export_version_free(str(export_dir), version)
    staging = staging_dir(str(export_dir))
    try:
        tf.saved_model.save(root, staging,
                            signatures={"serving_default": function, "serve_ids": function})
        if warmup:
            write_warmup_requests(staging, warmup)
        return publish_new_version(staging, str(export_dir), version)
    finally:
        io.remove_tree(staging)
