"""Every task family, declared: one registered row (`TaskSpec`) per family.

A row says what a family is, as data: its configs, its command, its modes,
the tokens its vocabulary needs, what a teacher gives it, the files it writes.
The command registry (`commands.registry`) makes its `bert` command, flags and
flag reference from the row; the run flow (`tasks.runner`) reads it before the
task exists; the task class (`tasks.base.Task`) keeps only what is code (its
model, loss, inputs, metrics, predictions and export), and names its row as
`spec`. The rows are registered by name (`register`), as tensorflow/models'
task_factory registers config → task; a family outside the library registers
itself the same way (`register`, and `OFFICIAL_BERT_TASKS` to load it:
`load_declared`).

No TensorFlow here: `--help` reads the rows.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
from typing import Callable

from official_bert.configs import (ClassificationConfig, MultipleChoiceConfig, NerConfig,
                                   PretrainingConfig, PretrainRunConfig, RunConfig, SquadConfig,
                                   SquadRunConfig, SwagRunConfig)

MODES = ("train", "eval", "predict")
# Modules (or .py files) of families declared outside the library, separated by
# os.pathsep: `load_declared` imports them, and their rows join `bert`.
DECLARED_ENV = "OFFICIAL_BERT_TASKS"


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task family, declared.

    What it is:
        name: the family, in the run's record, its messages and --teacher's check.
        task: its `tasks.base.Task` subclass as "module:Class" (imported when a
            run starts, so that `--help` loads no TensorFlow).
        config: its own settings (their flags); run_config: the run's
            (`configs.RunConfig`, or its command's `with_defaults` of it).
        variant: (a bool field of `config`, a family's name): when the field is
            true, that family runs instead (NER's --feature_based).

    Its command (`bert <command>`; None: a variant, run by another row's):
        command, summary, google_script (google-research/bert's script name);
        module: the module whose docstring is its `--help`;
        inputs: its input flags besides the model files, the --<mode>_file
            flags and --distill_text (flag → how it is read: `registry.Command`);
        modes: which of --do_train / --do_eval / --do_predict it has;
        counts: "epochs" (fine-tuning) or "steps" (pre-training);
        prints_scores: whether it prints the scores a run returns (SQuAD's
            official metric of --predict_file, on stdout).

    What its run needs:
        required_tokens: what the vocabulary must hold (None: BERT's [PAD],
            [UNK], [CLS], [SEP]); vocab_required: whether it needs one at all.
        results: the files it writes into --output_dir besides the record (none
            of them may be an input).
        evaluation_flag: the flag that gives --eval_every_steps its data.
        round_steps_up: steps are ceil(examples x epochs / batch), not google's
            int(examples / batch x epochs) (SQuAD counts windows so).
        trims_padding: whether training batches are cut to their longest
            sequence with --dynamic_padding (SQuAD's softmax runs over the
            padding, as google trains it: not cut).
        head_always_usable: whether a run may evaluate its model's head
            untrained (pre-training's masked LM, even fresh, is a valid score).
        xla_off: config → why --jit_compile is not used with it (a warning
            line), or None.

    What a teacher gives it (--teacher, `tasks.teacher.Distillation`):
        distils: None (the flag is refused), "outputs" (task distillation: a
            teacher fine-tuned on the task, its outputs on the training
            features) or "representations" (general distillation: any
            checkpoint, beside the student on every batch).
        reads_distill_text: whether it also reads --distill_text (unlabelled
            text, which the teacher labels).
    """

    name: str
    task: str
    config: type
    run_config: type = RunConfig
    variant: tuple | None = None

    command: str | None = None
    summary: str = ""
    google_script: str | None = None
    module: str | None = None
    inputs: dict = dataclasses.field(default_factory=dict)
    modes: tuple = MODES
    counts: str = "epochs"
    prints_scores: bool = False

    required_tokens: tuple | None = None
    vocab_required: bool = True
    results: tuple = ()
    evaluation_flag: str = "do_eval"
    round_steps_up: bool = False
    trims_padding: bool = True
    head_always_usable: bool = False
    xla_off: Callable | None = None

    distils: str | None = None
    reads_distill_text: bool = False

    def __post_init__(self):
        assert set(self.modes) <= set(MODES), self
        assert self.counts in ("epochs", "steps"), self
        assert self.distils in (None, "outputs", "representations"), self

    def task_class(self) -> type:
        """The family's `Task` subclass (its module imported now)."""
        module, _, name = self.task.partition(":")
        return getattr(importlib.import_module(module), name)

    def for_config(self, config) -> "TaskSpec":
        """The row that runs `config`: this one, or its variant's."""
        if self.variant and getattr(config, self.variant[0]):
            return family(self.variant[1])
        return self


FAMILIES: dict = {}


