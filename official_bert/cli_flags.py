"""The flags every entry script shares, defined once, and the `RunConfig` they make.

The `run_*.py` scripts parse flags (absl); this module *defines* the groups
they have in common, so one flag means one thing, with one help text and one
reader, in every task, and `run_config(FLAGS)` turns the parsed values into the
`tasks.base.RunConfig` the library takes. Nothing here parses argv.

Example (a task script):

    from official_bert import cli_flags
    cli_flags.define_run_flags(max_seq_length=128, train_batch_size=32)
    ...
    def main(_):
        run = cli_flags.run_config(FLAGS)
"""

from __future__ import annotations

import dataclasses

from absl import flags, logging

from official_bert.settings import settings_of

# tasks.base and training.distribution load TensorFlow: `run_config` imports
# them once the flags are parsed, so that defining the flags (and `--help`)
# loads absl alone.
# Group titles: `--help` (official_bert.app) lists flags under these headings.
MODEL_FLAGS = "model files"
TRAINING_FLAGS = "training"
DISTRIBUTION_FLAGS = "distribution, precision, XLA"
EXPORT_FLAGS = "export"
PRECISION_FLAGS = "precision"

DTYPES = ("float32", "bfloat16", "float16")
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def define_model_flags(max_seq_length: int | None = 128) -> None:
    """--init_checkpoint --bert_config_file --vocab_file --do_lower_case --max_seq_length
    (`modeling.configs.ModelFilesConfig`'s fields); no --max_seq_length when it is None
    (a command that packs no sequences)."""
    g = dict(module_name=MODEL_FLAGS)
    flags.DEFINE_string(
        "init_checkpoint", None,
        "Pre-trained weights: a Hugging Face directory (model.safetensors), a Google TF1 "
        "bert_model.ckpt prefix, or an official_bert run/checkpoint directory. "
        "bert_config.json/config.json and vocab.txt are found beside it; a head of this task "
        "in it is restored too.", **g)
    flags.DEFINE_string("bert_config_file", None,
                        "bert_config.json (default: the one beside --init_checkpoint).", **g)
    flags.DEFINE_string("vocab_file", None,
                        "vocab.txt (default: the one beside --init_checkpoint).", **g)
    flags.DEFINE_bool("do_lower_case", None,
                      "Lower-case and strip accents (default: what the checkpoint says, else "
                      "True).", **g)
    if max_seq_length is not None:
        flags.DEFINE_integer("max_seq_length", max_seq_length,
                             "Tokens per sequence after WordPiece, [CLS] and [SEP] included.",
                             **g)


