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

Example (`$MINILM` is the bundled all-MiniLM-L6-v2, as the README sets it):
  bert export-google --init_checkpoint=$MINILM --exact_gelu_as=tanh \\
      --output_dir=/tmp/google_bert
  python run_classifier.py --init_checkpoint=/tmp/google_bert/bert_model.ckpt \\
      --bert_config_file=/tmp/google_bert/bert_config.json \\
      --vocab_file=/tmp/google_bert/vocab.txt ...
"""

from __future__ import annotations

from absl import flags

from official_bert.commands import app, cli_flags, registry
from official_bert.configs import ExportGoogleConfig

# The export (`official_bert.google_export`) loads TensorFlow: it is imported
# inside `main`, so defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS


CONFIGS = (ExportGoogleConfig,)  # its flags' definitions


def define_flags():
    cli_flags.define_command_flags(ExportGoogleConfig, cli_flags.MODEL_FILES)


def main(argv):
    app.refuse_arguments(argv)
    from official_bert import google_export

    exported = google_export.export(cli_flags.from_flags(ExportGoogleConfig, FLAGS))
    print(f"checkpoint\t{exported.prefix}", flush=True)
    if exported.do_lower_case is not None:
        print(f"do_lower_case\t{exported.do_lower_case}  (google's scripts take it as a flag; "
              "their checkpoint's directory name says uncased or cased)", flush=True)


if __name__ == "__main__":
    registry.run_command("export-google")
