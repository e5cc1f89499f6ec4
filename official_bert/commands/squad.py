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

# Its flags and main are made from its task family's row (`tasks.families`) by
# `commands.registry`: this module is its `--help` and `python -m` name.

from official_bert.commands import registry

if __name__ == "__main__":
    registry.run_command("squad")
