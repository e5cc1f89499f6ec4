"""The parts of a run's settings: one dataclass a part, one field a setting.

`configs.RunConfig`, what every task run shares, is made of these five:

    ModelFilesConfig       where the model comes from (--init_checkpoint, ...);
                           every command that loads a model extends it
    TrainingSettings       modes, batch sizes, schedule, checkpoints, evaluation
    DistributionSettings   strategy, devices, --dtype, XLA
    ExportSettings         the TF Serving export
    DistillationSettings   a teacher's outputs beside the labels

with the closed sets of values they choose from and the checks that go with
them (`dtype_policy`, `check_serving_dtype`, `check_train_minutes`). The
commands take them through `official_bert.configs`, which composes them and
re-exports every name here. No TensorFlow: `--help` stays fast.
"""

from __future__ import annotations

import dataclasses

from official_bert.errors import UserError
from official_bert.settings import setting

DTYPE_POLICIES = {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
SERVING_DTYPES = ("float32", "bfloat16")
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
# --optimizer's choices; `training.optimization.create_optimizer` builds each.
OPTIMIZERS = ("adamw", "lamb")
# The longest --max_train_minutes, ten years: a budget is a run's wall time, and a
# larger number is a typo (1e300 overflowed the clock and trained at rate 0).
MAX_TRAIN_MINUTES = 10 * 365 * 24 * 60


def dtype_policy(dtype: str) -> str | None:
    """The Keras mixed-precision policy of --dtype (None for float32); a
    `UserError` for a dtype that is none of `DTYPE_POLICIES`."""
    if dtype not in DTYPE_POLICIES:
        raise UserError(f"--dtype={dtype!r} is unknown; use one of {', '.join(DTYPE_POLICIES)}")
    return DTYPE_POLICIES[dtype]


def check_serving_dtype(serving_dtype: str, export_dir: str | None) -> None:
    """`UserError` for a --serving_dtype that is unknown or given without the
    --export_dir it applies to (every command with both flags asks this)."""
    if serving_dtype not in SERVING_DTYPES:
        raise UserError(f"--serving_dtype={serving_dtype}: use one of "
                        f"{', '.join(SERVING_DTYPES)}")
    if serving_dtype != "float32" and not export_dir:
        raise UserError("--serving_dtype needs --export_dir (it sets the TF Serving export's "
                        "precision)")


def check_train_minutes(minutes: float) -> None:
    """`UserError` for a --max_train_minutes that is not a positive number of
    minutes, or is more than `MAX_TRAIN_MINUTES`."""
    if not 0 < minutes < float("inf"):
        raise UserError(f"--max_train_minutes must be a positive number of minutes, got "
                        f"{minutes:g}")
    if minutes > MAX_TRAIN_MINUTES:
        raise UserError(f"--max_train_minutes={minutes:g} is more than ten years "
                        f"({MAX_TRAIN_MINUTES} minutes): give the training budget in minutes")


def padding_bucket(max_seq_length: int) -> int:
    """The length multiple dynamic padding rounds up to: a quarter of
    `max_seq_length` (a multiple of 8, at least 16), so a run compiles at most
    four batch shapes (each one an XLA compilation under --jit_compile)."""
    return max(16, -(-max_seq_length // 32) * 8)


@dataclasses.dataclass
class ModelFilesConfig:
    """Where a model comes from: the flags of every command that loads one.
    `model_files.resolve_model_files` reads them; the task and command configs
    extend this class. `max_seq_length` is None where a command packs nothing."""

    init_checkpoint: str | None = setting(
        None, "Pre-trained weights: a Hugging Face directory (model.safetensors), a Google TF1 "
        "bert_model.ckpt prefix, or an official_bert run/checkpoint directory. "
        "bert_config.json/config.json and vocab.txt are found beside it; a head of this task "
        "in it is restored too.")
    bert_config_file: str | None = setting(
        None, "bert_config.json (default: the one beside --init_checkpoint).")
    vocab_file: str | None = setting(None, "vocab.txt (default: the one beside --init_checkpoint).")
    do_lower_case: bool | None = setting(
        None, "Lower-case and strip accents (default: what the checkpoint says, else True).")
    max_seq_length: int | None = setting(
        128, "Tokens per sequence after WordPiece, [CLS] and [SEP] included.")
    student_layers: list | None = setting(
        None, "A smaller model from --init_checkpoint: keep only these of its Transformer "
        "layers (0-based, e.g. 0,2,4: DistilBERT's student, every other layer); embeddings, "
        "pooler and heads are kept. Default: every layer.")


@dataclasses.dataclass
class TrainingSettings:
    """The run directory, the modes, and google-research/bert's training
    settings, plus the optimizer, gradient accumulation, checkpoint retention
    and evaluation while training. Fine-tuning counts epochs
    (`num_train_epochs`, `warmup_proportion`); pre-training counts steps
    (`num_train_steps`, `num_warmup_steps`); a run given steps uses them."""

    output_dir: str | None = setting(
        None, "The run directory: checkpoints, summaries, results, predictions. A rerun with "
        "the same directory resumes; two runs never share one.")
    do_train: bool = setting(False, "Train.")
    do_eval: bool = setting(False, "Evaluate on the dev data.")
    do_predict: bool = setting(False, "Predict the test data.")
    train_batch_size: int = setting(32, "Global batch size for training (all replicas).")
    eval_batch_size: int = setting(8, "Batch size for evaluation.")
    predict_batch_size: int = setting(8, "Batch size for prediction.")
    learning_rate: float = setting(5e-5, "Peak learning rate.")
    num_train_epochs: float = setting(3.0, "Epochs over the training data.")
    warmup_proportion: float = setting(
        0.1, "Fraction of the training steps of linear learning-rate warm-up.")
    max_train_examples: int | None = setting(None, "Train on the first N examples only.")
    num_train_steps: int | None = setting(None, "Optimizer updates in the whole run.")
    num_warmup_steps: int | None = setting(None, "Updates of linear learning-rate warm-up.")
    max_train_minutes: float | None = setting(
        None, "A budget of training time: the learning rate warms up over the same fraction of "
        "it as the steps' (--num_warmup_steps / --num_train_steps, or --warmup_proportion) and "
        "reaches 0 when it is spent; training stops at the step that crosses it, and saves. "
        "Counts training steps only (not start-up or evaluation); a resumed run continues the "
        "clock from its checkpoint. The step count becomes an upper bound.")
    optimizer: str = setting(
        "adamw", "adamw: BERT's AdamW. lamb: BERT's LAMB (layer-wise trust ratio) for very "
        "large batches.", choices=OPTIMIZERS)
    gradient_accumulation_steps: int = setting(
        1, "Micro-batches summed per update: the batch per replica in memory is "
        "train_batch_size / replicas / gradient_accumulation_steps.")
    save_checkpoints_steps: int = setting(1000, "Steps between checkpoints.")
    keep_checkpoint_max: int = setting(5, "Checkpoints kept.")
    iterations_per_loop: int = setting(1000, "Updates per host call (capped at --log_steps).")
    log_steps: int = setting(50, "Steps between progress lines and summaries.")
    seed: int = setting(42, "Random seed: head initialization, dropout, shuffling (and masks).")
    dynamic_padding: bool = setting(
        True, "Cut each batch to its longest sequence, rounded up to a quarter of "
        "--max_seq_length (at most 4 shapes to compile): the same model and metrics, less "
        "compute on short texts. Ignored on TPU.")
    eval_every_steps: int = setting(
        0, "Evaluate every this many training steps and at the last one (0: only after "
        "training); each evaluation goes to eval_history.jsonl and TensorBoard.")
    keep_best_metric: str | None = setting(
        None, "With --eval_every_steps: keep the model with the best value of this metric of "
        "eval_results.txt (e.g. eval_accuracy, eval_f1, entity_f1; lower is better for a name "
        "with 'loss') in output_dir/best/, and evaluate, predict and export with it.")
    early_stopping_patience: int | None = setting(
        None, "With --keep_best_metric: stop training after this many evaluations without a "
        "better value.")
    allow_changed_settings: bool = setting(
        False, "Resume a trained --output_dir with other training settings than its run.json "
        "records (learning rate, steps or epochs, warm-up, batch size, optimizer, accumulation, "
        "the budget --max_train_minutes, --dtype, training data): the change is logged and kept in run.json's history. Without it such a "
        "resume is refused. A change that makes it another run (task, labels, model, "
        "vocabulary, casing, --max_seq_length) is refused either way.")


@dataclasses.dataclass
class DistributionSettings:
    """Where and how the run computes: tf.distribute strategy, devices,
    precision, XLA."""

    distribution_strategy: str = setting(
        "one_device", "tf.distribute strategy (multi_worker_mirrored reads TF_CONFIG).",
        choices=STRATEGIES)
    num_gpus: int | None = setting(
        None, "GPUs to use (0: the CPU; more than one: MirroredStrategy over them). Default: "
        "every GPU TensorFlow sees (none: the CPU), said in the log. More than TensorFlow sees "
        "is refused, never silently run on the CPU.")
    tpu: str | None = setting(None, "TPU name or address for --distribution_strategy=tpu.")
    tpu_zone: str | None = setting(
        None, "The TPU's GCE zone (TPUClusterResolver; default: the VM's own).")
    gcp_project: str | None = setting(
        None, "The TPU's cloud project (TPUClusterResolver; default: the VM's own).")
    num_cpu_devices: int = setting(
        0, "Split the CPU into this many logical devices (to try "
        "--distribution_strategy=mirrored without GPUs).")
    dtype: str = setting(
        "float32", "Compute dtype: bfloat16/float16 are mixed precision (variables stay "
        "float32; float16 adds loss scaling in training).", choices=tuple(DTYPE_POLICIES))
    jit_compile: bool = setting(False, "Compile the training step with XLA.")


@dataclasses.dataclass
class ExportSettings:
    """The TF Serving export of a run."""

    export_dir: str | None = setting(
        None, "Write a SavedModel for TF Serving to export_dir/<version>/ (after training; "
        "without --do_train, of the checkpoint in --output_dir).")
    export_version: int | None = setting(
        None, "The version directory's number (default: seconds since the epoch). An existing "
        "version is never overwritten.")
    serving_dtype: str = setting(
        "float32", "The --export_dir model's precision: bfloat16 stores its weights and runs "
        "its matmuls in bfloat16 (CPUs with AVX512-BF16 or AMX: 1.7x faster at batch 1 than a "
        "mixed_bfloat16 export, benchmarks/README.md).", choices=SERVING_DTYPES)
    quantize: bool = setting(
        False, "With --export_dir: the version folder also holds model.tflite, the ids "
        "signature with int8 weights at the fixed length --max_seq_length, where TF Serving's "
        "--prefer_tflite_model looks for it; checked against the float model on the "
        "evaluation data (docs/make_it_small.md).")


@dataclasses.dataclass
class DistillationSettings:
    """Distillation (Hinton et al. 2015; DistilBERT, TinyBERT, MiniLM): the student
    (the model this run trains) learns a teacher's outputs beside the labels:
    loss = alpha * (the labels' loss) + (1 - alpha) * T^2 * KL(teacher || student
    at temperature T) (mean squared error to the teacher's score for
    regression). The fine-tuning commands (task distillation) and `bert
    distill` (general distillation, on a corpus) have these flags."""

    teacher: str | None = setting(
        None, "The checkpoint this run's model learns from, of the same vocabulary, any size. "
        "Fine-tuning (task distillation): a fine-tuned run directory of this task (or its "
        "ckpt-N) with the same labels; its outputs on the training data are computed once per "
        "session. bert distill (general distillation): any BERT checkpoint.")
    distill_alpha: float = setting(
        0.5, "With --teacher: the labels' share of the loss (0: the teacher's outputs alone).")
    distill_temperature: float = setting(
        2.0, "With --teacher: the softmax temperature both distributions are compared at.")
    distill_text: str | None = setting(
        None, "With --teacher, fine-tuning a classifier or a tagger: a file of more text without "
        "labels, in the training file's format (its text columns; CoNLL words, tags ignored), "
        "that the teacher labels: on its rows the student learns the teacher's outputs alone. "
        "An epoch reads the training file and this one (TinyBERT's augmented data).")

    def validate_distillation(self) -> None:
        if not 0 <= self.distill_alpha <= 1:
            raise UserError(f"--distill_alpha must be in [0, 1], got {self.distill_alpha}")
        if not 0 < self.distill_temperature < float("inf"):
            raise UserError(f"--distill_temperature must be positive, got "
                            f"{self.distill_temperature}")
