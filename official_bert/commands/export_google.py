"""Write any checkpoint as google-research/bert's original TF1 files.

From any checkpoint the project reads (a Hugging Face directory, a Google TF1
checkpoint, a run or checkpoint of this project), writes a new directory
`--output_dir` holding exactly what google's scripts take:

  bert_model.ckpt.index, bert_model.ckpt.data-00000-of-00001
      float32 variables under google's names (`bert/embeddings/...`,
      `bert/encoder/layer_<i>/...`, `bert/pooler/...`), plus the heads the
      checkpoint has under the names google's scripts create: the masked LM
      and next sentence (`cls/predictions/...`, `cls/seq_relationship/...`,
      run_pretraining.py), the classifier (`output_weights`, `output_bias`,
      run_classifier.py), the span head (`cls/squad/...`, run_squad.py)
  bert_config.json   google's keys; "gelu" means google's tanh GELU
  vocab.txt          the checkpoint's vocabulary

A model with the exact (erf) GELU (most Hugging Face models, e.g.
all-MiniLM-L6-v2) has no name in google's modeling.py: it is refused unless
`--exact_gelu_as=tanh` (written "gelu"; the command prints how much the outputs
change) or `--exact_gelu_as=gelu_exact` (exact when this project reads it;
google's `get_activation` refuses it rather than run another network).

The directory is staged beside its final name and renamed when complete; an
existing non-empty directory is refused, never overwritten.

Example:
  bert export-google --init_checkpoint=runs/pretrain --output_dir=/tmp/google_bert
  python run_classifier.py --init_checkpoint=/tmp/google_bert/bert_model.ckpt \\
      --bert_config_file=/tmp/google_bert/bert_config.json \\
      --vocab_file=/tmp/google_bert/vocab.txt ...
"""

from __future__ import annotations

import dataclasses

from absl import flags, logging

from official_bert import app, cli_flags, io
from official_bert.errors import UserError
from official_bert.modeling.configs import ModelFilesConfig

# What loads TensorFlow (checkpoints, tasks/) is imported inside the
# functions that run the command: defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS


@dataclasses.dataclass
class ExportGoogleConfig(ModelFilesConfig):
    """The command's settings (its flags' names).

    Args:
        (the model files: `ModelFilesConfig`; no max_seq_length: the weights
        are written whole)
        output_dir: the new directory to write.
        exact_gelu_as: "refuse", "tanh" or "gelu_exact" (module docstring).
    """

    max_seq_length: int | None = None
    output_dir: str | None = None
    exact_gelu_as: str = "refuse"


def export(config: ExportGoogleConfig) -> str:
    """Writes the directory; returns the checkpoint prefix (`.../bert_model.ckpt`)."""
    from official_bert import checkpoints
    from official_bert.tasks import base

    if not config.init_checkpoint:
        raise UserError("--init_checkpoint is required: the weights to export")
    if not config.output_dir:
        raise UserError("--output_dir is required: the new directory to write")
    if config.exact_gelu_as not in checkpoints.EXACT_GELU_CHOICES:
        raise UserError(f"--exact_gelu_as={config.exact_gelu_as!r}: use "
                        f"{', '.join(checkpoints.EXACT_GELU_CHOICES)}")
    if io.exists(config.output_dir) and (not io.isdir(config.output_dir)
                                         or io.listdir(config.output_dir)):
        raise UserError(f"--output_dir={config.output_dir} exists and is not an empty "
                        "directory: the export never overwrites; choose a new directory")
    files = base.resolve_model_files(config)
    io.refuse_output_over_input(
        {"--output_dir": config.output_dir},
        {"init_checkpoint": config.init_checkpoint, "vocab_file": files.vocab_file,
         "bert_config_file": config.bert_config_file})

    encoder, checkpoint = checkpoints.load_encoder(config.init_checkpoint, config=files.config)
    heads = {name: value for name, value in checkpoint.weights.items()
             if name in checkpoints.GOOGLE_HEAD_NAMES}
    if encoder.config.hidden_act == "gelu" and config.exact_gelu_as == "tanh":
        difference = checkpoints.gelu_tanh_difference(encoder)
        message = (f"the model's exact GELU is written as google's \"gelu\" (the tanh "
                   f"approximation): under google's code its sequence_output moves by up to "
                   f"{difference:.2e} on a random 2 x 32 batch")
        logging.warning(message)
        print(f"warning: {message}", flush=True)
    try:
        prefix = checkpoints.export_google(encoder, config.output_dir, files.vocab_file, heads,
                                           config.exact_gelu_as)
    except checkpoints.ExactGeluError as e:
        raise UserError(f"{config.init_checkpoint}: {e.problem}; {e.fix}") from None
    except FileExistsError:
        raise UserError(f"--output_dir={config.output_dir} appeared while exporting: the "
                        "export never overwrites; choose a new directory") from None
    logging.info("Wrote %s (%s checkpoint; heads: %s)", prefix, checkpoint.kind,
                 ", ".join(sorted({n.rsplit("/", 1)[0] for n in heads})) or "none")
    print(f"checkpoint\t{prefix}", flush=True)
    if files.do_lower_case is not None:
        print(f"do_lower_case\t{files.do_lower_case}  (google's scripts take it as a flag; "
              "their checkpoint's directory name says uncased or cased)", flush=True)
    return prefix


def _define_flags():
    flags.DEFINE_string("output_dir", None,
                        "The new directory for bert_model.ckpt.*, bert_config.json and "
                        "vocab.txt (must not exist, or be empty).")
    flags.DEFINE_enum("exact_gelu_as", "refuse", ["refuse", "tanh", "gelu_exact"],
                      "A model with the exact (erf) GELU, which google's modeling.py lacks: "
                      "refuse; tanh (write google's \"gelu\", the tanh approximation, and "
                      "print how much outputs move); gelu_exact (exact when this project "
                      "reads it, refused by google's code).")
    cli_flags.define_model_flags(max_seq_length=None)  # the weights are written whole


def main(argv):
    app.refuse_arguments(argv)
    export(cli_flags.from_flags(ExportGoogleConfig, FLAGS))


def entry(argv=None):
    """Console entry point (`bert export-google`)."""
    _define_flags()
    app.run(main, argv)


if __name__ == "__main__":
    entry()
