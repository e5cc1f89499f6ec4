"""SWAG CSV files → multiple-choice examples → packed features.

Columns (SWAG's own layout): `video-id, fold-ind, startphrase, sent1, sent2,
gold-source, ending0, ..., endingN, label`. The number of choices is the
number of consecutive `ending<k>` columns in the header (4 in SWAG; any number
works). `label` may be absent or empty in a file for prediction.

Each choice is packed as `[CLS] sent1 [SEP] sent2 ending_k [SEP]` (the BERT
paper's SWAG set-up: sentence A the context, sentence B the start of the next
sentence followed by the candidate ending), truncated longest-first to
`max_seq_length` as google-research/bert truncates pairs.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from typing import List, Optional, Sequence

import numpy as np

from official_bert import io
from official_bert.errors import BadFileError
from official_bert.text import tokenization

REQUIRED = ("sent1", "sent2")
_ENDING = re.compile(r"^ending(\d+)$")


class SwagFormatError(BadFileError):
    """A SWAG CSV file is malformed; the message names the file and line."""


@dataclasses.dataclass
class SwagExample:
    example_id: str
    context: str  # sent1
    start: str  # sent2, the first words of the next sentence
    endings: List[str]
    label: Optional[int]


def read_swag(path: str, require_label: bool = True) -> List[SwagExample]:
    """Reads SWAG's CSV; `require_label=False` for a prediction file."""
    if not io.exists(path):
        raise SwagFormatError(path, io.missing(path), fix="check the file name")
    if io.isdir(path):
        raise SwagFormatError(path, "is a directory, not a SWAG CSV file")
    try:
        return _read_swag(path, require_label)
    except UnicodeDecodeError as e:
        raise io.not_utf8(path, e) from None


def _read_swag(path: str, require_label: bool) -> List[SwagExample]:
    csv.field_size_limit(2 ** 31 - 1)  # a long text is a long field, not an error
    with io.open_file(path, newline="") as f:  # a BOM is dropped (io.strip_bom)
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise SwagFormatError(path, "is empty") from None
        except csv.Error as e:
            raise SwagFormatError(path, f"is not valid CSV ({e})", line=1) from None
        header = [h.strip() for h in header]
        columns = {name: i for i, name in enumerate(header)}
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            raise SwagFormatError(
                path, f"has a header without the {', '.join(missing)} column", line=1,
                fix="expected SWAG's video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
                    "ending0..endingN,label")
        endings = sorted(int(m.group(1)) for m in map(_ENDING.match, header) if m)
        if len(endings) < 2 or endings != list(range(len(endings))):
            raise SwagFormatError(
                path, f"has the endings {['ending%d' % k for k in endings]} in its header",
                line=1, fix="the header needs ending0, ending1, ... (at least two, numbered "
                            "from 0 without gaps)")
        ending_columns = [columns[f"ending{k}"] for k in endings]
        label_column = columns.get("label")
        if require_label and label_column is None:
            raise SwagFormatError(path, "has no label column in its header", line=1)
        id_column = columns.get("video-id")
        examples = []
        try:
            for row in reader:
                line = reader.line_num
                if not any(cell.strip() for cell in row):
                    continue
                if len(row) < len(header):
                    raise SwagFormatError(
                        path, f"has {len(row)} columns, the header has {len(header)}",
                        line=line, fix="a missing ending?")
                choice_texts = [row[c].strip() for c in ending_columns]
                for k, text in enumerate(choice_texts):
                    if not text:
                        raise SwagFormatError(path, f"has an empty ending{k}", line=line)
                label = None
                raw_label = row[label_column].strip() if label_column is not None else ""
                if raw_label:
                    try:
                        label = int(raw_label)
                    except ValueError:
                        raise SwagFormatError(
                            path, f"has the label {raw_label!r}, not an integer",
                            line=line) from None
                    if not 0 <= label < len(choice_texts):
                        raise SwagFormatError(
                            path, f"has the label {label}, which is not a choice "
                            f"(0..{len(choice_texts) - 1})", line=line)
                elif require_label:
                    raise SwagFormatError(path, "has an empty label", line=line)
                example_id = row[id_column] if id_column is not None else str(len(examples))
                examples.append(SwagExample(example_id, row[columns["sent1"]],
                                            row[columns["sent2"]], choice_texts, label))
        except csv.Error as e:
            raise SwagFormatError(path, f"is not valid CSV ({e})",
                                  line=reader.line_num) from None
    if not examples:
        raise SwagFormatError(path, "holds no examples")
    return examples


def second_segment(start: str, ending: str) -> str:
    """sent2 followed by the ending (sent2 may be empty, as in HellaSwag)."""
    return f"{start} {ending}" if start.strip() else ending


def pack_example(example: SwagExample, tokenizer, max_seq_length: int):
    """[num_choices] of (ids, mask, segment ids), each max_seq_length long."""
    context = tokenizer.tokenize(example.context)
    packed = []
    for ending in example.endings:
        tokens_b = tokenizer.tokenize(second_segment(example.start, ending))
        tokens, mask, segments = tokenization.pack_tokens(
            context, tokens_b, max_seq_length, pad=tokenization.PAD_TOKEN)
        ids = tokenizer.convert_tokens_to_ids(tokens[:sum(mask)])
        packed.append((ids + [0] * (max_seq_length - len(ids)), mask, segments))
    return packed


def convert_examples(examples: Sequence[SwagExample], tokenizer, max_seq_length: int) -> dict:
    """Features as numpy: [examples, choices, seq] ids/mask/type ids, label
    [examples] (0 where unknown), example_index [examples]."""
    num_choices = {len(e.endings) for e in examples}
    if len(num_choices) != 1:
        raise SwagFormatError(None, f"the examples have different numbers of choices: "
                              f"{sorted(num_choices)}")
    ids, mask, types = [], [], []
    for example in examples:
        packed = pack_example(example, tokenizer, max_seq_length)
        ids.append([p[0] for p in packed])
        mask.append([p[1] for p in packed])
        types.append([p[2] for p in packed])
    return {
        "input_word_ids": np.asarray(ids, np.int32),
        "input_mask": np.asarray(mask, np.int32),
        "input_type_ids": np.asarray(types, np.int32),
        "label": np.asarray([e.label if e.label is not None else 0 for e in examples], np.int32),
        "example_index": np.arange(len(examples), dtype=np.int32),
    }
