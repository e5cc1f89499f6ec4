"""General distillation: a smaller BERT learns a teacher on a corpus.

Pre-training's inputs and flags (`bert pretrain`: TFRecords of
create-pretraining-data, or text with `--input_format=text|conll|table`;
`--max_train_minutes`; the same command again resumes), plus `--teacher`: any
BERT checkpoint with the student's vocabulary and casing. The student
(`--init_checkpoint` with `--student_layers`, the teacher's layers it keeps, or
a `--bert_config_file` of any size) learns the teacher's masked-LM
distribution (`--distill_temperature`, `--distill_alpha`: the labels' share)
when the teacher has a masked-LM head, and its last layer: hidden states when
the widths match, self-attention relations (MiniLMv2) when they do not. A
teacher without a masked-LM head (all-MiniLM-L6-v2, bge-small) teaches its
representations alone; the log says so. The run record names the teacher; a
resume with another is refused. What it writes: pre-training's files
(`official_bert/tasks/general_distillation.py`); the output directory is an
`--init_checkpoint` for fine-tuning, where `--teacher` (task distillation)
takes the fine-tuned teacher.

Example (a 3-layer student of all-MiniLM-L6-v2, `$MINILM` as the README sets
it, on the repository's sample_text.txt, for two minutes):
  bert distill --do_train \\
    --teacher=$MINILM --init_checkpoint=$MINILM --student_layers=0,2,4 \\
    --input_format=text --input_file=sample_text.txt --max_seq_length=128 \\
    --max_predictions_per_seq=20 --train_batch_size=32 --learning_rate=1e-4 \\
    --num_train_steps=1000 --max_train_minutes=2 --output_dir=/tmp/minilm_l3
"""

# Its flags and main are made from its task family's row (`tasks.families`) by
# `commands.registry`: this module is its `--help` and `python -m` name.

from official_bert.commands import registry

if __name__ == "__main__":
    registry.run_command("distill")
