"""The settings of the model and task commands: one dataclass field each.

Every setting is defined once, here or in the parts of a run's settings
(`official_bert.run_settings`, re-exported here), with `official_bert.settings.setting`:
its name (google-research/bert's flag name where it has the concept), type,
default and help. The library takes these dataclasses; the commands generate
their flags from them (`official_bert.commands.cli_flags`), so a flag and its field
cannot disagree (`tests/test_settings.py`).

    RunConfig              what every task run shares, in five parts (`run_settings`):
      ModelFilesConfig       where the model comes from (--init_checkpoint, ...)
      TrainingSettings       modes, batch sizes, schedule, checkpoints, evaluation
      DistributionSettings   strategy, devices, --dtype, XLA
      ExportSettings         the TF Serving export
      DistillationSettings   a teacher's outputs beside the labels
    SquadRunConfig, SwagRunConfig, PretrainRunConfig: RunConfig with the
      command's own defaults (run_squad.py's --max_seq_length=384, ...)
    ClassificationConfig, SquadConfig, NerConfig, MultipleChoiceConfig,
      PretrainingConfig: each task's own settings
    FeatureExtractionConfig, EmbedConfig, ExportEncoderConfig,
      ExportGoogleConfig, ExtendVocabConfig: the commands that load a model without a run
    GoogleTpuFlags, UnusedTpuFlags: google-research/bert's TPU flags, accepted

This module imports nothing of TensorFlow's: defining the flags, and `--help`,
stay fast. Checks that need the file system (`model_files.check_model_source`)
live with the run flow.
"""

from __future__ import annotations

import dataclasses

from official_bert.errors import UserError
from official_bert.run_settings import (  # noqa: F401 - the parts of RunConfig, re-exported
    DTYPE_POLICIES, MAX_TRAIN_MINUTES, OPTIMIZERS, SERVING_DTYPES, STRATEGIES,
    DistillationSettings, DistributionSettings, ExportSettings, ModelFilesConfig,
    TrainingSettings, check_serving_dtype, check_train_minutes, dtype_policy, padding_bucket)
from official_bert.settings import FLAG, setting, setting_of, with_defaults

# The other closed sets of values, each a setting's choices here and checked or
# used where the library needs it (tests/test_defaults.py finds a restated one).
WINDOW_POOLINGS = ("mean", "max")  # how modeling.heads pools a document's windows
SENTENCE_POOLINGS = ("mean", "cls")  # modeling.pooling
TOKEN_POOLINGS = ("none", "cls", "mean")  # extract-features' vectors
LONG_DOCUMENTS = ("truncate", "windows")
NER_TASK_MODELS = ("bilstm", "dense")  # modeling.heads.FeatureTagger
LAYER_COMBINATIONS = ("concat", "sum", "last")
EXACT_GELU_CHOICES = ("refuse", "tanh", "gelu_exact")  # checkpoints.write


# === What every run shares: RunConfig, made of the parts in `run_settings` ===


