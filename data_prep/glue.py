"""Sentence(-pair) classification data: GLUE's nine tasks and your own CSV/TSV/JSON lines.

One definition per task (`GLUE_TASKS`): its files, text and label columns,
label list and metrics. The readers check every row and name the file, line
and value of anything wrong (a missing column, an unknown label, a score that
is not a number, a split with no example).

GLUE layouts (the TSVs of the GLUE distribution; columns by header name, so
extra columns do not matter; quotes are literal characters, as in
google-research/bert's `csv.reader(..., quotechar=None)`):

    task   files                                      text a        text b        label
    cola   train/dev.tsv (no header), test.tsv        column 4      -             column 2: 0, 1
    sst-2  train/dev/test.tsv                         sentence      -             label: 0, 1
    mrpc   train/dev/test.tsv                         #1 String     #2 String     Quality: 0, 1
    sts-b  train/dev/test.tsv                         sentence1     sentence2     score: float (regression)
    qqp    train/dev/test.tsv                         question1     question2     is_duplicate: 0, 1
    mnli   train, dev_matched, dev_mismatched,        sentence1     sentence2     gold_label: contradiction,
           test_matched, test_mismatched .tsv                                     entailment, neutral
    qnli   train/dev/test.tsv                         question      sentence      label: entailment, not_entailment
    rte    train/dev/test.tsv                         sentence1     sentence2     label: entailment, not_entailment
    wnli   train/dev/test.tsv                         sentence1     sentence2     label: 0, 1

XNLI (`--task_name=xnli`, google-research/bert's XnliProcessor; not GLUE):
`multinli/multinli.train.<lang>.tsv` (columns 1-3: premise, hypothesis,
label, "contradictory" read as "contradiction") for training; `xnli.dev.tsv`
and `xnli.test.tsv` (columns 7 and 8 the texts, column 2 the label) filtered
to the rows whose column 1 is the language. Labels contradiction,
entailment, neutral. The language is Chinese as in google's code
(`xnli`), or any XNLI language as `xnli-<lang>` (xnli-de, xnli-en, ...).
`bert download xnli` writes this layout.

Your own data (`custom_task`): a `.tsv`, `.csv` (with a header row) or
`.jsonl` file (one JSON object per line), text and label columns named by the
caller; the labels listed by the caller or taken from the training data
(sorted), or a float score for regression.

The examples become the model's inputs in `glue_features`.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from official_bert import io
from official_bert.errors import BadFileError, UserError

Column = Union[str, int]  # a header name, or a 0-based index in a file without header


class GlueFormatError(BadFileError):
    """A data file does not have the expected layout (names file, line, value)."""


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One row: `text_b` is None for single-sentence tasks; `label` is the raw
    label string (classification), a float (regression), or None (unlabeled)."""

    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: Optional[Union[str, float]] = None
    line: int = 0
    # The file's own id of the row (GLUE test sets' `index` column, QQP's `id`),
    # when the task names such a column and the file has it.
    index: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Columns:
    """Where a file keeps its fields: header names, or indices when `header` is False."""

    text_a: Column
    text_b: Optional[Column] = None
    label: Optional[Column] = None
    header: bool = True
    # Only the rows whose column `keep[0]` holds `keep[1]` (XNLI's language).
    keep: Optional[Tuple[Column, str]] = None
    # (raw label, label) pairs read as the label (XNLI-MT's "contradictory").
    label_map: Tuple[Tuple[str, str], ...] = ()
    # The row's own id (`InputExample.index`): read when the header has it.
    index: Optional[Column] = None


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A sentence(-pair) classification or regression task.

    Args:
        name: the `--task_name`.
        labels: the label strings in class-id order; None for regression (and
            for a custom task until they are read from its training data).
        columns: the columns of the train and dev files.
        test_columns: the columns of the test files (no label); default `columns`.
        train_file: file name in the data directory.
        dev_files: ((split suffix, file name), ...): the first is the main dev
            set; later ones (MNLI mismatched) are evaluated too when present.
        test_files: the same for prediction.
        metric_kind: a key of `classification_metrics.TASK_METRICS`.
        submission_files: ((test split suffix, file name), ...): the GLUE
            leaderboard's file for each test set (`submission_text`); empty
            for tasks that are not on it.
    """

    name: str
    labels: Optional[Tuple[str, ...]]
    columns: Columns
    test_columns: Optional[Columns] = None
    train_file: str = "train.tsv"
    dev_files: Tuple[Tuple[str, str], ...] = (("", "dev.tsv"),)
    test_files: Tuple[Tuple[str, str], ...] = (("", "test.tsv"),)
    metric_kind: str = "multiclass"
    file_format: Optional[str] = None  # None: from the file name's extension
    dev_columns: Optional[Columns] = None  # the dev files' columns when not `columns` (XNLI)
    submission_files: Tuple[Tuple[str, str], ...] = ()

    @property
    def is_regression(self) -> bool:
        return self.metric_kind == "regression"

    @property
    def is_pair(self) -> bool:
        return self.columns.text_b is not None

    def with_labels(self, labels: Sequence[str]) -> "TaskSpec":
        labels = tuple(labels)
        kind = self.metric_kind
        if kind in ("binary", "multiclass"):
            kind = "binary" if len(labels) == 2 else "multiclass"
        return dataclasses.replace(self, labels=labels, metric_kind=kind)


_PAIR_LABELS = ("entailment", "not_entailment")
# GLUE's test files keep each row's id in an `index` column (QQP: `id`); the
# leaderboard's files name every prediction by it.
_INDEX = "index"


def _glue(name, labels, columns, submission, test_columns=None, **kwargs) -> TaskSpec:
    """A GLUE task whose test rows carry their id (`Columns.index`) and whose
    test predictions go to the leaderboard file(s) `submission`."""
    index = kwargs.pop("index", _INDEX)
    test_columns = test_columns or dataclasses.replace(columns, label=None)
    test_files = kwargs.get("test_files", (("", "test.tsv"),))
    if isinstance(submission, str):
        submission = ((test_files[0][0], submission),)
    return TaskSpec(name, labels, columns, test_columns=dataclasses.replace(test_columns,
                                                                            index=index),
                    submission_files=submission, **kwargs)


GLUE_TASKS = {
    "cola": _glue("cola", ("0", "1"), Columns(3, None, 1, header=False), "CoLA.tsv",
                  test_columns=Columns("sentence"), metric_kind="matthews"),
    "sst-2": _glue("sst-2", ("0", "1"), Columns("sentence", None, "label"), "SST-2.tsv",
                   metric_kind="binary"),
    "mrpc": _glue("mrpc", ("0", "1"), Columns("#1 String", "#2 String", "Quality"), "MRPC.tsv",
                  metric_kind="binary"),
    "sts-b": _glue("sts-b", None, Columns("sentence1", "sentence2", "score"), "STS-B.tsv",
                   metric_kind="regression"),
    "qqp": _glue("qqp", ("0", "1"), Columns("question1", "question2", "is_duplicate"), "QQP.tsv",
                 metric_kind="binary", index="id"),
    # AX, GLUE's diagnostic set, is predicted with the MNLI model: `bert download
    # glue/diagnostic` puts it beside the MNLI directory.
    "mnli": _glue("mnli", ("contradiction", "entailment", "neutral"),
                  Columns("sentence1", "sentence2", "gold_label"),
                  (("", "MNLI-m.tsv"), ("mismatched", "MNLI-mm.tsv"), ("ax", "AX.tsv")),
                  dev_files=(("", "dev_matched.tsv"), ("mismatched", "dev_mismatched.tsv")),
                  test_files=(("", "test_matched.tsv"), ("mismatched", "test_mismatched.tsv"),
                              ("ax", "../diagnostic/diagnostic.tsv"))),
    "qnli": _glue("qnli", _PAIR_LABELS, Columns("question", "sentence", "label"), "QNLI.tsv",
                  metric_kind="binary"),
    "rte": _glue("rte", _PAIR_LABELS, Columns("sentence1", "sentence2", "label"), "RTE.tsv",
                 metric_kind="binary"),
    "wnli": _glue("wnli", ("0", "1"), Columns("sentence1", "sentence2", "label"), "WNLI.tsv",
                  metric_kind="binary"),
}
ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "mnli-m": "mnli"}
CUSTOM = "custom"
XNLI = "xnli"
# XNLI's 15 languages (google's XnliProcessor hard-codes "zh").
XNLI_LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur",
                  "vi", "zh")
FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}


def known_task_names() -> List[str]:
    return sorted(GLUE_TASKS) + [XNLI, f"{XNLI}-<lang>", CUSTOM]


def xnli_task(language: str = "zh") -> TaskSpec:
    """google-research/bert's XnliProcessor for `language` (its default: zh).

    Training reads `multinli/multinli.train.<language>.tsv` (header skipped;
    premise, hypothesis, label; "contradictory" is "contradiction"); dev and
    test read `xnli.dev.tsv` / `xnli.test.tsv`, only the rows of `language`
    (column 1), texts in columns 7 and 8, the label in column 2.
    """
    labels = ("contradiction", "entailment", "neutral")
    by_language = dict(header=True, keep=(0, language))
    return TaskSpec(
        XNLI if language == "zh" else f"{XNLI}-{language}", labels,
        Columns(0, 1, 2, header=True, label_map=(("contradictory", "contradiction"),)),
        dev_columns=Columns(6, 7, 1, **by_language),
        test_columns=Columns(6, 7, None, **by_language),
        train_file=f"multinli/multinli.train.{language}.tsv",
        dev_files=(("", "xnli.dev.tsv"),), test_files=(("", "xnli.test.tsv"),),
        metric_kind="multiclass")


def get_task(name: str) -> TaskSpec:
    """The GLUE task called `name` (case-insensitive; sst2/stsb accepted)."""
    key = (name or "").strip().lower()
    key = ALIASES.get(key, key)
    if key == XNLI or key.startswith(XNLI + "-"):
        language = key[len(XNLI) + 1:] or "zh"
        if language in XNLI_LANGUAGES:
            return xnli_task(language)
    if key not in GLUE_TASKS:
        raise UserError(f"--task_name={name!r} is unknown; known tasks: "
                        f"{', '.join(known_task_names())} (custom reads your own "
                        "CSV/TSV/JSON lines with --text_a_column/--label_column)")
    return GLUE_TASKS[key]


def custom_task(text_a_column: str, text_b_column: Optional[str] = None,
                label_column: str = "label", labels: Optional[Sequence[str]] = None,
                regression: bool = False) -> TaskSpec:
    """A task over your own files, with named columns.

    Args:
        text_a_column, text_b_column: the text columns (b optional).
        label_column: the label (or score) column.
        labels: the label strings in class-id order; None = from the
            training data (`labels_from_examples`), unless `regression`.
        regression: a float score and one output (MSE), as STS-B.
    """
    if not text_a_column:
        raise UserError("custom tasks need --text_a_column (the header name of the text column)")
    if regression and labels:
        raise UserError("--labels and --regression exclude each other")
    kind = "regression" if regression else "multiclass"
    spec = TaskSpec(CUSTOM, None, Columns(text_a_column, text_b_column or None, label_column),
                    test_columns=Columns(text_a_column, text_b_column or None, None),
                    train_file="train", dev_files=(("", "dev"),), test_files=(("", "test"),),
                    metric_kind=kind)
    if labels:
        spec = spec.with_labels(labels)
    return spec


def find_data_file(data_dir: str, name: str) -> str:
    """`data_dir/name`, or for a name without extension the first of
    name.tsv, name.csv, name.jsonl that exists. A name starting with "../"
    is beside `data_dir` (MNLI's AX), resolved here: gs:// paths have no parent links."""
    while name.startswith("../"):
        data_dir, name = os.path.dirname(os.fspath(data_dir).rstrip("/")), name[3:]
    path = io.join(data_dir, name)
    if os.path.splitext(name)[1]:
        return path
    for extension in FORMATS:
        if io.exists(path + extension):
            return path + extension
    return path + ".tsv"  # missing: the reader names it


# === Reading ===


def file_format(path: str, default: Optional[str] = None) -> str:
    extension = os.path.splitext(path)[1].lower()
    if extension in FORMATS:
        return FORMATS[extension]
    if default:
        return default
    raise BadFileError(path, "has an extension that names no format", fix="use .tsv, .csv or "
                       ".jsonl")


def _rows(path: str, fmt: str):
    """(line number, list of fields or dict) for every non-blank row."""
    if not io.exists(path):
        raise GlueFormatError(path, io.missing(path), fix="check the file name (or --data_dir)")
    if io.isdir(path):
        raise GlueFormatError(path, "is a directory, not a data file")
    try:
        yield from _decoded_rows(path, fmt)
    except UnicodeDecodeError as e:
        raise io.not_utf8(path, e) from None


def _decoded_rows(path: str, fmt: str):
    if fmt == "jsonl":
        with io.open_file(path) as f:  # a BOM is dropped (io.strip_bom)
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise GlueFormatError(path, f"is not JSON ({e.msg})", line=number) from None
                if not isinstance(row, dict):
                    raise GlueFormatError(path, f"holds a JSON {type(row).__name__}, expected "
                                          "an object", line=number)
                yield number, row
        return
    # MRPC's files start with a byte-order mark: `io.open_file` drops it (io.strip_bom).
    csv.field_size_limit(2 ** 31 - 1)  # a long document is a long field, not an error
    with io.open_file(path, newline="") as f:
        if fmt == "tsv":
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        else:
            reader = csv.reader(f)
        previous = 0
        try:
            for row in reader:
                start, previous = previous + 1, reader.line_num
                if not row or all(not field.strip() for field in row):
                    continue
                yield start, row
        except csv.Error as e:
            raise GlueFormatError(path, f"is not valid {fmt.upper()} ({e})",
                                  line=reader.line_num) from None


def _describe(column: Column) -> str:
    return f"column {column + 1}" if isinstance(column, int) else f"column {column!r}"


def _jsonl_fields(row: dict, columns: Columns, wanted: dict, path: str, number: int) -> dict:
    """The wanted fields of a JSON lines row, as strings (and its own id, when it has one)."""
    fields = {}
    if columns.index is not None and row.get(columns.index) is not None:
        fields["index"] = str(row[columns.index])
    for key, column in wanted.items():
        if column not in row:
            raise GlueFormatError(
                path, f"has no {key} field {column!r} (fields: "
                f"{', '.join(map(str, row))})", line=number,
                fix="fix the file or the column flag")
        value = row[column]
        fields[key] = "" if value is None else (
            json.dumps(value) if isinstance(value, bool) else str(value))
    return fields


def _header_positions(row: list, columns: Columns, wanted: dict, path: str, number: int,
                      fmt: str) -> tuple[dict, Optional[int]]:
    """From a header row: the position of each wanted column, and of the row's
    own id (`columns.index`) when the header has it."""
    header = [name.strip() for name in row]
    missing = [f"{key} {_describe(c)}" for key, c in wanted.items()
               if not isinstance(c, int) and c not in header]
    if missing:
        raise GlueFormatError(
            path, f"has a header without {', '.join(missing)} "
            f"(columns: {', '.join(header)})", line=number,
            fix=f"is this the right file / task, and is it "
                f"{'tab' if fmt == 'tsv' else 'comma'}-separated?")
    positions = {key: (c if isinstance(c, int) else header.index(c)) for key, c in wanted.items()}
    return positions, header.index(columns.index) if columns.index in header else None


def _table_fields(row: list, positions: dict, row_id: Optional[int], wanted: dict, path: str,
                  number: int, fmt: str) -> dict:
    """The wanted fields of a TSV/CSV row (and its own id, when the file has one)."""
    fields = {}
    if row_id is not None and row_id < len(row):
        fields["index"] = row[row_id].strip()
    for key, position in positions.items():
        if position >= len(row):
            raise GlueFormatError(
                path, f"has {len(row)} columns, but the {key} "
                f"({_describe(wanted[key])}) is column {position + 1}", line=number,
                fix=f"a missing field, or not "
                    f"{'tab' if fmt == 'tsv' else 'comma'}-separated?")
        fields[key] = row[position]
    return fields


def _parse_label(raw: str, labels: Optional[Sequence[str]], allowed: Optional[set],
                 regression: bool, path: str, number: int) -> Union[str, float]:
    """A row's label: a finite float score (regression) or one of `labels`."""
    if regression:
        try:
            label = float(raw)
        except ValueError:
            raise GlueFormatError(path, f"has the score {raw!r}, not a number",
                                  line=number, fix="regression tasks need a float "
                                  "label") from None
        if not np.isfinite(label):
            raise GlueFormatError(path, f"has the score {raw!r}, which is not finite",
                                  line=number)
        return label
    if not raw:
        raise GlueFormatError(path, "has an empty label", line=number)
    if allowed is not None and raw not in allowed:
        raise GlueFormatError(
            path, f"has the unknown label {raw!r}", line=number,
            fix=f"the labels are {', '.join(labels)} (for your own data list them "
                "all with --labels)")
    return raw


def read_examples(path: str, columns: Columns, labels: Optional[Sequence[str]] = None,
                  regression: bool = False, require_label: bool = True,
                  fmt: Optional[str] = None, split: str = "") -> List[InputExample]:
    """Reads one file into `InputExample`s, checking every row.

    Args:
        path: the file.
        columns: where the text(s) and label are.
        labels: the allowed label strings; None accepts any (custom tasks
            learn the list from the training data).
        regression: the label is a float score.
        require_label: False for test files (a label column, if any, is ignored).
        fmt: "tsv", "csv" or "jsonl"; default from the extension (else tsv).
        split: prefix of the example guids ("train", "dev", ...).

    Raises:
        GlueFormatError: naming the file, the line and the value.
    """
    fmt = fmt or file_format(path, "tsv")
    wanted = {"text_a": columns.text_a, "text_b": columns.text_b,
              "label": columns.label if require_label else None}
    wanted = {k: v for k, v in wanted.items() if v is not None}
    if require_label and "label" not in wanted:
        raise UserError(f"no label column is defined for {path}; pass --label_column")
    allowed = set(labels) if labels is not None else None
    positions = None
    row_id = None  # where the row's own id is (`columns.index`), when the file has it
    examples = []
    for number, row in _rows(path, fmt):
        if fmt == "jsonl":
            fields = _jsonl_fields(row, columns, wanted, path, number)
        else:
            if columns.header and positions is None:
                positions, row_id = _header_positions(row, columns, wanted, path, number, fmt)
                continue
            if positions is None:
                positions = dict(wanted)
            fields = _table_fields(row, positions, row_id, wanted, path, number, fmt)
        label = None
        if require_label:
            label = _parse_label(fields["label"].strip(), labels, allowed, regression, path,
                                 number)
        examples.append(InputExample(
            guid=f"{split or 'example'}-{len(examples)}", text_a=fields["text_a"],
            text_b=fields.get("text_b"), label=label, line=number, index=fields.get("index")))
    if not examples:
        raise GlueFormatError(path, "holds no examples (only blank lines or a header)")
    return examples


def read_split(task: TaskSpec, path: str, split: str) -> List[InputExample]:
    """Reads `path` as the task's `split` ("train", "dev" or "test")."""
    columns = task.columns if split == "train" else (task.dev_columns or task.columns)
    if split == "test":
        columns = task.test_columns or dataclasses.replace(columns, label=None)
    if columns.keep is not None or columns.label_map:
        return _read_selected(task, path, columns, split)
    if split == "test":
        return read_examples(path, columns, task.labels, task.is_regression,
                             require_label=False, fmt=task.file_format, split=split)
    return read_examples(path, columns, task.labels, task.is_regression,
                         require_label=True, fmt=task.file_format, split=split)


def read_unlabelled(task: TaskSpec, path: str) -> List[InputExample]:
    """Reads `path` as more text of the task's training file, without labels
    (--distill_text: the teacher labels it): the training file's text columns
    and format; a label column, if any, is ignored."""
    columns = dataclasses.replace(task.columns, label=None, keep=None, label_map=())
    return read_examples(path, columns, task.labels, task.is_regression,
                         require_label=False, fmt=task.file_format, split="distill_text")


def _read_selected(task: TaskSpec, path: str, columns: Columns,
                   split: str) -> List[InputExample]:
    """`read_examples` with `columns.keep` (only the rows holding a value) and
    `columns.label_map` (labels renamed before they are checked)."""
    from official_bert.errors import BadFileError

    require_label = split != "test"
    fmt = task.file_format or file_format(path, "tsv")
    plain = dataclasses.replace(columns, keep=None, label_map=())
    examples = read_examples(path, plain, None, task.is_regression,
                             require_label=require_label, fmt=fmt, split=split)
    if columns.keep is not None:
        column, value = columns.keep
        lines, index, first = set(), column if isinstance(column, int) else None, True
        for number, row in _rows(path, fmt):
            if first and columns.header:  # the header row, which may name the column
                first, header = False, [name.strip() for name in row]
                if index is None:
                    if column not in header:
                        raise BadFileError(path, f"has no column {column!r} in its header",
                                           line=number)
                    index = header.index(column)
                continue
            if index < len(row) and row[index].strip() == value:
                lines.add(number)
        examples = [e for e in examples if e.line in lines]
        if not examples:
            raise BadFileError(path, f"holds no example whose {_describe(column)} is "
                               f"{value!r}", fix="is it the right file, or the right "
                               "--task_name (xnli-<language>)?")
    renamed = dict(columns.label_map)
    examples = [dataclasses.replace(e, guid=f"{split}-{i}",
                                    label=renamed.get(e.label, e.label))
                for i, e in enumerate(examples)]
    if require_label and task.labels is not None:
        check_labels(examples, task.labels, path)
    return examples


def labels_from_examples(examples: Sequence[InputExample]) -> List[str]:
    """The distinct labels, sorted (numerically when they are all integers)."""
    found = {e.label for e in examples if e.label is not None}
    if len(found) < 2:
        raise UserError(f"the training data has {len(found)} distinct label(s) "
                        f"({', '.join(map(str, found)) or 'none'}); a classifier needs "
                        "at least 2 (list them with --labels)")
    try:
        return sorted(found, key=int)
    except ValueError:
        return sorted(found)


def check_labels(examples: Sequence[InputExample], labels: Sequence[str], path: str) -> None:
    """Raises GlueFormatError (file, line, value) for a label not in `labels`."""
    allowed = set(labels)
    for e in examples:
        if e.label is not None and e.label not in allowed:
            raise GlueFormatError(path, f"has the unknown label {e.label!r}", line=e.line,
                                  fix=f"the labels are {', '.join(labels)} (list them all "
                                      "with --labels)")


def read_text_lines(lines, pair: bool, name: str) -> List[Tuple[str, Optional[str]]]:
    """Raw lines of text to predict → [(text_a, text_b or None)].

    One example per line: the text, or `text a<TAB>text b` for a pair task.
    Blank lines are skipped. A line with the wrong number of fields is an
    error naming `name` and the line (a tab in a line for a single-sentence
    model is a text_b it cannot take); so is a line of bytes that are not
    UTF-8 (`lines` may hold `bytes`: each is decoded on its own).
    """
    examples = list(iter_text_lines(lines, pair, name))
    if not examples:
        raise BadFileError(name, "holds no text (only blank lines)")
    return examples


def iter_text_lines(lines, pair: bool, name: str, first_line: int = 1):
    """`read_text_lines` one example at a time, as the lines come (a pipe is
    answered line by line); nothing is raised for an input without text.
    `first_line`: the number of the first of `lines` (a caller that passes its
    lines one at a time); line 1 loses a byte-order mark (`io.strip_bom`)."""
    if first_line == 1:
        lines = io.text_lines(lines)
    for number, line in enumerate(lines, first_line):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise BadFileError(name, f"is not UTF-8 ({e.reason} at byte {e.start} of the "
                                   "line)", line=number, fix="convert the text to UTF-8"
                                   ) from None
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split("\t")
        if pair and len(fields) != 2:
            raise BadFileError(name, f"has {len(fields)} tab-separated field(s)", line=number,
                               fix="this model is a pair task: write `text a<TAB>text b` on "
                                   "each line")
        if not pair and len(fields) != 1:
            raise BadFileError(name, f"has {len(fields)} tab-separated fields", line=number,
                               fix="this model is single-sentence (it takes text_a only, no "
                                   "text_b): write one text per line")
        yield fields[0], fields[1] if pair else None


# === The GLUE leaderboard's files ===

# gluebenchmark.com takes a zip of one TSV per test set, `index<TAB>prediction`:
# the test file's own row id, and the label string (0/1 for CoLA, SST-2,
# MRPC, QQP, WNLI; entailment/... for MNLI, QNLI, RTE, AX) or STS-B's score.
SUBMISSION_HEADER = ("index", "prediction")
# Rows of each official test set (GLUE's test files).
GLUE_TEST_ROWS = {"CoLA.tsv": 1063, "SST-2.tsv": 1821, "MRPC.tsv": 1725, "STS-B.tsv": 1379,
                  "QQP.tsv": 390965, "MNLI-m.tsv": 9796, "MNLI-mm.tsv": 9847, "QNLI.tsv": 5463,
                  "RTE.tsv": 3000, "WNLI.tsv": 146, "AX.tsv": 1104}
# Each task's directory in GLUE's layout (`bert download glue`).
GLUE_DIRECTORIES = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B",
                    "qqp": "QQP", "mnli": "MNLI", "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}


def submission_file(task: TaskSpec, suffix: str) -> Optional[str]:
    """The leaderboard file of the task's test set `suffix`, or None."""
    return dict(task.submission_files).get(suffix)


def submission_text(task: TaskSpec, examples: Sequence[InputExample], predictions) -> str:
    """The leaderboard file's text: the header, then `index<TAB>prediction` per
    example in file order. The index is the example's own (`Columns.index`),
    its 0-based row number when the file has no such column.

    Args:
        predictions: a label string per example, or a float score (regression).
    """
    rows = ["\t".join(SUBMISSION_HEADER)]
    for position, (example, prediction) in enumerate(zip(examples, predictions)):
        index = example.index if example.index is not None else str(position)
        value = f"{float(prediction):.6f}" if task.is_regression else str(prediction)
        rows.append(f"{index}\t{value}")
    return "\n".join(rows) + "\n"


def read_submission(text: str, task: TaskSpec, name: str) -> List[Tuple[str, str]]:
    """[(index, prediction)] of a leaderboard file, every row checked: the
    header, two fields, a known label (a finite number for regression), no
    index twice. `BadFileError` names `name` and the line."""
    lines = text.splitlines()
    if not lines or tuple(lines[0].split("\t")) != SUBMISSION_HEADER:
        raise BadFileError(name, "does not start with the header index<TAB>prediction",
                           line=1, fix="write it with run_classifier.py --do_predict")
    rows, seen = [], {}
    for number, line in enumerate(lines[1:], 2):
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].strip():
            raise BadFileError(name, f"has {line!r}, not index<TAB>prediction", line=number)
        index, prediction = fields
        if index in seen:
            raise BadFileError(name, f"has the index {index!r} twice (lines {seen[index]} and "
                               f"{number})", line=number)
        seen[index] = number
        if task.is_regression:
            try:
                legal = np.isfinite(float(prediction))
            except ValueError:
                legal = False
            if not legal:
                raise BadFileError(name, f"has the score {prediction!r}, not a finite number",
                                   line=number)
        elif prediction not in task.labels:
            raise BadFileError(name, f"has the label {prediction!r}", line=number,
                               fix=f"{task.name}'s labels are {', '.join(task.labels)}")
        rows.append((index, prediction))
    return rows
