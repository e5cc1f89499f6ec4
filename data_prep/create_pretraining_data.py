r"""Create masked-LM / next-sentence-prediction TFRecords for BERT pre-training.

Same flags, defaults, algorithm and output features as google-research/bert's
`create_pretraining_data.py` (see `pretraining_instances` for the algorithm and
the few deliberate differences: balanced next-sentence labels, unbiased mask
counts, no special tokens as random replacements), and files from either tool
train either model. Beyond it:

* **Streaming.** Documents are read, tokenized and turned into instances one
  at a time; instances are written as they are made (after a bounded shuffle
  buffer). Random-next B spans come from a bounded reservoir of spans of the
  documents seen so far (`RandomNextPool`). Memory is bounded by
  `--lookahead_documents`, `--random_next_pool_size`, `--shuffle_buffer_size`
  and the tokenizer cache, not by the corpus size.
* **All cores.** `--num_workers` processes (default: all cores); each
  document goes to the worker with the fewest input bytes so far (a
  deterministic assignment every worker computes alike). Each worker's
  random-next pool also takes the documents other workers own (the first
  `--lookahead_documents`, then 1 in N; only the sentences its spans use are
  tokenized), so a worker that owns one huge book still draws random-next B
  spans from other documents. Worker *w*
  seeds its random generator with (`--random_seed`, w, N), so the output is
  byte-for-byte deterministic for a given seed and worker count. With a
  multiple of N output files each worker writes its own files; otherwise each
  worker writes a part of every output file and the parts are concatenated in
  worker order.
* **N-gram masking** (`--max_ngram_size=N`, official/nlp's flag): spans of up
  to N whole words (`--do_whole_word_mask`) or word pieces, length n drawn
  ∝ 1/n (`pretraining_instances.choose_ngrams`); the summary gives the masked
  spans' length distribution.
* **Full-sentence packing** (`--packing=full_sentences`, RoBERTa's inputs):
  instances filled with the next tokens of the sentence stream, across
  documents with a [SEP] between two, no next-sentence pairs, no padding but
  in the last instance of a pass (`pretraining_instances.FullSentencePacker`);
  one-sentence documents are used too. The summary records the packing and
  run_pretraining then trains the masked LM alone.
* **Dynamic masking** (`--dynamic_masking`): unmasked pairs (input_ids,
  input_mask, segment_ids, next_sentence_labels; plus word_start_mask with
  `--do_whole_word_mask`); `official_bert.training.input_pipeline.pretraining_dataset`
  masks them at read time, fresh every epoch.
* **Safe output.** Files are written under hidden temporary names
  (`official_bert.io.temporary_name`: `.<name>.tmp-<pid>-<hex>`) and renamed
  only when every worker has finished (`io.publish_together`), the summary
  (the set's manifest) marked incomplete first and complete last, so a file
  with the final name is complete, and a reader given part of an unfinished
  set refuses it (`official_bert.io.check_published_sets`). `--gzip` compresses (read with `compression_type="GZIP"`; the
  reader detects it).
* **Any TensorFlow file system.** Inputs, outputs and the vocabulary may be
  `gs://...` (or any `tf.io.gfile` path; TensorFlow is then imported);
  in-memory `ram://` paths, which other processes cannot see, are generated
  by one worker in this process.
* **Bad input** gives a one-line `error: ...` and exit status 1: no input files,
  empty input, fewer than 2 documents, a line that is not UTF-8 (file and line
  named; `--skip_bad_lines` skips and counts such lines instead), a vocabulary
  without [PAD]/[UNK]/[CLS]/[SEP]/[MASK], an unwritable output. Documents with
  fewer than two sentences make no instances and are counted.
* **Progress and summary.** A progress line (documents/s, instances) every
  `--progress_seconds`; at the end a summary (documents, sentences, tokens,
  instances, next-sentence balance, masked fraction and 80/10/10 split,
  padding fraction, speed) printed and written beside the first output as
  `official_bert.io.sidecar_path(output)`: `.<name, dots as underscores>.summary.json`,
  hidden, so that no data pattern (`out.tfrecord*`, `*.tfrecord*`) matches it.

Differences in reading: a file's end also ends a document (google continues a
document across files that do not end with a blank line).

Usage:
  python -m data_prep.create_pretraining_data \
      --input_file=/tmp/corpus.txt --output_file=/tmp/pretrain.tfrecord \
      --vocab_file=/tmp/vocab.txt --do_lower_case --max_seq_length=128 \
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=5
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import itertools
import multiprocessing
import os
import random
import shutil
import sys
import time
from typing import Callable, Iterator, Sequence

from data_prep import tfrecord_io
from official_bert import io
from official_bert.errors import BadFileError, UserError
from data_prep.pretraining_instances import (
    GenerationStats,
    InstanceMaker,
    PretrainingDataConfig,
    ShuffleBuffer,
    VocabInfo,
    count_summary,
)

__all__ = ["PretrainingDataConfig", "create_pretraining_data"]


# --------------------------------------------------------------------------
# Inputs and outputs
# --------------------------------------------------------------------------


def _split(value: str | Sequence[str]) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return [v.strip() for v in items if v and v.strip()]


def check_output_files(output_file: str | Sequence[str], inputs: Sequence[str]) -> list[str]:
    outputs = _split(output_file)
    if not outputs:
        raise UserError("no --output_file given")
    for i, path in enumerate(outputs):
        if any(io.same_path(path, other) for other in outputs[:i]):
            raise UserError(f"--output_file lists {path} twice")
    for path in outputs:
        io.refuse_output_over_input({"--output_file": path},
                                    [("input_file", source) for source in inputs])
        if io.isdir(path):
            raise UserError(f"--output_file {path} is a directory; name a file in it")
        io.check_output_directory(path)
        if not io.is_local(path):
            continue
        directory = os.path.dirname(os.path.abspath(path))
        if not os.access(directory, os.W_OK | os.X_OK):
            raise UserError(f"cannot write --output_file {path}: directory {directory} "
                            "is not writable")
    return outputs


def load_vocab_info(vocab_file: str) -> VocabInfo:
    from official_bert.text import tokenization

    if not io.isfile(vocab_file):
        raise BadFileError(vocab_file, "does not exist", fix="check --vocab_file")
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
            for raw in f:
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
            for lineno, raw in enumerate(f, 1):
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
    import codecs

    from official_bert.errors import not_utf8

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
            raise not_utf8(path, e, fix="convert the file to UTF-8 (or make TFRecords with "
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


# --------------------------------------------------------------------------
# One worker
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WorkerJob:
    worker_index: int
    num_workers: int
    input_files: tuple[str, ...]
    vocab_file: str
    config: PretrainingDataConfig
    targets: tuple[str, ...]  # files this worker writes (final or part names)
    temporaries: tuple[str, ...]  # where it writes them (the caller publishes them)


def worker_records(maker: InstanceMaker, ids: Callable[[str], list[int]],
                   input_files: Sequence[str], worker_index: int, num_workers: int,
                   foreign_rng: random.Random,
                   progress: Callable[[GenerationStats], None] | None = None,
                   ) -> Iterator[bytes]:
    """Worker `worker_index` of `num_workers`' serialized instances, in the
    order they are made (before any shuffling): its documents of
    `input_files` (`read_documents`), each `dupe_factor` times. The files of
    `create_pretraining_data` (`run_worker`) and run_pretraining's
    --input_format=text (`input_pipeline.text_records`) both come from here.

    Args:
      maker: the worker's `InstanceMaker` (its config, random generator, stats).
      ids: text → token ids (the tokenizer).
      input_files: the corpus, in the order every worker reads it.
      worker_index, num_workers: which share (documents by bytes, as `read_documents`).
      foreign_rng: draws the other workers' documents for the random-next pool.
      progress: called with the stats after each document and each pass.
    """
    from data_prep.pretraining_instances import PackedInstanceMaker

    config = maker.config
    stats = maker.stats
    rng = maker.rng
    packed = PackedInstanceMaker(maker) if config.packing == "full_sentences" else None

    def process(doc_id, document):
        for dupe in range(config.dupe_factor):
            records = (packed.examples(document, dupe) if packed
                       else maker.examples(doc_id, document))
            for record in records:
                yield record
            if progress is not None:
                progress(stats)

    # Documents wait in `pending` until enough others have been read, so
    # that the first ones also find random-next spans of other documents.
    pending: collections.deque = collections.deque()
    pending_tokens = 0
    # Documents are assigned by bytes, so one worker may own a single huge
    # book and nothing else: with only its own documents in its pool, it
    # would have no "different document" to draw a random next B from.
    # Every worker therefore also puts spans of the other workers'
    # documents in its pool: all of the first `lookahead_documents` it
    # meets (so a small corpus is fully shared), then a 1-in-N sample
    # (bounded extra work on a large one). Drawn from its own generator,
    # so the output stays deterministic.
    sample_rate = 1.0 / num_workers
    foreign_taken = [0]

    def want_foreign() -> bool:
        if packed:  # no random-next spans to draw
            return False
        if foreign_taken[0] < config.lookahead_documents or foreign_rng.random() < sample_rate:
            foreign_taken[0] += 1
            return True
        return False

    documents = read_documents(input_files, worker_index, num_workers,
                               config.skip_bad_lines, stats, want_foreign=want_foreign)
    for doc_id, lines, owned in documents:
        if not owned:
            maker.pool.add_document(doc_id, LazyDocument(lines, ids), foreign_rng)
            continue
        document = [s for s in map(ids, lines) if s]
        stats.documents += 1
        if not document:
            stats.documents_empty += 1
            continue
        n_tokens = sum(map(len, document))
        stats.sentences += len(document)
        stats.tokens += n_tokens
        if not packed:
            maker.pool.add_document(doc_id, document, rng)
        if len(document) < 2 and not packed:
            # Nothing to pair: no instances (it can still be a random next).
            stats.documents_one_sentence += 1
        else:
            pending.append((doc_id, document, n_tokens))
            pending_tokens += n_tokens
        while pending and (len(pending) > config.lookahead_documents or (
                pending_tokens > config.lookahead_tokens and len(pending) > 1)):
            doc_id_, document_, n_ = pending.popleft()
            pending_tokens -= n_
            yield from process(doc_id_, document_)
        if progress is not None:
            progress(stats)
    while pending:
        doc_id_, document_, _ = pending.popleft()
        yield from process(doc_id_, document_)
    if packed:
        yield from packed.finish()


def worker_rngs(random_seed: int, worker_index: int, num_workers: int, pass_index: int = 0
                ) -> tuple[random.Random, random.Random]:
    """The random generators of a worker: (instances, other workers' documents
    for the random-next pool), seeded with (random_seed, worker, num_workers)
    and, after the first pass of `stream_records`, the pass."""
    tail = f"/{pass_index}" if pass_index else ""
    return (random.Random(f"{random_seed}/{worker_index}/{num_workers}{tail}"),
            random.Random(f"{random_seed}/foreign/{worker_index}{tail}"))


def stream_records(input_files: Sequence[str], vocab_file: str, config: PretrainingDataConfig,
                   worker_index: int = 0, num_workers: int = 1, passes: int | None = None,
                   shuffle_files: bool = True) -> Iterator[bytes]:
    """Serialized instances made on the fly, pass after pass over the corpus
    (run_pretraining --input_format=text, through `input_pipeline.text_records`).

    Each pass is `worker_records` with `dupe_factor` 1: the files' own code,
    so the same statistics as `create_pretraining_data`'s output, with new
    pairs and masks every pass. The first pass reads the files in the order
    given with `run_worker`'s seeds, so its instances are exactly those of
    `create_pretraining_data --dupe_factor=1` with as many workers (in
    another order: no shuffle buffer here, the reader shuffles), as long as
    a worker's instances fit its `shuffle_buffer_size` (once full, that
    buffer draws from the same random generator). Pass p > 0
    reads them in an order shuffled with (random_seed, p), the same for every
    worker (so all agree on who owns which document), and seeds the worker's
    generators with p too. A pass that makes no instance (this worker owns
    no document with two sentences) ends the stream instead of looping forever.

    Args:
      input_files: the corpus (expanded paths).
      vocab_file: the WordPiece vocabulary.
      config: the generation config (its dupe_factor is ignored: 1 per pass).
      worker_index, num_workers: this input pipeline's share of the documents.
      passes: how many passes (None: forever).
      shuffle_files: shuffle the file order of each pass (else as given).
    """
    from data_prep.fast_tokenization import CachedTokenizer

    config = dataclasses.replace(config, dupe_factor=1)
    tokenizer = CachedTokenizer(vocab_file, do_lower_case=config.do_lower_case)
    vocab = VocabInfo(tokenizer.vocab, name=vocab_file)
    made = 0
    for p in itertools.count() if passes is None else range(passes):
        files = list(input_files)
        if p and shuffle_files:
            random.Random(f"{config.random_seed}/files/{p}").shuffle(files)
        rng, foreign_rng = worker_rngs(config.random_seed, worker_index, num_workers, p)
        maker = InstanceMaker(config, vocab, rng)
        for record in worker_records(maker, tokenizer.ids, files, worker_index, num_workers,
                                     foreign_rng):
            made += 1
            yield record
        if not made:
            return


def run_worker(job: WorkerJob, progress: Callable[[GenerationStats], None] | None = None
               ) -> dict:
    """Generates this worker's share; leaves its files as uncommitted temporaries.

    The files are finished but keep their temporary names (`job.temporaries`);
    the caller renames (or concatenates) them once every worker has succeeded.
    """
    from data_prep.fast_tokenization import CachedTokenizer

    config = job.config
    stats = GenerationStats()
    rng, foreign_rng = worker_rngs(config.random_seed, job.worker_index, job.num_workers)
    tokenizer = CachedTokenizer(job.vocab_file, do_lower_case=config.do_lower_case)
    vocab = VocabInfo(tokenizer.vocab, name=job.vocab_file)
    maker = InstanceMaker(config, vocab, rng, stats)
    writers = []
    try:
        for path, tmp_path in zip(job.targets, job.temporaries):
            writers.append(tfrecord_io.TFRecordWriter(path, gzip=config.gzip, tmp_path=tmp_path))
        n_writers = len(writers)
        next_writer = [0]

        def sink(record: bytes) -> None:  # round-robin over the output files, as google
            i = next_writer[0]
            writers[i].write(record)
            next_writer[0] = (i + 1) % n_writers

        shuffle = ShuffleBuffer(config.shuffle_buffer_size, rng, sink)
        add = shuffle.add

        for record in worker_records(maker, tokenizer.ids, job.input_files, job.worker_index,
                                     job.num_workers, foreign_rng, progress):
            add(record)
        shuffle.drain()
        for writer in writers:
            writer.commit(rename=False)
        if progress is not None:
            progress(stats)
    finally:
        for writer in writers:
            if not writer.committed:
                writer.close()
    return stats.as_dict()


_COUNTERS = None


def _init_pool_worker(counters):
    global _COUNTERS
    _COUNTERS = counters


def _pool_worker(job: WorkerJob) -> dict:
    last = [0.0]

    def progress(stats: GenerationStats):
        now = time.monotonic()
        if now - last[0] >= 0.2:
            last[0] = now
            _COUNTERS[2 * job.worker_index] = stats.documents
            _COUNTERS[2 * job.worker_index + 1] = stats.instances

    stats = run_worker(job, progress)
    _COUNTERS[2 * job.worker_index] = stats["documents"]
    _COUNTERS[2 * job.worker_index + 1] = stats["instances"]
    return stats


def _mp_context():
    # fork is fastest, but not safe once TensorFlow (threads) is loaded in this process.
    if "tensorflow" not in sys.modules and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


# --------------------------------------------------------------------------
# The whole job
# --------------------------------------------------------------------------


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _part_name(path: str, worker: int, num_workers: int) -> str:
    """The name of a worker's part of `path` (only ever written under its temporary name)."""
    return f"{path}.part-{worker:05d}-of-{num_workers:05d}"


