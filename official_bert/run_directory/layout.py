"""Every file name of a run directory, once.

    run.json               the run's record of itself (`record`)
    bert_config.json       the model's config            } the record's files: written
    vocab.txt              its vocabulary                } before training; once the
    classifier_config.json classification: task, labels, } directory holds a trained
                           casing, length, windows       } checkpoint a rerun must
    label_list.txt         NER: the tag list             } give the same text (a rerun
    tokenizer_config.json  pre-training: the data's casing } with other model files is
                                                           } refused)
    checkpoint, ckpt-<N>.* the training checkpoints (TensorFlow's state file and prefix;
                           `ckpt-<N>_temp/` while TensorFlow stages one)
    train/  eval/          TensorBoard summaries of training and of each evaluation
    eval_results.txt       the final evaluation (google's `key = value` lines)
    eval_history.jsonl     each evaluation while training (--eval_every_steps)
    best/                  the best model so far: best.json (its step and metrics) and
                           best-<step>.* (--keep_best_metric)
    features/              classification's cached TFRecords of converted examples
    feature_cache/         feature-based NER's cached encoder features
    .official_bert.lock    one run at a time (`lock.RunLock`)

besides each task's own prediction files (`RunFiles.results`). Only this
package spells these names (tests/test_run_directory_layout.py greps the
library for them); everyone else asks `RunDirectory` or uses these constants.
"""

from __future__ import annotations

import re

RUN_RECORD = "run.json"
BERT_CONFIG = "bert_config.json"
VOCAB = "vocab.txt"
CLASSIFIER_CONFIG = "classifier_config.json"
LABEL_LIST = "label_list.txt"
TOKENIZER_CONFIG = "tokenizer_config.json"
# tf.train's state file: the directory holds a checkpoint (TensorFlow's name, as
# checkpoints.tf_checkpoints.STATE_FILE reads it).
CHECKPOINT_INDEX = "checkpoint"
CHECKPOINT_NAME = "ckpt"  # the checkpoints' prefix: ckpt-<step>.index, ...
TRAIN_SUMMARIES = "train"
EVAL_SUMMARIES = "eval"
EVAL_RESULTS = "eval_results.txt"
EVAL_HISTORY = "eval_history.jsonl"
BEST = "best"
BEST_STATE = "best.json"
BEST_CHECKPOINT = "best-"  # best/best-<step>.*: the kept model's checkpoint files
FEATURES = "features"
FEATURE_CACHE = "feature_cache"
LOCK_FILE = ".official_bert.lock"  # hidden, so no data pattern matches it

# Files rewritten only when their text is the same (the record's model files),
# so they are never an output that could replace an input.
MODEL_FILES = (BERT_CONFIG, VOCAB)

# TensorFlow stages checkpoint N in `ckpt-N_temp/` and renames its files out when
# complete: one left behind is a killed save's.
STAGED_CHECKPOINT = re.compile(rf"^{CHECKPOINT_NAME}-\d+_temp$")


def checkpoint_name(step: int) -> str:
    """The name (prefix, without directory) of the run's checkpoint of `step`."""
    return f"{CHECKPOINT_NAME}-{step}"


def staged_checkpoints(step: int) -> str:
    """A glob of TensorFlow's staging directories of checkpoint `step`."""
    return f"{checkpoint_name(step)}_temp*"


def best_checkpoint_name(step) -> str:
    """The name of the best model's checkpoint of `step` in best/ ("" : the
    prefix every one shares)."""
    return f"{BEST_CHECKPOINT}{step}"
