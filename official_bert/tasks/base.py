"""`Task`: the code of a task family; its row declares the rest.

A family is a registered row (`tasks.families.TaskSpec`: its configs, command,
modes, tokens, files, what a teacher gives it) and a `Task` subclass that
overrides only what is code: how it checks its flags and reads its files, its
model and loss, its training data, metrics, prediction files and export. The
run flow (`tasks.runner`) resolves everything a run needs first (the length,
the model files, the run directory) and builds the task complete; the
training loop, the evaluation files and distillation are shared
(`training.trainer`, `tasks.evaluation`, `tasks.teacher`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
from absl import logging

from official_bert import checkpoints
from official_bert.configs import RunConfig
from official_bert.errors import UserError
from official_bert.model_files import ModelFiles
from official_bert.run_directory import RunDirectory
from official_bert.tasks.families import MODES, TaskSpec
from official_bert.training import input_pipeline


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """What the run flow needs of a task's files, from its flags alone
    (`Task.run_files`: before the task exists).

    Attributes:
        inputs: (flag, path) of every user file or directory the run reads: no
            output may replace one.
        training: the files training reads (run.json records each one's path,
            size and content; a resume with others is another run; a
            checkpoint pre-trained on one of them gives the run its length).
        results: the names of the files the task writes into --output_dir
            (predictions, results), so that none of them can be an input.
        vocab: a vocabulary for when neither --vocab_file nor the checkpoint
            names one (pre-training's: its data's).
    """

    inputs: tuple = ()
    training: tuple = ()
    results: tuple = ()
    vocab: str | None = None


@dataclasses.dataclass(frozen=True)
class InputRecord:
    """What the run's record keeps of the inputs read (`Task.read_inputs`).

    Attributes:
        record: file name → text kept besides bert_config.json and vocab.txt (a
            label list); once the directory holds a trained checkpoint, a rerun
            must produce the same text.
        identity: what makes a run this task's besides its family and the
            model, vocabulary, casing and length (the task name, its labels):
            kept in run.json; a rerun with other values is refused.
    """

    record: dict = dataclasses.field(default_factory=dict)
    identity: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TrainingSet:
    """A task's training data (`Task.train_dataset`): in-memory features, which
    the run batches (a teacher's outputs added first, when distilling), or a
    pipeline of the task's own.

    Attributes:
        features: feature arrays, a row per example.
        unlabelled: --distill_text's feature arrays (placeholder labels: the
            teacher's outputs are all they learn from).
        dataset_fn: or `dataset_fn(input_context)`: per-replica batches, repeated.
        size: the pipeline's examples per epoch (None: steps are given).
    """

    features: dict | None = None
    unlabelled: dict | None = None
    dataset_fn: Callable | None = None
    size: int | None = None

    @property
    def examples(self) -> int | None:
        """Examples per epoch: the arrays' rows, or the pipeline's `size`."""
        if self.features is None:
            return self.size
        return sum(rows(arrays) for arrays in (self.features, self.unlabelled)
                   if arrays is not None)


class Task:
    """One task family's code. Subclasses override what differs.

    The hooks, in the order a run calls them (`runner.run_task`; the `Trainer`
    calls the model's and the loss's, `training.trainer.Task`):

      hook               what it gives                              default
      -----------------  -----------------------------------------  -------------------
      check_flags *      flag checks (`UserError`), no file read    each --do_<mode> has
                                                                    its --<mode>_file
      run_files *        the files the flags name (`RunFiles`)      --<mode>_file,
                                                                    --distill_text
      __init__           the task, complete: its config, the run's,  the configs
                         the model files and the run directory
      read_inputs        reads and checks every input; what the      nothing read
                         record keeps of them (`InputRecord`)
      prepare            work once the run directory is locked       nothing
      build_model        the model (in the strategy's scope; at      required
                         another size: a teacher's)
      initialize         --init_checkpoint into the model; what     the encoder, and a
                         its head got (a `heads.HeadRestore`)        head that fits
      loss_normalizers,  the loss of a (micro-)batch and its        required
      loss_and_metrics   metrics (the Trainer's protocol)
      train_dataset      the training data (`TrainingSet`)          required
      evaluate           eval_results.txt's metrics                 None
      predict            the prediction files (`spec.results`)      nothing
      export             the TF Serving SavedModel                  refused
      evaluation_arrays  the dev set's features (--quantize's       None
                         check of the int8 model)

    * class methods: they run before the task exists.

    A family that distils (`spec.distils`) also says which loss compares a
    teacher's outputs with the student's: `teacher_loss(teacher, student,
    features)`, per example (or token); `tasks.teacher.mixed_loss` mixes it
    with the labels'.

    Attributes, from `__init__`: `config` (the task's own config), `run_config`
    (the `RunConfig`), `model_files` (the resolved `ModelFiles`),
    `run_directory` (the run's `RunDirectory`: where its files go) and
    `bert_config` (the model's `BertConfig`). A task built with `bert_config=`
    alone can build its model and compute its loss without a run (tests,
    benchmarks, the parity tools).
    """

    spec: TaskSpec  # the family's row (`tasks.families`)

    def __init__(self, config=None, run_config: RunConfig | None = None, *,
                 model_files: ModelFiles | None = None,
                 run_directory: RunDirectory | None = None, bert_config=None):
        self.config = config if config is not None else self.spec.config()
        self.run_config = run_config or self.spec.run_config()
        self.model_files = model_files
        self.run_directory = run_directory
        self.bert_config = bert_config or (model_files.config if model_files else None)

    # --- before the task exists ---------------------------------------------------

    @classmethod
    def check_flags(cls, config, run_config: RunConfig) -> None:
        """Task-specific checks of the flags (the task's config and the run's,
        at the run's length), before the task is built (`UserError`); no file
        is read yet. By default: each --do_<mode> that is on has its
        `--<mode>_file`."""
        for mode, path in mode_files(config).items():
            if getattr(run_config, f"do_{mode}") and not path:
                raise UserError(f"--{mode}_file is required with --do_{mode}")

    @classmethod
    def run_files(cls, config, run_config: RunConfig) -> RunFiles:
        """The files the flags name (`RunFiles`). By default: the `--<mode>_file`
        flags and --distill_text are the inputs, --train_file and
        --distill_text what training reads, `spec.results` the results."""
        modes = mode_files(config)
        distill = [run_config.distill_text] if run_config.distill_text else []
        return RunFiles(
            inputs=tuple((f"{mode}_file", path) for mode, path in modes.items())
            + tuple(("distill_text", path) for path in distill),
            training=tuple(path for path in [modes.get("train"), *distill] if path),
            results=cls.spec.results)

    # --- the run --------------------------------------------------------------------

    def read_inputs(self) -> InputRecord:
        """Reads and checks every input file (errors name the file and line);
        returns what the run's record keeps of them."""
        return InputRecord()

    def prepare(self) -> None:
        """Work done once the run directory is locked, before the model is
        built (e.g. the feature-based NER task caches the frozen encoder's
        features there)."""

    def build_model(self, bert_config=None):
        """The model, at `bert_config`'s size (default: the task's own)."""
        raise NotImplementedError(f"{type(self).__name__} must define build_model")

    def initialize(self, model, checkpoint):
        """Loads --init_checkpoint: the encoder, and this task's head when the
        checkpoint has one of the right shape (e.g. a fine-tuned run given back
        as --init_checkpoint). Returns what the head got (a
        `heads.HeadRestore`: true when restored; None: no head was looked for)."""
        checkpoints.assign_encoder_weights(model.encoder, checkpoint.weights)
        load = getattr(model, "load_head_weights", None)
        report = load(checkpoint) if load else None
        logging.info("Initialized the encoder%s from %s (%s checkpoint)%s",
                     " and the task head" if report else "", checkpoint.path, checkpoint.kind,
                     "" if report else "; the task head starts from random weights")
        for line in report.lines() if report is not None else []:
            logging.info("Task head: %s", line)
        for name, got, wanted in report.skipped if report is not None else []:
            logging.warning("Skipped %s of shape %s in %s: this task's head needs %s (a "
                            "head for another number of labels?)", name, got,
                            checkpoint.path, wanted)
        return report

    def train_dataset(self) -> TrainingSet:
        """The training data (`TrainingSet`)."""
        raise NotImplementedError(f"{type(self).__name__} must define train_dataset")

    def evaluate(self, trainer) -> dict | None:
        """Metrics for eval_results.txt (`eval_*` keys), or None."""
        return None

    def predict(self, trainer) -> dict | None:
        """Writes the prediction files (through `official_bert.io`, into
        `run_directory.file(name)` for each of `spec.results`); returns the
        predictions' scores when the task scores them itself (SQuAD), else None."""

    def export(self, model, export_dir: str, version: int | None) -> str:
        """Writes the serving SavedModel (with --quantize, its int8 model.tflite
        too); returns its version directory."""
        raise UserError(f"--export_dir is not supported by {type(self).__name__}")

    def evaluation_arrays(self) -> dict | None:
        """The evaluation data's features (the id arrays and the labels), which
        --quantize checks the int8 model on; None when none were read."""
        return None


# --- helpers for the families ---------------------------------------------------------


def mode_files(config) -> dict:
    """Mode → the file its flag names, for each `<mode>_file` field of a task's
    own config (google's --train_file / --eval_file / --predict_file)."""
    return {mode: getattr(config, f"{mode}_file") for mode in MODES
            if hasattr(config, f"{mode}_file")}


def rows(arrays: dict) -> int:
    """The number of rows (examples) of feature arrays."""
    return len(next(iter(arrays.values())))


def predict_logits(trainer, arrays: dict, batch_size: int, run_config: RunConfig,
                   unit: str = "examples"):
    """The model's float outputs on in-memory features (a dict of arrays with
    `example_index`), in the arrays' order, every example exactly once. For
    outputs without a sequence axis: batches may be cut to their longest
    sequence (--dynamic_padding)."""
    def output_fn(model, features):
        return {"logits": model(features, training=False),
                "example_index": features["example_index"]}

    out = trainer.predict(input_pipeline.numpy_dataset(
        arrays, batch_size, False, 0, run_config.padding_multiple()), output_fn,
        total=len(arrays["example_index"]), unit=unit)
    order = np.argsort(out["example_index"], kind="stable")
    return out["logits"][order].astype(np.float64)
