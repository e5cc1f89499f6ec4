"""Multiple choice with BERT (SWAG): one score per choice, softmax over the choices.

Reads SWAG's CSV (`sent1`, `sent2`, `ending0..3`, `label`; `data_prep/swag.py`)
and packs each choice `[CLS] sent1 [SEP] sent2 ending [SEP]`, as the BERT paper
does. What it writes: `official_bert/tasks/multiple_choice.py`; `--export_dir`
writes a raw-text SavedModel (context, start, endings → probabilities).

Example (SWAG, from `bert download swag --output_dir=$DATA`; `$MINILM` as the
README sets it):
  python run_swag.py --do_train --do_eval \\
    --train_file=$DATA/swag/train.csv --eval_file=$DATA/swag/val.csv \\
    --init_checkpoint=$MINILM --max_train_examples=2000 --max_seq_length=128 \\
    --train_batch_size=16 --learning_rate=5e-5 --num_train_epochs=1 --output_dir=/tmp/swag
"""

from __future__ import annotations

from absl import flags

from official_bert.commands import app, cli_flags, registry
from official_bert.configs import GoogleTpuFlags, MultipleChoiceConfig, SwagRunConfig

# tasks.multiple_choice loads TensorFlow: `main` imports it once the flags are parsed, so
# that defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS

CONFIGS = (MultipleChoiceConfig, SwagRunConfig, GoogleTpuFlags)  # its flags' definitions


def define_flags():
    cli_flags.define_flags(MultipleChoiceConfig)
    cli_flags.define_run_flags(SwagRunConfig)


# The main every task command ends with (deliberately the same): flags → config → the
# library.
def main(argv):
    app.refuse_arguments(argv)
    from official_bert.tasks import multiple_choice, runner

    config = cli_flags.from_flags(MultipleChoiceConfig, FLAGS)
    run_config = cli_flags.run_config(FLAGS, SwagRunConfig)
    runner.run_task(multiple_choice.MultipleChoiceTask, config, run_config)


if __name__ == "__main__":
    registry.run_command("swag")
