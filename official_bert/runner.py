"""What every `run_*.py` fine-tuning script shares: flags, model files, trainer.

The scripts own flag *parsing*; this module only *defines* the flags they have
in common (so one flag means one thing everywhere, with one help text) and
turns their values, passed in explicitly, into library objects. Nothing here
reads `absl.flags.FLAGS` on its own.

Example (in a runner):

    from official_bert import runner
    runner.define_model_flags(max_seq_length=128)
    runner.define_finetuning_flags(train_batch_size=32)
    runner.define_distribution_flags()
    ...
    files = runner.resolve_model_files(
        init_checkpoint=FLAGS.init_checkpoint, bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
        max_seq_length=FLAGS.max_seq_length)
    trainer = runner.make_trainer(task, runner.RunSettings.from_flags(FLAGS),
                                  num_train_steps, num_warmup_steps, init_fn, train=True)
"""

from __future__ import annotations

import dataclasses
import os

from absl import flags

DTYPE_POLICIES = {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
STRATEGIES = ["one_device", "mirrored", "multi_worker_mirrored", "tpu"]

# Help groups: `--help` (official_bert.app) lists flags under these headings.
MODEL_FLAGS = "model files (official_bert.runner)"
TRAINING_FLAGS = "training (official_bert.runner)"
DISTRIBUTION_FLAGS = "distribution, precision, XLA (official_bert.runner)"


# === Flags ===


def define_model_flags(max_seq_length: int) -> None:
    """--init_checkpoint --bert_config_file --vocab_file --do_lower_case --max_seq_length."""
    flags.DEFINE_string(
        "init_checkpoint", None,
        "Pre-trained weights: a Hugging Face directory (model.safetensors), a Google TF1 "
        "bert_model.ckpt prefix, or an official_bert run/checkpoint directory. "
        "bert_config.json/config.json and vocab.txt are found beside it.", module_name=MODEL_FLAGS)
    flags.DEFINE_string("bert_config_file", None,
                        "bert_config.json (default: the one beside --init_checkpoint).", module_name=MODEL_FLAGS)
    flags.DEFINE_string("vocab_file", None, "vocab.txt (default: the one beside --init_checkpoint).", module_name=MODEL_FLAGS)
    flags.DEFINE_bool("do_lower_case", None,
                      "Lower-case and strip accents (default: what the checkpoint says, else True).", module_name=MODEL_FLAGS)
    flags.DEFINE_integer("max_seq_length", max_seq_length,
                         "Tokens per sequence after WordPiece, [CLS] and [SEP] included; longer "
                         "inputs are truncated (or windowed where the task says so).", module_name=MODEL_FLAGS)


def define_finetuning_flags(train_batch_size: int = 32, eval_batch_size: int = 8,
                            predict_batch_size: int = 8, num_train_epochs: float = 3.0,
                            learning_rate: float = 5e-5) -> None:
    """google-research/bert's training flags plus --seed, --log_steps, --max_train_examples."""
    flags.DEFINE_string("output_dir", None,
                        "Checkpoints, summaries, results and predictions are written here; "
                        "a rerun with the same directory resumes.", module_name=TRAINING_FLAGS)
    flags.DEFINE_bool("do_train", False, "Train.", module_name=TRAINING_FLAGS)
    flags.DEFINE_bool("do_eval", False, "Evaluate on the dev data.", module_name=TRAINING_FLAGS)
    flags.DEFINE_bool("do_predict", False, "Predict the test data.", module_name=TRAINING_FLAGS)
    flags.DEFINE_integer("train_batch_size", train_batch_size, "Global batch size for training.", module_name=TRAINING_FLAGS)
    flags.DEFINE_integer("eval_batch_size", eval_batch_size, "Batch size for evaluation.", module_name=TRAINING_FLAGS)
    flags.DEFINE_integer("predict_batch_size", predict_batch_size, "Batch size for prediction.", module_name=TRAINING_FLAGS)
    flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate (AdamW).", module_name=TRAINING_FLAGS)
    flags.DEFINE_float("num_train_epochs", num_train_epochs, "Epochs over the training data.", module_name=TRAINING_FLAGS)
    flags.DEFINE_float("warmup_proportion", 0.1,
                       "Fraction of the training steps of linear learning-rate warm-up.", module_name=TRAINING_FLAGS)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between checkpoints.", module_name=TRAINING_FLAGS)
    flags.DEFINE_integer("log_steps", 50, "Steps between progress lines and summaries.", module_name=TRAINING_FLAGS)
    flags.DEFINE_integer("max_train_examples", None, "Train on the first N examples only.", module_name=TRAINING_FLAGS)
    flags.DEFINE_integer("seed", 42, "Random seed: head initialization, dropout, shuffling.", module_name=TRAINING_FLAGS)
    flags.DEFINE_string("export_dir", None,
                        "After training, write a SavedModel for TF Serving to "
                        "export_dir/<version>/.", module_name=TRAINING_FLAGS)
    define_dynamic_padding_flag()


def define_dynamic_padding_flag() -> None:
    """--dynamic_padding (run_squad uses it for prediction only)."""
    flags.DEFINE_bool("dynamic_padding", True,
                      "Cut each batch to its longest sequence, rounded up to a quarter of "
                      "--max_seq_length (at most 4 shapes to compile): the same model and "
                      "metrics, less compute on short texts. Ignored on TPU, which needs "
                      "static shapes. run_squad: prediction only, windows sorted by length.",
                      module_name=TRAINING_FLAGS)


def define_distribution_flags() -> None:
    """--distribution_strategy --num_gpus --tpu --dtype --jit_compile."""
    flags.DEFINE_enum("distribution_strategy", "one_device", STRATEGIES,
                      "tf.distribute strategy (multi_worker_mirrored reads TF_CONFIG).", module_name=DISTRIBUTION_FLAGS)
    flags.DEFINE_integer("num_gpus", 0, "GPUs to use (0 = CPU).", module_name=DISTRIBUTION_FLAGS)
    flags.DEFINE_string("tpu", None, "TPU name or address for --distribution_strategy=tpu.", module_name=DISTRIBUTION_FLAGS)
    flags.DEFINE_enum("dtype", "float32", list(DTYPE_POLICIES),
                      "Compute dtype: bfloat16/float16 are mixed precision (variables stay "
                      "float32; float16 adds loss scaling).", module_name=DISTRIBUTION_FLAGS)
    flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.", module_name=DISTRIBUTION_FLAGS)


def check_modes(*, do_train: bool, do_eval: bool, do_predict: bool, output_dir: str | None,
                train_file=None, eval_file=None, predict_file=None) -> None:
    """At least one --do_*, its --*_file given (for runners that read files), and
    --output_dir: ValueError naming the missing flag otherwise."""
    if not (do_train or do_eval or do_predict):
        raise ValueError("at least one of --do_train, --do_eval, --do_predict must be set")
    for mode, needed, path in (("train", do_train, train_file), ("eval", do_eval, eval_file),
                               ("predict", do_predict, predict_file)):
        if needed and not path:
            raise ValueError(f"--{mode}_file is required with --do_{mode}")
    if not output_dir:
        raise ValueError("--output_dir is required")


def dtype_policy(dtype: str) -> str | None:
    """'float32' → None, 'bfloat16' → 'mixed_bfloat16', 'float16' → 'mixed_float16'."""
    if dtype not in DTYPE_POLICIES:
        raise ValueError(f"--dtype={dtype!r} is unknown; use one of {sorted(DTYPE_POLICIES)}")
    return DTYPE_POLICIES[dtype]


# === Model files ===


@dataclasses.dataclass
class ModelFiles:
    """What a runner needs to build and initialize an encoder.

    Args:
        config: the `BertConfig`.
        checkpoint: a `checkpoints.BertCheckpoint`, or None for random weights.
        vocab_file: str. The WordPiece vocabulary.
        do_lower_case: bool.
    """

    config: object
    checkpoint: object
    vocab_file: str
    do_lower_case: bool

    def copy_to(self, output_dir: str) -> None:
        """Writes bert_config.json and vocab.txt to `output_dir`, so a run's
        directory is itself a checkpoint that `--init_checkpoint` accepts."""
        from official_bert import checkpoints

        os.makedirs(output_dir, exist_ok=True)
        self.config.to_json_file(os.path.join(output_dir, "bert_config.json"))
        destination = os.path.join(output_dir, "vocab.txt")
        if os.path.abspath(self.vocab_file) != os.path.abspath(destination):
            checkpoints._copy_atomic(self.vocab_file, destination)


def resolve_model_files(*, init_checkpoint: str | None, bert_config_file: str | None,
                        vocab_file: str | None, do_lower_case: bool | None,
                        max_seq_length: int | None = None) -> ModelFiles:
    """Finds config, weights, vocabulary and casing from whatever was given.

    `--init_checkpoint` alone is enough when its config and vocab.txt lie beside
    it; explicit `bert_config_file` / `vocab_file` win. Raises ValueError naming
    the missing file or the flag to pass.
    """
    from official_bert import checkpoints
    from official_bert.text import tokenization
    from official_bert.modeling.configs import BertConfig

    config = BertConfig.from_json_file(bert_config_file) if bert_config_file else None
    ckpt = None
    if init_checkpoint:
        ckpt = checkpoints.read_checkpoint(init_checkpoint, config)
        config = ckpt.config
    if config is None:
        raise ValueError("pass --init_checkpoint (or --bert_config_file and --vocab_file "
                         "to train from random weights)")
    vocab_file = vocab_file or (ckpt.vocab_file if ckpt else None)
    if not vocab_file:
        raise ValueError(f"no vocab.txt beside {init_checkpoint or bert_config_file}; "
                         "pass --vocab_file")
    if not os.path.exists(vocab_file):
        raise ValueError(f"--vocab_file {vocab_file} does not exist")
    if do_lower_case is None:
        do_lower_case = True if ckpt is None or ckpt.do_lower_case is None else ckpt.do_lower_case
    if max_seq_length is not None and max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={max_seq_length} is longer than the model's "
                         f"max_position_embeddings ({config.max_position_embeddings})")
    tokenization.validate_case_matches_vocab(tokenization.load_vocab_list(vocab_file),
                                             do_lower_case)
    return ModelFiles(config, ckpt, vocab_file, bool(do_lower_case))


