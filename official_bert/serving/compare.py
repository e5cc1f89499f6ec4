"""Models side by side on the user's data (`bert compare`): each one's task
metric on one labelled file, and its speed, timed interleaved in one process.

A model is an export's version folder (or its TF Serving directory: the
highest version), run through its `serve_ids` signature as TF Serving runs
it, or a TFLite file in such a folder (`model.tflite` of `--quantize`), run by
the TFLite interpreter; the folder's SavedModel says what the model is (its
task, labels, casing, length) and holds its vocabulary. Every model reads
the same token ids: the file is tokenized once per length, by this project's
Python tokenizer, as a client of the ids signature does.

What is timed, every model in turn in each round (the same engine load and
moment for all; a model measured alone on a busy machine can look 2x slower
or faster than its twin):

* B1: one row of `length` tokens, `b1_calls` calls a round: p50 and p95;
* B32: 32 rows of `length` tokens: rows per second;
* file: the file's first `file_rows` rows, in batches of 32 at their own
  lengths (a SavedModel's batch cut to its longest row, as `--dynamic_padding`
  does; a TFLite file always reads its fixed length): rows per second.

`length` is the TFLite files' fixed length when any is compared (they take no
other), else 128.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import statistics
import time

import numpy as np

from official_bert import io
from official_bert.errors import UserError
from official_bert.serving.base import IDS_KEYS
from official_bert.serving.versions import latest_version_dir

SCORED_TASKS = ("classification", "ner", "multiple_choice")
DEFAULT_LENGTH = 128
BATCH = 32


@dataclasses.dataclass
class Model:
    """One compared model: `run(ids) -> outputs` (numpy)."""

    name: str
    path: str
    engine: str  # "SavedModel" or "TFLite"
    precision: str  # "float32", "bfloat16" or "int8"
    version_dir: str
    metadata: dict
    fixed_length: int | None
    size: int
    run: object = dataclasses.field(repr=False)

    @property
    def task(self) -> str:
        return self.metadata["task"]


def open_model(path: str, threads: int) -> Model:
    """The model at `path` (a version folder, a TF Serving directory, or a
    .tflite file in a version folder); `UserError` for anything else."""
    if not io.exists(path):
        raise UserError(f"{path} does not exist: give an export's folder or a .tflite file")
    if path.endswith(".tflite"):
        return _tflite_model(path, threads)
    version = latest_version_dir(path)
    if version is None:
        raise UserError(f"{path} is not an export: it holds no saved_model.pb and no numbered "
                        "version that does (give a --export_dir of a fine-tuning command)")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's text ops)

    loaded = tf.saved_model.load(version)
    if "serve_ids" not in loaded.signatures:
        raise UserError(f"{version} has no serve_ids signature: not this project's export")
    signature = loaded.signatures["serve_ids"]
    dtypes = {v.dtype.name for v in signature.variables}

    def run(ids, _loaded=loaded):  # (keeps the restored objects alive)
        try:
            out = signature(**{k: tf.constant(v) for k, v in ids.items()})
        except tf.errors.InvalidArgumentError as e:  # the export's own checks of a request
            said = re.search(r"longer than the model\\?'s (\d+) positions", e.message)
            if not said:
                raise
            raise UserError(f"{path} reads at most {said.group(1)} tokens, and the requests were "
                            f"{ids['input_word_ids'].shape[-1]} long: give --seq_length="
                            f"{said.group(1)} or less") from None
        return {k: v.numpy() for k, v in out.items() if v.dtype != tf.string}

    size = sum(io.size(os.path.join(root, f)) for root, _, files in os.walk(version)
               for f in files if f != "model.tflite")
    return Model(path, version, "SavedModel", "bfloat16" if "bfloat16" in dtypes else "float32",
                 version, _metadata(loaded), None, size, run)


def _tflite_model(path: str, threads: int) -> Model:
    from official_bert.serving import edge

    version = os.path.dirname(os.path.abspath(path))
    if not io.exists(os.path.join(version, "saved_model.pb")):
        raise UserError(f"{path}: a TFLite file is compared from its export's version folder "
                        "(beside saved_model.pb, which holds its labels and vocabulary); "
                        "export with --quantize to get one there")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    metadata = _metadata(tf.saved_model.load(version))
    runner = edge.tflite_runner(path, threads)
    details = runner.interpreter.get_signature_runner().get_input_details()
    fixed = int(details["input_word_ids"]["shape_signature"][-1])
    weights = {d["dtype"] for d in runner.interpreter.get_tensor_details()}
    return Model(path, path, "TFLite", "int8" if np.int8 in weights else "float32", version,
                 metadata, fixed, io.size(path), runner)


def _metadata(loaded) -> dict:
    values = {}
    for key, value in loaded.metadata().items():
        value = value.numpy()
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, np.ndarray) and value.dtype == object:
            value = [v.decode() for v in value.tolist()]
        elif isinstance(value, np.generic):
            value = value.item()
        values[key] = value
    return values


# --- the labelled file ----------------------------------------------------------------


@dataclasses.dataclass
class Scoring:
    """A labelled file read for one task: `features(length)` gives its id
    arrays at a length; `score(outputs)` its metrics from a model's outputs on
    them (a dict whose first item is the headline)."""

    rows: int
    features: object
    score: object


def read_scoring_file(path: str, model: Model, task_name: str | None) -> Scoring:
    """The labelled file `path` as `model`'s task reads it (`UserError` when
    the task cannot be scored here or the file does not fit)."""
    if model.task not in SCORED_TASKS:
        raise UserError(f"bert compare scores {', '.join(SCORED_TASKS)} exports; {model.path} "
                        f"is a {model.task} export (time it with --data_file of another task, "
                        "or score it with its own command's --do_eval / --do_predict)")
    from official_bert.text import tokenization

    tokenizer = tokenization.FullTokenizer(
        os.path.join(model.version_dir, "assets", "vocab.txt"),
        do_lower_case=bool(model.metadata["lower_case"]))
    reader = {"classification": _classification, "ner": _ner,
              "multiple_choice": _multiple_choice}[model.task]
    return reader(path, model, tokenizer, task_name)


def _classification(path, model, tokenizer, task_name) -> Scoring:
    from data_prep import glue, glue_features
    from official_bert.metrics import classification as metrics

    if not task_name:
        raise UserError("--task_name is required for a classifier's file (the GLUE task whose "
                        f"columns it has: {', '.join(glue.known_task_names())})")
    spec = glue.get_task(task_name)
    labels = model.metadata.get("labels") or None
    if list(spec.labels or []) != list(labels or []):
        raise UserError(f"--task_name={task_name} has labels {spec.labels}, but {model.path} "
                        f"was trained with {labels}")
    examples = glue.read_split(spec, path, "dev")
    @functools.cache  # (each length is converted once, for every model that reads it)
    def features(length):
        return glue_features.convert_examples(examples, tokenizer, length, labels)

    def score(outputs):
        gold = features(model.fixed_length or DEFAULT_LENGTH)["label"]
        logits = (outputs["score"][:, None] if "score" in outputs
                  else np.log(np.maximum(outputs["probabilities"], 1e-12)))
        found = metrics.evaluate_logits(spec.metric_kind, logits, gold)
        found.pop("loss", None)
        if task_name.lower() == "mrpc":  # GLUE's MRPC score: the mean of accuracy and F1
            found = {"glue_score": (found["accuracy"] + found["f1"]) / 2, **found}
        return found

    return Scoring(len(examples), features, score)


def _ner(path, model, tokenizer, task_name) -> Scoring:
    from data_prep import conll
    from official_bert.metrics import ner as ner_metrics

    data = conll.read_conll(path)
    if not data.has_tags:
        raise UserError(f"{path} has no gold tags to score")
    labels = model.metadata["labels"]
    sentences = data.sentences
    @functools.cache
    def windows(length):
        return conll.convert_sentences(sentences, tokenizer, labels, length)

    def features(length):
        return {k: v for k, v in conll.windows_to_arrays(windows(length)).items()
                if k != "label_ids"}

    def score(outputs):
        length = outputs["tag_ids"].shape[-1]
        predicted = conll.word_predictions(windows(length), outputs["tag_ids"],
                                           len(sentences), [len(s.words) for s in sentences])
        tags = [[labels[i] for i in ids] for ids in predicted]
        found = ner_metrics.flat_results(ner_metrics.entity_scores(
            [s.tags for s in sentences], tags))
        return {"entity_f1": found["entity_f1"], **found}

    return Scoring(len(sentences), features, score)


def _multiple_choice(path, model, tokenizer, task_name) -> Scoring:
    from data_prep import swag

    examples = swag.read_swag(path)
    @functools.cache
    def features(length):
        return swag.convert_examples(examples, tokenizer, length)

    def score(outputs):
        gold = features(model.fixed_length or DEFAULT_LENGTH)["label"]
        return {"accuracy": float(np.mean(outputs["choice"] == gold))}

    return Scoring(len(examples), features, score)


# --- running and timing ---------------------------------------------------------------


def run_batched(model: Model, arrays: dict, trim: bool) -> dict:
    """`model` over `arrays` in batches of 32; with `trim` (a SavedModel),
    each batch cut to its longest row."""
    parts = [model.run(batch) for batch in file_batches(arrays, None, trim)]
    out = {}
    for key in parts[0]:
        values = [p[key] for p in parts]
        width = max(v.shape[-1] for v in values) if values[0].ndim > 1 else None
        if width is not None and any(v.shape[-1] != width for v in values):
            # (a trimmed tagger's per-token outputs: padded back to one width)
            values = [np.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, width - v.shape[-1])])
                      for v in values]
        out[key] = np.concatenate(values)
    return out


def timing_length(models: list, asked: int | None) -> int:
    """The length every model is timed at: the TFLite files' fixed one (all
    alike), else `asked` or 128."""
    fixed = {m.fixed_length for m in models if m.fixed_length}
    if len(fixed) > 1:
        raise UserError("the TFLite files have different fixed lengths "
                        f"({', '.join(str(n) for n in sorted(fixed))}): compare files of one "
                        "length (export each with the same --max_seq_length)")
    if fixed and asked and asked not in fixed:
        raise UserError(f"--seq_length={asked}: the TFLite files read {fixed.pop()} tokens, "
                        "no other length")
    return fixed.pop() if fixed else asked or DEFAULT_LENGTH


def random_ids(batch: int, length: int, vocab: list, seed: int = 0) -> dict:
    """A full-length request: random word pieces of `vocab` (past its first 5
    entries, the special tokens of BERT's layout) between [CLS] and [SEP]."""
    rng = np.random.default_rng(seed + batch)
    ids = rng.integers(min(5, len(vocab) - 1), len(vocab), size=(batch, length))
    ids[:, 0] = vocab.index("[CLS]") if "[CLS]" in vocab else 0
    ids[:, -1] = vocab.index("[SEP]") if "[SEP]" in vocab else 0
    return {"input_word_ids": ids.astype(np.int32),
            "input_mask": np.ones((batch, length), np.int32),
            "input_type_ids": np.zeros((batch, length), np.int32)}


def vocabulary(model: Model) -> list:
    """The model's vocabulary (its version's assets/vocab.txt), line i id i."""
    text = io.read_text(os.path.join(model.version_dir, "assets", "vocab.txt"))
    return text.splitlines()


def time_interleaved(runs: dict, requests: dict, calls: dict, rounds: int,
                     progress=None) -> dict:
    """{name: {request: [seconds]}}: after one untimed call of each request per
    model (tracing, compilation, oneDNN's primitives), `rounds` rounds in which
    every model, in an order rotated by one each round, makes calls[request]
    timed calls of each request (a request is a dict of arrays, or a list of
    them: one timed call runs them all)."""
    names = list(runs)

    def call(name, request):
        for part in request if isinstance(request, list) else [request]:
            runs[name](part)

    for name in names:
        for request in requests.values():
            call(name, request)
    seconds = {name: {key: [] for key in requests} for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            for key, request in requests.items():
                for _ in range(calls[key]):
                    start = time.perf_counter()
                    call(name, request)
                    seconds[name][key].append(time.perf_counter() - start)
        if progress:
            progress(r + 1, rounds)
    return seconds


def file_batches(arrays: dict, rows: int | None, trim: bool) -> list:
    """The first `rows` rows of `arrays` (None: all) as batches of 32 (each cut
    to its longest row when `trim`)."""
    batches = []
    ids = {k: np.asarray(arrays[k], np.int32)[:rows] for k in IDS_KEYS}
    for start in range(0, len(ids["input_word_ids"]), BATCH):
        batch = {k: v[start:start + BATCH] for k, v in ids.items()}
        if trim:
            longest = int(batch["input_mask"].reshape(-1, batch["input_mask"].shape[-1])
                          .sum(-1).max())
            batch = {k: v[..., :max(longest, 1)] for k, v in batch.items()}
        batches.append(batch)
    return batches


def summary(times: dict, file_rows: int) -> dict:
    b1 = sorted(times["b1"])
    return {"b1_p50_ms": 1000 * statistics.median(b1),
            "b1_p95_ms": 1000 * b1[min(len(b1) - 1, int(round(0.95 * (len(b1) - 1))))],
            "b32_rows_per_s": BATCH / statistics.median(times["b32"]),
            "file_rows_per_s": file_rows / statistics.median(times["file"])
            if times.get("file") else None}
