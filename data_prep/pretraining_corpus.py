"""The corpus as the pre-training generator reads it: documents, their owners, checks.

google-research/bert's input format: one sentence per line (these should
ideally be actual sentences, not entire paragraphs or arbitrary spans of text,
because the sentence boundaries are used for next-sentence prediction) and
blank lines between documents, so that next-sentence prediction doesn't span
between documents. Here the end of a file also ends a document (google
continues a document across files that do not end with a blank line).

`read_documents` gives each worker of `create_pretraining_data` its share of
the documents (and samples of the others' for its random-next pool);
`check_text_corpus` checks a corpus that run_pretraining reads on the fly.
"""

from __future__ import annotations

import codecs
import collections.abc
from typing import Callable, Iterator, Sequence

from data_prep.pretraining_instances import VocabInfo
from data_prep.pretraining_records import GenerationStats
from official_bert import io
from official_bert.errors import BadFileError


def load_vocab_info(vocab_file: str) -> VocabInfo:
    from official_bert.text import tokenization

    if not io.isfile(vocab_file):
        raise BadFileError(vocab_file, io.missing(vocab_file), fix="check --vocab_file")
    return VocabInfo(tokenization.load_vocab(vocab_file), name=vocab_file)


def _is_blank(raw: bytes) -> bool:
    """Whether a raw line is empty after `str.strip()` (undecodable lines are not)."""
    if raw.isascii():
        return not raw.strip()
    try:
        return not raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return False


def count_documents(files: Sequence[str], limit: int) -> int:
    """Number of documents (non-blank line runs; a file end ends one), up to `limit`."""
    count = 0
    for path in files:
        has_content = False
        with io.open_file(path, "rb") as f:
            for raw in io.text_lines(f):  # a BOM is dropped
                if _is_blank(raw):
                    if has_content:
                        count += 1
                        has_content = False
                        if count >= limit:
                            return count
                else:
                    has_content = True
        if has_content:
            count += 1
            if count >= limit:
                return count
    return count


def read_documents(files: Sequence[str], worker: int, num_workers: int,
                   skip_bad_lines: bool, stats: GenerationStats,
                   want_foreign: Callable[[], bool] = lambda: False,
                   ) -> Iterator[tuple[int, list[str] | list[bytes], bool]]:
    """Yields (document index, lines, owned) for the documents this worker owns
    (owned=True, stripped text lines) and for those of other workers that
    `want_foreign()` picks (owned=False, raw undecoded lines: only the few
    sentences that random-next spans use get decoded and tokenized).

    Input format, as google-research/bert's: (1) one sentence per line (these
    should ideally be actual sentences, not entire paragraphs or arbitrary spans
    of text, because the sentence boundaries are used for next-sentence
    prediction); (2) blank lines between documents, so that next-sentence
    prediction doesn't span between documents. The end of a file also ends a
    document.

    Every worker scans every line (cheap) and assigns each document, when it
    ends, to the worker with the fewest bytes so far (ties: the lowest index);
    all workers compute the same assignment, so each document has exactly one
    owner, big documents are spread evenly, and only the owner decodes and
    tokenizes it.
    """
    loads = [0] * num_workers
    doc_index = 0

    def finish(path, first_lineno, raw_lines, n_bytes):
        owner = loads.index(min(loads))
        loads[owner] += n_bytes
        if owner != worker:
            return (raw_lines, False) if want_foreign() else None
        lines = []
        for offset, raw in enumerate(raw_lines):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                if not skip_bad_lines:
                    raise BadFileError(
                        path, f"is not UTF-8 ({e.reason} at byte {e.start} of the line)",
                        line=first_lineno + offset,
                        fix="convert the file to UTF-8, or pass --skip_bad_lines to skip "
                            "such lines") from None
                stats.bad_lines_skipped += 1
                continue
            lines.append(line)
        return lines, True

    for path in files:
        raw_lines: list[bytes] = []
        first_lineno = n_bytes = 0
        with io.open_file(path, "rb") as f:
            for lineno, raw in enumerate(io.text_lines(f), 1):  # a BOM is dropped
                if _is_blank(raw):
                    if raw_lines:
                        found = finish(path, first_lineno, raw_lines, n_bytes)
                        if found is not None:
                            yield doc_index, *found
                        doc_index += 1
                        raw_lines = []
                    continue
                if not raw_lines:
                    first_lineno, n_bytes = lineno, 0
                raw_lines.append(raw)
                n_bytes += len(raw)
        if raw_lines:  # the end of a file ends its last document
            found = finish(path, first_lineno, raw_lines, n_bytes)
            if found is not None:
                yield doc_index, *found
            doc_index += 1


def check_text_corpus(files: Sequence[str], vocab_file: str, flag: str = "input_file") -> None:
    """Checks a corpus before it is read on the fly (run_pretraining
    --input_format=text), where an error would surface deep in `tf.data`: the
    vocabulary, at least 2 documents, and every byte UTF-8 (reads each file
    once, in blocks; the first bad line is named).

    Raises:
      BadFileError / UserError: naming the file (and line) and the fix.
    """
    load_vocab_info(vocab_file)
    n_docs = count_documents(files, limit=2)
    if n_docs < 2:
        raise BadFileError(", ".join(files), f"holds {n_docs} document(s); next-sentence "
                           "prediction needs at least 2", fix=f"check --{flag}: one sentence "
                           "per line, a blank line between documents")
    for path in files:
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            with io.open_file(path, "rb") as f:
                while block := f.read(1 << 22):
                    decoder.decode(block)
                decoder.decode(b"", final=True)
        except UnicodeDecodeError as e:
            raise io.not_utf8(path, e, fix="convert the file to UTF-8 (or make TFRecords with "
                              "create_pretraining_data --skip_bad_lines)") from None


class LazyDocument(collections.abc.Sequence):
    """Another worker's document as the random-next pool sees it: its raw lines,
    each decoded and tokenized only when a span first reaches it (a sampled
    book costs the pool's few spans, not the whole book). Lines that are not
    UTF-8 read as empty: their owner reports them."""

    def __init__(self, raw_lines: list[bytes], ids: Callable[[str], list[int]]):
        self._raw = raw_lines
        self._ids = ids
        self._tokens: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self._raw)

    def __getitem__(self, i: int) -> list[int]:
        tokens = self._tokens.get(i)
        if tokens is None:
            try:
                tokens = self._ids(self._raw[i].decode("utf-8").strip())
            except UnicodeDecodeError:
                tokens = []
            self._tokens[i] = tokens
        return tokens
