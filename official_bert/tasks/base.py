"""THE run flow: what every task does the same way.

    run(task)
      1. check the flags (`RunConfig.validate`, `Task.check_flags`)
      2. resolve checkpoint / config / vocabulary and check they fit each other
      3. read and validate every input file (`Task.read_inputs`)
      4. refuse an output that is one of the inputs
      5. lock --output_dir; refuse it if it holds another model's config or
         vocabulary; only then write bert_config.json, vocab.txt and the
         task's own run files
      6. seed, dtype policy, distribution strategy, `Trainer` (which resumes
         from the latest checkpoint in --output_dir, or initializes the encoder
         and any matching head from --init_checkpoint)
      7. train (with --eval_every_steps: evaluations while training, the best
         model kept, early stopping: `BestCheckpoint`; SIGTERM saves and exits
         75) → evaluate (eval_results.txt) → predict → export

A task family (`tasks/classification.py`, `squad.py`, ...) subclasses `Task`
and fills in only what is its own: its flags-free config, how it reads its
files, its model and loss (the `Trainer`'s protocol), its datasets, its
metrics, its prediction files and its export. A new task is one such module
and a thin `run_*.py` (docs/guide.md shows one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import signal
import threading
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from official_bert import checkpoints, io
from official_bert.errors import BadFileError, Preempted, RunDirectoryError, UserError
from official_bert.modeling.configs import BertConfig, ModelFilesConfig
from official_bert.modeling.heads import HeadRestore
from official_bert.serving.base import check_serving_dtype, with_weights_in
from official_bert.text import tokenization
from official_bert.training import distribution, input_pipeline, optimization
from official_bert.training.trainer import Trainer, TrainingConfig

DTYPE_POLICIES = {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def dtype_policy(dtype: str) -> str | None:
    """The Keras mixed-precision policy of --dtype (None for float32); a
    `UserError` for a dtype that is none of `DTYPE_POLICIES`."""
    if dtype not in DTYPE_POLICIES:
        raise UserError(f"--dtype={dtype!r} is unknown; use one of {', '.join(DTYPE_POLICIES)}")
    return DTYPE_POLICIES[dtype]


def log_precision(model, dtype: str) -> None:
    """Logs the dtype `model` computes in (its encoder's layers', which its
    heads follow) and keeps its variables in, for --dtype."""
    layer = getattr(getattr(model, "encoder", model), "embeddings", model)
    logging.info("%s computes in %s, variables in %s (--dtype=%s)", type(model).__name__,
                 layer.compute_dtype, layer.variable_dtype, dtype)


# === Settings ===


@dataclasses.dataclass
class RunConfig(ModelFilesConfig):
    """The settings every task shares (from `cli_flags`, or built in Python):
    the model files (`ModelFilesConfig`), the modes, training, distribution.

    Field names are the flags' names (google-research/bert's where it has the
    concept); `validate` names the flag of a bad value.
    """

    output_dir: str | None = None
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    max_seq_length: int = 128  # every task packs sequences
    # Training.
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    max_train_examples: int | None = None
    num_train_steps: int | None = None  # given directly (pre-training), else from epochs
    num_warmup_steps: int | None = None
    optimizer: str = "adamw"
    gradient_accumulation_steps: int = 1
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    log_steps: int = 50
    seed: int = 42
    dynamic_padding: bool = True
    # Evaluation during training: the best model kept, early stopping.
    eval_every_steps: int = 0
    keep_best_metric: str | None = None
    early_stopping_patience: int | None = None
    # Distribution, precision, XLA.
    distribution_strategy: str = "one_device"
    num_gpus: int = 0
    tpu: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None
    num_cpu_devices: int = 0
    dtype: str = "float32"
    jit_compile: bool = False
    # Export.
    export_dir: str | None = None
    export_version: int | None = None
    serving_dtype: str = "float32"

    def validate(self) -> None:
        """`UserError` naming the first bad flag."""
        if not self.output_dir:
            raise UserError("--output_dir is required")
        positive = ["max_seq_length", "train_batch_size", "eval_batch_size",
                    "predict_batch_size", "gradient_accumulation_steps",
                    "save_checkpoints_steps", "keep_checkpoint_max", "iterations_per_loop",
                    "log_steps"]
        for name in positive:
            if getattr(self, name) <= 0:
                raise UserError(f"--{name} must be positive, got {getattr(self, name)}")
        if self.eval_every_steps < 0:
            raise UserError(f"--eval_every_steps cannot be negative, got {self.eval_every_steps}")
        if (self.keep_best_metric or self.early_stopping_patience) and not self.eval_every_steps:
            raise UserError("--keep_best_metric and --early_stopping_patience need "
                            "--eval_every_steps (how often to evaluate while training)")
        if self.early_stopping_patience is not None and not self.keep_best_metric:
            raise UserError("--early_stopping_patience needs --keep_best_metric (the metric "
                            "whose improvement it waits for)")
        check_serving_dtype(self.serving_dtype, self.export_dir)
        for name in ("max_train_examples", "num_train_steps", "export_version",
                     "early_stopping_patience"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UserError(f"--{name} must be positive, got {value}")
        if self.do_train and self.num_train_steps is None and not self.num_train_epochs > 0:
            raise UserError(f"--num_train_epochs must be positive, got {self.num_train_epochs}")
        if not 0 <= self.warmup_proportion <= 1:
            raise UserError(f"--warmup_proportion must be in [0, 1], got "
                            f"{self.warmup_proportion}")
        if self.learning_rate <= 0:
            raise UserError(f"--learning_rate must be positive, got {self.learning_rate}")
        dtype_policy(self.dtype)
        if self.num_gpus < 0 or self.num_cpu_devices < 0:
            raise UserError("--num_gpus and --num_cpu_devices cannot be negative")
        if not self.init_checkpoint and not self.bert_config_file:
            if not has_checkpoint(self.output_dir):
                raise UserError("pass --init_checkpoint (or --bert_config_file and "
                                "--vocab_file to start from random weights)")

    @property
    def dtype_policy(self) -> str | None:
        """The Keras mixed-precision policy of --dtype (None for float32)."""
        return dtype_policy(self.dtype)

    def padding_multiple(self) -> int | None:
        """The length multiple batches are cut to (`input_pipeline.numpy_dataset`),
        None when --dynamic_padding is off or on TPU (static shapes)."""
        if not self.dynamic_padding or self.distribution_strategy == "tpu":
            return None
        return input_pipeline.padding_bucket(self.max_seq_length)


def has_checkpoint(directory: str | None) -> bool:
    """Whether `directory` holds a training checkpoint (its `checkpoint` index file)."""
    return bool(directory) and io.exists(io.join(directory, "checkpoint"))


# === Model files ===


@dataclasses.dataclass
class ModelFiles:
    """The resolved model: config, weights, vocabulary and casing.

    Args:
        config: the `BertConfig`.
        checkpoint: a `checkpoints.BertCheckpoint`, or None for random weights.
        vocab_file: str. The WordPiece vocabulary.
        do_lower_case: bool.
        vocab: the vocabulary's tokens, in id order.
    """

    config: object
    checkpoint: object
    vocab_file: str
    do_lower_case: bool
    vocab: list

    def tokenizer(self):
        """A `FullTokenizer` over this vocabulary (built once)."""
        if not hasattr(self, "_tokenizer"):
            tokenizer = tokenization.FullTokenizer(self.vocab_file,
                                                   do_lower_case=self.do_lower_case)
            object.__setattr__(self, "_tokenizer", tokenizer)
        return self._tokenizer


def resolve_model_files(model: ModelFilesConfig,
                        required_tokens=("[PAD]", "[UNK]", "[CLS]", "[SEP]"),
                        vocab_required: bool = True, fallback_vocab_file: str | None = None,
                        run_dir: str | None = None) -> ModelFiles:
    """Finds config, weights, vocabulary and casing from what was given, and
    checks that they fit each other (`UserError` / `BadFileError` otherwise).

    `--init_checkpoint` alone is enough when its config and vocab.txt lie beside
    it; explicit `--bert_config_file` / `--vocab_file` win. With neither
    `--init_checkpoint` nor `--bert_config_file`, `run_dir` (a run's
    --output_dir) that already holds a checkpoint is its own
    model source (evaluate or export a run). `fallback_vocab_file` is used when
    neither names a vocabulary; without any, `vocab_file` is None, or an error
    when `vocab_required`.
    """
    init_checkpoint = model.init_checkpoint
    if not init_checkpoint and not model.bert_config_file and has_checkpoint(run_dir):
        init_checkpoint = run_dir
    config = (BertConfig.from_json_file(model.bert_config_file) if model.bert_config_file
              else None)
    ckpt = checkpoints.read_checkpoint(init_checkpoint, config) if init_checkpoint else None
    if ckpt is not None:
        config = ckpt.config
    if config is None:
        raise UserError("pass --init_checkpoint (or --bert_config_file and --vocab_file to "
                        "start from random weights)")
    vocab_file = model.vocab_file or (ckpt.vocab_file if ckpt else None) or fallback_vocab_file
    do_lower_case = model.do_lower_case
    if do_lower_case is None:
        do_lower_case = True if ckpt is None or ckpt.do_lower_case is None else ckpt.do_lower_case
    if (model.max_seq_length is not None
            and model.max_seq_length > config.max_position_embeddings):
        raise UserError(f"--max_seq_length={model.max_seq_length} is longer than the model's "
                        f"max_position_embeddings ({config.max_position_embeddings})")
    if not vocab_file:
        if vocab_required:
            raise UserError(f"no vocab.txt beside {init_checkpoint or model.bert_config_file}; "
                            "pass --vocab_file")
        return ModelFiles(config, ckpt, None, bool(do_lower_case), [])
    if not io.exists(vocab_file):
        raise BadFileError(vocab_file, "does not exist", fix="check --vocab_file")
    vocab = tokenization.load_vocab_list(vocab_file)
    missing = [t for t in required_tokens if t not in vocab]
    if missing:
        raise BadFileError(vocab_file, f"lacks the special token(s) {', '.join(missing)}",
                           fix="use the vocab.txt the checkpoint was trained with, or build one "
                               "with `bert build-vocab` (it adds them)")
    if len(vocab) > config.vocab_size:
        raise BadFileError(vocab_file, f"has {len(vocab)} tokens but the model's vocab_size is "
                           f"{config.vocab_size}: ids past {config.vocab_size - 1} have no "
                           "embedding", fix="use the checkpoint's own vocab.txt")
    if len(vocab) < config.vocab_size:
        logging.warning("%s has %d tokens, the model's vocab_size is %d: the last %d embedding "
                        "rows are never used (fine if the model reserves them; otherwise this "
                        "is the wrong vocabulary)", vocab_file, len(vocab), config.vocab_size,
                        config.vocab_size - len(vocab))
    tokenization.validate_case_matches_vocab(vocab, do_lower_case)
    return ModelFiles(config, ckpt, vocab_file, bool(do_lower_case), vocab)


# === Tasks ===


class Task:
    """One task family; `run` carries it out. Subclasses override what differs.

    The `Trainer` calls `build_model`, `loss_normalizers` and
    `loss_and_metrics` (see `training.trainer.Task`); `run` calls the others,
    in this order: `check_flags`, `input_paths`,
    `read_inputs`, `run_files` / `output_files`, `prepare`, `build_model` + `initialize`,
    `train_dataset`, `evaluate`, `predict`, `export`.

    Attributes set by `run` before `read_inputs`: `files` (the `ModelFiles`)
    and `bert_config` (the model's `BertConfig`). A task built with
    `bert_config=` alone can build its model and compute its loss without a
    run (tests, benchmarks, the parity tools).
    """

    # Special tokens the task needs in the vocabulary, and whether it needs one.
    required_tokens = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
    vocab_required = True

    def __init__(self, run: RunConfig | None = None, *, bert_config=None):
        self.run = run or RunConfig()
        self.bert_config = bert_config  # the run's model config (set by `run`)
        self.files: ModelFiles | None = None
        self.head_restored: list = []
        # What the head's load_head_weights did with each head weight (a
        # `heads.HeadRestore`), for the refusal to evaluate a random head.
        self.head_report = None

    # --- before anything is written ----------------------------------------

    def check_flags(self) -> None:
        """Task-specific flag checks (`UserError`); the files are not read yet.
        By default: each of --do_train / --do_eval / --do_predict that is on
        has its `--<mode>_file` (`mode_files`)."""
        self.require_files(**self.mode_files())

    def fallback_vocab_file(self) -> str | None:
        """A vocabulary to use when neither --vocab_file nor the checkpoint names one."""
        return None

    def input_paths(self):
        """Every user file or directory the run reads (never overwritten): a
        dict flag → path, or (flag, path) pairs when a flag names several.
        By default: the `--<mode>_file` flags (`mode_files`)."""
        return {f"{mode}_file": path for mode, path in self.mode_files().items()}

    def output_files(self) -> list:
        """The names of the files the task writes into --output_dir (predictions,
        results), so that none of them can be one of the inputs."""
        return []

    def read_inputs(self) -> None:
        """Reads and checks every input file (errors name the file and line)."""

    def run_files(self) -> dict:
        """File name → text this task keeps in --output_dir (besides
        bert_config.json and vocab.txt), e.g. the label list. A rerun must
        produce the same text once the directory holds a trained checkpoint."""
        return {}

    def prepare(self) -> None:
        """Work done once the run directory is ready, before the model is built
        (e.g. the feature-based NER task caches the frozen encoder's features)."""

    # --- the model ------------------------------------------------------------

    def jit_compile(self) -> bool:
        """Whether to XLA-compile the train and predict steps (--jit_compile,
        unless the task's model is one XLA does badly)."""
        return self.run.jit_compile

    def build_model(self):
        raise NotImplementedError(f"{type(self).__name__} must define build_model")

    def initialize(self, model, checkpoint) -> None:
        """Loads --init_checkpoint: the encoder, and this task's head when the
        checkpoint has one of the right shape (e.g. a fine-tuned run given back
        as --init_checkpoint). Sets `head_restored`."""
        checkpoints.assign_encoder_weights(model.encoder, checkpoint.weights)
        load = getattr(model, "load_head_weights", None)
        restored = load(checkpoint) if load else False
        self.head_report = restored if isinstance(restored, HeadRestore) else None
        self.head_restored = ([restored] if isinstance(restored, str) else
                              list(restored) if isinstance(restored, (list, tuple)) else
                              ["head"] if restored else [])
        named = self.head_restored and not isinstance(restored, (bool, HeadRestore))
        logging.info("Initialized the encoder%s from %s (%s checkpoint)%s",
                     f" and the {', '.join(self.head_restored)} weights" if named else
                     " and the task head" if self.head_restored else "",
                     checkpoint.path, checkpoint.kind,
                     "" if self.head_restored else "; the task head starts from random weights")
        if self.head_report is not None:
            for line in self.head_report.lines():
                logging.info("Task head: %s", line)
            for name, got, wanted in self.head_report.skipped:
                logging.warning("Skipped %s of shape %s in %s: this task's head needs %s (a "
                                "head for another number of labels?)", name, got,
                                checkpoint.path, wanted)

    def has_head(self) -> bool:
        """Whether the model's head would be usable without training (restored
        from --init_checkpoint). Tasks without a trained head return True."""
        return bool(self.head_restored)

    # --- training, evaluation, prediction, export -----------------------------

    def num_train_examples(self) -> int:
        """Training examples per epoch (after --max_train_examples)."""
        raise NotImplementedError(f"{type(self).__name__} must define num_train_examples")

    def train_steps(self) -> int:
        """Optimizer updates of the run: google-research/bert's
        int(examples / batch * epochs), unless --num_train_steps is given."""
        run = self.run
        if run.num_train_steps:
            return run.num_train_steps
        examples = self.num_train_examples()
        steps = int(examples / run.train_batch_size * run.num_train_epochs)
        if steps <= 0:
            raise UserError(f"{examples} training examples make no step of --train_batch_size="
                            f"{run.train_batch_size} over --num_train_epochs="
                            f"{run.num_train_epochs}; lower the batch size or add data")
        return steps

    def warmup_steps(self, train_steps: int) -> int:
        if self.run.num_warmup_steps is not None:
            return self.run.num_warmup_steps
        return int(train_steps * self.run.warmup_proportion)

    def train_dataset(self):
        """A `dataset_fn(input_context)` of per-replica training batches (repeated)."""
        raise NotImplementedError(f"{type(self).__name__} must define train_dataset")

    def evaluate(self, trainer) -> dict | None:
        """Metrics for eval_results.txt (`eval_*` keys), or None."""
        return None

    def evaluation_flag(self) -> str:
        """The flag that gives --eval_every_steps its data (the dev set)."""
        return "do_eval"

    def predict(self, trainer) -> None:
        """Writes the prediction files (through `official_bert.io`)."""

    def export(self, model, export_dir: str, version: int | None) -> str:
        """Writes the serving SavedModel; returns its version directory."""
        raise UserError(f"--export_dir is not supported by {type(self).__name__}")

    # --- helpers for subclasses ----------------------------------------------------

    def output_path(self, name: str) -> str:
        return io.join(self.run.output_dir, name)

    def mode_files(self) -> dict:
        """Mode ("train", "eval", "predict") → the file its flag names, for each
        `<mode>_file` field of the task's own config (`self.config`, google's
        --train_file / --eval_file / --predict_file)."""
        config = getattr(self, "config", None)
        return {mode: getattr(config, f"{mode}_file") for mode in ("train", "eval", "predict")
                if hasattr(config, f"{mode}_file")}

    def require_files(self, **paths) -> None:
        """`UserError` when a mode is on without its file, e.g.
        `require_files(train=config.train_file, eval=config.eval_file)`."""
        for mode, path in paths.items():
            if getattr(self.run, f"do_{mode}") and not path:
                raise UserError(f"--{mode}_file is required with --do_{mode}")

    def predict_logits(self, trainer, arrays: dict, batch_size: int):
        """The model's float outputs on in-memory features (a dict of arrays
        with `example_index`), in the arrays' order, every example exactly once.
        For outputs without a sequence axis: batches may be cut to their
        longest sequence (--dynamic_padding)."""
        def output_fn(model, features):
            return {"logits": model(features, training=False),
                    "example_index": features["example_index"]}

        out = trainer.predict(input_pipeline.numpy_dataset(
            arrays, batch_size, False, 0, self.run.padding_multiple()), output_fn)
        order = np.argsort(out["example_index"], kind="stable")
        return out["logits"][order].astype(np.float64)


# === The run flow ===


def run(task: Task) -> dict:
    """Carries out `task` (see the module docstring). Returns the eval results
    (empty without --do_eval)."""
    config = task.run
    config.validate()
    modes = [m for m in ("train", "eval", "predict") if getattr(config, f"do_{m}")]
    if not modes and not config.export_dir:
        raise UserError("nothing to do: set --do_train, --do_eval, --do_predict or --export_dir")
    task.check_flags()
    if config.eval_every_steps and not getattr(config, task.evaluation_flag()):
        raise UserError(f"--eval_every_steps needs --{task.evaluation_flag()} (the data to "
                        "evaluate on)")
    if config.eval_every_steps and not config.do_train:
        raise UserError("--eval_every_steps evaluates while training: add --do_train")
    # Before any TensorFlow op (reading the inputs below runs some): logical devices,
    # and the collective ops of MultiWorkerMirroredStrategy, cannot be set up once
    # TensorFlow's runtime has started.
    strategy = make_strategy(config)

    task.files = files = resolve_model_files(config, task.required_tokens, task.vocab_required,
                                             task.fallback_vocab_file(), config.output_dir)
    task.bert_config = files.config
    task.read_inputs()
    inputs = task.input_paths()
    # A run directory given as its own --init_checkpoint (to resume, evaluate or
    # export it) is not an input the run writes over.
    own_run = bool(config.init_checkpoint) and io.same_path(config.init_checkpoint,
                                                            config.output_dir)
    inputs = list(inputs.items() if isinstance(inputs, dict) else inputs) + [
        ("init_checkpoint", None if own_run else config.init_checkpoint),
        ("vocab_file", files.vocab_file), ("bert_config_file", config.bert_config_file)]
    outputs = {"--output_dir": config.output_dir, "--export_dir": config.export_dir}
    for name in ["eval_results.txt", *task.run_files(), *task.output_files()]:
        if name not in ("bert_config.json", "vocab.txt"):  # rewritten only when equal
            outputs[f"the run's {name}"] = io.join(config.output_dir, name)
    io.refuse_output_over_input(outputs, inputs)
    if config.export_dir and io.same_path(
            config.export_dir, config.output_dir):
        raise UserError("--export_dir must not be --output_dir: give the SavedModels a "
                        "directory of their own")

    # The chief owns the run directory (its lock and files); the other workers of a
    # multi-worker run write their checkpoints to scratch directories (Trainer).
    chief = distribution.is_chief(strategy)
    with io.RunLock(config.output_dir) if chief else contextlib.nullcontext(), \
            _sigterm_stops():
        _write_run_files(task, files, write=chief)
        return _train_evaluate_predict_export(task, files, strategy)


@contextlib.contextmanager
def _sigterm_stops():
    """SIGTERM (preemption) outside training stops the run at once with
    `Preempted` (exit 75): evaluation, prediction and export are redone by the
    same command, and every file is written atomically, so nothing is lost.
    Training handles it itself, at a step boundary (`Trainer.train`)."""
    def stop(signum, frame):
        del signum, frame
        Preempted.received = True
        raise Preempted()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _write_run_files(task: Task, files: ModelFiles, write: bool = True) -> None:
    """bert_config.json, vocab.txt and the task's files: each checked against
    what the directory holds before any is written (only checked, without `write`)."""
    config = task.run
    wanted = {"bert_config.json": files.config.to_json_string()}
    if files.vocab_file:
        wanted["vocab.txt"] = io.read_text(files.vocab_file)
    wanted.update(task.run_files())
    trained = has_checkpoint(config.output_dir)
    for name, text in wanted.items():
        path = io.join(config.output_dir, name)
        if trained and io.exists(path) and io.read_text(path) != text:
            raise RunDirectoryError(
                f"--output_dir {config.output_dir} holds a run trained with another {name} "
                f"than this run would use (from "
                f"{'--vocab_file ' + files.vocab_file if name == 'vocab.txt' else 'the flags and checkpoint'}"
                f"); nothing was changed. Use another --output_dir, or the same model files")
    for name, text in wanted.items():
        path = io.join(config.output_dir, name)
        if write and not (io.exists(path) and io.read_text(path) == text):
            io.atomic_write(path, text)


def make_strategy(config: RunConfig):
    return distribution.get_strategy(config.distribution_strategy, config.num_gpus, config.tpu,
                                     num_cpu_devices=config.num_cpu_devices,
                                     tpu_zone=config.tpu_zone, gcp_project=config.gcp_project)


def make_trainer(task: Task, strategy, num_train_steps: int, num_warmup_steps: int,
                 train: bool):
    """The `Trainer` of a run, with BERT's optimizer recipe (when `train`)."""
    config = task.run
    training_config = TrainingConfig(
        output_dir=config.output_dir, num_train_steps=max(num_train_steps, 1),
        save_checkpoints_steps=config.save_checkpoints_steps,
        keep_checkpoint_max=config.keep_checkpoint_max, log_steps=config.log_steps,
        steps_per_loop=min(config.iterations_per_loop, config.log_steps),
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        jit_compile=task.jit_compile(),
        tokens_per_example=config.max_seq_length)
    optimizer_fn = None
    if train:
        optimizer_fn = lambda: optimization.create_optimizer(optimization.OptimizerConfig(  # noqa: E731
            learning_rate=config.learning_rate, num_train_steps=num_train_steps,
            num_warmup_steps=num_warmup_steps, optimizer=config.optimizer))
    checkpoint = task.files.checkpoint if task.files else None
    init_fn = (lambda model: task.initialize(model, checkpoint)) if checkpoint else None
    return Trainer(task, strategy, training_config, optimizer_fn=optimizer_fn, init_fn=init_fn,
                   loss_scale=config.dtype == "float16")


def _train_evaluate_predict_export(task: Task, files: ModelFiles, strategy) -> dict:
    config = task.run
    replicas = strategy.num_replicas_in_sync
    if config.do_train and config.train_batch_size % (replicas * config.gradient_accumulation_steps):
        raise UserError(f"--train_batch_size={config.train_batch_size} is not divisible by the "
                        f"{replicas} replica(s) x --gradient_accumulation_steps="
                        f"{config.gradient_accumulation_steps}")
    if config.do_train:
        logging.info("%d replica(s), batch %d (%d per replica x %d accumulation steps)",
                     replicas, config.train_batch_size,
                     config.train_batch_size // replicas // config.gradient_accumulation_steps,
                     config.gradient_accumulation_steps)
    keras.utils.set_random_seed(config.seed)
    if config.dtype_policy:
        keras.mixed_precision.set_global_policy(config.dtype_policy)
    task.prepare()

    num_train_steps = num_warmup_steps = 0
    if config.do_train:
        num_train_steps = task.train_steps()
        num_warmup_steps = task.warmup_steps(num_train_steps)
        logging.info("train: %sbatch %d, %d steps (%d warm-up)",
                     "" if config.num_train_steps else f"{task.num_train_examples()} examples, ",
                     config.train_batch_size, num_train_steps, num_warmup_steps)
    trainer = make_trainer(task, strategy, num_train_steps, num_warmup_steps, config.do_train)
    log_precision(trainer.model, config.dtype)
    if not config.do_train and trainer.resumed_from is None and not task.has_head():
        source = (f"--init_checkpoint {config.init_checkpoint} " + (
            task.head_report.what_the_checkpoint_holds() if task.head_report is not None else
            f"holds no trained {type(task).__name__} head for this task")
            if config.init_checkpoint else "There is no --init_checkpoint")
        raise UserError(
            f"{source}, and --output_dir holds no checkpoint: evaluating or exporting "
            "now would use a random head. Add --do_train, or point --init_checkpoint / "
            "--output_dir at a fine-tuned run")

    best = BestCheckpoint(task, trainer) if config.eval_every_steps else None
    if config.do_train:
        start = time.time()
        if best is not None and best.state["stopped_at"] is not None:
            logging.info("This run stopped early at step %d (no better %s in %d evaluations): "
                         "nothing more to train", best.state["stopped_at"], best.metric,
                         config.early_stopping_patience)
        else:
            trainer.train(task.train_dataset(), config.train_batch_size,
                          evaluate_every=config.eval_every_steps,
                          on_evaluate=best.evaluate if best else None)
        logging.info("Training took %.1f s", time.time() - start)
    # The step whose weights the model now holds: the best one when it was kept.
    model_step = best.restore() if best is not None else None
    if model_step is None:
        model_step = int(trainer.global_step.numpy())

    results = {}
    if config.do_eval:
        start = time.time()
        results = _evaluation(task, trainer)
        if results and best is not None and best.state["step"] is not None:
            results["best_step"] = best.state["step"]
        if results and trainer.is_chief:
            write_results(task.output_path("eval_results.txt"), results)
            _write_summaries(io.join(config.output_dir, "eval"), results)
        if results:
            logging.info("Eval results (%.1f s): %s", time.time() - start, _describe(results))
    if config.do_predict:
        task.predict(trainer)
    if config.export_dir:
        path = task.export(with_weights_in(trainer.model, config.serving_dtype),
                           config.export_dir, config.export_version)
        logging.info("Exported step %d to %s", model_step, path)
    return results


def _evaluation(task: Task, trainer) -> dict:
    """`task.evaluate` with the keys every eval_results.txt has."""
    results = task.evaluate(trainer) or {}
    if results:
        results["global_step"] = int(trainer.global_step.numpy())
        if "eval_loss" in results:
            results.setdefault("loss", results["eval_loss"])  # google's key too
    return results


def _describe(results: dict) -> str:
    return ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in sorted(results.items()))


class BestCheckpoint:
    """Evaluations while training (--eval_every_steps): each one's metrics in
    `eval_history.jsonl` and TensorBoard; with --keep_best_metric the best model
    so far in `output_dir/best/` (`best.json` says its step and metrics), and
    with --early_stopping_patience training stops after that many evaluations
    without improvement. A metric with "loss" in its name is better lower, any
    other higher. The state lives in `best/best.json`, so a resumed run goes on
    counting, and a stopped run is not trained further.

    `best.json` is the commit record: a new best model is written as
    `best/best-<step>` first, then `best.json` names that step, and only then
    are the previous one's files deleted. A run killed in between leaves the
    previous pair whole (`best.json` and the checkpoint it names); the next run
    deletes the unnamed leftovers."""

    def __init__(self, task: Task, trainer):
        config = task.run
        self.task, self.trainer, self.metric = task, trainer, config.keep_best_metric
        self.patience = config.early_stopping_patience
        self.directory = io.join(config.output_dir, "best")
        self.state_path = io.join(self.directory, "best.json")
        self.history_path = task.output_path("eval_history.jsonl")
        self.state = {"metric": self.metric, "value": None, "step": None, "results": None,
                      "evaluations_since_best": 0, "stopped_at": None}
        if io.exists(self.state_path):
            self.state.update(json.loads(io.read_text(self.state_path)))
            if self.state["metric"] != self.metric:
                raise UserError(f"--output_dir {config.output_dir} kept its best model by "
                                f"{self.state['metric']}, not --keep_best_metric={self.metric}; "
                                "use the same metric, or another --output_dir")
        self.checkpoint = tf.train.Checkpoint(model=trainer.model)
        if trainer.is_chief and io.isdir(self.directory):
            self._remove_unnamed_checkpoints()

    def evaluate(self, step: int) -> bool:
        """Evaluates now; keeps the model if it is the best; True to stop."""
        results = _evaluation(self.task, self.trainer)
        logging.info("Evaluation at step %d: %s", step, _describe(results))
        if not self.trainer.is_chief:
            return False
        _write_summaries(io.join(self.task.run.output_dir, "eval"), results)
        history = io.read_text(self.history_path) if io.exists(self.history_path) else ""
        io.atomic_write(self.history_path, history + json.dumps(results, sort_keys=True) + "\n")
        if not self.metric:
            return False
        if self.metric not in results:
            raise UserError(f"--keep_best_metric={self.metric} is not one of this task's "
                            f"metrics: {', '.join(sorted(k for k in results if k != 'global_step'))}")
        value, best = results[self.metric], self.state["value"]
        lower = "loss" in self.metric
        improved = best is None or (value < best if lower else value > best)
        if improved:
            self.checkpoint.write(self._prefix(step))
            self.state.update(value=value, step=step, results=results, evaluations_since_best=0)
            logging.info("Best %s so far: %.4g at step %d (kept in %s)", self.metric, value, step,
                         self.directory)
        else:
            self.state["evaluations_since_best"] += 1
        stop = bool(self.patience) and self.state["evaluations_since_best"] >= self.patience
        if stop:
            self.state["stopped_at"] = step
        io.atomic_write(self.state_path, json.dumps(self.state, indent=2, sort_keys=True) + "\n")
        if improved:
            self._remove_unnamed_checkpoints()
        return stop

    def _prefix(self, step: int) -> str:
        return io.join(self.directory, f"best-{step}")

    def _remove_unnamed_checkpoints(self) -> None:
        """Deletes every `best-*` but the checkpoint `best.json` names, and points
        the `checkpoint` state file (`tf.train.latest_checkpoint`'s) at that one."""
        step = self.state["step"]
        keep = f"best-{step}." if step is not None else None
        for name in io.listdir(self.directory):
            # Leftovers are older best models and a killed write's files,
            # including its `best-<step>_temp` directory.
            if name.startswith("best-") and not (keep and name.startswith(keep)):
                path = io.join(self.directory, name)
                if io.isdir(path):
                    io.remove_tree(path)
                else:
                    io.remove(path)
        if step is not None:
            tf.compat.v1.train.update_checkpoint_state(self.directory, self._prefix(step))
        else:
            io.remove(io.join(self.directory, "checkpoint"))

    def restore(self) -> int | None:
        """Puts the best model's weights into the trainer's model (for the final
        evaluation, the predictions and the export); returns its step (None
        when no best model is kept)."""
        if not self.metric or self.state["step"] is None:
            return None
        prefix = self._prefix(self.state["step"])
        if not io.exists(prefix + ".index"):
            raise RunDirectoryError(f"{self.state_path} names the best model of step "
                                    f"{self.state['step']}, but {prefix}.index is missing; "
                                    "delete the best/ directory to start keeping it anew")
        self.checkpoint.read(prefix).expect_partial()
        logging.info("Using the best model (%s %.4g, step %d) from %s", self.metric,
                     self.state["value"], self.state["step"], prefix)
        return self.state["step"]


def write_results(path: str, results: dict) -> None:
    """`key = value` lines, sorted (google-research/bert's eval_results.txt)."""
    io.atomic_write(path, "".join(f"{key} = {results[key]}\n" for key in sorted(results)))


def _write_summaries(directory: str, results: dict) -> None:
    writer = tf.summary.create_file_writer(directory)
    with writer.as_default(step=int(results.get("global_step", 0))):
        for name, value in results.items():
            if isinstance(value, float) and name != "global_step":
                tf.summary.scalar(name, value)
    writer.flush()


def steps_for_windows(num_windows: int, batch_size: int, epochs: float) -> int:
    """Updates for `epochs` over `num_windows`, rounded up (SQuAD and NER count
    windows, as the reference implementation does)."""
    return max(1, math.ceil(num_windows * epochs / batch_size))
