"""Models side by side on your labelled file: quality, latency, throughput, size.

Each of --models (TF Serving exports, their bfloat16 twins, the int8
model.tflite that --quantize writes beside a SavedModel) is scored on
--data_file with its task's metric and timed, all in one process, in turn in
each round, with --threads threads: batch-1 latency (p50, p95) and batch-32
throughput at one length, and throughput on the file's own rows. One table on
stdout, the first model the reference of the "of first" and "x" columns;
--json_output and --plot_output (quality against latency) keep it. How each
model is run and timed: `official_bert/serving/compare.py`.

Example (a teacher, its distilled student and the student's int8 file;
docs/make_it_small.md):
  bert compare --models=/tmp/teacher_export,/tmp/student_export,\\
/tmp/student_export/1/model.tflite \\
      --data_file=$GLUE/SST-2/dev.tsv --task_name=sst-2 --plot_output=/tmp/compare.png
"""

from __future__ import annotations

import json

from absl import flags, logging

from official_bert.commands import app, cli_flags, registry
from official_bert.configs import CompareConfig
from official_bert.errors import UserError

FLAGS = flags.FLAGS

CONFIGS = (CompareConfig,)  # its flags' definitions


def define_flags():
    cli_flags.define_flags(CompareConfig)


def compare(config: CompareConfig) -> dict:
    """Scores and times every model; returns the report (`format_table`'s input)."""
    from official_bert.serving import compare as lib

    config.validate()
    _set_threads(config.threads)
    models = [lib.open_model(path, config.threads) for path in config.models]
    tasks = {m.task for m in models}
    if len(tasks) > 1:
        raise UserError(f"--models are of different tasks ({', '.join(sorted(tasks))}): "
                            "compare models of one task")
    names = config.names or short_names(config.models)
    if len(names) != len(models):
        raise UserError(f"--names has {len(names)} names for {len(models)} --models")
    length = lib.timing_length(models, config.seq_length)
    scoring = lib.read_scoring_file(config.data_file, models[0], config.task_name)
    rows = []
    for model in models:
        logging.info("Scoring %s (%s %s) on %d rows of %s", model.name, model.engine,
                     model.precision, scoring.rows, config.data_file)
        own_length = model.fixed_length or int(model.metadata["seq_length"])
        outputs = lib.run_batched(model, scoring.features(own_length), trim=False)
        rows.append({"model": model.name, "name": names[len(rows)], "engine": model.engine,
                     "precision": model.precision,
                     "size_mb": model.size / 2**20, "metrics": scoring.score(outputs)})
    vocab = lib.vocabulary(models[0])
    requests = {"b1": lib.random_ids(1, length, vocab),
                "b32": lib.random_ids(lib.BATCH, length, vocab)}
    runs, all_requests = {}, {}
    for index, model in enumerate(models):
        runs[index] = model.run
        all_requests[index] = dict(requests, file=lib.file_batches(
            scoring.features(model.fixed_length or int(model.metadata["seq_length"])),
            config.file_rows, trim=model.fixed_length is None))
    file_rows = min(config.file_rows, scoring.rows)
    logging.info("Timing %d models, %d rounds, %d threads, length %d", len(models),
                 config.rounds, config.threads, length)
    # The same B1 and B32 requests for all; the file's rows as each model reads them.
    seconds = lib.time_interleaved(
        {i: (lambda request, i=i: runs[i](request)) for i in runs},
        {"b1": requests["b1"], "b32": requests["b32"]},
        {"b1": config.b1_calls, "b32": 1}, config.rounds,
        progress=lambda r, n: logging.info("timing round %d/%d done", r, n))
    file_seconds = lib.time_interleaved(
        {i: (lambda _, i=i: [runs[i](b) for b in all_requests[i]["file"]]) for i in runs},
        {"file": None}, {"file": 1}, config.rounds)
    for index, row in enumerate(rows):
        row.update(lib.summary({**seconds[index], "file": file_seconds[index]["file"]},
                               file_rows))
    first = rows[0]
    headline = next(iter(first["metrics"]))
    for row in rows:
        score, reference = row["metrics"][headline], first["metrics"][headline]
        row["of_first"] = score / reference if reference else None
        row["speedup_b1"] = first["b1_p50_ms"] / row["b1_p50_ms"]
        row["speedup_b32"] = row["b32_rows_per_s"] / first["b32_rows_per_s"]
    return {"data_file": config.data_file, "rows_scored": scoring.rows, "metric": headline,
            "length": length, "threads": config.threads, "rounds": config.rounds,
            "file_rows": file_rows, "models": rows}


