"""Raw text documents → BERT's pre-training text: one sentence per line, a blank
line between documents (what create_pretraining_data.py reads).

Each input file is one document (a book, a speech; `README*` and hidden files
are skipped). Each is decoded (UTF-8, else `--fallback_encoding`), cleaned of
control characters and odd spaces, stripped of Project Gutenberg's license
text (`--strip_gutenberg`), cut into paragraphs and then into sentences (a
rule-based splitter that keeps abbreviations, initials and acronyms whole;
sentences over `--max_sentence_chars` are split). Statistics go beside the
output (`.corpus_txt.stats.json` for `corpus.txt`). Each step is described in
`data_prep/prepare_corpus.py`, which does the work.

Example:
  bert prepare-corpus --input=data_prep/sample_corpus --output_file=/tmp/corpus.txt
"""

from __future__ import annotations

import dataclasses
import sys

from absl import flags

from data_prep.configs import CorpusFiles, CorpusOptions
from official_bert.commands import app, cli_flags, registry

FLAGS = flags.FLAGS

# The configs the flags come from (tests/test_settings.py checks them).
CONFIGS = (CorpusFiles, CorpusOptions)


def define_flags():
    for config in CONFIGS:
        cli_flags.define_flags(config, group=__name__)
    flags.mark_flags_as_required(["input", "output_file"])


def main(argv):
    app.refuse_arguments(argv)
    from data_prep import prepare_corpus
    from official_bert import file_sets

    files = cli_flags.from_flags(CorpusFiles, FLAGS)
    options = cli_flags.from_flags(CorpusOptions, FLAGS)
    # The flag's empty value means no fallback: a file that is not UTF-8 is an error.
    options = dataclasses.replace(options, fallback_encoding=options.fallback_encoding or None)
    stats = prepare_corpus.prepare_corpus(files.input, files.output_file, options)
    print(
        f"wrote {files.output_file}: {stats['documents']} documents, "
        f"{stats['sentences']} sentences, {stats['characters']} characters; "
        f"{len(stats['one_sentence_documents'])} one-sentence documents, "
        f"{len(stats['empty_documents_skipped'])} empty documents skipped, "
        f"{len(stats['decoded_with_fallback_encoding'])} decoded as non-UTF-8 "
        f"(stats: {file_sets.sidecar_path(files.output_file, 'stats')})",
        file=sys.stderr,
    )


if __name__ == "__main__":
    registry.run_command("prepare-corpus")
