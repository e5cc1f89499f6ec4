"""Sentence embeddings at scale: a text file in, one float32 vector a line out.

`bert embed` (`official_bert/commands/embed.py`). The input is read twice,
streaming: once to count and check its lines (every line UTF-8; the count
makes the .npy header), then in chunks that are tokenized, sorted by length
(so a batch pads to about its own length), run through the encoder in
batches, pooled by `pooling.sentence_embedding` and written in input order. The
memory is a chunk's, whatever the file's size. The output appears complete
or not at all (`io.atomic_output`), and never replaces a file the project did
not write unless --overwrite says so (`official_bert.outputs`).

Outputs (by the output file's extension):
  .npy    float32 [lines, hidden], row i = line i (numpy.load, or mmap_mode="r")
  .jsonl  {"index": i, "embedding": [...]} a line, 8 significant digits

With `export_dir`, the same model and pooling are also written as a
SavedModel for TF Serving (`serving.embedding.SentenceEmbeddingServing`).
"""

from __future__ import annotations

import json

import numpy as np
import tensorflow as tf
from absl import logging

from official_bert import checkpoints, io, model_files, outputs
from official_bert.errors import BadFileError, UserError
from official_bert.progress import Progress
from official_bert.modeling.pooling import SENTENCE_POOLINGS, sentence_embedding
from official_bert.serving.base import with_weights_in
from official_bert.serving.versions import check_export_version_free
from official_bert.serving.embedding import SentenceEmbeddingServing
from official_bert.configs import EmbedConfig, check_serving_dtype, dtype_policy
from official_bert.tasks.features import InputExample, featurize
from official_bert.training.precision import log_precision

OUTPUT_FORMATS = (".npy", ".jsonl")
CHUNK_BATCHES = 16  # batches per sorted chunk: the memory bound, and the padding saved


def run(config: EmbedConfig) -> dict:
    """Validates everything, then writes what `config` asks for; returns {what: path}."""
    if not config.init_checkpoint:
        raise UserError("--init_checkpoint is required: the model to embed with")
    if not config.output_file and not config.export_dir:
        raise UserError("give --input_file and --output_file (vectors of a file), "
                        "--export_dir (a SavedModel), or both")
    if bool(config.input_file) != bool(config.output_file):
        raise UserError("--input_file and --output_file go together")
    if config.pooling not in SENTENCE_POOLINGS:
        raise UserError(f"--pooling={config.pooling!r}: use {' or '.join(SENTENCE_POOLINGS)}")
    check_serving_dtype(config.serving_dtype, config.export_dir)
    policy = dtype_policy(config.dtype)
    if config.batch_size <= 0 or config.max_seq_length < 2 or config.max_batch_size <= 0:
        raise UserError("--batch_size and --max_batch_size must be positive and "
                        "--max_seq_length at least 2")
    if config.output_file:
        if not config.output_file.endswith(OUTPUT_FORMATS):
            raise UserError(f"--output_file={config.output_file}: end it with "
                            f"{' or '.join(OUTPUT_FORMATS)} (the format)")
        outputs.ensure_checked(config.output_file, "--output_file", outputs.FILE)
    if config.input_file and (not io.exists(config.input_file) or io.isdir(config.input_file)):
        raise BadFileError(config.input_file, "does not exist or is a directory",
                           fix="check --input_file")
    files = model_files.prepare_job(
        config, inputs={"input_file": config.input_file},
        outputs={"--output_file": config.output_file, "--export_dir": config.export_dir})
    check_export_version_free(config.export_dir, config.export_version)  # before embedding
    num_lines = count_lines(config.input_file) if config.input_file else 0

    encoder, _ = checkpoints.load_encoder(config.init_checkpoint, config=files.config,
                                          dtype=policy)
    log_precision(encoder, config.dtype)
    written = {}
    if config.output_file:
        embed_file(encoder, files.tokenizer(), config, num_lines)
        written["embeddings"] = config.output_file
    if config.export_dir:
        module = SentenceEmbeddingServing(
            with_weights_in(encoder, config.serving_dtype), files.vocab, files.do_lower_case, config.max_seq_length,
            max_batch_size=config.max_batch_size, pooling=config.pooling,
            normalize=config.normalize)
        written["serving"] = module.save(config.export_dir, config.export_version)
    return written


