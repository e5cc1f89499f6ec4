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

# Its flags and main are made from its task family's row (`tasks.families`) by
# `commands.registry`: this module is its `--help` and `python -m` name.

from official_bert.commands import registry

if __name__ == "__main__":
    registry.run_command("swag")