def encoder_init_fn(checkpoint, log_name: str | None = None):
    """An `init_fn` for `Trainer` that loads `checkpoint`'s encoder weights."""
    from absl import logging

    from official_bert import checkpoints

    def init_fn(model):
        if checkpoint is not None:
            checkpoints.assign_encoder_weights(model.encoder, checkpoint.weights)
            logging.info("Initialized the encoder from %s", log_name or checkpoint.path)

    return init_fn


# === Training ===


@dataclasses.dataclass
class RunSettings:
    """The values of the shared training and distribution flags."""

    output_dir: str
    learning_rate: float = 5e-5
    save_checkpoints_steps: int = 1000
    log_steps: int = 50
    max_seq_length: int = 128
    distribution_strategy: str = "one_device"
    num_gpus: int = 0
    tpu: str | None = None
    dtype: str = "float32"
    jit_compile: bool = False
    seed: int = 42
    dynamic_padding: bool = True

    def padding_multiple(self) -> int | None:
        """`numpy_dataset`'s `trim_padding_multiple` for these settings."""
        if not self.dynamic_padding or self.distribution_strategy == "tpu":
            return None
        return padding_bucket(self.max_seq_length)

    @classmethod
    def from_flags(cls, flag_values) -> "RunSettings":
        """Reads the fields of this class from parsed absl `flag_values` (a
        field whose flag the runner does not define keeps its default)."""
        return cls(**{f.name: getattr(flag_values, f.name) for f in dataclasses.fields(cls)
                      if f.name in flag_values})


