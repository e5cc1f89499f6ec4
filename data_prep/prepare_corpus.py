r"""Raw text documents → BERT's pre-training text format.

The output is what google-research/bert's `create_pretraining_data.py` (and
ours) reads: one sentence per line, a blank line between documents.

Each input file is one document (a book, a speech). Files named `README*` and
hidden files are not documents and are skipped. For each file:

1. **Decoding.** UTF-8 (a BOM is dropped); a file that is not valid UTF-8 is
   decoded with `--fallback_encoding` (cp1252 by default, which also covers
   ISO-8859-1 text) and listed in the stats; with `--fallback_encoding=''` it
   is an error naming the file and line.
2. **Unicode clean-up** (`clean_text`): NFC normalisation; newlines unified;
   control and format characters (zero-width spaces, soft hyphens, BOMs,
   U+FFFD) removed; every kind of space (NBSP, thin space, tab, …) becomes a
   plain space.
3. **Project Gutenberg license text** (`strip_gutenberg`): everything up to the
   end of the header (`*** START OF THE PROJECT GUTENBERG EBOOK …`, or the
   old `*END*THE SMALL PRINT! …*END*` line) and from the footer on (`End of
   (the) Project Gutenberg …`, `*** END OF THE PROJECT GUTENBERG …`) is
   dropped. Editors' notes between the license and the text stay.
4. **Paragraphs** (`split_paragraphs`): hard-wrapped files (almost all lines
   shorter than 100 characters, like Gutenberg books) have paragraphs separated
   by blank lines, whose lines are joined; other files (speeches with one
   paragraph per line) take each line as a paragraph.
5. **Sentences** (`split_sentences`, documented there): a rule-based splitter
   that breaks after `.`, `!`, `?` or `…` (and any closing quotes/brackets)
   before a word that does not start in lower case, and keeps abbreviations
   intact: titles (`Mr.`, `Mrs.`, `Dr.`, `St.`, `Gen.`, …) never end a
   sentence, `No.`/`Vol.`/`Jan.`… not before a number, initials (`Harry S.
   Truman`, `G. K. Chesterton`) and dotted acronyms (`U.S.`, `D.C.`, `p.m.`)
   not unless the next word is a typical sentence opener (`The`, `We`, …).
   Sentences longer than `--max_sentence_chars` are split at `;`/`:` and then
   at spaces.

Documents of a single sentence are kept (create_pretraining_data.py skips them
for next-sentence prediction) and listed in the stats as `one_sentence_documents`.
The stats are written next to the output as `official_bert.file_sets.sidecar_path(output_file,
"stats")` (`.corpus_txt.stats.json` for `corpus.txt`: hidden, so that no pattern
for the text matches it).

The command is `bert prepare-corpus` (`official_bert/commands/prepare_corpus.py`):
  bert prepare-corpus --input=../shared/data/pretrain_text --output_file=/tmp/corpus.txt
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import unicodedata
from typing import Iterable, Sequence

from data_prep.configs import CorpusOptions
from official_bert import file_sets, io, outputs
from official_bert.errors import BadFileError, UserError
from official_bert.progress import Progress

_log = logging.getLogger(__name__)

# --------------------------------------------------------------------------
# Input files
# --------------------------------------------------------------------------


def _is_document_file(path: str) -> bool:
    name = os.path.basename(path)
    return not (name.startswith(".") or name.upper().startswith("README"))


def expand_inputs(patterns: Iterable[str]) -> tuple[list[str], list[str]]:
    """Files, directories (searched recursively) and globs → (documents, skipped).

    Any `official_bert.io` path (local, `gs://`, `ram://`). Documents come
    sorted within each pattern, patterns in the order given, duplicates
    dropped. `skipped` lists README and hidden files that were left out. A
    pattern that matches nothing is an error.
    """
    files, skipped, seen = [], [], set()
    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern:
            continue
        if io.isdir(pattern):
            matches = io.walk_files(pattern)
        elif io.has_magic(pattern):
            matches = [p for p in io.glob(pattern) if not io.isdir(p)]
        elif io.exists(pattern):
            matches = [pattern]
        else:
            raise UserError(f"--input {pattern} {io.missing(pattern)}")
        if not matches:
            raise UserError(f"--input {pattern!r} matches no files")
        for path in matches:
            if path in seen:
                continue
            seen.add(path)
            (files if _is_document_file(path) else skipped).append(path)
    return files, skipped


def decode_text(raw: bytes, path: str, fallback_encoding: str | None) -> tuple[str, str]:
    """Bytes → (text, encoding used). UTF-8 first, then `fallback_encoding`; a
    byte-order mark at the start is dropped first, whichever decodes (`io.strip_bom`)."""
    text = io.strip_bom(raw)
    try:
        return text.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as e:
        if not fallback_encoding:
            start = e.start + len(raw) - len(text)  # in the file, the BOM counted
            line = raw.count(b"\n", 0, start) + 1
            raise BadFileError(
                path, f"is not UTF-8 ({e.reason} at byte {start})", line=line,
                fix="set --fallback_encoding (e.g. cp1252) to decode such files"
            ) from None
    try:
        return text.decode(fallback_encoding), fallback_encoding
    except UnicodeDecodeError:
        # cp1252 leaves 5 bytes undefined; latin-1 decodes any byte.
        return text.decode("latin-1"), "latin-1"


# --------------------------------------------------------------------------
# Unicode clean-up
# --------------------------------------------------------------------------


class _CleanTable(dict):
    """A `str.translate` table built lazily, one code point at a time."""

    def __missing__(self, cp: int):
        char = chr(cp)
        if char == "\n":
            value = char
        elif char in "\t\x0b\x0c" or unicodedata.category(char) == "Zs":
            value = " "
        elif char in "\u2028\u2029\x85\x1c\x1d\x1e":
            value = "\n"
        elif cp == 0xFFFD or unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co"):
            value = ""
        else:
            value = char
        self[cp] = value
        return value


_CLEAN = _CleanTable()


def clean_text(text: str) -> str:
    """NFC, unified newlines, control/format characters removed, spaces unified."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text)
    return text.translate(_CLEAN)