@dataclasses.dataclass
class RunConfig(ExportSettings, DistillationSettings, DistributionSettings, TrainingSettings,
                ModelFilesConfig):
    """The settings every task shares (from `cli_flags.run_config`, or built
    in Python): the model files, training, distribution, export (the parts'
    fields, in that order). `validate` names the flag of a bad value."""

    # The flags given on the command line (every other field is its default): a run
    # that does not train takes its run's trained --max_seq_length unless it is given
    # (`tasks.runner`). Not a setting: no flag of its own, and not compared.
    given: frozenset = dataclasses.field(default=frozenset(), compare=False, repr=False,
                                         metadata={FLAG: False})

    def validate(self) -> None:
        """`UserError` naming the first bad flag. (Whether there is a model to
        start from needs the run directory: `model_files.check_model_source`.)"""
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
        if self.quantize and not self.export_dir:
            raise UserError("--quantize needs --export_dir (it adds the int8 model.tflite to the "
                            "TF Serving export's version folder)")
        for name in ("max_train_examples", "num_train_steps", "export_version",
                     "early_stopping_patience"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UserError(f"--{name} must be positive, got {value}")
        if self.max_train_minutes is not None:
            check_train_minutes(self.max_train_minutes)
            if not self.do_train:
                raise UserError("--max_train_minutes is a training budget: add --do_train, or "
                                "leave it out to evaluate, predict or export")
        if (self.do_train and self.num_train_steps is None
                and not 0 < self.num_train_epochs < float("inf")):  # (inf was a traceback)
            raise UserError(f"--num_train_epochs must be a positive number, got "
                            f"{self.num_train_epochs}")
        if not 0 <= self.warmup_proportion <= 1:
            raise UserError(f"--warmup_proportion must be in [0, 1], got "
                            f"{self.warmup_proportion}")
        if self.learning_rate <= 0:
            raise UserError(f"--learning_rate must be positive, got {self.learning_rate}")
        dtype_policy(self.dtype)
        self.validate_distillation()
        if (self.num_gpus or 0) < 0 or self.num_cpu_devices < 0:
            raise UserError("--num_gpus and --num_cpu_devices cannot be negative")

    @property
    def dtype_policy(self) -> str | None:
        """The Keras mixed-precision policy of --dtype (None for float32)."""
        return dtype_policy(self.dtype)

    def padding_multiple(self) -> int | None:
        """The length multiple batches are cut to (`input_pipeline.numpy_dataset`),
        None when --dynamic_padding is off or on TPU (static shapes)."""
        if not self.dynamic_padding or self.distribution_strategy == "tpu":
            return None
        return padding_bucket(self.max_seq_length)


# The commands whose defaults are not RunConfig's (google's run_squad.py packs 384
# tokens; SWAG's four sequences per example halve the batch; pre-training counts steps).
# Each task's library default is its command's (`SpanLabelingTask()` packs 384 too).
SquadRunConfig = with_defaults(RunConfig, "SquadRunConfig", max_seq_length=384)
SwagRunConfig = with_defaults(RunConfig, "SwagRunConfig", train_batch_size=16)
PretrainRunConfig = with_defaults(RunConfig, "PretrainRunConfig", num_train_steps=100000,
                                  num_warmup_steps=10000, log_steps=100, seed=12345)


@dataclasses.dataclass
class GoogleTpuFlags:
    """google-research/bert's TPU flags, so its commands run unchanged:
    `cli_flags.run_config` turns them into RunConfig's --distribution_strategy
    and --tpu (and logs each one that has no effect)."""

    use_tpu: bool = setting(
        False, "google-research/bert's flag: --use_tpu is --distribution_strategy=tpu.")
    tpu_name: str | None = setting(None, "google-research/bert's name for --tpu.")
    master: str | None = setting(
        None, "google-research/bert's TensorFlow master URL: the TPU address when --tpu is not "
        "given.")
    num_tpu_cores: int = setting(
        8, "google-research/bert's flag, accepted and unused: the TPU strategy uses every core "
        "of the TPU it connects to.")


# === Each task's own settings ===


@dataclasses.dataclass
class ClassificationConfig:
    """What the classification task reads (run_classifier.py's own flags).

    --long_document=windows reads the whole text in windows of max_seq_length
    - 2 tokens every `doc_stride` (at most a window, as in run_squad.py), each
    classified, the logits pooled (`heads.pool_window_logits`) into the
    document's, in training (the loss is on the pooled logits, all of a
    document's windows in its batch), evaluation, prediction and the export.
    """

    task_name: str | None = setting(
        None, "cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli, xnli (Chinese, as "
        "google's; xnli-<lang> for another XNLI language), or custom.")
    data_dir: str | None = setting(
        None, "Directory of the task's train/dev/test files (GLUE layout).")
    train_file: str | None = setting(
        None, "Training file (default: the task's file in --data_dir).")
    eval_file: str | None = setting(None, "Dev file (default: the task's file in --data_dir).")
    predict_file: str | None = setting(
        None, "Test file (default: the task's file in --data_dir).")
    text_a_column: str | None = setting(None, "custom: header name (or JSON key) of the text.")
    text_b_column: str | None = setting(None, "custom: the second text of a pair task.")
    label_column: str = setting("label", "custom: the label (or score) column.")
    labels: list | None = setting(
        None, "custom: every label, in class order (default: sorted from the training data).")
    regression: bool = setting(False, "custom: the label is a float score (one output, MSE).")
    max_eval_examples: int | None = setting(None, "Evaluate on the first N dev examples only.")
    max_predict_examples: int | None = setting(None, "Predict the first N test examples only.")
    cache_features: bool = setting(
        True, "Keep converted features as TFRecords in output_dir/features and re-use them "
        "while the data, vocabulary and settings are unchanged.")
    long_document: str = setting(
        "truncate", "truncate: read the first --max_seq_length tokens (BERT's way). windows: "
        "read the whole text in windows of --max_seq_length - 2 tokens every --doc_stride, "
        "classify each and pool their logits (--window_pooling) in training, evaluation, "
        "prediction and the export. Single-text tasks.", choices=LONG_DOCUMENTS)
    doc_stride: int = setting(
        128, "--long_document=windows: tokens between the starts of a document's windows "
        "(run_squad.py's flag; one longer than a window is a window).")
    window_pooling: str = setting(
        "mean", "--long_document=windows: a document's logits are the mean, or per class the "
        "max, of its windows' logits.", choices=WINDOW_POOLINGS)
    max_windows: int = setting(
        16, "--long_document=windows: windows per document at most (a longer document's tail "
        "is not read; a warning counts them). All of a document's windows are in its training "
        "batch.")

    @property
    def windows(self) -> dict | None:
        """The window settings with --long_document=windows, else None."""
        if self.long_document != "windows":
            return None
        return {"doc_stride": self.doc_stride, "window_pooling": self.window_pooling,
                "max_windows": self.max_windows}


@dataclasses.dataclass
class SquadConfig:
    """run_squad.py's own flags (google's names and defaults)."""

    train_file: str | None = setting(None, "SQuAD json for training, e.g. train-v1.1.json.")
    predict_file: str | None = setting(
        None, "SQuAD json for predictions, e.g. dev-v1.1.json.")
    doc_stride: int = setting(128, "Stride between context windows, in tokens.")
    max_query_length: int = setting(64, "Question tokens kept.")
    n_best_size: int = setting(20, "Candidates per question in nbest_predictions.json.")
    max_answer_length: int = setting(30, "Longest answer, in WordPiece tokens.")
    verbose_logging: bool = setting(False, "Log get_final_text alignment failures.")
    version_2_with_negative: bool = setting(False, "SQuAD 2.0: questions may have no answer.")
    null_score_diff_threshold: float = setting(
        0.0, "v2.0: predict no answer when null score - best non-null score > this.")
    tune_threshold: bool = setting(
        False, "v2.0: apply the best_f1_thresh found on --predict_file (needs answers).")
    max_predict_examples: int | None = setting(None, "Predict only the first N questions.")


@dataclasses.dataclass
class NerConfig:
    """run_ner.py's own flags."""

    train_file: str | None = setting(None, "CoNLL file to train on.")
    eval_file: str | None = setting(None, "CoNLL file with gold tags to evaluate on.")
    predict_file: str | None = setting(
        None, "CoNLL file to tag (gold column optional): writes test_predictions.conll; when "
        "the file has gold tags they are scored too (test_results.txt, and the log).")
    window_stride: int | None = setting(
        None, "Sub-tokens between the starts of a long sentence's windows (default: half a "
        "window).")
    tag_scheme: str = setting(
        "auto", "The files' tag scheme (auto: I- opening an entity means IOB1).",
        choices=("auto", "bio", "iob1"))
    labels: list | None = setting(
        None, "The tag list (default: from the training file, or the run's label_list.txt).",
        flag=False)
    feature_based: bool = setting(
        False, "Freeze the encoder; train a task model on its features.")
    layers: str = setting("-1,-2,-3,-4", "Encoder layers for --feature_based (-1 = last).")
    combine: str = setting("concat", "How the --layers are combined (last: the deepest of them "
                           "alone).", choices=LAYER_COMBINATIONS)
    task_model: str = setting("bilstm", "Task model for --feature_based.",
                              choices=NER_TASK_MODELS)
    lstm_units: int = setting(768, "Units per direction (or dense width) of the task model.")
    task_model_layers: int = setting(2, "Layers of the task model.")
    task_dropout: float = setting(0.1, "Dropout in the feature-based task model.")
    feature_batch_size: int = setting(32, "Windows per encoder pass when caching features.")


@dataclasses.dataclass
class MultipleChoiceConfig:
    """run_swag.py's own flags: the SWAG CSV files."""

    train_file: str | None = setting(None, "SWAG CSV to train on.")
    eval_file: str | None = setting(None, "SWAG CSV (with labels) to evaluate on.")
    predict_file: str | None = setting(None, "SWAG CSV to predict (label column optional).")


@dataclasses.dataclass
class PretrainingConfig:
    """run_pretraining.py's own flags. With --input_format=text (conll, table: a
    fine-tuning file's text, `data_prep.task_text`), instances are made on the
    fly by the generator's code (`input_pipeline.text_records`);
    with --length_bucket_width, batches of one length bucket are cut to it
    (`input_pipeline.pretraining_dataset`)."""

    input_file: str | None = setting(
        None, "Input files (TFRecords, or the text of --input_format): comma-separated globs.")
    eval_input_file: str | None = setting(
        None, "Held-out data for --do_eval, in --input_format (default: --input_file, whose "
        "figures overstate what the model learned).")
    max_predictions_per_seq: int = setting(
        20, "Masked-LM predictions per instance; must be what the files were made with (with "
        "--dynamic_masking, the most positions masked).")
    max_eval_steps: int = setting(100, "Most evaluation batches.")
    dynamic_masking: bool = setting(
        False, "Mask at read time, fresh every epoch (also re-masks static files). Unmasked "
        "files are always masked at read time.")
    masked_lm_prob: float = setting(0.15, "Fraction of tokens masked by dynamic masking.")
    length_bucket_width: int = setting(
        0, "Length bucketing of training batches: each batch holds instances whose length "
        "rounded up to a multiple of this is the same, and is cut to it (less padding, "
        "max_seq_length / width shapes to compile; e.g. 16 or 32). 0: every batch is padded to "
        "--max_seq_length (--dynamic_padding does not apply to pre-training). Not on TPU.")
    input_format: str = setting(
        "tfrecord", "tfrecord: create_pretraining_data's files. text: --input_file is the "
        "sentence-per-line corpus itself (a blank line between documents); instances are made "
        "on the fly with the generator's code (needs a vocabulary). conll, table: a fine-tuning "
        "set's own text for task-adaptive pre-training, read as it is: run_ner.py's CoNLL files, "
        "or run_classifier.py's .tsv/.csv/.jsonl with --text_column; each sentence or row is a "
        "document, packed as full sentences, masked LM only.",
        choices=("tfrecord", "text", "conll", "table"))
    text_column: str | None = setting(
        None, "--input_format=table: the header name (or JSON key) of the text column, or two "
        "comma-separated for a pair task's texts (e.g. sentence for SST-2, "
        "'#1 String,#2 String' for MRPC).")
    do_whole_word_mask: bool = setting(
        False, "Mask whole words: with --input_format=text, or dynamic masking of files made "
        "with --do_whole_word_mask.")
    max_ngram_size: int = setting(
        1, "Mask spans of up to this many contiguous words (--do_whole_word_mask) or word "
        "pieces, length n drawn with probability proportional to 1/n (official/nlp's flag): "
        "with --input_format=text or --dynamic_masking.")
    short_seq_prob: float = setting(
        0.1, "--input_format=text: probability of a shorter target length (as "
        "create_pretraining_data's flag).")


# === The commands that load a model without a run ===


@dataclasses.dataclass
class FeatureExtractionConfig(ModelFilesConfig):
    """extract_features.py's flags (google's names); the vectors are written
    as float32 whatever --dtype computes in."""

    input_file: str | None = setting(
        None, "Text file, one example a line ('a ||| b' for pairs).")
    output_file: str | None = setting(None, "JSON-lines file to write.")
    layers: str = setting("-1,-2,-3,-4",
                          "Comma-separated layer indexes (-1 = last Transformer block).")
    batch_size: int = setting(32, "Examples per forward pass.")
    pooling: str = setting(
        "none", "none: a vector per token; cls: the [CLS] vector; mean: the mean over tokens.",
        choices=TOKEN_POOLINGS)
    dtype: str = setting_of(DistributionSettings, "dtype")


@dataclasses.dataclass
class UnusedTpuFlags:
    """google-research/bert's TPU flags of extract_features.py: accepted so its
    commands run unchanged, and unused (the encoder runs on this machine's
    device; embeddings are looked up either way). The command logs each one
    given, once."""

    use_tpu: bool = setting(False, "google-research/bert's flag; unused here.")
    master: str | None = setting(None, "google-research/bert's flag; unused here.")
    num_tpu_cores: int = setting(8, "google-research/bert's flag; unused here.")
    use_one_hot_embeddings: bool = setting(False, "google-research/bert's flag; unused here.")


@dataclasses.dataclass
class EmbedConfig(ModelFilesConfig):
    """`bert embed`'s flags. Texts are cut at max_seq_length WordPieces ([CLS]
    and [SEP] included); the vectors are float32 whatever --dtype computes in;
    --serving_dtype=bfloat16 stores the SavedModel's weights in bfloat16
    (`serving.base.with_weights_in`)."""

    input_file: str | None = setting(None, "Text file, one text a line (the whole line).")
    output_file: str | None = setting(
        None, "Where the vectors go: a new .npy (float32 [lines, hidden]) or .jsonl file; "
        "never overwritten.")
    export_dir: str | None = setting(
        None, "Also write a SavedModel for TF Serving to export_dir/<version>/: raw text in "
        "(serving_default), the embedding out.")
    export_version: int | None = setting_of(ExportSettings, "export_version")
    max_batch_size: int = setting(256, "The --export_dir model refuses requests with more texts.")
    serving_dtype: str = setting_of(ExportSettings, "serving_dtype")
    max_seq_length: int = setting_of(ModelFilesConfig, "max_seq_length", 256)
    batch_size: int = setting(64, "Texts per forward pass.")
    pooling: str = setting(
        "mean", "mean: the average of the last layer over the tokens (sentence-transformers'); "
        "cls: the [CLS] token's vector.", choices=SENTENCE_POOLINGS)
    normalize: bool = setting(True, "L2-normalize each vector (dot product = cosine).")
    dtype: str = setting_of(DistributionSettings, "dtype")


@dataclasses.dataclass
class ExportEncoderConfig(ModelFilesConfig):
    """`bert export-encoder`'s flags. max_seq_length is the preprocessor's
    default packed length (and the TF Serving export's, and the TFLite files'
    fixed length); --serving_dtype=bfloat16 stores the --export_dir model's
    weights in bfloat16 (`serving.base.with_weights_in`)."""

    output_dir: str | None = setting(
        None, "Where to write preprocessor/ and encoder/ (TF Hub's pair) and the edge files; "
        "neither SavedModel may exist there yet.")
    export_dir: str | None = setting(
        None, "Also write the encoder for TF Serving to export_dir/<version>/ (raw-text "
        "serving_default and serve_ids).")
    export_version: int | None = setting_of(ExportSettings, "export_version")
    max_batch_size: int = setting(
        256, "The --export_dir model refuses requests with more examples.")
    edge_formats: list = setting(
        [], "Also convert the ids signature: tflite, onnx (needs pip install -e '.[edge]'). "
        "TFLite takes a fixed length of --max_seq_length.")
    quantize: bool = setting(
        False, "With --edge_formats: also write encoder_dynamic_range.tflite (int8 weights) and "
        "encoder_int8.onnx (ONNX Runtime dynamic quantization).")
    serving_dtype: str = setting_of(ExportSettings, "serving_dtype")


@dataclasses.dataclass
class ExportGoogleConfig(ModelFilesConfig):
    """`bert export-google`'s flags (module docstring of
    `official_bert.commands.export_google`)."""

    max_seq_length: int | None = setting(
        None, "None: the weights are written whole, nothing is packed.", flag=False)
    output_dir: str | None = setting(
        None, "The new directory for bert_model.ckpt.*, bert_config.json and vocab.txt (must "
        "not exist, or be empty).")
    exact_gelu_as: str = setting(
        "refuse", "A model with the exact (erf) GELU, which google's modeling.py lacks: refuse; "
        "tanh (write google's \"gelu\", the tanh approximation, and print how much outputs "
        "move); gelu_exact (exact when this project reads it, refused by google's code).",
        choices=EXACT_GELU_CHOICES)


@dataclasses.dataclass
class ExtendVocabConfig(ModelFilesConfig):
    """`bert extend-vocab`'s flags (module docstring of
    `official_bert.commands.extend_vocab`): the model (its --init_checkpoint,
    vocabulary and casing, found as every command finds them), the domain corpus,
    the new checkpoint directory, and how many words to add."""

    max_seq_length: int | None = setting(None, "None: nothing is packed.", flag=False)
    input_file: list[str] | None = setting(
        None, "Comma-separated text files or globs of the domain's text (the pre-training text "
        "format, or any text): its words are counted.")
    output_dir: str | None = setting(
        None, "The new checkpoint directory (Hugging Face layout: model.safetensors, "
        "config.json, vocab.txt, tokenizer_config.json, vocab_extension.tsv); must not exist, "
        "or be empty.")
    num_new_tokens: int = setting(
        1000, "Add at most this many words: the most frequent ones the vocabulary splits into "
        "2 or more word pieces, first into its [unusedN] slots, then appended.")
    min_count: int = setting(
        10, "Add only words seen at least this many times in --input_file.")

    def validate(self) -> None:
        """`UserError` naming the first missing or bad flag."""
        for name in ("init_checkpoint", "input_file", "output_dir"):
            if not getattr(self, name):
                raise UserError(f"--{name} is required")
        for name in ("num_new_tokens", "min_count"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name}={getattr(self, name)} must be at least 1")


@dataclasses.dataclass
class OutputConfig:
    """What a command that writes a file or directory may replace: the commands
    whose registry entry declares such an output (`commands.registry`) take it."""
    overwrite: bool = setting(
        False, "replace an output file or directory that this project did not write")


@dataclasses.dataclass
class CompareConfig:
    """`bert compare`'s flags (`official_bert.serving.compare`): the models, the
    labelled file, and how they are timed."""

    models: list = setting(
        [], "Comma-separated exports to compare, the first the reference: an --export_dir (its "
        "highest version), a version folder, or a .tflite file in one (--quantize's "
        "model.tflite).")
    names: list = setting(
        [], "Comma-separated names of --models in the table and the picture (default: their "
        "paths less the folders they share).")
    data_file: str | None = setting(
        None, "A labelled file of the models' task, as their command reads it: a GLUE-layout "
        "dev file (with --task_name), a CoNLL file, a SWAG csv.")
    task_name: str | None = setting(
        None, "The GLUE task of a classifier's --data_file (its columns): sst-2, mrpc, ...")
    threads: int = setting(2, "Threads of TensorFlow's operations and of the TFLite interpreter.")
    seq_length: int | None = setting(
        None, "The length of the B1 and B32 requests (default: the TFLite files' fixed length "
        "when one is compared, else 128).")
    rounds: int = setting(5, "Timing rounds; every model runs in each, in a rotated order.")
    b1_calls: int = setting(10, "Timed batch-1 calls per model per round (p50 and p95).")
    file_rows: int = setting(
        256, "Rows of --data_file timed at their own lengths, per model per round.")
    json_output: str | None = setting(None, "Also write the table's figures as JSON here.")
    plot_output: str | None = setting(
        None, "Also draw quality against batch-1 latency as a PNG here (needs matplotlib: "
        "pip install -e '.[compare]').")

    def validate(self) -> None:
        """`UserError` naming the first missing or bad flag."""
        if not self.models:
            raise UserError("--models is required: the exports to compare, comma-separated")
        if not self.data_file:
            raise UserError("--data_file is required: a labelled file of the models' task")
        for name in ("threads", "rounds", "b1_calls", "file_rows"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name} must be at least 1, got {getattr(self, name)}")
        if self.seq_length is not None and self.seq_length < 2:
            raise UserError(f"--seq_length must be at least 2, got {self.seq_length}")
