"""Fine-tunes BERT on SQuAD v1.1 / v2.0 and predicts answers (google-research/bert's run_squad.py).

Flags and defaults are google's; any checkpoint kind loads (Hugging Face
directory, Google TF1 checkpoint, official_bert run), with a SQuAD head in it
(`cls/squad/*`, HF `qa_outputs`) restored too. What it writes:
`official_bert/tasks/squad.py` (predictions.json, nbest_predictions.json,
null_odds.json for v2.0, eval_results.json when the predict file has answers).

Example (v1.1, from `bert download squad_v1.1 --output_dir=$DATA`; `$MINILM` is the
bundled all-MiniLM-L6-v2, as the README sets it):
  python run_squad.py --do_train --do_predict --init_checkpoint=$MINILM \\
    --train_file=$DATA/squad_v1.1/train-v1.1.json \\
    --predict_file=$DATA/squad_v1.1/dev-v1.1.json \\
    --train_batch_size=16 --learning_rate=5e-5 --num_train_epochs=1 \\
    --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad
"""

from __future__ import annotations

import json

from absl import flags

from official_bert.commands import app, cli_flags, registry
from official_bert.configs import GoogleTpuFlags, SquadConfig, SquadRunConfig

# tasks.squad loads TensorFlow: `main` imports it once the flags are parsed, so
# that defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS

CONFIGS = (SquadConfig, SquadRunConfig, GoogleTpuFlags)  # its flags' definitions


def define_flags():
    cli_flags.define_flags(SquadConfig)
    cli_flags.define_run_flags(SquadRunConfig, modes=("train", "predict"))


# The main every task command ends with (deliberately the same): flags → config → the
# library; this one then prints the official scores the library returns.
def main(argv):
    app.refuse_arguments(argv)
    from official_bert.tasks import runner, squad

    config = cli_flags.from_flags(SquadConfig, FLAGS)
    scores = runner.run_task(squad.SpanLabelingTask, config,
                             cli_flags.run_config(FLAGS, SquadRunConfig))
    if scores:  # the official metric of --predict_file, when it has answers
        print(json.dumps(scores), flush=True)


if __name__ == "__main__":
    registry.run_command("squad")