def short_names(paths: list) -> list:
    """Each path less the folders all of them share ("teacher/export",
    "teacher/export/1/model.tflite"), or its last folder when there is one model."""
    parts = [p.rstrip("/").split("/") for p in paths]
    shared = 0
    while all(len(q) > shared + 1 for q in parts) and len({q[shared] for q in parts}) == 1:
        shared += 1
    if len(paths) == 1:
        shared = len(parts[0]) - 1
    return ["/".join(q[shared:]) for q in parts]


def _set_threads(threads: int) -> None:
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow's runtime already started (in a test process)
        logging.warning("TensorFlow's threads were set before: not %d", threads)


def format_table(report: dict) -> str:
    metric = report["metric"]
    lines = [f"{report['rows_scored']} rows of {report['data_file']} scored; timed at length "
             f"{report['length']}, {report['threads']} threads, {report['rounds']} rounds, "
             "every model in turn (x: against the first).", "",
             f"| model | engine | precision | {metric} | of first | B1 p50 ms | B1 p95 ms | "
             "B32 rows/s | file rows/s | size MB | x B1 | x B32 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in report["models"]:
        score = row["metrics"][metric]
        lines.append(
            f"| {row['name']} | {row['engine']} | {row['precision']} | {100 * score:.2f} | "
            f"{100 * row['of_first']:.1f}% | {row['b1_p50_ms']:.1f} | {row['b1_p95_ms']:.1f} | "
            f"{row['b32_rows_per_s']:.1f} | {row['file_rows_per_s']:.1f} | "
            f"{row['size_mb']:.1f} | {row['speedup_b1']:.2f}x | {row['speedup_b32']:.2f}x |")
    return "\n".join(lines)


def plot(report: dict, path: str) -> None:
    """Quality against batch-1 latency, one labelled point a model, as a PNG."""
    try:
        import matplotlib
    except ImportError:
        raise UserError("--plot_output needs matplotlib: pip install -e '.[compare]'") \
            from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from official_bert import io

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for row in report["models"]:
        x, y = row["b1_p50_ms"], 100 * row["metrics"][report["metric"]]
        axes.scatter([x], [y])
        label = row["name"] if row["precision"] in row["name"] else (
            f"{row['name']} ({row['precision']})")
        axes.annotate(label,
                      (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    axes.set_xlabel(f"batch-1 latency, p50 ms (length {report['length']}, "
                    f"{report['threads']} threads)")
    axes.set_ylabel(report["metric"])
    axes.set_title("Quality against latency")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    import io as bytes_io

    buffer = bytes_io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    io.atomic_write(path, buffer.getvalue())


def main(argv):
    app.refuse_arguments(argv)
    config = cli_flags.from_flags(CompareConfig, FLAGS)
    report = compare(config)
    print(format_table(report), flush=True)
    from official_bert import io

    if config.json_output:
        io.atomic_write(config.json_output, json.dumps(report, indent=2) + "\n")
        print(f"wrote {config.json_output}", flush=True)
    if config.plot_output:
        plot(report, config.plot_output)
        print(f"wrote {config.plot_output}", flush=True)


if __name__ == "__main__":
    registry.run_command("compare")