def define_training_flags(*, modes=("train", "eval", "predict"), train_batch_size: int = 32,
                          eval_batch_size: int = 8, predict_batch_size: int = 8,
                          learning_rate: float = 5e-5, num_train_epochs: float | None = 3.0,
                          log_steps: int = 50, seed: int = 42) -> None:
    """google-research/bert's training flags, plus --seed, --log_steps, the
    optimizer, gradient accumulation and checkpoint retention.

    Args:
        modes: which of --do_train / --do_eval / --do_predict the script has.
        num_train_epochs: None for a script that counts steps instead
            (pre-training defines --num_train_steps itself).
    """
    g = dict(module_name=TRAINING_FLAGS)
    flags.DEFINE_string("output_dir", None,
                        "The run directory: checkpoints, summaries, results, predictions. A "
                        "rerun with the same directory resumes; two runs never share one.", **g)
    for mode, help_text in (("train", "Train."), ("eval", "Evaluate on the dev data."),
                            ("predict", "Predict the test data.")):
        if mode in modes:
            flags.DEFINE_bool(f"do_{mode}", False, help_text, **g)
    flags.DEFINE_integer("train_batch_size", train_batch_size,
                         "Global batch size for training (all replicas).", **g)
    if "eval" in modes:
        flags.DEFINE_integer("eval_batch_size", eval_batch_size, "Batch size for evaluation.", **g)
    if "predict" in modes:
        flags.DEFINE_integer("predict_batch_size", predict_batch_size,
                             "Batch size for prediction.", **g)
    flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.", **g)
    if num_train_epochs is not None:
        flags.DEFINE_float("num_train_epochs", num_train_epochs, "Epochs over the training data.",
                           **g)
        flags.DEFINE_float("warmup_proportion", 0.1,
                           "Fraction of the training steps of linear learning-rate warm-up.", **g)
        flags.DEFINE_integer("max_train_examples", None, "Train on the first N examples only.",
                             **g)
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"],
                      "adamw: BERT's AdamW. lamb: BERT's LAMB (layer-wise trust ratio) for very "
                      "large batches.", **g)
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches summed per update: the batch per replica in memory is "
                         "train_batch_size / replicas / gradient_accumulation_steps.", **g)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between checkpoints.", **g)
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept.", **g)
    flags.DEFINE_integer("iterations_per_loop", 1000,
                         "Updates per host call (capped at --log_steps).", **g)
    flags.DEFINE_integer("log_steps", log_steps, "Steps between progress lines and summaries.",
                         **g)
    flags.DEFINE_integer("seed", seed,
                         "Random seed: head initialization, dropout, shuffling (and masks).", **g)
    flags.DEFINE_integer("eval_every_steps", 0,
                         "Evaluate every this many training steps and at the last one (0: "
                         "only after training); each evaluation goes to eval_history.jsonl and "
                         "TensorBoard.", **g)
    flags.DEFINE_string("keep_best_metric", None,
                        "With --eval_every_steps: keep the model with the best value of this "
                        "metric of eval_results.txt (e.g. eval_accuracy, eval_f1, entity_f1; "
                        "lower is better for a name with 'loss') in output_dir/best/, and "
                        "evaluate, predict and export with it.", **g)
    flags.DEFINE_integer("early_stopping_patience", None,
                         "With --keep_best_metric: stop training after this many evaluations "
                         "without a better value.", **g)
    flags.DEFINE_bool("dynamic_padding", True,
                      "Cut each batch to its longest sequence, rounded up to a quarter of "
                      "--max_seq_length (at most 4 shapes to compile): the same model and "
                      "metrics, less compute on short texts. Ignored on TPU.", **g)


def define_distribution_flags() -> None:
    """--distribution_strategy --num_gpus --tpu --num_cpu_devices --dtype --jit_compile."""
    g = dict(module_name=DISTRIBUTION_FLAGS)
    flags.DEFINE_enum("distribution_strategy", "one_device", STRATEGIES,
                      "tf.distribute strategy (multi_worker_mirrored reads TF_CONFIG).", **g)
    flags.DEFINE_integer("num_gpus", 0, "GPUs to use (0 = CPU). More than TensorFlow sees is "
                         "refused, never silently run on the CPU.", **g)
    flags.DEFINE_string("tpu", None, "TPU name or address for --distribution_strategy=tpu.", **g)
    flags.DEFINE_integer("num_cpu_devices", 0,
                         "Split the CPU into this many logical devices (to try "
                         "--distribution_strategy=mirrored without GPUs).", **g)
    define_dtype_flag(DISTRIBUTION_FLAGS)
    flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.", **g)
    # google-research/bert's spelling of the same, so its TPU commands run unchanged.
    flags.DEFINE_bool("use_tpu", False,
                      "google-research/bert's flag: --use_tpu is --distribution_strategy=tpu.",
                      **g)
    flags.DEFINE_string("tpu_name", None, "google-research/bert's name for --tpu.", **g)
    flags.DEFINE_string("tpu_zone", None, "The TPU's GCE zone (TPUClusterResolver; default: "
                        "the VM's own).", **g)
    flags.DEFINE_string("gcp_project", None, "The TPU's cloud project (TPUClusterResolver; "
                        "default: the VM's own).", **g)
    flags.DEFINE_string("master", None, "google-research/bert's TensorFlow master URL: the TPU "
                        "address when --tpu is not given.", **g)
    flags.DEFINE_integer("num_tpu_cores", 8, "google-research/bert's flag, accepted and unused: "
                         "the TPU strategy uses every core of the TPU it connects to.", **g)


