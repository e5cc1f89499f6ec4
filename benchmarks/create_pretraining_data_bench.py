r"""Benchmark of data_prep/create_pretraining_data.py: documents/s, instances/s, peak memory.

The corpus (default: `<repo>/../shared/data/pretrain_text`, the public-domain
books and speeches; without it the bundled `data_prep/sample_corpus`) is put
into one-sentence-per-line form with `prepare_corpus`, then generated with
google-research/bert's flags (`--max_seq_length=128 --dupe_factor=5`, the
rest default). Each run is a fresh process, timed from its start (Python
start-up, imports and all) to its exit, as the reference number for
google-research/bert's generator (about 1,300 instances/s on this 2-core
machine) was taken. Peak memory is `resource.getrusage` in that process:
`ru_maxrss` of itself and of its (waited-for) children, the worker processes
(and `os.wait4`'s for the process as a whole); `peak_mb` is the largest,
`total_bound_mb` = self + workers × largest child. google's generator is
measured the same way (`os.wait4`).

`--replicate=1,10` also runs the corpus written 10 times over (10× the
documents): with streaming generation the peak memory stays flat while the
time grows linearly. `--google_dir` runs google-research/bert's own
`create_pretraining_data.py` from that directory (it must run under the
installed TensorFlow, e.g. with `import tensorflow.compat.v1 as tf`) on the
same corpus and flags for a same-run baseline.

Prints a table and writes JSON (`--output_json`).

  python benchmarks/create_pretraining_data_bench.py --replicate=1,10
  python benchmarks/create_pretraining_data_bench.py --replicate=1 --num_workers=1 \
      --google_dir=/tmp/google_bert --rounds=3   # one process each, 3 rounds in turn
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from absl import app, flags  # noqa: E402

from benchmarks import common  # noqa: E402

common.define_corpus_flags()
flags.DEFINE_list("replicate", ["1", "10"], "Corpus replication factors to run.")
flags.DEFINE_integer("dupe_factor", 5, "As google-research/bert's flag.")
flags.DEFINE_integer("max_seq_length", 128, "As google-research/bert's flag.")
flags.DEFINE_integer("num_workers", 0, "Worker processes (0: all cores).")
flags.DEFINE_bool("dynamic_masking", False, "Benchmark --dynamic_masking output.")
flags.DEFINE_string("google_dir", None, "Directory with google-research/bert's "
                    "create_pretraining_data.py and tokenization.py (TF2-runnable) for a "
                    "same-run baseline on the 1x corpus.")
flags.DEFINE_string("output_json", None, "Where to write the results "
                    "(default: benchmarks/results/create_pretraining_data.json).")
flags.DEFINE_string("work_dir", None, "Scratch directory (default: a temporary one).")
flags.DEFINE_integer("rounds", 1, "With --google_dir: rounds of (ours, google) in turn on the "
                     "1x corpus; the table ends with each round's ratio and the median.")
flags.DEFINE_string("_child", None, "internal: run one generation in this process")
flags.DEFINE_string("_count", None, "internal: count a TFRecord file's records in this process")
FLAGS = flags.FLAGS


def run_child(spec: dict) -> dict:
    """Generation in this process; returns timing and rusage (called in a fresh process)."""
    from data_prep.create_pretraining_data import PretrainingDataConfig, create_pretraining_data

    config = PretrainingDataConfig(dupe_factor=spec["dupe_factor"],
                                   max_seq_length=spec["max_seq_length"],
                                   dynamic_masking=spec["dynamic_masking"])
    summary = create_pretraining_data(spec["input"], spec["output"], spec["vocab_file"], config,
                                      num_workers=spec["num_workers"] or None,
                                      progress_seconds=0, log=None)
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "documents": summary["documents"], "instances": summary["instances"],
        "workers": summary["num_workers"], "generation_seconds": summary["seconds"],
        "self_maxrss_mb": self_kb / 1024, "children_maxrss_mb": children_kb / 1024,
        "next_sentence_random_fraction": summary["next_sentence_random_fraction"],
        "masked_fraction": summary["masked_fraction"],
        "padding_fraction": summary["padding_fraction"],
        "tokens": summary["tokens"],
    }


def timed_process(cmd, cwd=None) -> tuple[float, str, float, float]:
    """Runs `cmd`; returns (wall seconds, stdout, peak RSS MB, CPU seconds) of it and its
    (waited-for) descendants."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        _, status, usage = os.wait4(proc.pid, 0)  # this child's rusage alone
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n"
                               f"{err.read().decode()[-3000:]}")
        cpu = usage.ru_utime + usage.ru_stime
        return seconds, out.read().decode(), usage.ru_maxrss / 1024, cpu