# --------------------------------------------------------------------------
# Project Gutenberg headers and footers
# --------------------------------------------------------------------------

_GUTENBERG_START = re.compile(
    r"^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG|"
    r"^\s*\*END\*?\s*THE SMALL PRINT!",
    re.IGNORECASE,
)
_GUTENBERG_END = re.compile(
    r"^\s*\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|"
    r"^\s*End of (the )?Project Gutenberg",
    re.IGNORECASE,
)

_GUTENBERG_TITLE = re.compile(r"^\W*(this is )?(the )?project gutenberg'?s? e-?(text|book)",
                              re.IGNORECASE)


def strip_gutenberg(lines: Sequence[str]) -> tuple[list[str], bool]:
    """Drops a Project Gutenberg license header and footer, if there are any.

    Returns (remaining lines, whether anything was stripped). The header ends
    at the first start marker found in the first half of the file; the footer
    starts at the first end marker after it.
    """
    start = 0
    half = max(1, len(lines) // 2)
    for i, line in enumerate(lines[:half]):
        if _GUTENBERG_START.match(line):
            start = i + 1
            break
    end = len(lines)
    for i in range(start, len(lines)):
        if _GUTENBERG_END.match(lines[i]):
            end = i
            break
    stripped = start > 0 or end < len(lines)
    body = list(lines[start:end])
    if start > 0:  # a repeated "The Project Gutenberg Etext of ..." title line
        nonempty = [i for i, line in enumerate(body) if line.strip()][:5]
        for i in reversed(nonempty):
            if _GUTENBERG_TITLE.match(body[i]):
                del body[i]
    return body, stripped


# --------------------------------------------------------------------------
# Paragraphs and sentences
# --------------------------------------------------------------------------


def split_paragraphs(lines: Sequence[str], long_line: int = 100) -> tuple[list[str], bool]:
    """Lines → (paragraphs, hard_wrapped).

    A file is hard-wrapped when fewer than 20% of its non-empty lines are
    longer than `long_line` characters; its paragraphs are blocks of lines
    between blank lines. Otherwise every non-empty line is a paragraph.
    """
    nonempty = [line for line in lines if line.strip()]
    if not nonempty:
        return [], False
    n_long = sum(len(line) > long_line for line in nonempty)
    hard_wrapped = n_long < 0.2 * len(nonempty)
    paragraphs = []
    if hard_wrapped:
        block: list[str] = []
        for line in list(lines) + [""]:
            if line.strip():
                block.append(line)
            elif block:
                paragraphs.append(" ".join(" ".join(block).split()))
                block = []
    else:
        paragraphs = [" ".join(line.split()) for line in nonempty]
    return paragraphs, hard_wrapped


# Titles and the like: never the end of a sentence.
_TITLES = frozenset(
    """mr mrs ms mssrs messrs mme mlle dr prof rev hon st ste sr jr gen col capt
    lt maj sgt cmdr adm gov sen rep pres supt insp esq fr rt vs v viz cf e.g i.e
    al""".split()
)
# Abbreviations that do not end a sentence when a number follows ("No. 5").
_BEFORE_NUMBER = frozenset(
    """no nos vol vols p pp fig figs ch chap art sec sect op jan feb mar apr jun
    jul aug sep sept oct nov dec""".split()
)
# Words that typically open a sentence: after an initial or a dotted acronym
# ("... in the U.S. We ...") they decide for a sentence break.
_OPENERS = frozenset(
    """The A An And But Or So Yet For Nor If In On At As By To Of It Its It's
    I I'm We We've We're Our Us You Your He His She Her They Their There These
    Those This That What When Where Why How Who Now Today Then Thus Yes No Let
    Let's My Mr Mrs Dr""".split()
)
_BOUNDARY = re.compile(r"([.!?\u2026]+)([\"'\u201d\u2019)\]]*)(\s+)")
_WORD_BEFORE = re.compile(r"[A-Za-z](?:[A-Za-z.]*[A-Za-z])?$")
_NEXT_START = re.compile(r"[\"'\u201c\u2018(\[]*(\S)")
_NEXT_WORD = re.compile(r"[\"'\u201c\u2018(\[]*([^\s,;:.!?]+)")
_DOTTED = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")


def _is_boundary(paragraph: str, match: re.Match) -> bool:
    rest = paragraph[match.end():]
    start = _NEXT_START.match(rest)
    if start is None or start.group(1).islower():
        return False
    terminator, closing = match.group(1), match.group(2)
    if terminator != "." or closing:
        return True
    # The word before the period: its trailing letters and inner dots, so
    # "--Mr" gives "Mr" and "(U.S" gives "U.S".
    before = _WORD_BEFORE.search(paragraph, max(0, match.start(1) - 40), match.start(1))
    if before is None:
        return True
    word = before.group(0)
    lower = word.lower()
    if lower in _TITLES:
        return False
    if lower in _BEFORE_NUMBER and start.group(1).isdigit():
        return False
    initial = len(word) == 1 and word.isupper() and word != "I"
    if initial or _DOTTED.match(word):
        nxt = _NEXT_WORD.match(rest)
        return bool(nxt) and nxt.group(1) in _OPENERS
    return True


def _split_long(sentence: str, max_chars: int) -> list[str]:
    if len(sentence) <= max_chars:
        return [sentence]
    pieces, current = [], ""
    for part in re.split(r"(?<=[;:])\s+", sentence):
        while len(part) > max_chars:  # no ;/: left: cut at the last space
            cut = part.rfind(" ", 0, max_chars)
            cut = cut if cut > 0 else max_chars
            if current:
                pieces.append(current)
                current = ""
            pieces.append(part[:cut].strip())
            part = part[cut:].strip()
        if current and len(current) + 1 + len(part) > max_chars:
            pieces.append(current)
            current = part
        else:
            current = f"{current} {part}" if current else part
    if current:
        pieces.append(current)
    return [p for p in pieces if p]


def split_sentences(paragraph: str, max_chars: int = 1000) -> list[str]:
    """One paragraph (no newlines) → its sentences.

    A sentence ends after `.`, `!`, `?` or `…` (one or more) and any closing
    quotes or brackets, followed by whitespace and a word that does not start
    with a lower-case letter (opening quotes/brackets are looked through).
    After a single `.`, directly after a word:
      * titles (`Mr.`, `Mrs.`, `Dr.`, `St.`, `Gen.`, `Gov.`, `e.g.`, …) never end
        a sentence;
      * `No.`, `Vol.`, `p.`, month abbreviations… do not before a digit;
      * an initial (one capital letter, not `I`) or a dotted acronym (`U.S.`,
        `D.C.`, `p.m.`) ends a sentence only before a typical sentence opener
        (`The`, `We`, `It`, …), so "U.S. Congress" and "Harry S. Truman" stay
        whole while "… in the U.S. We …" is split.
    Sentences longer than `max_chars` are split at `;`/`:` and then at spaces.
    """
    paragraph = " ".join(paragraph.split())
    if not paragraph:
        return []
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(paragraph):
        if _is_boundary(paragraph, match):
            end = match.start(3)
            sentences.append(paragraph[start:end])
            start = match.end()
    sentences.append(paragraph[start:])
    out = []
    for sentence in sentences:
        sentence = sentence.strip()
        if sentence:
            out.extend(_split_long(sentence, max_chars))
    return out


# --------------------------------------------------------------------------
# Documents and the corpus
# --------------------------------------------------------------------------


@dataclasses.dataclass
class DocumentResult:
    sentences: list[str]
    encoding: str
    gutenberg_stripped: bool
    hard_wrapped: bool


def document_sentences(raw: bytes, path: str = "<document>",
                       options: CorpusOptions = CorpusOptions()) -> DocumentResult:
    """One raw document → its sentences (see the module docstring)."""
    text, encoding = decode_text(raw, path, options.fallback_encoding)
    lines = clean_text(text).split("\n")
    stripped = False
    if options.strip_gutenberg:
        lines, stripped = strip_gutenberg(lines)
    paragraphs, hard_wrapped = split_paragraphs(lines)
    sentences = []
    for paragraph in paragraphs:
        sentences.extend(split_sentences(paragraph, options.max_sentence_chars))
    return DocumentResult(sentences, encoding, stripped, hard_wrapped)


def prepare_corpus(input_patterns: Sequence[str], output_file: str,
                   options: CorpusOptions = CorpusOptions()) -> dict:
    """Writes `output_file` (one sentence per line, blank line between documents).

    Returns the stats, also written to `file_sets.sidecar_path(output_file, "stats")`. The output
    is written under a temporary name and renamed when complete.
    """
    files, skipped = expand_inputs(input_patterns)
    io.refuse_output_over_input({"--output_file": output_file},
                                [("input", path) for path in files])
    outputs.ensure_checked(output_file, "--output_file", outputs.FILE)
    output_dir = os.path.dirname(os.path.abspath(output_file))
    for pattern in input_patterns:
        pattern = pattern.strip()
        if pattern and io.is_local(pattern) and io.isdir(pattern) and (
                output_dir + os.sep).startswith(os.path.abspath(pattern).rstrip(os.sep) + os.sep):
            raise UserError(f"--output_file {output_file} is inside --input {pattern}: a rerun "
                            "would read the corpus as one more document; write it elsewhere")
    if not files:
        raise UserError(f"--input {', '.join(input_patterns)} holds no document files "
                        f"(skipped: {', '.join(skipped) or 'none'})")
    stats = {
        "input_files": len(files),
        "documents": 0,
        "sentences": 0,
        "characters": 0,
        "one_sentence_documents": [],
        "empty_documents_skipped": [],
        "not_documents_skipped": skipped,
        "decoded_with_fallback_encoding": {},
        "gutenberg_license_stripped": 0,
        "hard_wrapped_documents": 0,
    }

    def write(f):
        first = True
        progress = Progress(len(files), "documents")  # (a file is a document)
        for done, path in enumerate(files, 1):
            if progress.update(done - 1):
                _log.info("progress: %s", progress.line())
            with io.open_file(path, "rb") as g:
                raw = g.read()
            doc = document_sentences(raw, path, options)
            if doc.encoding != "utf-8":
                stats["decoded_with_fallback_encoding"][path] = doc.encoding
            stats["gutenberg_license_stripped"] += doc.gutenberg_stripped
            stats["hard_wrapped_documents"] += doc.hard_wrapped
            if not doc.sentences:
                stats["empty_documents_skipped"].append(path)
                continue
            if len(doc.sentences) == 1:
                stats["one_sentence_documents"].append(path)
            if not first:
                f.write("\n")
            first = False
            for sentence in doc.sentences:
                f.write(sentence)
                f.write("\n")
            stats["documents"] += 1
            stats["sentences"] += len(doc.sentences)
            stats["characters"] += sum(len(s) for s in doc.sentences)

    io.check_output_directory(output_file)
    with io.atomic_output(output_file) as f:
        write(f)
        if stats["documents"] == 0:  # raising drops the output
            raise UserError(f"--input: no text in {len(files)} input file(s): all documents "
                            "are empty")
    if not io.is_stream(output_file):  # /dev/null's stats would be a file in /dev
        io.atomic_write(file_sets.sidecar_path(output_file, "stats"),
                        json.dumps(stats, indent=2))
        io.remove(file_sets.legacy_sidecar_path(output_file, "stats"))  # an older version's
    return stats