def training_steps(num_examples: int, batch_size: int, epochs: float,
                   warmup_proportion: float) -> tuple[int, int]:
    """(train steps, warm-up steps) with google-research/bert's arithmetic."""
    num_train_steps = int(num_examples / batch_size * epochs)
    if num_train_steps <= 0:
        raise ValueError(f"{num_examples} training examples make no step of batch {batch_size} "
                         f"over {epochs} epochs; lower --train_batch_size or add data")
    return num_train_steps, int(num_train_steps * warmup_proportion)


def make_trainer(task, settings: RunSettings, num_train_steps: int, num_warmup_steps: int,
                 init_fn=None, train: bool = True):
    """A `training.Trainer` with BERT's AdamW recipe (optimizer only when `train`)."""
    from official_bert.training import distribution
    from official_bert.training import optimization
    from official_bert.training import trainer as training

    strategy = distribution.get_strategy(settings.distribution_strategy, settings.num_gpus,
                                         settings.tpu)
    config = training.TrainingConfig(
        output_dir=settings.output_dir, num_train_steps=max(num_train_steps, 1),
        save_checkpoints_steps=settings.save_checkpoints_steps, log_steps=settings.log_steps,
        steps_per_loop=settings.log_steps, jit_compile=settings.jit_compile,
        tokens_per_example=settings.max_seq_length)
    optimizer_fn = None
    if train:
        optimizer_fn = lambda: optimization.create_optimizer(optimization.OptimizerConfig(
            learning_rate=settings.learning_rate, num_train_steps=num_train_steps,
            num_warmup_steps=num_warmup_steps))
    return training.Trainer(task, strategy, config, optimizer_fn=optimizer_fn, init_fn=init_fn,
                            loss_scale=settings.dtype == "float16")


