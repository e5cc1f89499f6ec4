"""The settings of the data commands, each defined once (`official_bert.settings.setting`).

Every class here is what one data step takes: the library functions of
`data_prep` take these objects, and the commands (`official_bert/commands/`)
make their flags from the same fields (`cli_flags.define_flags`), so a flag's
name, type, default and help cannot drift from the library's.

    config class             library                                   command
    DownloadOptions          data_prep.download.Downloader             bert download
    DownloadListing          (the command itself)                      bert download --list
    CorpusFiles              data_prep.prepare_corpus.prepare_corpus   bert prepare-corpus
    CorpusOptions            data_prep.prepare_corpus                  bert prepare-corpus
    BuildVocabConfig         data_prep.build_vocab.build_vocab         bert build-vocab
    PretrainingDataFiles     create_pretraining_data(...)'s arguments  bert create-pretraining-data
    PretrainingDataConfig    data_prep.pretraining_instances           bert create-pretraining-data
    SquadSplitConfig         data_prep.squad.split_by_article          bert squad-split

This module imports no TensorFlow (nor anything beyond the settings and the
errors), so that a command's `--help` stays fast.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from official_bert.errors import UserError
from official_bert.settings import setting

# --------------------------------------------------------------------------
# bert download
# --------------------------------------------------------------------------

DEFAULT_OUTPUT_DIR = "~/bert_data"
DATA_ENV = "BERT_DATA"  # the default --output_dir, when set
MANIFEST_ENV = "BERT_DOWNLOAD_MANIFEST"  # the default --manifest, when set
DOWNLOADS = "downloads"  # under --output_dir: partial and kept archives


@dataclasses.dataclass
class DownloadOptions:
    """Where datasets go and how their files are fetched (`download.Downloader`).

    The command's defaults of `output_dir` and `manifest` come from the
    environment (`DATA_ENV`, `MANIFEST_ENV`) when it sets them.
    """

    output_dir: str = setting(
        DEFAULT_OUTPUT_DIR, f"Where the datasets go, one directory each (default: ${DATA_ENV}, "
        f"else {DEFAULT_OUTPUT_DIR}); partial downloads wait in its {DOWNLOADS}/.")
    base_url: Optional[str] = setting(
        None, "A mirror that serves the same files as <base_url>/<name> (names as in --list, "
        "e.g. glue/CoLA.zip).")
    source_dir: Optional[str] = setting(
        None, "A local directory with the files (as <name> or its base name): nothing is "
        "downloaded, everything is verified.")
    manifest: Optional[str] = setting(
        None, f"JSON overriding file entries (url, sha256, size, md5) and base_url (default: "
        f"${MANIFEST_ENV}).")
    keep_archives: bool = setting(
        False, f"Keep the verified archives in <output_dir>/{DOWNLOADS}/ (a --source_dir for "
        "another machine).")
    retries: int = setting(5, "Reconnections (resuming with HTTP Range) per file.")
    timeout: float = setting(60.0, "Seconds without data before a connection counts as "
                             "dropped.")
    progress_seconds: float = setting(5.0, "Seconds between progress lines (also one per 10%).")
    retry_wait: float = setting(1.0, "Seconds before the first retry (doubled for each next "
                                "one, at most 30).", flag=False)


@dataclasses.dataclass(frozen=True)
class DownloadListing:
    """`bert download --list`: print the table instead of downloading."""

    list: bool = setting(False, "List the datasets, their files, URLs and checksums.")


# --------------------------------------------------------------------------
# bert prepare-corpus
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CorpusFiles:
    """The documents to read and the corpus file to write."""

    input: Optional[list[str]] = setting(
        None, "Comma-separated input files, directories (searched recursively; README* and "
        "hidden files skipped) or globs. Each file is one document.")
    output_file: Optional[str] = setting(
        None, "Output text file: one sentence per line, a blank line between documents.")


@dataclasses.dataclass(frozen=True)
class CorpusOptions:
    """How raw documents are turned into sentences (`prepare_corpus`)."""

    # None (the flag's empty value): a file that is not UTF-8 is an error.
    fallback_encoding: Optional[str] = setting(
        "cp1252", "Encoding for files that are not valid UTF-8; empty: such a file is an error.")
    strip_gutenberg: bool = setting(True, "Drop Project Gutenberg license headers/footers.")
    max_sentence_chars: int = setting(1000, "Split longer sentences at ;/: and spaces.")


# --------------------------------------------------------------------------
# bert build-vocab
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BuildVocabConfig:
    """What `build_vocab.build_vocab` reads, writes and learns with."""

    input_file: Optional[list[str]] = setting(
        None, "Comma-separated text files or globs (e.g. the output of prepare_corpus.py).")
    output_file: Optional[str] = setting(None, "Vocabulary file to write (one token per line).")
    vocab_size: int = setting(30522, "Exact number of tokens in the vocabulary.")
    do_lower_case: bool = setting(True, "Uncased (lower-case, strip accents) or cased.")
    num_unused: int = setting(994, "Number of [unusedN] slots (Google: 994).")
    lower_thresh: int = setting(10, "Lowest word-piece count the trainer's threshold search "
                                "may go down to (tensorflow-text default 10).")
    slack_ratio: float = setting(0.05, "Learned vocabulary may fall this fraction short of "
                                 "--vocab_size (filled with [unusedN]).")
    max_unique_chars: int = setting(1000, "Largest alphabet kept.")
    max_lines: Optional[int] = setting(None, "Count words in at most this many lines.")


# --------------------------------------------------------------------------
# bert create-pretraining-data (google-research/bert's flags, then ours)
# --------------------------------------------------------------------------

# sentence_pairs: google's [CLS] A [SEP] B [SEP] with next-sentence labels;
# full_sentences: RoBERTa's packed sentence stream, no next-sentence task.
PACKINGS = ("sentence_pairs", "full_sentences")


@dataclasses.dataclass(frozen=True)
class PretrainingDataFiles:
    """Which files `create_pretraining_data` reads and writes, and with how many processes."""

    input_file: Optional[str] = setting(
        None, "Input raw text file (or comma-separated list of files; globs allowed).")
    output_file: Optional[str] = setting(
        None, "Output TF example file (or comma-separated list of files).")
    vocab_file: Optional[str] = setting(
        None, "The vocabulary file that the BERT model was trained on.")
    num_workers: int = setting(0, "Worker processes (0: all cores).")
    progress_seconds: float = setting(10.0, "Seconds between progress lines (0: none).")


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
    """Everything that shapes the generated data (the flags, minus file names).

    The field order is that of the set's summary ("config"), kept as it was.
    """

    max_seq_length: int = setting(128, "Maximum sequence length.")
    max_predictions_per_seq: int = setting(
        20, "Maximum number of masked LM predictions per sequence.")
    masked_lm_prob: float = setting(0.15, "Masked LM probability.")
    short_seq_prob: float = setting(
        0.1, "Probability of creating sequences which are shorter than the maximum length.")
    dupe_factor: int = setting(
        10, "Number of times to duplicate the input data (with different masks).")
    packing: str = setting(
        "sentence_pairs", "sentence_pairs: google's [CLS] A [SEP] B [SEP] with next-sentence "
        "labels. full_sentences: RoBERTa's, each instance filled with the next max_seq_length "
        "- 2 tokens of the sentence stream, across documents with a [SEP] between them; no "
        "padding, no next-sentence task (run_pretraining turns it off).", choices=PACKINGS)
    do_lower_case: bool = setting(
        True, "Whether to lower case the input text. Should be True for uncased models and "
        "False for cased models.")
    do_whole_word_mask: bool = setting(
        False, "Whether to use whole word masking rather than per-WordPiece masking.")
    max_ngram_size: int = setting(
        1, "Mask spans of up to this many contiguous words (with --do_whole_word_mask) or word "
        "pieces, span length n drawn with probability proportional to 1/n (official/nlp's "
        "flag). 1: single tokens/words.")
    dynamic_masking: bool = setting(
        False, "Write unmasked pairs; the input pipeline masks them at read time.")
    random_seed: int = setting(12345, "Random seed for data generation.")
    # Streaming bounds (memory does not grow with the corpus):
    random_next_pool_size: int = setting(
        10_000, "Candidate random-next spans kept per worker (reservoir sample).")
    random_next_spans_per_document: int = setting(
        32, "Candidate random-next spans drawn per document.", flag=False)
    lookahead_documents: int = setting(
        64, "Documents read ahead before generating from the first ones.")
    lookahead_tokens: int = setting(
        2_000_000, "Tokens read ahead at most (a few huge documents stop the read-ahead "
        "sooner).", flag=False)
    shuffle_buffer_size: int = setting(10_000, "Instances per worker shuffled before writing.")
    skip_bad_lines: bool = setting(
        False, "Skip (and count) lines that are not valid UTF-8 instead of failing.")
    gzip: bool = setting(False, "Write gzip-compressed TFRecords.")

    def validate(self) -> None:
        if self.max_seq_length < 5:
            raise UserError(f"--max_seq_length={self.max_seq_length} must be at least 5 "
                            "([CLS] A [SEP] B [SEP])")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise UserError(f"--masked_lm_prob={self.masked_lm_prob} must be in (0, 1)")
        if self.max_predictions_per_seq < 1:
            raise UserError("--max_predictions_per_seq must be at least 1")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise UserError(f"--short_seq_prob={self.short_seq_prob} must be in [0, 1]")
        if self.dupe_factor < 1:
            raise UserError("--dupe_factor must be at least 1")
        if self.packing not in PACKINGS:
            raise UserError(f"--packing={self.packing} is unknown; use one of "
                            f"{', '.join(PACKINGS)}")
        if self.max_ngram_size < 1:
            raise UserError(f"--max_ngram_size={self.max_ngram_size} must be at least 1 "
                            "(1: single tokens or, with --do_whole_word_mask, single words)")
        if self.max_ngram_size > self.max_predictions_per_seq:
            raise UserError(f"--max_ngram_size={self.max_ngram_size} is more than "
                            f"--max_predictions_per_seq={self.max_predictions_per_seq}: a span "
                            "of n words or pieces masks at least n tokens, so a longer span "
                            "never fits")
        if self.max_ngram_size > 1 and self.dynamic_masking:
            raise UserError("--max_ngram_size applies where tokens are masked: with "
                            "--dynamic_masking that is run_pretraining, so pass "
                            f"--max_ngram_size={self.max_ngram_size} there instead")
        for name in ("random_next_pool_size", "random_next_spans_per_document",
                     "lookahead_documents", "shuffle_buffer_size"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name} must be at least 1")


# --------------------------------------------------------------------------
# bert squad-split
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SquadSplitConfig:
    """`squad.split_by_article`'s file and where it is cut."""

    input_file: Optional[str] = setting(None, "SQuAD JSON (v1.1 or v2.0) to split.")
    train_output: Optional[str] = setting(None, "Where the first articles go.")
    dev_output: Optional[str] = setting(None, "Where the remaining articles go.")
    num_train_articles: Optional[int] = setting(
        None, "How many articles (from the start) form the training part.")
