"""What reading a checkpoint gives (`BertCheckpoint`), its kinds, and `CheckpointError`."""

from __future__ import annotations

import dataclasses

from official_bert.errors import CheckpointError, first_line  # noqa: F401 (this package's names)
from official_bert.modeling.configs import BertConfig

HUGGINGFACE = "huggingface"
GOOGLE_TF1 = "google_tf1"
OFFICIAL_BERT = "official_bert"


@dataclasses.dataclass
class BertCheckpoint:
    """What `read_checkpoint` found.

    Attributes:
        kind: one of "huggingface", "google_tf1", "official_bert".
        path: the path given.
        config: the encoder's `BertConfig`.
        weights: canonical name → numpy array, encoder and any heads.
        vocab_file: `vocab.txt` beside the checkpoint, or None.
        do_lower_case: the casing the checkpoint was trained with, when the
            files say so (Hugging Face `tokenizer_config.json`, or "uncased" /
            "cased" in a Google checkpoint's directory name), else None.
        prefix: the TensorFlow checkpoint read (a run directory's latest
            complete one when `path` is the directory); None for Hugging Face.
        step: the step of a run's checkpoint (`ckpt-<N>`), else None.
    """

    kind: str
    path: str
    config: BertConfig
    weights: dict
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    prefix: str | None = None
    step: int | None = None

    def head_weights(self, prefix: str) -> dict:
        """The weights whose canonical name starts with `prefix`."""
        return {k: v for k, v in self.weights.items() if k.startswith(prefix)}

