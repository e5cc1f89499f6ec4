"""Reading a user's files: UTF-8 with one byte-order-mark rule, JSON, a
fingerprint of the content.

* a user's file that is not UTF-8 is reported with the line of its first bad
  byte (`read_text`, `not_utf8`);
* a UTF-8 byte-order mark at the very start of a text file is an encoding mark,
  not content: every text reader drops it (`strip_bom`: `read_text`,
  `paths.open_file` in a text read mode, `text_lines` for readers that decode
  line by line); one anywhere else is a character of its line and stays;
* JSON files read with one line for each way they can be wrong (`read_json`);
* what a run record knows a training file by (`content_fingerprint`).
"""

from __future__ import annotations

import codecs
import hashlib
import json

from official_bert.errors import BadFileError, not_utf8_error
from official_bert.io.paths import exists, isdir, missing, open_file, size


# A UTF-8 byte-order mark, as bytes and as the character it decodes to.
BOM = codecs.BOM_UTF8
BOM_CHAR = "\ufeff"


def strip_bom(data):
    """`data` (the start of a text file: bytes or str) without a UTF-8
    byte-order mark at its very start.

    The one rule of every reader of a user's text file (vocabularies, CoNLL,
    GLUE and SWAG tables, SQuAD JSON, corpora, label lists, the text to predict
    or embed): a BOM at the start of the file is how an editor marked the
    encoding, not content, as Python's "utf-8-sig" reads it. Only one is
    dropped, and only there: a BOM anywhere else is a character of its line.
    `read_text`, `open_file` (text read modes) and `text_lines` apply it.
    """
    mark = BOM if isinstance(data, (bytes, bytearray)) else BOM_CHAR
    return data[len(mark):] if data[:len(mark)] == mark else data


def text_lines(lines):
    """The lines of a text file as a reader iterates them (bytes or str), the
    first one through `strip_bom`: for readers that decode line by line (to
    name the line that is not UTF-8). Items that are not lines (a reader's own
    markers) pass through, and the first line is the first bytes or str."""
    lines = iter(lines)
    for line in lines:
        if isinstance(line, (bytes, bytearray, str)):
            yield strip_bom(line)
            break
        yield line
    yield from lines


def read_text(path: str) -> str:
    """The whole file as UTF-8 text, without a byte-order mark at its start
    (`strip_bom`); `BadFileError` naming the line of a bad byte."""
    with open_file(path, "rb") as f:
        data = f.read()
    try:
        return strip_bom(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise not_utf8_error(path, e.reason, where=f"at byte {e.start}", line=line) from None


def not_utf8(path: str, error: UnicodeDecodeError | None = None, *,
             fix: str | None = None) -> BadFileError:
    """The `BadFileError` for `path`, naming the line and byte of its first
    byte that is not UTF-8 (`errors.not_utf8_error`).

    For readers that decode as they go (csv, json, line loops) and catch the
    `UnicodeDecodeError` without knowing the line: the file is read again, in
    blocks, up to the bad byte (only on this error path). `error` gives the
    reason when the file cannot be read again.
    """
    try:
        found = _first_bad_utf8(path)
    except OSError:
        found = None
    if found is None:
        reason = error.reason if error is not None else "invalid byte"
        return not_utf8_error(path, reason, fix=fix)
    reason, where, line = found
    return not_utf8_error(path, reason, where=where, line=line, fix=fix)


def _first_bad_utf8(path: str) -> tuple[str, str, int] | None:
    """(the decoder's reason, where, the 1-based line) of the first byte of
    `path` that is not UTF-8; None when the whole file decodes."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    consumed = newlines = 0
    with open_file(path, "rb") as f:
        while block := f.read(1 << 20):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as e:
                # `e.start` counts from the bytes the decoder held back
                # (at most 3 of an unfinished character) plus this block.
                held = len(e.object) - len(block)
                start = max(e.start - held, 0)
                line = newlines + block.count(b"\n", 0, start) + 1
                return e.reason, f"at byte {consumed + start}", line
            newlines += block.count(b"\n")
            consumed += len(block)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as e:  # the file ends inside a character
        return e.reason, "at the end of the file", newlines + 1
    return None


def read_json(path: str, error: type[BadFileError] = BadFileError, *, what: str = "a JSON file",
              missing_fix: str = "check the file name", directory_fix: str | None = None):
    """The parsed JSON value of `path` (a UTF-8 file; a byte-order mark at its
    start is dropped, `strip_bom`).

    Every way the file can be wrong is an `error` (a `BadFileError` type)
    naming it: missing, a directory, not UTF-8 (with the line), not JSON
    (with the line and column). `what` says what the file should have been.
    """
    if not exists(path):
        raise error(path, missing(path), fix=missing_fix)
    if isdir(path):
        raise error(path, f"is a directory, not {what}", fix=directory_fix)
    try:
        with open_file(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise error(path, f"is not valid JSON ({e.msg} at column {e.colno})",
                    line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from None


# A file's content fingerprint (`content_fingerprint`): hashed whole up to
# WHOLE_FINGERPRINT bytes, else by FINGERPRINT_BLOCKS blocks of FINGERPRINT_BLOCK.
WHOLE_FINGERPRINT = 128 << 20
FINGERPRINT_BLOCK = 1 << 20
FINGERPRINT_BLOCKS = 32


def content_fingerprint(path: str) -> str:
    """What a run record knows a training file by: its content, not its size
    alone (a train.tsv with its labels flipped keeps its size) nor its mtime
    (a copy or a touch is the same data).

    A file up to 128 MiB (every GLUE, SQuAD, CoNLL and SWAG training file) is
    read whole: "sha256:<hex>" of its bytes. SST-2's 3.8 MB train.tsv takes
    5 ms here (sha256 at about 0.8 GB/s from the page cache), a fifth of
    reading it into lines (25 ms), and a fine-tuning session reads and
    tokenizes all of it anyway (seconds). A larger file (a pre-training
    shard) is read in 32 blocks of 1 MiB spread evenly from its first byte to
    its last: "sha256-32x1MiB:<hex>" of its size and those blocks, 32 MiB read
    whatever its size; an edit that falls between the blocks and keeps the size
    goes unseen there.
    """
    length = size(path)
    digest = hashlib.sha256()
    with open_file(path, "rb") as f:
        if length <= WHOLE_FINGERPRINT:
            for block in iter(lambda: f.read(FINGERPRINT_BLOCK), b""):
                digest.update(block)
            return "sha256:" + digest.hexdigest()
        digest.update(str(length).encode())
        step = (length - FINGERPRINT_BLOCK) / (FINGERPRINT_BLOCKS - 1)
        for index in range(FINGERPRINT_BLOCKS):
            f.seek(round(index * step))
            digest.update(f.read(FINGERPRINT_BLOCK))
    return f"sha256-{FINGERPRINT_BLOCKS}x{FINGERPRINT_BLOCK >> 20}MiB:" + digest.hexdigest()
