"""Any checkpoint as google-research/bert's TF1 files: the job of `bert export-google`.

From any checkpoint the project reads, `export` writes a new directory of
`bert_model.ckpt.*` (the encoder and the heads it has, under google's names),
`bert_config.json` and `vocab.txt` (`checkpoints.export_google` is the
writer; the command's docstring says what google's scripts take from it).
It returns what it wrote (`Exported`: the command prints it), and warns once
(the log's `warning: ...` line) how much an exact GELU written as google's tanh
one moves the outputs.
"""

from __future__ import annotations

import dataclasses

from absl import logging

from official_bert import checkpoints, model_files
from official_bert.outputs import DIRECTORY, ensure_checked
from official_bert.errors import UserError


@dataclasses.dataclass(frozen=True)
class Exported:
    """What `export` wrote: the checkpoint prefix (`.../bert_model.ckpt`), and the
    casing google's scripts must be told (`--do_lower_case`; None when unknown)."""
    prefix: str
    do_lower_case: bool | None


def export(config) -> Exported:
    """Writes the directory of an `ExportGoogleConfig`; returns what it wrote."""
    _check_flags(config)
    files = model_files.prepare_job(config, inputs={},
                                    outputs={"--output_dir": config.output_dir})

    # (The checkpoint the job read: a run that trains is read once, at one step.)
    encoder, checkpoint = checkpoints.load_encoder(files.checkpoint or config.init_checkpoint,
                                                   config=files.config)
    heads = {name: value for name, value in checkpoint.weights.items()
             if name in checkpoints.GOOGLE_HEAD_NAMES}
    if encoder.config.hidden_act == "gelu" and config.exact_gelu_as == "tanh":
        difference = checkpoints.gelu_tanh_difference(encoder)
        message = (f"the model's exact GELU is written as google's \"gelu\" (the tanh "
                   f"approximation): under google's code its sequence_output moves by up to "
                   f"{difference:.2e} on a random 2 x 32 batch")
        logging.warning(message)
    try:
        prefix = checkpoints.export_google(encoder, config.output_dir, files.vocab_file, heads,
                                           config.exact_gelu_as)
    except checkpoints.ExactGeluError as e:
        raise UserError(f"{config.init_checkpoint}: {e.problem}; {e.fix}") from None
    except FileExistsError:
        raise UserError(f"--output_dir={config.output_dir} was written by another process "
                        "while this one exported: it is kept, and this export was not "
                        "published; choose another directory") from None
    logging.info("Wrote %s (%s checkpoint; heads: %s)", prefix, checkpoint.kind,
                 ", ".join(sorted({n.rsplit("/", 1)[0] for n in heads})) or "none")
    return Exported(prefix, files.do_lower_case)


def _check_flags(config) -> None:
    """`UserError` for a missing or bad flag, or an --output_dir it may not write."""
    if not config.init_checkpoint:
        raise UserError("--init_checkpoint is required: the weights to export")
    if not config.output_dir:
        raise UserError("--output_dir is required: the new directory to write")
    if config.exact_gelu_as not in checkpoints.EXACT_GELU_CHOICES:
        raise UserError(f"--exact_gelu_as={config.exact_gelu_as!r}: use "
                        f"{', '.join(checkpoints.EXACT_GELU_CHOICES)}")
    # The one output policy: new, empty, our own earlier export, or --overwrite.
    ensure_checked(config.output_dir, "--output_dir", DIRECTORY)
