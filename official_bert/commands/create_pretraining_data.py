r"""Create masked-LM / next-sentence-prediction TFRecords for BERT pre-training.

Same flags, defaults, algorithm and output features as google-research/bert's
`create_pretraining_data.py` (see `data_prep/pretraining_instances.py` for the
algorithm and the few deliberate differences: balanced next-sentence labels,
unbiased mask counts, no special tokens as random replacements), and files from
either tool train either model. Beyond it:

* **Streaming.** Documents are read, tokenized and turned into instances one
  at a time; instances are written as they are made (after a bounded shuffle
  buffer). Random-next B spans come from a bounded reservoir of spans of the
  documents seen so far. Memory is bounded by
  `--lookahead_documents`, `--random_next_pool_size`, `--shuffle_buffer_size`
  and the tokenizer cache, not by the corpus size.
* **All cores.** `--num_workers` processes (default: all cores); each
  document goes to the worker with the fewest input bytes so far (a
  deterministic assignment every worker computes alike). Each worker's
  random-next pool also takes the documents other workers own (the first
  `--lookahead_documents`, then 1 in N; only the sentences its spans use are
  tokenized), so a worker that owns one huge book still draws random-next B
  spans from other documents. Worker *w*
  seeds its random generator with (`--random_seed`, w, N), so the output is
  byte-for-byte deterministic for a given seed and worker count. With a
  multiple of N output files each worker writes its own files; otherwise each
  worker writes a part of every output file and the parts are concatenated in
  worker order.
* **N-gram masking** (`--max_ngram_size=N`, official/nlp's flag): spans of up
  to N whole words (`--do_whole_word_mask`) or word pieces, length n drawn
  ∝ 1/n; the summary gives the masked
  spans' length distribution.
* **Full-sentence packing** (`--packing=full_sentences`, RoBERTa's inputs):
  instances filled with the next tokens of the sentence stream, across
  documents with a [SEP] between two, no next-sentence pairs, no padding but
  in the last instance of a pass;
  one-sentence documents are used too. The summary records the packing and
  run_pretraining then trains the masked LM alone.
* **Dynamic masking** (`--dynamic_masking`): unmasked pairs (input_ids,
  input_mask, segment_ids, next_sentence_labels; plus word_start_mask with
  `--do_whole_word_mask`); `bert pretrain` (run_pretraining.py) masks them
  at read time, fresh every epoch.
* **Safe output.** Files are written under hidden temporary names
  (`.<name>.tmp-<pid>-<hex>`) and renamed
  only when every worker has finished, the summary
  (the set's manifest) marked incomplete first and complete last, so a file
  with the final name is complete, and a reader given part of an unfinished
  set refuses it. `--gzip` compresses (read with `compression_type="GZIP"`;
  this project's reader detects it).
* **Any TensorFlow file system.** Inputs, outputs and the vocabulary may be
  `gs://...` (or any `tf.io.gfile` path; TensorFlow is then imported);
  in-memory `ram://` paths, which other processes cannot see, are generated
  by one worker in this process.
* **Bad input** gives a one-line `error: ...` and exit status 1: no input files,
  empty input, fewer than 2 documents, a line that is not UTF-8 (file and line
  named; `--skip_bad_lines` skips and counts such lines instead), a vocabulary
  without [PAD]/[UNK]/[CLS]/[SEP]/[MASK], an unwritable output. Documents with
  fewer than two sentences make no instances and are counted.
* **Progress and summary.** A progress line (documents/s, instances) every
  `--progress_seconds`; at the end a summary (documents, sentences, tokens,
  instances, next-sentence balance, masked fraction and 80/10/10 split,
  padding fraction, speed) printed and written beside the first output as
  `.<name, dots as underscores>.summary.json` (`.pretrain_tfrecord.summary.json`
  for `pretrain.tfrecord`), hidden, so that no data pattern (`out.tfrecord*`,
  `*.tfrecord*`) matches it.

Differences in reading: a file's end also ends a document (google continues a
document across files that do not end with a blank line).

Example (also `python create_pretraining_data.py`, google's script name):
  bert create-pretraining-data \
      --input_file=sample_text.txt --output_file=/tmp/pretrain.tfrecord \
      --vocab_file=$MINILM/vocab.txt --do_lower_case --max_seq_length=128 \
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=5

The generator is `data_prep/create_pretraining_data.py`.
"""

from __future__ import annotations

from absl import flags

from data_prep.configs import PretrainingDataConfig, PretrainingDataFiles
from official_bert.commands import app, cli_flags, registry
from official_bert.errors import UserError

# data_prep.create_pretraining_data loads the tokenizer: `main` imports it once
# the flags are parsed, so that defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS

# The configs the flags come from (tests/test_settings.py checks them).
CONFIGS = (PretrainingDataFiles, PretrainingDataConfig)
# Flags that shape next-sentence pairs, which --packing=full_sentences does not make.
PAIR_FLAGS = ("short_seq_prob", "random_next_pool_size")


def define_flags():
    for config in CONFIGS:
        cli_flags.define_flags(config, group=__name__)
    flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])


def _refuse_pair_flags() -> None:
    """Given with full_sentences, the pair flags would be ignored without a
    word, so a mistaken packing would go unnoticed."""
    given = [f"--{name}" for name in PAIR_FLAGS if FLAGS[name].present]
    if given:
        raise UserError(f"{' and '.join(given)} shape next-sentence pairs, which "
                        "--packing=full_sentences does not make: leave "
                        f"{'it' if len(given) == 1 else 'them'} out, or use "
                        "--packing=sentence_pairs")


def main(argv):
    app.refuse_arguments(argv)
    from data_prep import create_pretraining_data

    if FLAGS.packing == "full_sentences":
        _refuse_pair_flags()
    files = cli_flags.from_flags(PretrainingDataFiles, FLAGS)
    create_pretraining_data.create_pretraining_data(
        files.input_file, files.output_file, files.vocab_file,
        cli_flags.from_flags(PretrainingDataConfig, FLAGS),
        num_workers=files.num_workers or None, progress_seconds=files.progress_seconds)


if __name__ == "__main__":
    registry.run_command("create-pretraining-data")