def _lines(input_file):
    """(line number, text) of each line, streaming; `BadFileError` naming the
    first line that is not UTF-8. Lines end at "\\n" (a "\\r" before it is dropped); a
    byte-order mark at the start of the file is dropped (`io.text_lines`)."""
    with io.open_file(input_file, "rb") as f:
        for number, raw in enumerate(io.text_lines(f), 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise BadFileError(input_file, f"is not UTF-8 ({e.reason})", line=number,
                                   fix="convert the file to UTF-8") from None
            yield number, text.rstrip("\n").rstrip("\r")


def count_lines(input_file) -> int:
    """The number of texts, checking every line (`_lines`)."""
    if not io.exists(input_file) or io.isdir(input_file):
        raise BadFileError(input_file, "does not exist or is a directory",
                           fix="check --input_file")
    count = sum(1 for _ in _lines(input_file))
    if count == 0:
        raise BadFileError(input_file, "is empty", fix="give one text a line")
    return count


def _chunks(input_file, size):
    chunk = []
    for _, text in _lines(input_file):
        chunk.append(text)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def embed_texts(encoder, tokenizer, texts, max_seq_length, batch_size, pooling="mean",
                normalize=True, forward=None):
    """[len(texts), hidden] float32: the texts' vectors, in their order.

    Sorted by length into batches, each padded to its longest text (rounded
    up to 8): padding is masked out, so a vector does not depend on its batch.
    """
    features = featurize([InputExample(i, t, None) for i, t in enumerate(texts)], tokenizer,
                         max_seq_length)
    forward = forward or make_forward(encoder, pooling, normalize)
    order = sorted(range(len(texts)), key=lambda i: len(features[i][1]))
    vectors = np.zeros((len(texts), encoder.config.hidden_size), np.float32)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = max(len(features[i][1]) for i in rows)
        width = min(-(-width // 8) * 8, encoder.config.max_position_embeddings)
        ids = np.zeros((len(rows), width), np.int32)
        mask = np.zeros_like(ids)
        for row, i in enumerate(rows):
            token_ids = features[i][1]
            ids[row, :len(token_ids)] = token_ids
            mask[row, :len(token_ids)] = 1
        vectors[rows] = forward(ids, mask, np.zeros_like(ids)).numpy()
    return vectors


def make_forward(encoder, pooling, normalize):
    """The batch function: ids, mask, types → [batch, hidden] vectors, traced once."""
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec, spec])
    def forward(ids, mask, types):
        outputs = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types},
                          training=False)
        return sentence_embedding(outputs["sequence_output"], mask, pooling, normalize)

    return forward


def embed_file(encoder, tokenizer, config: EmbedConfig, num_lines: int) -> None:
    """Streams `config.input_file` → `config.output_file` (module docstring)."""
    hidden = encoder.config.hidden_size
    forward = make_forward(encoder, config.pooling, config.normalize)
    npy = config.output_file.endswith(".npy")
    logging.info("Embedding %d texts of %s", num_lines, config.input_file)
    progress = Progress(num_lines, "texts")
    done = 0
    # Published as the output policy found it in `run` (`outputs`): never over another's file.
    with io.atomic_output(config.output_file, "wb", overwrite=False) as out:
        if npy:
            np.lib.format.write_array_header_1_0(out, {
                "descr": np.lib.format.dtype_to_descr(np.dtype("<f4")),
                "fortran_order": False, "shape": (num_lines, hidden)})
        for chunk in _chunks(config.input_file, config.batch_size * CHUNK_BATCHES):
            vectors = embed_texts(encoder, tokenizer, chunk, config.max_seq_length,
                                  config.batch_size, forward=forward)
            if npy:
                out.write(vectors.astype("<f4").tobytes())
            else:
                out.write("".join(json.dumps({"index": done + i, "embedding": [
                    float(f"{x:.8g}") for x in row]}) + "\n"
                    for i, row in enumerate(vectors)).encode("utf-8"))
            done += len(chunk)
            if done > num_lines:
                break  # the file grew since it was counted: refused below
            if progress.update(done):
                logging.info("embedded %s", progress.line())
        if done != num_lines:  # changed between the two passes: no output is left
            raise BadFileError(config.input_file, f"changed while being read ({num_lines} "
                               f"lines counted, then {done} or more read)",
                               fix="run again on a file that is not being written")