def padding_bucket(max_seq_length: int) -> int:
    """The length multiple dynamic padding rounds up to: a quarter of
    `max_seq_length` (a multiple of 8, at least 16), so a run compiles at most
    four batch shapes (each one an XLA compilation under --jit_compile)."""
    return max(16, -(-max_seq_length // 32) * 8)


def bucketed_length(longest: int, multiple: int, full: int) -> int:
    """The length `text_layers.trim_padding` cuts a batch to: its longest
    sequence rounded up to `multiple`, at most `full`."""
    return min(full, -(-max(int(longest), 1) // multiple) * multiple)


def numpy_dataset(arrays: dict, batch_size: int, training: bool, seed: int,
                  trim_padding_multiple: int | None = None):
    """A `dataset_fn` over in-memory feature arrays (all of one length).

    Training: sharded per input pipeline, shuffled, repeated, batched with
    `drop_remainder`. Evaluation/prediction: every example once, in order, the
    last batch smaller (so no example is dropped or padded into a metric).
    With `trim_padding_multiple`, each batch's sequence features
    (the packed inputs and NER's `label_ids`) are cut to its longest sequence rounded up to that
    multiple (`text_layers.trim_padding`); only for outputs that do not have
    the sequence length (losses, per-example scores).
    """
    import tensorflow as tf

    from official_bert.text import text_layers

    sequence_keys = text_layers.PACKED_KEYS + ("label_ids",)

    def trim(batch):
        return text_layers.trim_padding(batch, trim_padding_multiple, keys=sequence_keys)

    num_examples = len(next(iter(arrays.values())))

    def dataset_fn(context):
        ds = tf.data.Dataset.from_tensor_slices(arrays)
        per_replica = context.get_per_replica_batch_size(batch_size)
        if training:
            ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
            ds = ds.shuffle(num_examples, seed=seed).repeat()
            ds = ds.batch(per_replica, drop_remainder=True)
        else:
            ds = ds.batch(per_replica)
        if trim_padding_multiple:
            ds = ds.map(trim, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return ds.prefetch(2)

    return dataset_fn
