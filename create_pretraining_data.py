"""Masked-LM / next-sentence TFRecords for pre-training, as google-research/bert's
top-level `create_pretraining_data.py` (same flags and defaults): google's README
command runs unchanged from the repository root,

  python create_pretraining_data.py --input_file=./sample_text.txt \\
    --output_file=/tmp/tf_examples.tfrecord --vocab_file=$BERT_BASE_DIR/vocab.txt \\
    --do_lower_case=True --max_seq_length=128 --max_predictions_per_seq=20 \\
    --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

The command is `official_bert/commands/create_pretraining_data.py` (also `bert
create-pretraining-data`): its docstring says what it adds (streaming, all cores,
dynamic masking, safe output); the generator is `data_prep/create_pretraining_data.py`.
`sample_text.txt` is five inaugural addresses from `data_prep/sample_corpus/`.
"""

if __name__ == "__main__":
    from official_bert.commands import registry

    registry.run_command("create-pretraining-data")
