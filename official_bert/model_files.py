"""One way to start any job: find the model files, check them, and refuse an
output that is one of the inputs.

Every command that loads a model (the task runs of `tasks.runner`,
extract_features, embed, export-encoder, export-google) starts here:

    files = prepare_job(config, inputs={"input_file": ...},
                        outputs={"--output_file": ...})

`resolve_model_files` turns the flags of `ModelFilesConfig` (--init_checkpoint,
--bert_config_file, --vocab_file, --do_lower_case, --max_seq_length) into a
`ModelFiles`, with the config, weights and vocabulary checked against each
other; `refuse_outputs_over_inputs` adds the model files to a job's inputs and
refuses any output that would replace one of them.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from absl import logging

from official_bert import checkpoints, io
from official_bert.checkpoints import layer_subset
from official_bert.errors import BadFileError, UserError
from official_bert.modeling.configs import BertConfig
from official_bert.run_directory import has_checkpoint
from official_bert.text import tokenization

if TYPE_CHECKING:  # the configs' module is above this one; only its type is named
    from official_bert.configs import ModelFilesConfig

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")


@dataclasses.dataclass
class ModelFiles:
    """The resolved model: config, weights, vocabulary and casing.

    Args:
        config: the `BertConfig`.
        checkpoint: a `checkpoints.BertCheckpoint`, or None for random weights.
        vocab_file: str. The WordPiece vocabulary.
        do_lower_case: bool.
        vocab: the vocabulary's tokens, in id order.
        student_layers: the layers of --init_checkpoint this model kept
            (--student_layers, as numbers); None when the model is not a
            student made now (a checkpoint whole, or a run's own student).
    """

    config: object
    checkpoint: object
    vocab_file: str
    do_lower_case: bool
    vocab: list
    student_layers: list | None = None

    def tokenizer(self):
        """A `FullTokenizer` over this vocabulary (built once)."""
        if not hasattr(self, "_tokenizer"):
            tokenizer = tokenization.FullTokenizer(self.vocab_file,
                                                   do_lower_case=self.do_lower_case)
            object.__setattr__(self, "_tokenizer", tokenizer)
        return self._tokenizer


def prepare_job(config: ModelFilesConfig, inputs, outputs: dict, **resolve_options) -> ModelFiles:
    """The start of a job: its `ModelFiles` (`resolve_model_files` with
    `resolve_options`), after refusing any of `outputs` (flag → path) that is
    one of `inputs` (flag → path, or (flag, path) pairs) or of the model files,
    or that cannot be written (`io.check_writable`)."""
    for flag, path in outputs.items():
        io.check_writable(path, flag)
    files = resolve_model_files(config, **resolve_options)
    refuse_outputs_over_inputs(config, files, inputs, outputs)
    return files


def refuse_outputs_over_inputs(config: ModelFilesConfig, files: ModelFiles, inputs,
                               outputs: dict, own_run_dir: str | None = None) -> None:
    """`UserError` when an output would replace an input: `inputs` (the job's
    own) and the model files. `own_run_dir`: a run directory that may be its
    own --init_checkpoint (to resume, evaluate or export it: not an input the
    run writes over)."""
    own_run = bool(own_run_dir and config.init_checkpoint) and io.same_path(
        config.init_checkpoint, own_run_dir)
    inputs = list(inputs.items() if isinstance(inputs, dict) else inputs) + [
        ("init_checkpoint", None if own_run else config.init_checkpoint),
        ("vocab_file", files.vocab_file), ("bert_config_file", config.bert_config_file),
        ("teacher", getattr(config, "teacher", None))]
    io.refuse_output_over_input(outputs, inputs)


def check_model_source(config) -> None:
    """`UserError` when a run (a `RunConfig`) has no model to start from: no
    --init_checkpoint, no --bert_config_file, and no checkpoint of its own in
    --output_dir. (Not in `RunConfig.validate`: looking at the run directory
    needs `io`, and the configs stay free of it.)"""
    if not config.init_checkpoint and not config.bert_config_file:
        if not has_checkpoint(config.output_dir):
            raise UserError("pass --init_checkpoint (or --bert_config_file and "
                            "--vocab_file to start from random weights)")


def resolve_model_files(model: ModelFilesConfig, required_tokens=SPECIAL_TOKENS,
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
    model = google_names_in_a_hugging_face_directory(model)
    init_checkpoint = model.init_checkpoint
    if not init_checkpoint and not model.bert_config_file and has_checkpoint(run_dir):
        init_checkpoint = run_dir
    config = (BertConfig.from_json_file(model.bert_config_file) if model.bert_config_file
              else None)
    ckpt = checkpoints.read_checkpoint(init_checkpoint, config) if init_checkpoint else None
    kept = None
    if model.student_layers is not None:  # (an empty list is --student_layers=, refused)
        ckpt, kept = _student(ckpt, model.student_layers, own_run=not model.init_checkpoint or (
            bool(run_dir) and io.same_path(model.init_checkpoint, run_dir)))
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
        return ModelFiles(config, ckpt, None, bool(do_lower_case), [], kept)
    vocab = _checked_vocab(vocab_file, config, required_tokens)
    tokenization.validate_case_matches_vocab(vocab, do_lower_case)
    return ModelFiles(config, ckpt, vocab_file, bool(do_lower_case), vocab, kept)


def _student(ckpt, layers, own_run: bool):
    """--student_layers: the layers of --init_checkpoint to keep
    (`checkpoints.layer_subset`). Returns (the checkpoint, the layers kept). A
    run's own checkpoint (resumed, evaluated or exported) is the student
    already, and is left as it is (kept: None; its record names its layers)."""
    layer_subset.refuse_empty(layers)  # (before a resume's own checkpoint ignores the flag)
    if ckpt is None:
        raise UserError(f"{layer_subset.FLAG} keeps layers of a checkpoint: give the teacher "
                        "as --init_checkpoint")
    if own_run:
        logging.info("%s: the model comes from the run's own checkpoint, which has its %d "
                     "layers already", layer_subset.FLAG, ckpt.config.num_hidden_layers)
        return ckpt, None
    kept = layer_subset.parse_layers(layers, ckpt.config.num_hidden_layers)
    logging.info("A student of %d layers from %s: its layers are the teacher's %s of %d",
                 len(kept), ckpt.path, ",".join(map(str, kept)), ckpt.config.num_hidden_layers)
    return layer_subset.keep_layers(ckpt, kept), kept


def google_names_in_a_hugging_face_directory(model: ModelFilesConfig) -> ModelFilesConfig:
    """google-research/bert's commands name `$BERT_BASE_DIR/bert_config.json` and
    `$BERT_BASE_DIR/bert_model.ckpt`. When those files are absent and the
    directory holds a Hugging Face checkpoint (config.json, model.safetensors),
    the same command uses them, and says so once. The exact GELU of a Hugging
    Face config is kept: this project runs the model (google's code would need
    `bert export-google --exact_gelu_as=tanh`)."""
    replaced = {}
    config_file, checkpoint = model.bert_config_file, model.init_checkpoint
    if (config_file and os.path.basename(config_file) == "bert_config.json"
            and not io.exists(config_file)):
        directory = os.path.dirname(config_file) or "."
        if io.exists(io.join(directory, "config.json")):
            replaced["bert_config_file"] = io.join(directory, "config.json")
    if (checkpoint and os.path.basename(checkpoint).startswith("bert_model.ckpt")
            and not io.exists(checkpoint) and not io.exists(checkpoint + ".index")):
        directory = os.path.dirname(checkpoint) or "."
        if io.exists(io.join(directory, "model.safetensors")):
            replaced["init_checkpoint"] = directory
    if not replaced:
        return model
    said = [f"--{name}={getattr(model, name)} with {path}" for name, path in replaced.items()]
    logging.info("%s holds a Hugging Face checkpoint, not google's files: reading %s (its exact "
                 "GELU kept)", os.path.dirname(config_file or checkpoint) or ".",
                 " and ".join(said))
    return dataclasses.replace(model, **replaced)


def _checked_vocab(vocab_file: str, config, required_tokens) -> list:
    """The vocabulary's tokens, checked against the model and the task's
    special tokens."""
    if not io.exists(vocab_file):
        raise BadFileError(vocab_file, io.missing(vocab_file), fix="check --vocab_file")
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
    return vocab
