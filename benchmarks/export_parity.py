r"""Does an exported classifier answer exactly as its checkpoint? On a real dev set.

The checkpoint's answers come from `run_classifier.py --do_predict` (features
made by the Python `FullTokenizer`, the Keras model): its `test_results.tsv`.
The export's come from raw text through `serving_default` (in-graph
tensorflow-text tokenization), loaded in a fresh Python process in which this
project cannot be imported — as TF Serving sees it. Prints the agreement of
the labels and the largest probability difference, and writes them as JSON.

    python run_classifier.py --task_name=sst-2 --data_dir=DIR_WITH_test.tsv \
        --init_checkpoint=RUN_DIR --do_predict --export_dir=EXPORT --output_dir=OUT
    python benchmarks/export_parity.py --export_dir=EXPORT \
        --test_results=OUT/test_results.tsv --input_file=DIR_WITH_test.tsv/test.tsv \
        --text_a_column=sentence
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
from absl import app, flags

flags.DEFINE_string("export_dir", None, "The classifier export (TF Serving directory).")
flags.DEFINE_string("test_results", None, "The checkpoint's test_results.tsv.")
flags.DEFINE_string("input_file", None, "The TSV (with a header) that both predicted.")
flags.DEFINE_string("text_a_column", "sentence", "Column of the first text.")
flags.DEFINE_string("text_b_column", None, "Column of the second text (pair tasks).")
flags.DEFINE_integer("batch_size", 64, "Examples per SavedModel call.")
flags.DEFINE_string("json_output", None, "Also write the results here.")
FLAGS = flags.FLAGS

FRESH = r"""
import json, os, sys
sys.modules["official_bert"] = None  # the export must not need this project
sys.modules["data_prep"] = None
import numpy as np, tensorflow as tf, tensorflow_text  # noqa: F401  (WordPiece ops)
args = json.load(sys.stdin)
root = args["export_dir"]
versions = sorted((int(v) for v in os.listdir(root) if v.isdigit()), reverse=True)
path = os.path.join(root, str(versions[0])) if versions else root
serve = tf.saved_model.load(path).signatures["serving_default"]
out = []
for i in range(0, len(args["a"]), args["batch_size"]):
    feed = {"text_a": tf.constant(args["a"][i:i + args["batch_size"]])}
    if args["b"] is not None:
        feed["text_b"] = tf.constant(args["b"][i:i + args["batch_size"]])
    out.extend(serve(**feed)["probabilities"].numpy().tolist())
print(json.dumps(out))
"""


def read_tsv_column(path, column):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if rows and column not in rows[0]:
        raise ValueError(f"{path} has no column {column!r} (it has {', '.join(rows[0])})")
    return [row[column] for row in rows]


def main(argv):
    del argv
    texts_a = read_tsv_column(FLAGS.input_file, FLAGS.text_a_column)
    texts_b = (read_tsv_column(FLAGS.input_file, FLAGS.text_b_column)
               if FLAGS.text_b_column else None)
    checkpoint = np.loadtxt(FLAGS.test_results, delimiter="\t", ndmin=2)
    if len(checkpoint) != len(texts_a):
        raise ValueError(f"{FLAGS.test_results} has {len(checkpoint)} rows, "
                         f"{FLAGS.input_file} {len(texts_a)} examples")
    env = dict(os.environ, PYTHONPATH="", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", FRESH], input=json.dumps(
            {"export_dir": FLAGS.export_dir, "a": texts_a, "b": texts_b,
             "batch_size": FLAGS.batch_size}),
        capture_output=True, text=True, env=env, cwd="/")
    if result.returncode:
        raise SystemExit(result.stderr[-3000:])
    exported = np.asarray(json.loads(result.stdout.strip().splitlines()[-1]))
    same = int((exported.argmax(1) == checkpoint.argmax(1)).sum())
    report = {"examples": len(texts_a), "same_label": same,
              "max_abs_probability_difference": float(np.abs(exported - checkpoint).max())}
    print(f"{report['examples']} examples of {FLAGS.input_file}: the export (raw text, fresh "
          f"process without the project) gives the checkpoint's label for {same}; largest "
          f"probability difference {report['max_abs_probability_difference']:.2e}")
    if FLAGS.json_output:
        with open(FLAGS.json_output, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    flags.mark_flags_as_required(["export_dir", "test_results", "input_file"])
    app.run(main)
