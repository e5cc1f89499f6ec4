"""Sentence embeddings: a text file to float32 vectors, and a SavedModel that embeds.

One text a line in `--input_file`; `--output_file` gets one vector a line, as
`.npy` (float32 [lines, hidden]) or `.jsonl`. `--pooling=mean` (the default)
averages the last layer over the tokens, as sentence-transformers does;
`--pooling=cls` takes the [CLS] vector; vectors are L2-normalized unless
`--nonormalize`. The input is streamed in sorted, batched chunks (constant
memory), progress is logged, and the output appears complete or not at all
and never replaces a file. `--export_dir` writes the same model and pooling as
a TF Serving SavedModel whose `serving_default` takes raw text and returns
`embedding` (`official_bert/serving/embedding.py`). The library side is
`official_bert/tasks/embeddings.py`.

Example (all-MiniLM-L6-v2 as sentence-transformers runs it: mean, normalized,
256 WordPieces; `$MINILM` is the bundled all-MiniLM-L6-v2, as the README sets it):
  bert embed --init_checkpoint=$MINILM --input_file=examples/sentences.txt \\
      --output_file=/tmp/vectors.npy --export_dir=/tmp/minilm_embedder
"""

from __future__ import annotations

from official_bert.commands import cli_flags, registry
from official_bert.configs import EmbedConfig

CONFIGS = (EmbedConfig,)  # its flags' definitions


def define_flags():
    cli_flags.define_command_flags(EmbedConfig, cli_flags.MODEL_FILES, cli_flags.PRECISION,
                                   cli_flags.EXPORT)


# Its main is `registry.job_main`: the job its row names, run on its config (the
# library call loads TensorFlow once the flags are parsed, so `--help` stays fast).

if __name__ == "__main__":
    registry.run_command("embed")
