r"""The generator behind `bert create-pretraining-data`: workers, files, the summary.

google-research/bert's `create_pretraining_data.py`, streaming and on all
cores; the command's docstring (`official_bert/commands/create_pretraining_data.py`)
says what it adds. The parts:

* `pretraining_corpus`: the corpus read a document at a time, each document
  owned by one worker (`read_documents`), the others' sampled for its
  random-next pool;
* `pretraining_instances`: google's algorithm (pairs, truncation, masking)
  turning a worker's documents into instances;
* `pretraining_records`: each instance's `tf.train.Example` bytes and the
  counts behind the summary;
* this module: one worker's records (`worker_records`, also the on-the-fly
  stream of run_pretraining --input_format=text: `stream_records`), its files
  (`run_worker`), and the whole job (`create_pretraining_data`): the plan of
  workers and files, the pool of processes, the parts concatenated, the set
  published with its summary (`official_bert.file_sets.publish_together`).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import multiprocessing
import os
import random
import shutil
import signal
import sys
import threading
import time
from typing import Callable, Iterator, Sequence

from data_prep import tfrecord_io
from data_prep.configs import PretrainingDataConfig
from data_prep.fast_tokenization import CachedTokenizer
from data_prep.pretraining_corpus import (LazyDocument, count_documents, load_vocab_info,
                                          read_documents)
from data_prep.pretraining_instances import (InstanceMaker, PackedInstanceMaker, ShuffleBuffer,
                                             VocabInfo)
from data_prep.pretraining_records import GenerationStats, count_summary
from official_bert import file_sets, interruption, io
from official_bert.outputs import FILE_PREFIX, ensure_checked
from official_bert.progress import Progress
from official_bert.errors import BadFileError, UserError

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
        io.check_output_directory(path)
    # The one output policy: kinds, names, devices, writable, never over a foreign file.
    ensure_checked(",".join(outputs), "--output_file", FILE_PREFIX)
    _remove_stale_temporaries(outputs)
    return outputs


def _remove_stale_temporaries(outputs: Sequence[str]) -> None:
    """A stopped generation's temporaries never outlive the next run: those of a
    run that could not remove them (killed, or its terminal gone) are removed
    before this one writes (a worker's shard is tens of MB; their names carry the
    pid of the generation that made them, so a running one's are kept)."""
    for directory in sorted({os.path.dirname(path) or "." for path in outputs}):
        io.remove_stale_temporaries(directory)


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


def _foreign_sampler(lookahead_documents: int, num_workers: int,
                     foreign_rng: random.Random) -> Callable[[], bool]:
    """Whether the next document of another worker goes into this worker's pool.

    Documents are assigned by bytes, so one worker may own a single huge book
    and nothing else: with only its own documents in its pool, it would have
    no "different document" to draw a random next B from. Every worker
    therefore also puts spans of the other workers' documents in its pool:
    all of the first `lookahead_documents` it meets (so a small corpus is
    fully shared), then a 1-in-N sample (bounded extra work on a large one).
    Drawn from its own generator, so the output stays deterministic.
    """
    sample_rate = 1.0 / num_workers
    taken = [0]

    def want_foreign() -> bool:
        if taken[0] < lookahead_documents or foreign_rng.random() < sample_rate:
            taken[0] += 1
            return True
        return False

    return want_foreign


def _count_owned(maker: InstanceMaker, doc_id: int, document: list[list[int]], n_tokens: int,
                 packed: PackedInstanceMaker | None) -> bool:
    """Counts one of the worker's own (non-empty) documents and adds it to the
    random-next pool; returns whether it makes instances."""
    stats = maker.stats
    stats.sentences += len(document)
    stats.tokens += n_tokens
    if packed:
        return True
    maker.pool.add_document(doc_id, document, maker.rng)
    if len(document) < 2:
        # Nothing to pair: no instances (it can still be a random next).
        stats.documents_one_sentence += 1
        return False
    return True


def _document_passes(maker: InstanceMaker, packed: PackedInstanceMaker | None, doc_id: int,
                     document: list[list[int]],
                     progress: Callable[[GenerationStats], None] | None) -> Iterator[bytes]:
    """The records of the `dupe_factor` passes over one document."""
    for dupe in range(maker.config.dupe_factor):
        records = (packed.examples(document, dupe) if packed
                   else maker.examples(doc_id, document))
        for record in records:
            yield record
        if progress is not None:
            progress(maker.stats)


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
    config = maker.config
    stats = maker.stats
    packed = PackedInstanceMaker(maker) if config.packing == "full_sentences" else None
    # Full-sentence packing draws no random-next spans: no other worker's documents.
    want_foreign = ((lambda: False) if packed
                    else _foreign_sampler(config.lookahead_documents, num_workers, foreign_rng))
    # Documents wait in `pending` until enough others have been read, so
    # that the first ones also find random-next spans of other documents.
    pending: collections.deque = collections.deque()
    pending_tokens = 0
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
        if _count_owned(maker, doc_id, document, n_tokens, packed):
            pending.append((doc_id, document, n_tokens))
            pending_tokens += n_tokens
        while pending and (len(pending) > config.lookahead_documents or (
                pending_tokens > config.lookahead_tokens and len(pending) > 1)):
            doc_id_, document_, n_ = pending.popleft()
            pending_tokens -= n_
            yield from _document_passes(maker, packed, doc_id_, document_, progress)
        if progress is not None:
            progress(stats)
    while pending:
        doc_id_, document_, _ = pending.popleft()
        yield from _document_passes(maker, packed, doc_id_, document_, progress)
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
    interruption.as_worker_process()


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


class _GenerationProgress:
    """The lines said while generating: documents done of the corpus's (counted
    by a thread meanwhile: the line says the time left once it is known),
    instances, the time elapsed. One every `progress_seconds` (0: none)."""

    def __init__(self, inputs: Sequence[str], progress_seconds: float,
                 log: Callable[[str], None]):
        self.inputs, self.log = inputs, log
        self.enabled = bool(progress_seconds)
        self.progress = Progress(None, "documents", min_interval=progress_seconds,
                                 max_interval=progress_seconds)

    def count_documents(self) -> None:
        """Counts the corpus's documents in a thread (a read of the corpus,
        far quicker than generating). Started after the pool forks its workers."""
        def count():
            try:
                self.progress.total = count_documents(self.inputs, limit=sys.maxsize)
            except Exception:  # noqa: BLE001 (the workers report a bad file themselves)
                pass

        if self.enabled:
            threading.Thread(target=count, name="count-documents", daemon=True).start()

    def update(self, documents: int, instances: int) -> None:
        if self.enabled and self.progress.update(documents):
            elapsed = max(self.progress.elapsed, 1e-9)
            line = self.progress.line()
            head, _, timing = line.partition(" documents, ")
            self.log(f"progress: {head} documents, {instances} instances "
                     f"({instances / elapsed:.0f}/s), {timing}")


def _count_workers(inputs: Sequence[str], outputs: Sequence[str], vocab_file: str,
                   config: PretrainingDataConfig, num_workers: int | None) -> int:
    """How many workers: as asked (all cores by default), but one for
    process-local files and at most one per two documents; refuses a corpus
    with too few documents."""
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
    return max(1, min(requested, n_docs // 2))


def _worker_targets(outputs: Sequence[str], workers: int) -> list[tuple[str, ...]]:
    """The files each worker writes: with a multiple of N outputs, worker w
    writes outputs w, w + N, ...; otherwise a part of every output."""
    if len(outputs) % workers == 0:
        return [tuple(outputs[w::workers]) for w in range(workers)]
    return [tuple(_part_name(o, w, workers) for o in outputs) for w in range(workers)]


def _run_jobs(jobs: Sequence[WorkerJob], progress: _GenerationProgress) -> list[dict]:
    """Every worker's stats: one worker in this process, more in a pool."""
    if len(jobs) > 1:
        return _run_pool(jobs, progress)
    progress.count_documents()
    return [run_worker(jobs[0], lambda stats: progress.update(stats.documents, stats.instances))]


def _concatenate_parts(outputs: Sequence[str], staged: dict, temporaries: dict,
                       workers: int) -> None:
    """Each output from the workers' parts of it, in worker order."""
    for output in outputs:
        with io.open_new(staged[output], "wb") as out:
            for w in range(workers):
                part = temporaries[_part_name(output, w, workers)]
                with io.open_file(part, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 22)
                io.remove(part)
            io.sync(out)


def _summary(results: list[dict], config: PretrainingDataConfig, inputs: Sequence[str],
             outputs: Sequence[str], vocab_file: str, start: float) -> dict:
    """The set's summary: the summed counts, their fractions, the job."""
    totals = GenerationStats.total(results)
    elapsed = time.monotonic() - start
    summary = count_summary(totals, config)
    summary.update({
        "input_files": inputs,
        "output_files": outputs,
        "vocab_file": vocab_file,
        "num_workers": len(results),
        "config": dataclasses.asdict(config),
        "format": "dynamic" if config.dynamic_masking else "static",
        "packing": config.packing,
        "next_sentence_prediction": config.packing == "sentence_pairs",
        "seconds": elapsed,
        "documents_per_second": totals["documents"] / elapsed,
        "instances_per_second": totals["instances"] / elapsed,
        "per_worker": results,
    })
    return summary


def create_pretraining_data(input_file: str | Sequence[str], output_file: str | Sequence[str],
                            vocab_file: str, config: PretrainingDataConfig = PretrainingDataConfig(),
                            num_workers: int | None = None, progress_seconds: float = 10.0,
                            log: Callable[[str], None] | None = _stderr) -> dict:
    """Generates the TFRecords; returns the summary (also `file_sets.sidecar_path(first output)`).

    `input_file`/`output_file`: comma-separated strings or lists (inputs may be
    globs). `num_workers`: processes (None/0: all cores; fewer when there are
    fewer than two documents per worker).
    """
    log = log or (lambda message: None)
    config.validate()
    start = time.monotonic()
    inputs = file_sets.expand_paths(input_file, "input_file")
    progress = _GenerationProgress(inputs, progress_seconds, log)
    outputs = check_output_files(output_file, inputs)
    for path in outputs:
        io.refuse_output_over_input({"--output_file": path}, {"vocab_file": vocab_file})
    load_vocab_info(vocab_file)  # fail early on a bad vocabulary
    workers = _count_workers(inputs, outputs, vocab_file, config, num_workers)
    direct = len(outputs) % workers == 0  # each worker writes whole outputs
    targets = _worker_targets(outputs, workers)
    temporaries = {t: io.temporary_name(t) for worker_targets in targets for t in worker_targets}
    jobs = [WorkerJob(w, workers, tuple(inputs), vocab_file, config, targets[w],
                      tuple(temporaries[t] for t in targets[w])) for w in range(workers)]
    log(f"create_pretraining_data: {len(inputs)} input file(s) → {len(outputs)} output "
        f"file(s), {workers} worker(s), {'dynamic' if config.dynamic_masking else 'static'} "
        f"masking, {config.packing.replace('_', ' ')}, dupe_factor {config.dupe_factor}, "
        f"max_seq_length {config.max_seq_length}")
    staged = {o: temporaries[o] if direct else io.temporary_name(o) for o in outputs}
    try:
        results = _run_jobs(jobs, progress)
        if not direct:
            _concatenate_parts(outputs, staged, temporaries, workers)
        summary = _summary(results, config, inputs, outputs, vocab_file, start)
        # The outputs are renamed into place together, then the summary (which
        # lists them under "files") is written last.
        summary_path = file_sets.sidecar_path(outputs[0])
        io.remove(file_sets.legacy_sidecar_path(outputs[0]))  # an older version's, now stale
        file_sets.publish_together(staged, summary_path, summary)
    except BaseException:
        for path in [*temporaries.values(), *staged.values()]:
            io.remove(path)
        raise
    log(_progress_line(start, summary["documents"], summary["instances"]))
    log(format_summary(summary) + f"\nsummary written to {summary_path}")
    return summary


def _run_pool(jobs, progress: _GenerationProgress):
    ctx = _mp_context()
    if ctx.get_start_method() != "fork":  # spawned workers' semaphores need the tracker
        interruption.start_resource_tracker()
    counters = ctx.Array("q", 2 * len(jobs), lock=False)
    with ctx.Pool(len(jobs), initializer=_init_pool_worker, initargs=(counters,)) as pool:
        # The pool replaces a worker that dies, but its job is lost with it and the
        # result would never be ready: the first workers are watched (`_dead_worker`).
        workers = list(pool._pool)
        result = pool.map_async(_pool_worker, jobs, chunksize=1)
        progress.count_documents()  # a thread: only once the workers are forked
        while not result.ready():
            result.wait(0.5)
            if not result.ready():
                _refuse_dead_worker(workers)
                progress.update(sum(counters[0::2]), sum(counters[1::2]))
        return result.get()


def _refuse_dead_worker(workers) -> None:
    """`UserError` when one of the pool's `workers` has ended: a pool's worker
    lives until the pool ends, so it died (killed: out of memory, a signal sent
    to it alone, or a crash). A stop signal to the whole job is the job's stop,
    not a worker's death (`interruption`)."""
    for process in workers:
        code = process.exitcode
        if code is None:
            continue
        if interruption.requested() is not None:
            raise interruption.stopped()
        how = (f"was killed by {signal.Signals(-code).name}" if code < 0 else
               f"ended with exit status {code}")
        raise UserError(f"data generation stopped: its worker process {process.pid} {how} "
                        "(SIGKILL is often the system's out-of-memory killer); nothing was "
                        "published and its temporaries are removed: run the same command "
                        "again, with fewer --num_workers if memory ran out")


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
