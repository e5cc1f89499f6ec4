"""Data preparation: raw files → examples → features (pre-training corpus, vocabulary, TFRecords).

The file-formats layer, beside `official_bert.text` and `modeling`: file
formats only, no flags and no command line (the commands that run these
modules are `official_bert/commands/`), TensorFlow only where a TensorFlow
file system or format needs it. It stands on the layers below it and on
nothing above (`tests/test_layers.py`): the errors, settings, progress and
stop signal (`errors`, `settings`, `progress`, `interruption`); files and
their policies (`io`, `file_sets`, `outputs`, `run_directory.lock`); the tag
schemes of `metrics.ner`; and the tokenizer (`text.tokenization`).

    configs.py                  the data commands' settings, each defined once
    prepare_corpus.py           raw documents → one sentence per line
    build_vocab.py              a WordPiece vocabulary in Google's layout
    create_pretraining_data.py  the pre-training TFRecords: workers, files, summary
    pretraining_corpus.py       the corpus a document at a time, each owned by one worker
    pretraining_instances.py    google's algorithm: pairs, truncation, masking, packing
    pretraining_records.py      each instance's tf.train.Example bytes; the counts
    fast_tokenization.py        a cached front end of the tokenizer
    tfrecord_io.py              TFRecords and tf.train.Example bytes without TensorFlow
    glue.py                     classification data: GLUE's tasks, readers, leaderboard files
    glue_features.py            classification examples → model inputs (and their cache)
    squad.py                    SQuAD JSON → examples → windowed features
    squad_postprocessing.py     SQuAD logits → answers
    swag.py, conll.py           multiple choice (SWAG) and token tagging (CoNLL) data
    datasets.py                 `bert download`'s table: sources, pinned digests, layouts
    download.py                 fetching, verifying and publishing those datasets
"""