def register(spec: TaskSpec) -> TaskSpec:
    """Registers a family's row (again: the same row is kept; another of that
    name is refused). Returns it, for `Task.spec = register(TaskSpec(...))`."""
    known = FAMILIES.setdefault(spec.name, spec)
    if known != spec:
        raise ValueError(f"another task family is registered as {spec.name!r}")
    return spec


def family(name: str) -> TaskSpec:
    """The registered row of the family `name` (KeyError for an unknown one)."""
    return FAMILIES[name]


def load_declared() -> None:
    """Imports the families named in $OFFICIAL_BERT_TASKS (module names, or .py
    files, each imported once under its file's name), each of which registers
    its row."""
    for entry in filter(None, os.environ.get(DECLARED_ENV, "").split(os.pathsep)):
        name = os.path.splitext(os.path.basename(entry))[0] if entry.endswith(".py") else entry
        if name in sys.modules:
            continue
        if not entry.endswith(".py"):
            importlib.import_module(entry)
            continue
        loader = importlib.util.spec_from_file_location(name, entry)
        module = sys.modules[name] = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)


def _windows_without_xla(config) -> str | None:
    return ("--jit_compile is off with --long_document=windows (each batch has its own number "
            "of windows)") if config.windows else None


def _bilstm_without_xla(config) -> str | None:
    # XLA on CPU keeps a copy of the sequence per LSTM step in the backward pass: 2 x
    # 768-unit BiLSTMs over batch 32 took 7.2 GB at 64 words (2.7 without XLA) and ran
    # out of 24 GB on CoNLL's 124-word sentence, for no gain in speed (3.8 s vs 3.6 s).
    return ("--jit_compile is not used for the BiLSTM task model: XLA's LSTM gradient needs "
            "memory growing with the sentence length, and is no faster"
            ) if config.task_model == "bilstm" else None


_MODEL_INPUTS = {"bert_config_file": "file", "vocab_file": "file"}
_CORPUS = {"input_file": "file", "eval_input_file": "file"}
_TASKS = "official_bert.tasks"

PRETRAINING = register(TaskSpec(
    "pretraining", f"{_TASKS}.pretraining:PretrainingTask", PretrainingConfig, PretrainRunConfig,
    command="pretrain", summary="pre-train BERT (masked LM + next sentence)",
    google_script="run_pretraining.py", module="official_bert.commands.pretrain",
    inputs=_CORPUS, modes=("train", "eval"), counts="steps",
    required_tokens=(),  # google's files need no vocabulary; ours name theirs
    vocab_required=False, head_always_usable=True))

DISTILLATION = register(dataclasses.replace(
    PRETRAINING, name="distillation",
    task=f"{_TASKS}.general_distillation:GeneralDistillationTask", command="distill",
    summary="a smaller BERT that learns a teacher on a corpus (general distillation)",
    google_script=None, module="official_bert.commands.distill", distils="representations"))

CLASSIFICATION = register(TaskSpec(
    "classification", f"{_TASKS}.classification:ClassificationTask", ClassificationConfig,
    command="classify", summary="fine-tune / evaluate / predict GLUE or your own CSV/TSV",
    google_script="run_classifier.py", module="official_bert.commands.classify",
    inputs={"data_dir": "dir"}, xla_off=_windows_without_xla,
    distils="outputs", reads_distill_text=True))

SQUAD = register(TaskSpec(
    "squad", f"{_TASKS}.squad:SpanLabelingTask", SquadConfig, SquadRunConfig,
    command="squad", summary="question answering, SQuAD v1.1 and v2.0",
    google_script="run_squad.py", module="official_bert.commands.squad",
    modes=("train", "predict"), prints_scores=True,
    results=("predictions.json", "nbest_predictions.json", "null_odds.json",
             "eval_results.json"),
    evaluation_flag="do_predict",  # SQuAD evaluates its predictions of --predict_file
    round_steps_up=True, trims_padding=False, distils="outputs"))

MULTIPLE_CHOICE = register(TaskSpec(
    "multiple choice", f"{_TASKS}.multiple_choice:MultipleChoiceTask", MultipleChoiceConfig,
    SwagRunConfig, command="swag", summary="multiple choice (SWAG layout)",
    google_script="run_swag.py", module="official_bert.commands.swag",
    results=("test_results.tsv",), distils="outputs"))

NER = register(TaskSpec(
    "ner", f"{_TASKS}.ner:NerTask", NerConfig, variant=("feature_based", "feature-based ner"),
    command="ner", summary="token tagging (CoNLL files), fine-tuned or feature-based",
    google_script="run_ner.py", module="official_bert.commands.ner",
    results=("eval_predictions.conll", "test_predictions.conll", "test_results.txt"),
    distils="outputs", reads_distill_text=True))

FEATURE_BASED_NER = register(dataclasses.replace(
    NER, name="feature-based ner", task=f"{_TASKS}.ner:FeatureBasedNerTask", variant=None,
    command=None, xla_off=_bilstm_without_xla,
    distils=None))  # (its features are the frozen encoder's, made before training)
