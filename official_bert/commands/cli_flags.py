"""The command line of a config: its flags, generated from its settings, and
the config built from the parsed flags.

Every setting is a field of a config dataclass (`official_bert.settings.setting`,
the configs in `official_bert.configs` and the commands' own);
`define_flags` defines one absl flag per setting, so a flag has the field's
name, type, default and help and the two cannot disagree
(`tests/test_settings.py`). A command lists its configs once, as `CONFIGS`,
defines their flags in its `define_flags()` (which `commands.registry` calls
before parsing), and builds them back with `from_flags` / `run_config`.
Nothing here parses argv.

Example (a command; a task family's are made from its row, `commands.registry`):

    from official_bert.commands import cli_flags
    from official_bert.configs import ExportEncoderConfig
    CONFIGS = (ExportEncoderConfig,)
    def define_flags():
        cli_flags.define_command_flags(ExportEncoderConfig, cli_flags.MODEL_FILES)
    ...
    def main(_):
        export_checkpoint(cli_flags.from_flags(ExportEncoderConfig, FLAGS))
"""

from __future__ import annotations

import dataclasses
import sys

from absl import flags, logging

from official_bert.settings import settings_of
from official_bert.configs import (DistillationSettings, DistributionSettings, ExportSettings,
                                   GoogleTpuFlags, ModelFilesConfig, RunConfig, TrainingSettings)

# training.distribution loads TensorFlow: `run_config` imports it once the flags
# are parsed, so that defining the flags (and `--help`) loads absl alone.

# The flags `define_flags` defines belong to the command that calls it (absl's
# module of a flag, under which `--help` lists it), not to this module.
flags.disclaim_key_flags()

# Group titles: `--help` (official_bert.commands.app) lists flags under these headings.
MODEL_FLAGS = "model files"
TRAINING_FLAGS = "training"
DISTRIBUTION_FLAGS = "distribution, precision, XLA"
EXPORT_FLAGS = "export"
DISTILLATION_FLAGS = "distillation"
PRECISION_FLAGS = "precision"


def _names(config_class) -> tuple:
    return tuple(f.name for f in dataclasses.fields(config_class))


# The shared parts of a command's config: (heading, the settings' names).
MODEL_FILES = (MODEL_FLAGS, _names(ModelFilesConfig))
TRAINING = (TRAINING_FLAGS, _names(TrainingSettings))
DISTRIBUTION = (DISTRIBUTION_FLAGS, _names(DistributionSettings))
EXPORT = (EXPORT_FLAGS, _names(ExportSettings))
DISTILLATION = (DISTILLATION_FLAGS, _names(DistillationSettings))
PRECISION = (PRECISION_FLAGS, ("dtype",))  # --dtype of a command that trains nothing

# Fine-tuning counts epochs; pre-training counts steps (RunConfig has both).
EPOCH_FLAGS = ("num_train_epochs", "warmup_proportion", "max_train_examples")
STEP_FLAGS = ("num_train_steps", "num_warmup_steps")

_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           str: flags.DEFINE_string, list: flags.DEFINE_list}


def define_flags(config_class, *, group: str | None = None, only=None, skip=(),
                 flag_values=flags.FLAGS) -> list[str]:
    """Defines a flag for each setting of the dataclass `config_class`
    (`official_bert.settings.setting` fields): its name, type, default, help and
    choices come from the field, so the flag and the config cannot disagree.

    Args:
        group: the `--help` heading (absl's module name); default: the calling
            command's module.
        only: the names to define (default: every setting); `skip`: names not to.
    Returns the names defined. A name already defined (a field two configs of
    one command share) is defined once.
    """
    group = group or _calling_module()
    defined = []
    for s in settings_of(config_class):
        if (only is not None and s.name not in only) or s.name in skip:
            continue
        if s.name in flag_values:
            continue
        kwargs = dict(flag_values=flag_values, module_name=group)
        if s.choices is not None:
            flags.DEFINE_enum(s.name, s.default, list(s.choices), s.help, **kwargs)
        else:
            _DEFINE[s.kind](s.name, s.default, s.help, **kwargs)
        defined.append(s.name)
    return defined


def _calling_module() -> str:
    """The name of the first module up the stack that is not this one (the
    command defining its flags), for its `--help` heading."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame.f_globals.get("__name__", __name__) if frame is not None else __name__


def define_command_flags(config_class, *parts, skip=(), group: str | None = None) -> None:
    """The flags of `config_class`: its own settings under the command's
    heading (`group`: default, the calling command's module), then each shared
    part (`MODEL_FILES`, `PRECISION`, `EXPORT`, ...) under the part's heading."""
    shared = [name for _, names in parts for name in names]
    define_flags(config_class, skip=(*shared, *skip), group=group)
    for heading, names in parts:
        define_flags(config_class, group=heading, only=names, skip=skip)


def define_run_flags(config_class=RunConfig, *, modes=("train", "eval", "predict"),
                     counts: str = "epochs", distillation: bool | None = None,
                     distill_text: bool = False, group: str | None = None) -> None:
    """The flags of a task run: `config_class` (RunConfig, or the command's
    `with_defaults` of it) by part, and google's TPU flags (`GoogleTpuFlags`).

    Args:
        modes: which of --do_train / --do_eval / --do_predict (and their batch
            sizes) the command has.
        counts: "epochs" (fine-tuning) or "steps" (pre-training, `STEP_FLAGS`).
        distillation: whether the command has --teacher and its flags (None:
            fine-tuning commands do, pre-training does not).
        distill_text: whether it also has --distill_text (a task that reads
            unlabelled text: `TaskSpec.reads_distill_text`).
        group: the command's `--help` heading (default: the calling module).
    """
    skip = [name for mode in ("train", "eval", "predict") if mode not in modes
            for name in (f"do_{mode}", f"{mode}_batch_size")]
    skip += STEP_FLAGS if counts == "epochs" else EPOCH_FLAGS
    if not (counts == "epochs" if distillation is None else distillation):
        skip += DISTILLATION[1]
    elif not distill_text:
        skip.append("distill_text")
    define_command_flags(config_class, MODEL_FILES, TRAINING, DISTILLATION, DISTRIBUTION,
                         EXPORT, skip=skip, group=group)
    define_flags(GoogleTpuFlags, group=DISTRIBUTION_FLAGS)


def from_flags(config_class, flag_values):
    """An instance of the dataclass `config_class` from the parsed flags of its
    settings (a setting whose flag the command does not define keeps its default)."""
    return config_class(**{s.name: getattr(flag_values, s.name)
                           for s in settings_of(config_class) if s.name in flag_values})


def run_config(flag_values, config_class=RunConfig):
    """The `config_class` (a `RunConfig`) of the parsed flags, google's TPU
    flags applied: --use_tpu is --distribution_strategy=tpu, --tpu_name and
    --master name the TPU; each TPU flag without an effect is logged."""
    from official_bert.training.distribution import GOOGLE_TPU_FLAGS, ignored_tpu_flags

    config = dataclasses.replace(from_flags(config_class, flag_values), given=frozenset(
        name for name in flag_values if flag_values[name].present))
    google = from_flags(GoogleTpuFlags, flag_values)
    tpu = config.tpu or google.tpu_name or google.master
    if tpu != config.tpu:
        config = dataclasses.replace(config, tpu=tpu)
    if google.use_tpu:
        config = dataclasses.replace(config, distribution_strategy="tpu")
    given = {name: flag_values[name].value for name in GOOGLE_TPU_FLAGS
             if name in flag_values and flag_values[name].present}
    for line in ignored_tpu_flags(config.distribution_strategy, given):
        logging.info(line)
    return config