def _progress_line(start: float, documents: int, instances: int) -> str:
    elapsed = max(time.monotonic() - start, 1e-9)
    return (f"progress: {documents} documents ({documents / elapsed:.1f}/s), "
            f"{instances} instances ({instances / elapsed:.0f}/s), {elapsed:.1f}s")


def create_pretraining_data(input_file: str | Sequence[str], output_file: str | Sequence[str],
                            vocab_file: str, config: PretrainingDataConfig = PretrainingDataConfig(),
                            num_workers: int | None = None, progress_seconds: float = 10.0,
                            log: Callable[[str], None] | None = _stderr) -> dict:
    """Generates the TFRecords; returns the summary (also `io.sidecar_path(first output)`).

    `input_file`/`output_file`: comma-separated strings or lists (inputs may be
    globs). `num_workers`: processes (None/0: all cores; fewer when there are
    fewer than two documents per worker).
    """
    log = log or (lambda message: None)
    config.validate()
    start = time.monotonic()
    inputs = io.expand_paths(input_file, "input_file")
    outputs = check_output_files(output_file, inputs)
    for path in outputs:
        io.refuse_output_over_input({"--output_file": path}, {"vocab_file": vocab_file})
    load_vocab_info(vocab_file)  # fail early on a bad vocabulary
    requested = num_workers or os.cpu_count() or 1
    if any(map(io.is_process_local, [*inputs, *outputs, vocab_file])):
        requested = 1  # ram:// files exist only in this process
    n_docs = count_documents(inputs, limit=2 * requested)
    if n_docs == 0:
        raise BadFileError(", ".join(inputs), "holds no documents (only blank lines, or "
                           "nothing)", fix="check --input_file")
    if n_docs < 2 and config.packing == "sentence_pairs":
        raise BadFileError(", ".join(inputs), "holds only 1 document; next-sentence "
                           "prediction needs at least 2", fix="separate documents with a "
                           "blank line")
    workers = max(1, min(requested, n_docs // 2))

    direct = len(outputs) % workers == 0
    if direct:  # worker w writes outputs w, w + N, ...
        targets = [tuple(outputs[w::workers]) for w in range(workers)]
    else:  # every worker writes a part of every output
        targets = [tuple(_part_name(o, w, workers) for o in outputs) for w in range(workers)]
    temporaries = {t: io.temporary_name(t) for worker_targets in targets for t in worker_targets}
    jobs = [WorkerJob(w, workers, tuple(inputs), vocab_file, config, targets[w],
                      tuple(temporaries[t] for t in targets[w])) for w in range(workers)]
    log(f"create_pretraining_data: {len(inputs)} input file(s) → {len(outputs)} output "
        f"file(s), {workers} worker(s), {'dynamic' if config.dynamic_masking else 'static'} "
        f"masking, {config.packing.replace('_', ' ')}, dupe_factor {config.dupe_factor}, max_seq_length {config.max_seq_length}")
    staged = {o: temporaries[o] if direct else io.temporary_name(o) for o in outputs}
    try:
        if workers == 1:
            last = [start]

            def progress(stats):
                now = time.monotonic()
                if progress_seconds and now - last[0] >= progress_seconds:
                    last[0] = now
                    log(_progress_line(start, stats.documents, stats.instances))

            results = [run_worker(jobs[0], progress)]
        else:
            results = _run_pool(jobs, progress_seconds, start, log)
        if not direct:  # concatenate the workers' parts, in worker order
            for output in outputs:
                with io.open_new(staged[output], "wb") as out:
                    for w in range(workers):
                        part = temporaries[_part_name(output, w, workers)]
                        with io.open_file(part, "rb") as f:
                            shutil.copyfileobj(f, out, 1 << 22)
                        io.remove(part)
                    io.sync(out)

        totals = GenerationStats.total(results)
        elapsed = time.monotonic() - start
        summary = count_summary(totals, config)
        summary.update({
            "input_files": inputs,
            "output_files": outputs,
            "vocab_file": vocab_file,
            "num_workers": workers,
            "config": dataclasses.asdict(config),
            "format": "dynamic" if config.dynamic_masking else "static",
            "packing": config.packing,
            "next_sentence_prediction": config.packing == "sentence_pairs",
            "seconds": elapsed,
            "documents_per_second": totals["documents"] / elapsed,
            "instances_per_second": totals["instances"] / elapsed,
            "per_worker": results,
        })
        # The outputs are renamed into place together, then the summary (which
        # lists them under "files") is written last.
        summary_path = io.sidecar_path(outputs[0])
        io.remove(io.legacy_sidecar_path(outputs[0]))  # an older version's, now stale
        io.publish_together(staged, summary_path, summary)
    except BaseException:
        for path in [*temporaries.values(), *staged.values()]:
            io.remove(path)
        raise
    log(_progress_line(start, totals["documents"], totals["instances"]))
    log(format_summary(summary) + f"\nsummary written to {summary_path}")
    return summary


def _run_pool(jobs, progress_seconds, start, log):
    ctx = _mp_context()
    counters = ctx.Array("q", 2 * len(jobs), lock=False)
    with ctx.Pool(len(jobs), initializer=_init_pool_worker, initargs=(counters,)) as pool:
        result = pool.map_async(_pool_worker, jobs, chunksize=1)
        last = time.monotonic()
        while not result.ready():
            result.wait(0.5)
            now = time.monotonic()
            if progress_seconds and now - last >= progress_seconds and not result.ready():
                last = now
                log(_progress_line(start, sum(counters[0::2]), sum(counters[1::2])))
        return result.get()


def format_summary(summary: dict) -> str:
    def pct(x):
        return "n/a" if x is None else f"{100 * x:.2f}%"

    if summary.get("packing", "sentence_pairs") == "sentence_pairs":
        pairs = (f"next sentence random {pct(summary['next_sentence_random_fraction'])}, ")
    else:
        pairs = "full sentences (no next-sentence pairs), "
    lines = [
        f"documents {summary['documents']} ({summary['documents_one_sentence']} with one "
        f"sentence and {summary['documents_empty']} empty: no instances), sentences "
        f"{summary['sentences']}, tokens {summary['tokens']}, bad lines skipped "
        f"{summary['bad_lines_skipped']}",
        f"instances {summary['instances']} in {summary['seconds']:.1f}s "
        f"({summary['instances_per_second']:.0f}/s, {summary['documents_per_second']:.1f} "
        f"documents/s, {summary['num_workers']} workers)",
        f"{pairs}padding "
        f"{pct(summary['padding_fraction'])}, tokens/instance "
        f"{summary['tokens_per_instance'] or 0:.1f}",
    ]
    if summary["format"] == "static":
        lines.append(
            f"masked {pct(summary['masked_fraction'])} of maskable tokens "
            f"({summary['masked_per_instance'] or 0:.2f}/instance): [MASK] "
            f"{pct(summary['masked_as_mask_fraction'])}, random "
            f"{pct(summary['masked_as_random_fraction'])}, kept "
            f"{pct(summary['masked_as_kept_fraction'])}")
        if summary.get("masked_ngram_size_fractions"):
            lines.append("masked n-grams by length (1, 2, ...): " + ", ".join(
                pct(x) for x in summary["masked_ngram_size_fractions"]))
    else:
        lines.append("masking: dynamic (at read time)")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def _define_flags():
    from absl import flags

    flags.DEFINE_string("input_file", None,
                        "Input raw text file (or comma-separated list of files; globs allowed).")
    flags.DEFINE_string("output_file", None,
                        "Output TF example file (or comma-separated list of files).")
    flags.DEFINE_string("vocab_file", None,
                        "The vocabulary file that the BERT model was trained on.")
    flags.DEFINE_bool("do_lower_case", True,
                      "Whether to lower case the input text. Should be True for uncased "
                      "models and False for cased models.")
    flags.DEFINE_bool("do_whole_word_mask", False,
                      "Whether to use whole word masking rather than per-WordPiece masking.")
    flags.DEFINE_integer("max_ngram_size", 1,
                         "Mask spans of up to this many contiguous words (with "
                         "--do_whole_word_mask) or word pieces, span length n drawn with "
                         "probability proportional to 1/n (official/nlp's flag). 1: single "
                         "tokens/words.")
    flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
    flags.DEFINE_integer("max_predictions_per_seq", 20,
                         "Maximum number of masked LM predictions per sequence.")
    flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
    flags.DEFINE_integer("dupe_factor", 10,
                         "Number of times to duplicate the input data (with different masks).")
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
    flags.DEFINE_float("short_seq_prob", 0.1,
                       "Probability of creating sequences which are shorter than the "
                       "maximum length.")
    # Beyond google-research/bert:
    flags.DEFINE_bool("dynamic_masking", False,
                      "Write unmasked pairs; the input pipeline masks them at read time.")
    flags.DEFINE_enum("packing", "sentence_pairs", ["sentence_pairs", "full_sentences"],
                      "sentence_pairs: google's [CLS] A [SEP] B [SEP] with next-sentence labels. "
                      "full_sentences: RoBERTa's, each instance filled with the next "
                      "max_seq_length - 2 tokens of the sentence stream, across documents with "
                      "a [SEP] between them; no padding, no next-sentence task (run_pretraining "
                      "turns it off).")
    flags.DEFINE_integer("num_workers", 0, "Worker processes (0: all cores).")
    flags.DEFINE_bool("gzip", False, "Write gzip-compressed TFRecords.")
    flags.DEFINE_bool("skip_bad_lines", False,
                      "Skip (and count) lines that are not valid UTF-8 instead of failing.")
    flags.DEFINE_float("progress_seconds", 10.0, "Seconds between progress lines (0: none).")
    flags.DEFINE_integer("shuffle_buffer_size", 10_000,
                         "Instances per worker shuffled before writing.")
    flags.DEFINE_integer("random_next_pool_size", 10_000,
                         "Candidate random-next spans kept per worker (reservoir sample).")
    flags.DEFINE_integer("lookahead_documents", 64,
                         "Documents read ahead before generating from the first ones.")
    flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])


