"""A sentence-embedding SavedModel for TF Serving: raw text in, one vector out.

An `ExportModule` (`serving.base`; TF Serving's versions, atomic: `serving.versions`;
the vocabulary asset; the warm-up file; the input checks), written by
`bert embed --export_dir=...`. The pooling is `pooling.sentence_embedding`, the
one `bert embed` writes to .npy, so the two agree.

`serving_default`:
    inputs:  text       string [batch]      (one text per example; cut at
                                             seq_length WordPieces)
    outputs: embedding  float32 [batch, H]  (mean over the tokens, or [CLS];
                                             L2-normalized unless exported
                                             with --nonormalize)
             num_tokens int32 [batch]       ([CLS] and [SEP] included)
`serve_ids` (int32 `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq]):
    outputs: embedding, as above.
"""

from __future__ import annotations

import tensorflow as tf

from official_bert.modeling.pooling import sentence_embedding
from official_bert.serving.base import MAX_BATCH_SIZE, ExportModule
from official_bert.text import text_layers


class SentenceEmbeddingServing(ExportModule):
    """A `BertEncoder` with in-graph tokenization and sentence pooling.

    Args:
        encoder, vocab, lower_case, seq_length, max_batch_size: as `ExportModule`.
        pooling: "mean" or "cls" (`pooling.sentence_embedding`).
        normalize: bool. L2-normalize the vectors.
    """

    TASK = "sentence_embedding"
    TEXT_INPUTS = {"text": 1}

    def __init__(self, encoder, vocab, lower_case=True, seq_length=256,
                 max_batch_size=MAX_BATCH_SIZE, pooling="mean", normalize=True):
        self.pooling = str(pooling)
        self.normalize = bool(normalize)
        super().__init__(encoder, vocab, lower_case, seq_length, max_batch_size=max_batch_size)

    def serve_text(self, text):
        packed = text_layers.trim_padding(self.pack([self.tokenizer(text)]))
        return {**self.serve_token_ids(packed),
                "num_tokens": tf.reduce_sum(tf.cast(packed["input_mask"], tf.int32), axis=1)}

    def serve_token_ids(self, inputs):
        outputs = self.model(inputs, training=False)
        return {"embedding": sentence_embedding(outputs["sequence_output"], inputs["input_mask"],
                                                self.pooling, self.normalize)}

    def metadata_entries(self):
        return {"pooling": self.pooling, "normalize": self.normalize,
                "hidden_size": self.model.config.hidden_size}
