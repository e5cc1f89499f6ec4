"""Sentence(-pair) classification and regression with BERT: GLUE and your own data.

`--task_name` is a GLUE task (cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte,
wnli; files under `--data_dir` in GLUE's layout, see `data_prep/glue.py`; `bert
download glue` makes it), XNLI (xnli, xnli-<lang>; `bert download xnli`) or
`custom`: your own `.tsv` / `.csv` (with a header) / `.jsonl` files, found as
`--data_dir`/train.*, dev.*, test.* or given by `--train_file --eval_file
--predict_file`, with `--text_a_column` (`--text_b_column` for pairs) and
`--label_column`; the labels are `--labels`, or read from the training data
(sorted), or a float score with `--regression`. Texts longer than
`--max_seq_length`: `--long_document=windows` (with `--doc_stride`,
`--window_pooling`). What it writes: `official_bert/tasks/classification.py`.

Examples (all-MiniLM-L6-v2, `$MINILM` as the README sets it), on the bundled
QNLI sample, then on SST-2 from `bert download glue/SST-2 --output_dir=$DATA`:
  python run_classifier.py --task_name=qnli --data_dir=examples/qnli_small \\
    --init_checkpoint=$MINILM --do_train --do_eval --num_train_epochs=1 \\
    --train_batch_size=32 --learning_rate=5e-5 --max_seq_length=128 --output_dir=/tmp/qnli
  python run_classifier.py --task_name=sst-2 --data_dir=$DATA/glue/SST-2 \\
    --init_checkpoint=$MINILM --do_train --do_eval --max_train_examples=8000 \\
    --num_train_epochs=1 --train_batch_size=32 --learning_rate=5e-5 \\
    --max_seq_length=64 --output_dir=/tmp/sst2 --export_dir=/tmp/sst2_export
"""

# Its flags and main are made from its task family's row (`tasks.families`) by
# `commands.registry`: this module is its `--help` and `python -m` name.

from official_bert.commands import registry

if __name__ == "__main__":
    registry.run_command("classify")
