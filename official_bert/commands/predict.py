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
  * its int8 `model.tflite` (`--quantize`), tokenized by the SavedModel beside it;
  * a `run_classifier.py --output_dir` (its latest checkpoint).

Only load a SavedModel you trust: loading and calling one runs whatever
TensorFlow graph it holds (whose ops can read and write files), so a
SavedModel is a program, not data.

It works as a filter: each batch is answered as soon as it is complete, or
as soon as the input pauses (a pipe or a terminal that has sent no more lines
yet), so `bert predict` can sit in a pipeline and answer line by line. A line
that is not UTF-8 (or has the wrong number of fields) stops it with an error
naming the line, after the answers to the lines before it.

Examples (the runs of `bert classify --help`'s examples: SST-2's export, the
QNLI run's directory):
  echo "a charming and often affecting journey" | bert predict --model=/tmp/sst2_export
  printf 'Who wrote the letter?\\tThe letter was written by his sister.\\n' | \\
      bert predict --model=/tmp/qnli --output_format=json
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import sys

from absl import flags, logging

from data_prep import glue
from official_bert.commands import app, cli_flags, registry
from official_bert import inputs, io
from official_bert.errors import BadFileError, UserError
from official_bert.settings import setting

# What loads TensorFlow (checkpoints, serving/) is imported inside the
# functions that run the command: defining the flags (and `--help`) stays fast.

app.quiet_tensorflow()

FLAGS = flags.FLAGS



@dataclasses.dataclass
class PredictConfig:
    """The command's flags (`main` reads them from FLAGS)."""

    model: str | None = setting(
        None, "SavedModel (export) directory, or a run_classifier.py --output_dir. Load only "
        "SavedModels you trust: a SavedModel runs whatever TensorFlow graph it holds (its ops "
        "can read and write files).")
    input_file: str = setting("-", "Text file, one example per line; '-' = standard input.")
    batch_size: int = setting(32, "Examples per model call.")
    output_format: str = setting("tsv", "tsv lines (with a header) or JSON lines.",
                                 choices=("tsv", "json"))
    header: bool = setting(True, "tsv: print a header line first.")


CONFIGS = (PredictConfig,)  # its flags' definitions


def define_flags():
    cli_flags.define_flags(PredictConfig)


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


# A pause in the input (`_lines`): answer the lines read so far.
PAUSE = None


def _lines(source):
    """The lines (bytes) of a binary file, with `PAUSE` wherever the next
    read would wait (a pipe or terminal with nothing more sent yet)."""
    try:
        fd = source.fileno()
        os.fstat(fd)
    except (AttributeError, OSError, ValueError):
        yield from source  # not a local stream: read as it comes
        return
    buffer, searched = bytearray(), 0
    while True:
        start = 0
        while True:
            end = buffer.find(b"\n", max(start, searched))
            if end < 0:
                break
            yield bytes(buffer[start:end + 1])
            start = end + 1
        del buffer[:start]
        searched = len(buffer)  # a long line is searched once, not once per read
        if not select.select([fd], [], [], 0)[0]:
            yield PAUSE
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        buffer += chunk
    if buffer:
        yield bytes(buffer)


def _load(model: str):
    """The predictor of --model; a file that will not load is named, in one line."""
    from official_bert.serving import classification as export
    from official_bert.serving.versions import check_saved_model, latest_version_dir

    if not io.exists(model):
        raise BadFileError(model, io.missing(model), fix="check --model")
    version = latest_version_dir(model)
    if version is not None:  # else not a SavedModel: ClassifierPredictor says what it expected
        check_saved_model(version)
    try:
        return export.ClassifierPredictor(model)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - what loading a damaged or foreign file raises
        if not (isinstance(e, (ValueError, OSError, KeyError, IndexError))
                or type(e).__module__.split(".")[0] in ("tensorflow", "google")):
            raise
        text = str(getattr(e, "message", None) or e).strip()
        text = (text.splitlines() or [type(e).__name__])[0][:300]
        if text.startswith(f"{model} "):
            text = "it " + text[len(model) + 1:]
        raise BadFileError(model, f"cannot be loaded as a classifier: {text}",
                           fix="give a run_classifier.py --export_dir (or --output_dir); a "
                               "SavedModel truncated by a copy must be copied again") from None


def main(argv):
    app.refuse_arguments(argv)
    if not FLAGS.model:
        raise UserError("--model is required: a SavedModel directory or a run_classifier.py "
                        "--output_dir")
    if FLAGS.batch_size < 1:
        raise UserError(f"--batch_size={FLAGS.batch_size}; use at least 1")
    if FLAGS.input_file == "-":
        source, name = sys.stdin.buffer, "standard input"
    else:
        if not io.exists(FLAGS.input_file):
            raise BadFileError(FLAGS.input_file, io.missing(FLAGS.input_file),
                               fix="check --input_file")
        if io.isdir(FLAGS.input_file):
            raise BadFileError(FLAGS.input_file, "is a directory", fix="check --input_file")
        source, name = inputs.open_stream(FLAGS.input_file, "--input_file"), FLAGS.input_file
    predictor = _load(FLAGS.model)
    logging.info("Predicting %s with %s", name, FLAGS.model)
    if FLAGS.output_format == "tsv" and FLAGS.header:
        texts = ["text_a", "text_b"] if predictor.pair else ["text"]
        if predictor.regression:
            print("\t".join(["score", *texts]), flush=True)
        else:
            print("\t".join(["label", *(f"p({name})" for name in predictor.labels), *texts]),
                  flush=True)

    def answer(batch):
        texts_b = [b for _, b in batch] if predictor.pair else None
        outputs = predictor.predict([a for a, _ in batch], texts_b)
        sys.stdout.write("".join(row + "\n" for row in format_rows(predictor, batch, outputs)))
        sys.stdout.flush()

    batch, answered, lines = [], 0, 0
    try:
        with contextlib.nullcontext() if source is sys.stdin.buffer else source:
            for number, line in _numbered(_lines(source)):
                lines = number or lines
                if line is PAUSE:
                    if batch:
                        answer(batch)
                        answered, batch = answered + len(batch), []
                    continue
                batch.extend(_one_line(glue, line, number, predictor.pair, name))
                if len(batch) >= FLAGS.batch_size:
                    answer(batch)
                    answered, batch = answered + len(batch), []
            if batch:
                answer(batch)
                answered += len(batch)
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    if not lines:  # (an empty file was refused before; a stream, only once it ended)
        raise inputs.empty_error("--input_file", FLAGS.input_file,
                                 inputs.classify(FLAGS.input_file))
    if not answered:
        raise BadFileError(name, "holds no text (only blank lines)")


def _numbered(lines):
    """(line number, line) for each line, (None, PAUSE) for each pause."""
    number = 0
    for line in lines:
        if line is PAUSE:
            yield None, PAUSE
        else:
            number += 1
            yield number, line


def _one_line(glue, line: bytes, number: int, pair: bool, name: str):
    """The example of input line `number` (none for a blank line); errors name the
    line. Line 1 loses a byte-order mark there (`io.strip_bom`)."""
    return list(glue.iter_text_lines([line], pair, name, first_line=number))


if __name__ == "__main__":
    registry.run_command("predict")
