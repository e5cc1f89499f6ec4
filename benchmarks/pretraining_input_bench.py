r"""Pre-training input, side by side: TFRecords vs raw text read on the fly, with and without n-grams.

The corpus (default: `<repo>/../shared/data/pretrain_text`, the public-domain
books and speeches; without it the bundled `data_prep/sample_corpus`) is put
into one-sentence-per-line form with `prepare_corpus`. Then, in one process:

1. the generator (`create_pretraining_data`, one worker, `--dupe_factor=1`)
   writes static files with single-token masking and with whole-word 3-gram
   masking (`--do_whole_word_mask --max_ngram_size=3`), and unmasked files
   with word starts for dynamic masking: instances/s of each, and the masked
   spans' length distribution next to official/nlp's 1/n law;
2. `input_pipeline.pretraining_dataset` reads batches through each input
   mode: static TFRecords, dynamic masking of TFRecords (whole words, and
   whole-word 3-grams, in the graph), and `--input_format=text` (instances
   made on the fly by the generator's code, single tokens and whole-word
   3-grams): seconds to the first batch (the shuffle buffer fills first) and
   instances/s over `--batches` batches after `--warmup_batches`.

Prints a table and writes JSON (`--output_json`). The load average is printed:
the numbers are only comparable within one run.

  python benchmarks/pretraining_input_bench.py --batches=300
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

from benchmarks import common  # noqa: E402

common.define_corpus_flags()
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per instance.")
flags.DEFINE_integer("batch_size", 32, "Instances per batch.")
flags.DEFINE_integer("batches", 300, "Timed batches per input mode.")
flags.DEFINE_integer("warmup_batches", 20, "Untimed batches first (after the first one).")
flags.DEFINE_integer("max_ngram_size", 3, "The n-gram modes' --max_ngram_size.")
flags.DEFINE_string("output_json", None, "Where to write the results (JSON).")
FLAGS = flags.FLAGS


def generate(corpus, output, vocab, **config):
    from data_prep.create_pretraining_data import PretrainingDataConfig, create_pretraining_data

    return create_pretraining_data(
        corpus, output, vocab, PretrainingDataConfig(
            max_seq_length=FLAGS.max_seq_length,
            max_predictions_per_seq=FLAGS.max_predictions_per_seq, dupe_factor=1, **config),
        num_workers=1, progress_seconds=0, log=None)


def time_reading(dataset) -> dict:
    start = time.perf_counter()
    iterator = iter(dataset)
    next(iterator)
    first = time.perf_counter() - start
    for _ in range(FLAGS.warmup_batches):
        next(iterator)
    start = time.perf_counter()
    for _ in range(FLAGS.batches):
        batch = next(iterator)
    batch["input_word_ids"].numpy()
    seconds = time.perf_counter() - start
    return {"first_batch_s": first,
            "instances_per_s": FLAGS.batches * FLAGS.batch_size / seconds}


def main(argv):
    del argv
    from data_prep import prepare_corpus
    from data_prep.pretraining_instances import PretrainingDataConfig
    from official_bert.training import input_pipeline

    vocab = FLAGS.vocab_file or common.bert_base_uncased_vocab()
    work = pathlib.Path(tempfile.mkdtemp(prefix="pretraining_input_bench_"))
    corpus = str(work / "corpus.txt")
    prepare_corpus.prepare_corpus((FLAGS.corpus or common.default_corpus()).split(","), corpus)
    L, P, N = FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, FLAGS.max_ngram_size

    generated = {}
    for name, config in (("single tokens", {}),
                         (f"whole-word {N}-grams", dict(do_whole_word_mask=True,
                                                        max_ngram_size=N)),
                         ("unmasked, word starts", dict(do_whole_word_mask=True,
                                                        dynamic_masking=True))):
        path = str(work / f"{len(generated)}.tfrecord")
        summary = generate(corpus, path, vocab, **config)
        generated[name] = dict(path=path, summary=summary)
    static, spans, dynamic = (generated[k]["path"] for k in generated)

    shared = dict(seq_length=L, max_predictions_per_seq=P, batch_size=FLAGS.batch_size,
                  seed=1, vocab_file=vocab)
    modes = {
        "TFRecords, static masks": dict(file_patterns=static),
        "TFRecords, dynamic whole words": dict(file_patterns=dynamic),
        f"TFRecords, dynamic whole-word {N}-grams": dict(file_patterns=dynamic,
                                                         max_ngram_size=N),
        "text, single tokens": dict(file_patterns=corpus, text_config=PretrainingDataConfig()),
        f"text, whole-word {N}-grams": dict(file_patterns=corpus, text_config=PretrainingDataConfig(
            do_whole_word_mask=True, max_ngram_size=N)),
    }
    reading = {}
    for name, kwargs in modes.items():
        reading[name] = time_reading(input_pipeline.pretraining_dataset(**shared, **kwargs))
        print(f"  {name}: {reading[name]}", flush=True)

    weights = [1 / n for n in range(1, N + 1)]
    zipf = [w / sum(weights) for w in weights]
    ngram_summary = generated[f"whole-word {N}-grams"]["summary"]
    results = {
        "corpus": FLAGS.corpus or common.default_corpus(), "vocab_file": vocab,
        "load_average": os.getloadavg(),
        "documents": generated["single tokens"]["summary"]["documents"],
        "generator": {name: {k: g["summary"][k] for k in (
            "instances", "instances_per_second", "masked_fraction",
            "masked_as_mask_fraction", "masked_ngram_size_fractions") if k in g["summary"]}
            for name, g in generated.items()},
        "ngram_size_fractions": ngram_summary["masked_ngram_size_fractions"],
        "one_over_n": zipf,
        "reading": reading,
    }

    print(f"\nCorpus {results['corpus']}: {results['documents']} documents; "
          f"load average {results['load_average'][0]:.1f}")
    print("\nGenerator (create_pretraining_data, 1 worker, dupe_factor 1):\n")
    print("| masking | instances | instances/s | masked | [MASK] |")
    print("|---|---|---|---|---|")
    for name, g in results["generator"].items():
        masked = g.get("masked_fraction")
        print(f"| {name} | {g['instances']:,} | {g['instances_per_second']:,.0f} | "
              + (f"{100 * masked:.2f}% | {100 * g['masked_as_mask_fraction']:.1f}% |"
                 if masked is not None else "at read time | |"))
    print(f"\nWhole-word {N}-gram spans by length (n = 1..{N}): "
          + ", ".join(f"{100 * x:.1f}%" for x in results["ngram_size_fractions"])
          + " (1/n normalized: " + ", ".join(f"{100 * x:.1f}%" for x in zipf) + ")")
    print(f"\nReading (pretraining_dataset, batch {FLAGS.batch_size}, {FLAGS.batches} batches "
          "after warm-up):\n")
    print("| input | first batch (s) | instances/s |")
    print("|---|---|---|")
    for name, r in reading.items():
        print(f"| {name} | {r['first_batch_s']:.1f} | {r['instances_per_s']:,.0f} |")
    if FLAGS.output_json:
        pathlib.Path(FLAGS.output_json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    app.run(main)
