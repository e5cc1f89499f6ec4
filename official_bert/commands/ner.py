"""Named-entity recognition (token classification) with BERT: fine-tuning or feature-based.

Reads CoNLL files (CoNLL-2003's 4 columns with `-DOCSTART-`, WNUT-17's 2
columns; IOB1 or BIO; `data_prep/conll.py`). Each word's first WordPiece
carries its label; long sentences are split into overlapping windows. Fine-tuning
(default) trains a dense layer on each final token vector and the whole
network; `--feature_based` (the BERT paper's §5.3) freezes the encoder and
trains a BiLSTM (or dense) tagger on its `--layers`. What it writes:
`official_bert/tasks/ner.py`.

Example (WNUT-17, from `bert download wnut17 --output_dir=$DATA`; `$MINILM` as the
README sets it):
  python run_ner.py --do_train --do_eval \\
    --train_file=$DATA/wnut17/wnut17train.conll \\
    --eval_file=$DATA/wnut17/emerging.dev.conll \\
    --init_checkpoint=$MINILM --max_seq_length=128 --train_batch_size=32 \\
    --learning_rate=5e-5 --num_train_epochs=3 --output_dir=/tmp/wnut17
"""

# Its flags and main are made from its task family's row (`tasks.families`) by
# `commands.registry`: this module is its `--help` and `python -m` name.

from official_bert.commands import registry

if __name__ == "__main__":
    registry.run_command("ner")
