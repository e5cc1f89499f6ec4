"""`Task`: what a task family fills in; `runner.run_task` carries it out.

A task family (`tasks/classification.py`, `squad.py`, ...) subclasses `Task`
and overrides only what is its own; the run flow, the run directory, the
training loop and the evaluation files are shared (`tasks.runner`,
`run_directory`, `training.trainer`, `tasks.evaluation`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from absl import logging

from official_bert import checkpoints
from official_bert.errors import UserError
from official_bert.model_files import SPECIAL_TOKENS, ModelFiles
from official_bert.run_directory import RunDirectory
from official_bert.configs import RunConfig
from official_bert.training import input_pipeline

MODES = ("train", "eval", "predict")


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """What the run flow needs of a task's files and identity (`Task.run_files`).

    Attributes:
        inputs: (flag, path) of every user file or directory the run reads: no
            output may replace one.
        training: the files training reads (run.json records each one's path
            and size; a resume with other sizes is another run).
        results: the names of the files the task writes into --output_dir
            (predictions, results), so that none of them can be an input.
        record: file name → text kept in the run's record besides
            bert_config.json and vocab.txt (a label list); once the directory
            holds a trained checkpoint, a rerun must produce the same text.
        identity: what makes a run this task's besides its family and the
            model, vocabulary, casing and length (the task name, its labels):
            kept in run.json; a rerun with other values is refused.
    """

    inputs: tuple = ()
    training: tuple = ()
    results: tuple = ()
    record: dict = dataclasses.field(default_factory=dict)
    identity: dict = dataclasses.field(default_factory=dict)


class Task:
    """One task family. Subclasses override what differs.

    Every hook, in the order a run calls it (`runner.run_task`; the `Trainer`
    calls the model's three, `training.trainer.Task`):

      hook                 step  what it gives                         default
      -------------------  ----  ------------------------------------  ------------------
      check_flags *        1     task flag checks (`UserError`), no    each --do_<mode> has
                                 file read yet                         its --<mode>_file
      evaluation_flag *    1     the flag naming the dev set           --do_eval
      fallback_vocab_file* 2     a vocabulary when neither the flag    None
                                 nor the checkpoint names one
      __init__             2     the task, built whole from its        the configs and the
                                 config, the run's and the resolved    model files
                                 model files
      read_inputs          3     reads and checks every input file     nothing to read
      run_files            3-5   what the run flow needs of its files   inputs: the --<mode>_file
                                 and identity: one `RunFiles`          flags; training:
                                 (inputs, training, results, record,   --train_file
                                 identity)
      prepare              6     work before the model is built        nothing
      build_model          6     the model (in the strategy's scope)   required
      initialize           6     loads --init_checkpoint into it       the encoder, and a
                                                                       head that fits
      has_head             6     whether the head may be evaluated     a head was restored
                                 untrained
      jit_compile          6     whether to XLA-compile the steps      --jit_compile
      loss_normalizers,    7     the loss of a (micro-)batch and its   required
      loss_and_metrics           metrics (the Trainer's protocol)
      num_train_examples,  7     how long to train                     required /
      train_steps,                                                     google's arithmetic
      warmup_steps
      train_dataset        7     the training batches                  required
      evaluate             7     eval_results.txt's metrics            None
      predict              7     the prediction files                  nothing
      export               7     the TF Serving SavedModel             refused
      evaluation_arrays    7     the dev set's features (--quantize's  None
                                 check of the int8 model)

    * class methods: they check the flags and choose the vocabulary before the
    task exists (its model files are resolved after them).

    Class attributes: `family` (the task in the record and messages),
    `required_tokens` and `vocab_required` (what the vocabulary must hold),
    `distils` (what a --teacher gives it), `reads_distill_text`. Attributes,
    from `__init__`: `config` (the task's own config, in subclasses),
    `run_config` (the `RunConfig`), `model_files` (the resolved `ModelFiles`)
    and `bert_config` (the model's `BertConfig`); set by the run: with
    --teacher, `teacher` (a `tasks.teacher.Teacher`, step 3: it is checked
    against the labels the inputs give); `head_report` (the `heads.HeadRestore`
    of --init_checkpoint, once `initialize` ran). A task built with
    `bert_config=` alone can build its model and compute its loss without a run
    (tests, benchmarks, the parity tools).
    """

    # Special tokens the task needs in the vocabulary, and whether it needs one.
    required_tokens = SPECIAL_TOKENS
    vocab_required = True
    # The task in the run's record and its messages ("classification", ...);
    # None: the class's name.
    family: str | None = None
    # What the task learns from a --teacher besides its labels: None (nothing: the flag is
    # refused), "outputs" (task distillation: a teacher fine-tuned on the task, its
    # outputs on the training features) or "representations" (general distillation: any
    # checkpoint, run beside the student on every batch).
    distils: str | None = None
    # Whether it also reads --distill_text (unlabelled text the teacher labels): a
    # task that does reads it in `read_inputs` and joins it in `train_dataset`
    # (`teacher.join_unlabelled`); the run checks the flag and records the file.
    reads_distill_text: bool = False

    def __init__(self, run_config: RunConfig | None = None, *,
                 model_files: ModelFiles | None = None, bert_config=None):
        self.run_config = run_config or RunConfig()
        # The resolved checkpoint, config and vocabulary (step 2), and the model's
        # config: the run builds the task with them; tests and tools may give the
        # model config alone.
        self.model_files = model_files
        self.bert_config = bert_config or (model_files.config if model_files else None)
        # What the head's load_head_weights did with each head weight, for the
        # refusal to evaluate a random head (None: no head was looked for).
        self.head_report = None
        # The `tasks.teacher.Teacher` of task distillation (--teacher), set by the
        # run; a task that distils adds its outputs to the training features.
        self.teacher = None
        self._run_directory = None

    @property
    def run_directory(self) -> RunDirectory:
        """The run's --output_dir: where each of its files goes. One object for
        the whole run (the flow, the `Trainer` and the task share it: it holds
        the session's record until the first checkpoint)."""
        current = self._run_directory
        if current is None or current.path != self.run_config.output_dir:
            self._run_directory = current = RunDirectory(self.run_config.output_dir)
        return current

    # --- before anything is written ----------------------------------------

    @classmethod
    def check_flags(cls, config, run_config: RunConfig) -> None:
        """Task-specific checks of the flags (the task's config and the run's),
        before the task is built (`UserError`); no file is read yet. By default:
        each of --do_train / --do_eval / --do_predict that is on has its
        `--<mode>_file`."""
        for mode, path in _mode_files(config).items():
            if getattr(run_config, f"do_{mode}") and not path:
                raise UserError(f"--{mode}_file is required with --do_{mode}")

    @classmethod
    def fallback_vocab_file(cls, config) -> str | None:
        """A vocabulary to use when neither --vocab_file nor the checkpoint names one."""
        return None

    def read_inputs(self) -> None:
        """Reads and checks every input file (errors name the file and line)."""

    def run_files(self) -> "RunFiles":
        """What the run flow needs of the task's files and identity, as one value
        (`RunFiles`), asked once the inputs are read (its record and identity may
        come from them: the labels of a training file). By default: the
        `--<mode>_file` flags and --distill_text are the inputs, --train_file and
        --distill_text what training reads."""
        modes, distill = _mode_files(getattr(self, "config", None)), self.distill_text_files()
        return RunFiles(
            inputs=tuple((f"{mode}_file", path) for mode, path in modes.items())
            + tuple(("distill_text", path) for path in distill),
            training=tuple(path for path in [modes.get("train"), *distill] if path))

    def distill_text_files(self) -> list:
        """[--distill_text], when given: one of the files training reads."""
        return [self.run_config.distill_text] if self.run_config.distill_text else []

    def prepare(self) -> None:
        """Work done once the run directory is ready, before the model is built
        (e.g. the feature-based NER task caches the frozen encoder's features)."""

    # --- the model ------------------------------------------------------------

    def jit_compile(self) -> bool:
        """Whether to XLA-compile the train and predict steps (--jit_compile,
        unless the task's model is one XLA does badly)."""
        return self.run_config.jit_compile

    def build_model(self):
        raise NotImplementedError(f"{type(self).__name__} must define build_model")

    def initialize(self, model, checkpoint) -> None:
        """Loads --init_checkpoint: the encoder, and this task's head when the
        checkpoint has one of the right shape (e.g. a fine-tuned run given back
        as --init_checkpoint). Sets `head_report`."""
        checkpoints.assign_encoder_weights(model.encoder, checkpoint.weights)
        load = getattr(model, "load_head_weights", None)
        report = self.head_report = load(checkpoint) if load else None
        logging.info("Initialized the encoder%s from %s (%s checkpoint)%s",
                     " and the task head" if report else "", checkpoint.path, checkpoint.kind,
                     "" if report else "; the task head starts from random weights")
        if report is None:
            return
        for line in report.lines():
            logging.info("Task head: %s", line)
        for name, got, wanted in report.skipped:
            logging.warning("Skipped %s of shape %s in %s: this task's head needs %s (a "
                            "head for another number of labels?)", name, got,
                            checkpoint.path, wanted)

    def has_head(self) -> bool:
        """Whether the model's head would be usable without training (restored
        from --init_checkpoint). Tasks without a trained head return True."""
        return bool(self.head_report)

    # --- training, evaluation, prediction, export -----------------------------

    def num_train_examples(self) -> int:
        """Training examples per epoch (after --max_train_examples)."""
        raise NotImplementedError(f"{type(self).__name__} must define num_train_examples")

    def train_steps(self) -> int:
        """Optimizer updates of the run: google-research/bert's
        int(examples / batch * epochs), unless --num_train_steps is given."""
        run = self.run_config
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
        if self.run_config.num_warmup_steps is not None:
            return self.run_config.num_warmup_steps
        return int(train_steps * self.run_config.warmup_proportion)

    def train_dataset(self):
        """A `dataset_fn(input_context)` of per-replica training batches (repeated)."""
        raise NotImplementedError(f"{type(self).__name__} must define train_dataset")

    def evaluate(self, trainer) -> dict | None:
        """Metrics for eval_results.txt (`eval_*` keys), or None."""
        return None

    @classmethod
    def evaluation_flag(cls) -> str:
        """The flag that gives --eval_every_steps its data (the dev set)."""
        return "do_eval"

    def predict(self, trainer) -> dict | None:
        """Writes the prediction files (through `official_bert.io`, into
        `run_directory.file(name)` for each of `RunFiles.results`); returns the
        predictions' scores when the task scores them itself (SQuAD), else None."""

    def export(self, model, export_dir: str, version: int | None) -> str:
        """Writes the serving SavedModel (with --quantize, its int8 model.tflite
        too); returns its version directory."""
        raise UserError(f"--export_dir is not supported by {type(self).__name__}")

    def evaluation_arrays(self) -> dict | None:
        """The evaluation data's features (the id arrays and the labels), which
        --quantize checks the int8 model on; None when none were read."""
        return None

    # --- a helper for subclasses ---------------------------------------------------

    def predict_logits(self, trainer, arrays: dict, batch_size: int, unit: str = "examples"):
        """The model's float outputs on in-memory features (a dict of arrays
        with `example_index`), in the arrays' order, every example exactly once.
        For outputs without a sequence axis: batches may be cut to their
        longest sequence (--dynamic_padding)."""
        def output_fn(model, features):
            return {"logits": model(features, training=False),
                    "example_index": features["example_index"]}

        out = trainer.predict(input_pipeline.numpy_dataset(
            arrays, batch_size, False, 0, self.run_config.padding_multiple()), output_fn,
            total=len(arrays["example_index"]), unit=unit)
        order = np.argsort(out["example_index"], kind="stable")
        return out["logits"][order].astype(np.float64)


def _mode_files(config) -> dict:
    """Mode → the file its flag names, for each `<mode>_file` field of a task's
    own config (google's --train_file / --eval_file / --predict_file)."""
    return {mode: getattr(config, f"{mode}_file") for mode in MODES
            if hasattr(config, f"{mode}_file")}