def ours(corpus: str, work: pathlib.Path, vocab: str, replicate: int) -> dict:
    """One timed run of our generator on `corpus` (the 1x corpus written `replicate` times)."""
    output = work / f"ours-x{replicate}.tfrecord"
    spec = dict(input=corpus, output=str(output), vocab_file=vocab,
                dupe_factor=FLAGS.dupe_factor, max_seq_length=FLAGS.max_seq_length,
                dynamic_masking=FLAGS.dynamic_masking, num_workers=FLAGS.num_workers)
    seconds, out, wait4_mb, cpu = timed_process(
        [sys.executable, __file__, f"--_child={json.dumps(spec)}"])
    result = json.loads(out.strip().splitlines()[-1])
    result["seconds"] = seconds
    result["cpu_seconds"] = cpu
    result["peak_mb"] = max(result["self_maxrss_mb"], result["children_maxrss_mb"], wait4_mb)
    result["total_bound_mb"] = (result["self_maxrss_mb"]
                                + result["workers"] * result["children_maxrss_mb"])
    result["output_mb"] = os.path.getsize(output) / 2**20
    result.update(tool="ours", replicate=replicate, corpus_mb=os.path.getsize(corpus) / 2**20)
    os.remove(output)
    return result


def google(corpus: str, work: pathlib.Path, vocab: str, documents: int) -> dict:
    """One timed run of google-research/bert's generator on the 1x `corpus`."""
    output = work / "google.tfrecord"
    cmd = [sys.executable, "create_pretraining_data.py", f"--input_file={corpus}",
           f"--output_file={output}", f"--vocab_file={vocab}", "--do_lower_case=True",
           f"--max_seq_length={FLAGS.max_seq_length}", f"--dupe_factor={FLAGS.dupe_factor}"]
    seconds, _, peak_mb, cpu = timed_process(cmd, cwd=FLAGS.google_dir)
    # Count and NSP balance of what it wrote, after timing, in another process: TensorFlow
    # imported here would raise the next runs' ru_maxrss (Linux keeps the parent's high-water
    # mark in a child started by vfork + exec).
    _, out, _, _ = timed_process([sys.executable, __file__, f"--_count={output}"])
    n, random_next = json.loads(out.strip().splitlines()[-1])
    os.remove(output)
    return {"tool": "google-research/bert", "replicate": 1, "documents": documents,
            "corpus_mb": os.path.getsize(corpus) / 2**20, "instances": n, "seconds": seconds,
            "cpu_seconds": cpu, "workers": 1, "peak_mb": peak_mb,
            "next_sentence_random_fraction": random_next / n}


def count_records(path: str) -> tuple[int, int]:
    """(records, random-next labels) of a pre-training TFRecord file."""
    import tensorflow as tf

    n = random_next = 0
    for record in tf.data.TFRecordDataset(path):
        example = tf.train.Example.FromString(record.numpy())
        n += 1
        random_next += example.features.feature["next_sentence_labels"].int64_list.value[0]
    return n, random_next


def round_ratios(rows: list[dict]) -> list[tuple[float, float]]:
    """(wall, CPU) instances/s ratios of ours to google's for each round: each
    google row against the 1x row of ours just before it."""
    ratios, last_ours = [], None
    for r in rows:
        if r["tool"] == "ours" and r["replicate"] == 1:
            last_ours = r
        elif r["tool"] != "ours" and last_ours is not None:
            ratios.append(((last_ours["instances"] / last_ours["seconds"])
                           / (r["instances"] / r["seconds"]),
                           (last_ours["instances"] / last_ours["cpu_seconds"])
                           / (r["instances"] / r["cpu_seconds"])))
    return ratios