def define_dtype_flag(group: str = PRECISION_FLAGS) -> None:
    """--dtype, under the help group `group`."""
    flags.DEFINE_enum("dtype", "float32", list(DTYPES),
                      "Compute dtype: bfloat16/float16 are mixed precision (variables stay "
                      "float32; float16 adds loss scaling in training).", module_name=group)


def define_export_flags(export_dir_help: str = (
        "Write a SavedModel for TF Serving to export_dir/<version>/ (after training; without "
        "--do_train, of the checkpoint in --output_dir).")) -> None:
    """--export_dir --export_version --serving_dtype; `export_dir_help` says
    what the command exports."""
    g = dict(module_name=EXPORT_FLAGS)
    flags.DEFINE_string("export_dir", None, export_dir_help, **g)
    flags.DEFINE_integer("export_version", None,
                         "The version directory's number (default: seconds since the epoch). "
                         "An existing version is never overwritten.", **g)
    flags.DEFINE_enum("serving_dtype", "float32", ["float32", "bfloat16"],
                      "The --export_dir model's precision: bfloat16 stores its weights and runs "
                      "its matmuls in bfloat16 (CPUs with AVX512-BF16 or AMX: 1.7x faster at "
                      "batch 1 than a mixed_bfloat16 export, benchmarks/README.md).", **g)


def define_run_flags(*, max_seq_length: int = 128, **training_defaults) -> None:
    """All the shared groups: model files, training, distribution, export."""
    define_model_flags(max_seq_length)
    define_training_flags(**training_defaults)
    define_distribution_flags()
    define_export_flags()


_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           str: flags.DEFINE_string, list: flags.DEFINE_list}


def define_flags(config_class, *, group: str | None = None, only=None, skip=(),
                 flag_values=flags.FLAGS) -> list[str]:
    """Defines a flag for each setting of the dataclass `config_class`
    (`official_bert.settings.setting` fields): its name, type, default, help and
    choices come from the field, so the flag and the config cannot disagree.

    Args:
        group: the `--help` heading (absl's module name); default: the caller's.
        only: the names to define (default: every setting); `skip`: names not to.
    Returns the names defined. A name already defined (a field two configs of
    one command share) is defined once.
    """
    defined = []
    for s in settings_of(config_class):
        if (only is not None and s.name not in only) or s.name in skip:
            continue
        if s.name in flag_values:
            continue
        kwargs = dict(flag_values=flag_values)
        if group:
            kwargs["module_name"] = group
        if s.choices is not None:
            flags.DEFINE_enum(s.name, s.default, list(s.choices), s.help, **kwargs)
        else:
            _DEFINE[s.kind](s.name, s.default, s.help, **kwargs)
        defined.append(s.name)
    return defined


def from_flags(config_class, flag_values):
    """An instance of the dataclass `config_class` from the parsed flags of the
    same names (a field whose flag the script does not define keeps its default)."""
    return config_class(**{f.name: getattr(flag_values, f.name)
                           for f in dataclasses.fields(config_class) if f.name in flag_values})


def run_config(flag_values):
    """The `tasks.base.RunConfig` of the parsed flags."""
    from official_bert.tasks.base import RunConfig
    from official_bert.training.distribution import GOOGLE_TPU_FLAGS, ignored_tpu_flags

    config = from_flags(RunConfig, flag_values)
    tpu = config.tpu or getattr(flag_values, "tpu_name", None) or getattr(flag_values, "master",
                                                                         None)
    if tpu != config.tpu:
        config = dataclasses.replace(config, tpu=tpu)
    if getattr(flag_values, "use_tpu", False):
        config = dataclasses.replace(config, distribution_strategy="tpu")
    given = {name: flag_values[name].value for name in GOOGLE_TPU_FLAGS
             if name in flag_values and flag_values[name].present}
    for line in ignored_tpu_flags(config.distribution_strategy, given):
        logging.info(line)
    return config
