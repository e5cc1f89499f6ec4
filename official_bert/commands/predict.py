"""Classify lines of raw text with a fine-tuned classifier: no code to write.

Reads one example per line from `--input_file` (default: standard input):
the text, or for a pair task (MRPC, MNLI, ...) `text a<TAB>text b`. Blank
lines are skipped. Prints, per example, a tab-separated line: the label, the
probability of each label (in label order; a header line names them), and
the text; for regression, the score and the text. `--output_format=json`
prints one JSON object per line instead.

`--model` is any of:
  * a SavedModel written by `run_classifier.py --export_dir` (the TF Serving
    directory with versions inside, whose latest is used, or one version);
  * a `run_classifier.py --output_dir` (its latest checkpoint).

Examples:
  echo "a charming and often affecting journey" | bert predict --model=/tmp/sst2_export
  bert predict --model=/tmp/mrpc --input_file=pairs.tsv --output_format=json
"""

from __future__ import annotations

import json
import sys

from absl import flags

from official_bert import app, io

app.quiet_tensorflow()

FLAGS = flags.FLAGS

flags.DEFINE_string("model", None, "SavedModel (export) directory, or a run_classifier.py --output_dir.")
flags.DEFINE_string("input_file", "-", "Text file, one example per line; '-' = standard input.")
flags.DEFINE_integer("batch_size", 32, "Examples per model call.")
flags.DEFINE_enum("output_format", "tsv", ["tsv", "json"], "tsv lines (with a header) or JSON lines.")
flags.DEFINE_bool("header", True, "tsv: print a header line first.")


def format_rows(predictor, examples, outputs) -> list:
    rows = []
    for i, (text_a, text_b) in enumerate(examples):
        texts = [text_a] + ([text_b] if text_b is not None else [])
        if predictor.regression:
            score = float(outputs["score"][i])
            if FLAGS.output_format == "json":
                rows.append(json.dumps({"score": score, "text_a": text_a, "text_b": text_b}))
            else:
                rows.append("\t".join([f"{score:.6f}", *texts]))
            continue
        label = outputs["label"][i].decode()
        probabilities = [float(p) for p in outputs["probabilities"][i]]
        if FLAGS.output_format == "json":
            names = predictor.labels or [str(k) for k in range(len(probabilities))]
            record = {"label": label, "probabilities": dict(zip(names, probabilities)),
                      "text_a": text_a}
            if text_b is not None:
                record["text_b"] = text_b
            rows.append(json.dumps(record, ensure_ascii=False))
        else:
            rows.append("\t".join([label, *(f"{p:.6f}" for p in probabilities), *texts]))
    return rows


def main(argv):
    del argv
    from data_prep import glue

    if not FLAGS.model:
        raise ValueError("--model is required: a SavedModel directory or a run_classifier.py "
                         "--output_dir")
    if FLAGS.batch_size < 1:
        raise ValueError(f"--batch_size={FLAGS.batch_size}; use at least 1")
    from official_bert.serving import classification as export

    predictor = export.ClassifierPredictor(FLAGS.model)
    if FLAGS.input_file == "-":
        examples = glue.read_text_lines(sys.stdin, predictor.pair, "standard input")
    else:
        if not io.exists(FLAGS.input_file):
            raise FileNotFoundError(f"--input_file {FLAGS.input_file} does not exist")
        with io.open_file(FLAGS.input_file, encoding="utf-8") as f:
            examples = glue.read_text_lines(f, predictor.pair, FLAGS.input_file)
    if FLAGS.output_format == "tsv" and FLAGS.header:
        texts = ["text_a", "text_b"] if predictor.pair else ["text"]
        if predictor.regression:
            print("\t".join(["score", *texts]))
        else:
            print("\t".join(["label", *(f"p({name})" for name in predictor.labels), *texts]))
    for start in range(0, len(examples), FLAGS.batch_size):
        batch = examples[start:start + FLAGS.batch_size]
        texts_b = [b for _, b in batch] if predictor.pair else None
        outputs = predictor.predict([a for a, _ in batch], texts_b)
        for row in format_rows(predictor, batch, outputs):
            print(row, flush=True)


def entry(argv=None):
    """Console entry point (`bert predict`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
