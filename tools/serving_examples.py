"""The guide's serving examples, made from real exports: for each task, the
`saved_model_cli show` of its raw-text signature and a TF Serving REST exchange.

TF Serving's REST API takes the row format `{"signature_name": ..., "instances":
[{input: value, ...}, ...]}` and answers `{"predictions": [{output: value, ...},
...]}` (a single named output is given bare; strings as UTF-8 text). This script
does what the model server does with such a request: it turns the instances into
one batch per named input, calls the signature and splits the outputs back into
rows. The models are the tiny exports of `tests/test_serving.py` (random weights,
so the values only show the shapes and types; the guide says so). From the
repository root:

    python tools/serving_examples.py > /tmp/serving_examples.md
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

# The number of instances each example sends, and how long a list may get in print.
INSTANCES = 2
SHOWN = 6


def rest_exchange(signature, text: dict) -> tuple[dict, dict]:
    """The REST request of the first `INSTANCES` rows of `text` and the response
    TF Serving gives for it (row format)."""
    import tensorflow as tf

    names = list(text)
    rows = [{name: text[name][i] for name in names} for i in range(INSTANCES)]
    request = {"signature_name": "serving_default", "instances": rows}
    batch = {name: tf.constant([row[name] for row in rows]) for name in names}
    outputs = signature(**batch)

    def value(tensor, i):
        item = tensor.numpy()[i]
        if isinstance(item, bytes):
            return item.decode("utf-8")
        item = np.asarray(item)
        if item.dtype.kind in "SO":  # strings: a vector (or matrix) of bytes
            return np.vectorize(lambda x: x.decode("utf-8"), otypes=[object])(item).tolist()
        if item.dtype.kind == "f":
            item = np.round(item.astype(np.float64), 4)
        return item.tolist()

    predictions = [{key: value(outputs[key], i) for key in sorted(outputs)}
                   for i in range(INSTANCES)]
    return request, {"predictions": predictions}


def shorten(value):
    """Long lists cut to their first `SHOWN` items and "…" (for print only)."""
    if isinstance(value, list):
        head = [shorten(v) for v in value[:SHOWN]]
        return head + ["…"] if len(value) > SHOWN else head
    if isinstance(value, dict):
        return {k: shorten(v) for k, v in value.items()}
    return value


def main():
    import tensorflow as tf

    from test_serving import _export_all

    with tempfile.TemporaryDirectory() as root:
        cases = _export_all(Path(root))
        for task, case in cases.items():
            path = case["dir"]
            show = subprocess.run(
                ["saved_model_cli", "show", "--dir", path, "--tag_set", "serve",
                 "--signature_def", "serving_default"],
                capture_output=True, text=True, check=True,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout
            request, response = rest_exchange(
                tf.saved_model.load(path).signatures["serving_default"], case["text"])
            print(f"#### {task}\n\n```\n{show.strip()}\n```\n")
            print("```json\n" + json.dumps(request, ensure_ascii=False) + "\n```\n")
            rows = ",\n  ".join(json.dumps(shorten(row), ensure_ascii=False)
                                 for row in response["predictions"])
            print('```json\n{"predictions": [\n  ' + rows + "\n]}\n```\n")


if __name__ == "__main__":
    main()