def main(argv):
    if len(argv) > 1:
        raise UserError(f"unexpected arguments: {' '.join(argv[1:])} (flags are written "
                        "--name=value)")
    from absl import flags

    FLAGS = flags.FLAGS
    if FLAGS.packing == "full_sentences":
        # Flags that shape next-sentence pairs: given with full_sentences they would be
        # ignored without a word, so a mistaken packing would go unnoticed.
        given = [f"--{name}" for name in ("short_seq_prob", "random_next_pool_size")
                 if FLAGS[name].present]
        if given:
            raise UserError(f"{' and '.join(given)} shape next-sentence pairs, which "
                            "--packing=full_sentences does not make: leave "
                            f"{'it' if len(given) == 1 else 'them'} out, or use "
                            "--packing=sentence_pairs")
    config = PretrainingDataConfig(
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        dupe_factor=FLAGS.dupe_factor,
        packing=FLAGS.packing,
        do_lower_case=FLAGS.do_lower_case,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        max_ngram_size=FLAGS.max_ngram_size,
        dynamic_masking=FLAGS.dynamic_masking,
        random_seed=FLAGS.random_seed,
        random_next_pool_size=FLAGS.random_next_pool_size,
        lookahead_documents=FLAGS.lookahead_documents,
        shuffle_buffer_size=FLAGS.shuffle_buffer_size,
        skip_bad_lines=FLAGS.skip_bad_lines,
        gzip=FLAGS.gzip,
    )
    create_pretraining_data(FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file, config,
                            num_workers=FLAGS.num_workers or None,
                            progress_seconds=FLAGS.progress_seconds)


def entry(argv=None):
    """Console entry point (`bert <command>` and `python -m`)."""
    from official_bert import app

    _define_flags()
    app.run(main, argv)


if __name__ == "__main__":
    entry()
