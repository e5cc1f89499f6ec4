"""A fine-tuning set's own text as a pre-training corpus (task-adaptive pre-training).

run_pretraining's `--input_format=conll` and `--input_format=table` read the
training file of a fine-tuning task as it is, so that continuing the masked LM
on a task's text ("Don't Stop Pretraining", Gururangan et al. 2020: TAPT) is
one command:

    conll   run_ner.py's files (WNUT-17's wnut17train.conll, CoNLL-2003):
            one token a line, the word in the first column, a blank line
            between sentences (`conll.read_conll` reads them, with its checks);
            each sentence becomes one line, its words joined by spaces.
    table   run_classifier.py's files: a .tsv or .csv with a header row, or
            .jsonl (GLUE's TSVs, a custom task's files; `glue.read_examples`
            reads them): the text of the `text_columns` (one, or a pair
            task's two), each text one line.

Each sentence (CoNLL) or row (table) is one document of google's corpus
format (one sentence per line, a blank line between documents): tweets,
reviews and sentence pairs are unrelated to the ones beside them, so there is
nothing for next-sentence prediction to learn, and run_pretraining packs such
a corpus as RoBERTa's full sentences (a [SEP] between documents) and trains
the masked LM alone.

Labels are not read (a file without them works); a text with line breaks
(a quoted CSV field, a JSON string) becomes one line.
"""

from __future__ import annotations

from typing import List, Sequence

from data_prep import conll, glue
from official_bert import io
from official_bert.errors import BadFileError, UserError

TASK_FORMATS = ("conll", "table")


def text_columns(value: str | None, input_format: str) -> list[str]:
    """The table's text columns from `--text_column` ("sentence" or
    "sentence1,sentence2"); [] for conll. Raises a `UserError` naming the flag."""
    names = [name.strip() for name in (value or "").split(",") if name.strip()]
    if input_format != "table":
        if names:
            raise UserError("--text_column is for --input_format=table; "
                            f"--input_format={input_format} does not use it: leave it out")
        return []
    if not names or len(names) > 2:
        raise UserError("--input_format=table needs --text_column: the header name (or JSON "
                        "key) of the text column, or two comma-separated for a pair task "
                        "(e.g. sentence for SST-2, sentence1,sentence2 for RTE)"
                        + (f"; got {value!r}" if value else ""))
    return names


def documents(path: str, input_format: str, columns: Sequence[str] = ()) -> List[List[str]]:
    """The file's documents: a list of sentences each (see the module docstring).

    Raises:
        BadFileError: the file is missing, malformed, or holds no text.
    """
    if input_format == "conll":
        found = [[" ".join(sentence.words)] for sentence in conll.read_conll(path).sentences]
    elif input_format == "table":
        found = _table_documents(path, columns)
    else:
        raise ValueError(f"input_format={input_format!r}: one of {TASK_FORMATS}")
    found = [[line for line in map(_one_line, document) if line] for document in found]
    found = [document for document in found if document]
    if not found:
        raise BadFileError(path, "holds no text", fix="check the file (and --text_column)")
    return found


def _table_documents(path: str, columns: Sequence[str]) -> List[List[str]]:
    """One document per row: its text column(s), read by the classifier's reader."""
    layout = glue.Columns(text_a=columns[0], text_b=columns[1] if len(columns) > 1 else None)
    examples = glue.read_examples(path, layout, require_label=False,
                                  fmt=glue.file_format(path, "tsv"))
    return [[example.text_a] + ([example.text_b] if example.text_b is not None else [])
            for example in examples]


def _one_line(text: str) -> str:
    """A text as one corpus line: its line breaks and runs of spaces as one space."""
    return " ".join(text.split())


def write_corpus(paths: Sequence[str], input_format: str, columns: Sequence[str],
                 destination: str) -> dict:
    """Writes the documents of `paths` (in order) to `destination` in
    google's corpus format; returns {"documents": n, "sentences": n}.

    The destination is the run's own scratch copy (run_pretraining writes it
    under TensorFlow's process-local `ram://`), so it is written directly.
    """
    counts = {"documents": 0, "sentences": 0}
    with io.open_file(destination, "w") as out:
        for path in paths:
            for document in documents(path, input_format, columns):
                if counts["documents"]:
                    out.write("\n")  # the blank line between documents
                out.write("".join(line + "\n" for line in document))
                counts["documents"] += 1
                counts["sentences"] += len(document)
    return counts