def main(argv):
    del argv
    if FLAGS._child:
        print(json.dumps(run_child(json.loads(FLAGS._child))))
        return
    if FLAGS._count:
        print(json.dumps(count_records(FLAGS._count)))
        return
    from data_prep import prepare_corpus

    load_before = os.getloadavg()[0]
    source = FLAGS.corpus or common.default_corpus()
    vocab = FLAGS.vocab_file or common.bert_base_uncased_vocab()
    work = pathlib.Path(FLAGS.work_dir or tempfile.mkdtemp(prefix="cpd_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus-x1.txt"
    stats = prepare_corpus.prepare_corpus(source.split(","), str(corpus))
    rows = []
    for factor in map(int, FLAGS.replicate):
        path = corpus
        if factor > 1:
            path = work / f"corpus-x{factor}.txt"
            with open(path, "wb") as out:
                for i in range(factor):
                    with open(corpus, "rb") as f:
                        shutil.copyfileobj(f, out)
                    out.write(b"\n")
        rows.append(ours(str(path), work, vocab, factor))
        if factor > 1:
            os.remove(path)
    if FLAGS.google_dir:
        for round_ in range(FLAGS.rounds):
            if round_:  # ours again, then google: each pair shares the machine's state
                rows.append(ours(str(corpus), work, vocab, 1))
            rows.append(google(str(corpus), work, vocab, stats["documents"]))

    header = (f"{'tool':<22}{'corpus':>8}{'workers':>8}{'documents':>10}{'instances':>11}"
              f"{'seconds':>9}{'docs/s':>9}{'inst/s':>9}{'inst/cpu-s':>11}{'peak MB':>9}"
              f"{'NSP rand':>9}")
    print(common.machine_line(common.machine()))
    print(f"corpus: {source} ({stats['documents']} documents, "
          f"{os.path.getsize(corpus) / 2**20:.1f} MB prepared); vocab {vocab}")
    print(f"flags: --max_seq_length={FLAGS.max_seq_length} --dupe_factor={FLAGS.dupe_factor} "
          f"(wall time of a fresh process, start-up included; inst/cpu-s: per CPU-second of "
          f"all its processes, which other load on the machine does not change)")
    if load_before > 0.5:
        print(f"warning: load average {load_before:.1f} before the runs: other work shares "
              "the cores and lowers the wall-clock rates")
    print(header)
    for r in rows:
        peak = f"{r['peak_mb']:.0f}"
        docs = r.get("documents") or 0
        print(f"{r['tool']:<22}{str(r['replicate']) + 'x':>8}{r['workers']:>8}{docs:>10}"
              f"{r['instances']:>11}{r['seconds']:>9.1f}{docs / r['seconds']:>9.1f}"
              f"{r['instances'] / r['seconds']:>9.0f}{r['instances'] / r['cpu_seconds']:>11.0f}"
              f"{peak:>9}"
              f"{100 * r['next_sentence_random_fraction']:>8.1f}%")
    ratios = round_ratios(rows)
    for i, (wall, cpu) in enumerate(ratios):
        print(f"round {i + 1}: ours / google instances/s {wall:.2f}x, per CPU-second {cpu:.2f}x")
    if len(ratios) > 1:
        print(f"median of {len(ratios)} rounds: {statistics.median(r[0] for r in ratios):.2f}x, "
              f"per CPU-second {statistics.median(r[1] for r in ratios):.2f}x")
    result = {"machine": {**common.machine(), "python": platform.python_version(),
                          "load_average_before": load_before},
              "ratios": [{"instances_per_s": w, "instances_per_cpu_s": c} for w, c in ratios],
              "corpus": source, "flags": {"max_seq_length": FLAGS.max_seq_length,
                                          "dupe_factor": FLAGS.dupe_factor,
                                          "dynamic_masking": FLAGS.dynamic_masking},
              "runs": rows}
    path = pathlib.Path(FLAGS.output_json or REPO / "benchmarks" / "results"
                        / "create_pretraining_data.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"results written to {path}")
    if not FLAGS.work_dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    app.run(main)
