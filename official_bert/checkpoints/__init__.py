"""Checkpoint I/O: one loader for every kind of BERT checkpoint, and exporters.

Kinds read by `read_checkpoint(path)`:

* ``huggingface``: a directory with `config.json` and `model.safetensors`
  (`BertModel`, or `BertFor*` with `bert.`-prefixed names and head weights),
  read with `safetensors.numpy` (no torch).
* ``google_tf1``: Google's original TF1 checkpoints, `bert_model.ckpt.*` with
  `bert_config.json` and `vocab.txt` (names like
  `bert/encoder/layer_0/attention/self/query/kernel`).
* ``official_bert``: this project's own object-based TF2 checkpoints, written
  by `tf.train.Checkpoint(encoder=..., ...)`, with `bert_config.json` beside.

Whatever the kind, the weights come back as one dictionary of numpy arrays
under Google's TF1 names (the *canonical names*), kernels as [in, out]. Heads
use google-research/bert's names too: `cls/predictions/...` (masked LM),
`cls/seq_relationship/...` (next sentence), `output_weights`/`output_bias`
(run_classifier), `cls/squad/...` (run_squad).

The modules, by job:

    bert_checkpoint.py   `BertCheckpoint` (what reading gives), the kinds, `CheckpointError`
    canonical_names.py   Hugging Face's names <-> the canonical ones; the encoder's
                         variables by canonical name (`assign_encoder_weights`)
    tf_checkpoints.py    TensorFlow checkpoint files: the prefix a path names,
                         damaged checkpoints (a run directory's own are
                         `run_directory.latest`'s)
    read.py              `read_checkpoint` (any kind), `load_encoder`
    write.py             `save_checkpoint`, `export_huggingface`, `write_huggingface`,
                         `export_google`
    vocabulary.py        new tokens' rows in the word embeddings and the masked-LM
                         output bias (`add_token_rows`, `bert extend-vocab`)

Everything a caller needs is importable from here (`checkpoints.load_encoder`).
"""

from official_bert.checkpoints.bert_checkpoint import (GOOGLE_TF1, HUGGINGFACE, OFFICIAL_BERT,
                                                       BertCheckpoint, CheckpointError)
from official_bert.checkpoints.canonical_names import (GOOGLE_HEAD_NAMES, assign_encoder_weights,
                                                       encoder_variables, get_encoder_weights)
from official_bert.checkpoints.read import load_encoder, read_checkpoint
from official_bert.checkpoints.tf_checkpoints import (checkpoint_damage, checkpoint_files,
                                                      damaged_checkpoint_error)
from official_bert.checkpoints.write import (EXACT_GELU_CHOICES, GOOGLE_CHECKPOINT,
                                             ExactGeluError, export_google, export_huggingface,
                                             gelu_tanh_difference, save_checkpoint,
                                             write_huggingface)
from official_bert.checkpoints.vocabulary import add_token_rows
from official_bert.modeling.configs import ConfigError

__all__ = [
    "BertCheckpoint",
    "CheckpointError",
    "ConfigError",
    "EXACT_GELU_CHOICES",
    "ExactGeluError",
    "GOOGLE_CHECKPOINT",
    "GOOGLE_HEAD_NAMES",
    "GOOGLE_TF1",
    "HUGGINGFACE",
    "OFFICIAL_BERT",
    "add_token_rows",
    "assign_encoder_weights",
    "checkpoint_damage",
    "checkpoint_files",
    "damaged_checkpoint_error",
    "encoder_variables",
    "export_google",
    "export_huggingface",
    "gelu_tanh_difference",
    "get_encoder_weights",
    "load_encoder",
    "read_checkpoint",
    "save_checkpoint",
    "write_huggingface",
]
