"""Pre-trains BERT: masked LM + next sentence, on any tf.distribute strategy.

google-research/bert's `run_pretraining.py` flags, plus distribution
(`--distribution_strategy`, `--num_gpus`, `--tpu`), precision (`--dtype`),
XLA (`--jit_compile`), `--optimizer {adamw,lamb}`,
`--gradient_accumulation_steps` and `--dynamic_masking`. Input: TFRecords of
`data_prep/create_pretraining_data.py` or of google-research/bert's generator,
checked before the model is built; or text (`--input_format`): the corpus
itself, or a fine-tuning set's own CoNLL / TSV file (masked LM only). The
output directory is itself an `--init_checkpoint` for fine-tuning and for a
second phase; running the same command again resumes. `--init_checkpoint` may
be any BERT checkpoint, one without pre-training heads included (the log says
which heads start fresh). Every progress line and eval_results.txt show
masked_lm_unigram_baseline beside masked_lm_accuracy: the accuracy of always
guessing the most frequent masked token. What it writes:
`official_bert/tasks/pretraining.py`.

Example (a few steps from all-MiniLM-L6-v2, `$MINILM` as the README sets it, on
the repository's sample_text.txt):
  python create_pretraining_data.py --input_file=sample_text.txt \\
    --output_file=/tmp/tf_examples.tfrecord --vocab_file=$MINILM/vocab.txt \\
    --do_lower_case --max_seq_length=128 --max_predictions_per_seq=20
  python run_pretraining.py --do_train --input_file=/tmp/tf_examples.tfrecord \\
    --init_checkpoint=$MINILM --max_seq_length=128 --max_predictions_per_seq=20 \\
    --train_batch_size=32 --num_train_steps=20 --num_warmup_steps=10 \\
    --learning_rate=2e-5 --output_dir=/tmp/pretraining_output

From scratch, phase 1 at length 128, then phase 2 at 512 from phase 1's output
($CORPUS_DATA: your `bert create-pretraining-data` files at each length, $MODEL:
your bert_config.json and vocab.txt):
  python run_pretraining.py --do_train --do_eval \\
    --input_file="$CORPUS_DATA/pretrain-128-*.tfrecord" \\
    --eval_input_file=$CORPUS_DATA/heldout-128.tfrecord \\
    --bert_config_file=$MODEL/bert_config.json --vocab_file=$MODEL/vocab.txt \\
    --max_seq_length=128 --max_predictions_per_seq=20 \\
    --train_batch_size=256 --learning_rate=1e-4 --num_train_steps=900000 \\
    --num_warmup_steps=10000 --output_dir=/runs/phase1
  python run_pretraining.py --do_train --do_eval \\
    --input_file="$CORPUS_DATA/pretrain-512-*.tfrecord" \\
    --eval_input_file=$CORPUS_DATA/heldout-512.tfrecord \\
    --init_checkpoint=/runs/phase1 --max_seq_length=512 --max_predictions_per_seq=80 \\
    --train_batch_size=256 \\
    --learning_rate=1e-4 --num_train_steps=100000 --num_warmup_steps=10000 \\
    --output_dir=/runs/phase2

Task-adaptive pre-training: all-MiniLM-L6-v2 (no masked-LM head) continued on
WNUT-17's training sentences, evaluated on its dev sentences (from `bert download
wnut17 --output_dir=$DATA`):
  python run_pretraining.py --do_train --do_eval --init_checkpoint=$MINILM \\
    --input_format=conll --input_file=$DATA/wnut17/wnut17train.conll \\
    --eval_input_file=$DATA/wnut17/emerging.dev.conll --max_seq_length=64 \\
    --max_predictions_per_seq=10 --train_batch_size=32 --learning_rate=1e-4 \\
    --num_train_steps=300 --num_warmup_steps=30 --output_dir=/runs/wnut17_tapt
"""

# Its flags and main are made from its task family's row (`tasks.families`) by
# `commands.registry`: this module is its `--help` and `python -m` name.

from official_bert.commands import registry

if __name__ == "__main__":
    registry.run_command("pretrain")
