"""The guide's per-task serving examples (docs/serve.md, "Every task: its signature, request
and response"), made from real exports.

For each task: the export command, `saved_model_cli show` of its raw-text
signature, the `curl` request to TF Serving's REST API, the response body, and
the gRPC call (the guide's `predict` helper), printed as one collapsible
Markdown block per task.

TF Serving's REST API takes the row format `{"signature_name": ..., "instances":
[{input: value, ...}, ...]}` and answers `{"predictions": [{output: value, ...},
...]}`; a signature with one output is answered with the bare values,
`{"predictions": [value, ...]}`; strings are UTF-8 text. This script does what
the model server does with such a request: it turns the instances into one batch
per named input, calls the signature and splits the outputs back into rows. The
models are the tiny exports `tests/test_serving.py` checks (random weights, so the
values only show the shapes and types; floats are rounded to 4 places and lists
longer than 6 items cut with "…" for print). From the repository root:

    python tools/serving_examples.py > /tmp/serving_examples.md
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, this folder is on sys.path; the repository root is not, and the tiny
# exports (`tools.kit`) are not installed with the library.
sys.path.insert(0, str(ROOT))

# The number of instances each example sends, and how long a list may get in print
# (a row's list; the lists inside it, e.g. the encoder's vectors).
INSTANCES = 2
SHOWN = 6
SHOWN_INSIDE = 5

# task → (title, the export command that makes such a model)
TASKS = {
    "classification": ("Classification (a sentence pair, 3 labels)",
                       "python run_classifier.py --task_name=mnli ... --export_dir=D"),
    "regression": ("Regression (one sentence, a float score)",
                   "python run_classifier.py --regression --train_file=... --export_dir=D"),
    "squad_v1": ("SQuAD v1.1", "python run_squad.py ... --export_dir=D"),
    "squad_v2": ("SQuAD v2.0 (the tuned threshold baked in)",
                 "python run_squad.py --version_2_with_negative --tune_threshold --do_predict "
                 "... --export_dir=D"),
    "multiple_choice": ("Multiple choice (SWAG)", "python run_swag.py ... --export_dir=D"),
    "ner": ("NER (tags per input word)", "python run_ner.py ... --export_dir=D"),
    "encoder": ("Encoder", "bert export-encoder --init_checkpoint=C --output_dir=H "
                           "--export_dir=D"),
    "pretraining": ("Pre-training (masked LM and next sentence)",
                    "python run_pretraining.py ... --export_dir=D"),
}


def _plain(item):
    """One row of an output as JSON: strings as text, floats rounded."""
    if isinstance(item, bytes):
        return item.decode("utf-8")
    item = np.asarray(item)
    if item.dtype.kind in "SO":  # strings: a vector (or matrix) of bytes
        return np.vectorize(lambda x: x.decode("utf-8"), otypes=[object])(item).tolist()
    if item.dtype.kind == "f":
        item = np.round(item.astype(np.float64), 4)
    return item.tolist()


def rest_exchange(signature, text: dict, signature_name="serving_default") -> tuple[dict, dict]:
    """The REST request of the first `INSTANCES` rows of `text` and the response
    TF Serving gives for it (row format)."""
    import tensorflow as tf

    names = list(text)
    rows = [{name: text[name][i] for name in names} for i in range(INSTANCES)]
    request = {"signature_name": signature_name, "instances": rows}
    batch = {name: tf.constant([row[name] for row in rows]) for name in names}
    outputs = {key: value.numpy() for key, value in signature(**batch).items()}
    if len(outputs) == 1:  # one named output: TF Serving gives the bare values
        [values] = outputs.values()
        return request, {"predictions": [_plain(values[i]) for i in range(INSTANCES)]}
    predictions = [{key: _plain(outputs[key][i]) for key in sorted(outputs)}
                   for i in range(INSTANCES)]
    return request, {"predictions": predictions}


def to_json(value) -> str:
    """JSON with the text as UTF-8, but combining marks escaped (`Cafe\\u0301`): the
    examples keep a decomposed accent that an editor would otherwise compose."""
    text = json.dumps(value, ensure_ascii=False)
    return "".join(f"\\u{ord(c):04x}" if unicodedata.combining(c) else c for c in text)


def shorten(value, depth=0):
    """Long lists cut to their first `SHOWN` items (`SHOWN_INSIDE` in a list
    within a list) and "…" (for print only)."""
    if isinstance(value, list):
        shown = SHOWN if depth == 0 else SHOWN_INSIDE
        head = [shorten(v, depth + 1) for v in value[:shown]]
        return head + ["…"] if len(value) > shown else head
    if isinstance(value, dict):
        return {k: shorten(v, depth) for k, v in value.items()}
    return value


def show(path: str) -> str:
    """`saved_model_cli show` of the raw-text signature (the binary as installed:
    `show` reads the file, it needs no text ops)."""
    return subprocess.run(
        ["saved_model_cli", "show", "--dir", path, "--tag_set", "serve",
         "--signature_def", "serving_default"],
        capture_output=True, text=True, check=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout.strip()


def task_block(task: str, path: str, request: dict, response: dict) -> str:
    title, command = TASKS[task]
    body = to_json(request)
    if len(response["predictions"]) and isinstance(response["predictions"][0], dict):
        rows = ",\n  ".join(to_json(shorten(row)) for row in response["predictions"])
        answer = '{"predictions": [\n  ' + rows + "\n]}"
    else:
        answer = to_json(shorten(response))
    columns = {name: [row[name] for row in request["instances"]]
               for name in request["instances"][0]}
    grpc = f"predict({task!r}, {to_json(columns)})"
    return "\n".join([
        f"<details><summary><b>{title}</b>: <code>{command}</code></summary>", "",
        "`saved_model_cli show --dir D/<version> --tag_set serve "
        "--signature_def serving_default`:", "",
        "```", show(path), "```", "",
        "```bash",
        f"curl -d @- http://localhost:8501/v1/models/{task}:predict <<'EOF'",
        body, "EOF", "```", "",
        "```json", answer, "```", "",
        "gRPC (the `predict` helper above):", "",
        "```python", grpc, "```", "",
        "</details>", ""])


def main():
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the raw-text signatures' ops)

    from tools.kit.serving_exports import export_all

    with tempfile.TemporaryDirectory() as root:
        cases = export_all(Path(root))
        for task in TASKS:
            case = cases[task]
            request, response = rest_exchange(
                tf.saved_model.load(case["dir"]).signatures["serving_default"], case["text"])
            print(task_block(task, case["dir"], request, response))


if __name__ == "__main__":
    main()
