"""The GLUE leaderboard's zip from a directory of `run_classifier.py` runs.

`run_classifier.py --do_predict` on a GLUE task writes, beside
`test_results.tsv`, the leaderboard's file of each test set (`CoLA.tsv`,
`SST-2.tsv`, `MRPC.tsv`, `STS-B.tsv`, `QQP.tsv`, `MNLI-m.tsv`, `MNLI-mm.tsv`,
`QNLI.tsv`, `RTE.tsv`, `WNLI.tsv`, and `AX.tsv` from the MNLI run when
`diagnostic/diagnostic.tsv` lies beside its data). This command finds the runs in
`--runs_dir` (it and its subdirectories: each run's `classifier_config.json`
names its task), checks every file, and writes the zip gluebenchmark.com
takes (the eleven files at its top level):

* every file is there; missing ones are named, with the run that should
  have written them, and the zip is refused unless `--allow_missing`;
* each file has the header `index<TAB>prediction`, a legal label on every
  row (0/1, the task's label strings, a finite STS-B score), no index twice;
* it has as many rows as the test set: with `--glue_dir` (GLUE's layout,
  as `bert download glue` writes it) the very indices of each test file, in
  its order; without, the official test sets' row counts (CoLA 1,063,
  SST-2 1,821, MRPC 1,725, ...).

Nothing is written unless all of it holds. The zip is written atomically; an
existing `--output_file` is replaced only when it is this project's earlier
output, unchanged, or with --overwrite (the one output policy,
official_bert/outputs.py).

Example:
  bert glue-submission --runs_dir=runs/glue --glue_dir=$DATA/glue \\
      --output_file=runs/glue_submission.zip
"""

from __future__ import annotations

import dataclasses
import io as _bytes_io
import zipfile

from absl import flags, logging

from data_prep import glue
from official_bert.commands import app, cli_flags, registry
from official_bert import io, outputs
from official_bert.errors import BadFileError, UserError
from official_bert.run_directory import run_of
from official_bert.settings import setting

FLAGS = flags.FLAGS

# The zip's comment: what marks a file as this command's (and so replaceable).
ZIP_COMMENT = b"official_bert glue-submission"


@dataclasses.dataclass
class GlueSubmissionConfig:
    """The command's settings (its flags' names)."""

    runs_dir: str | None = setting(
        None, "Directory of run_classifier.py runs (it, or one subdirectory per task), each "
        "predicted with --do_predict.")
    output_file: str | None = setting(None, "The zip to write (gluebenchmark.com's upload).")
    glue_dir: str | None = setting(
        None, "GLUE's data (bert download glue): check each file against its test set's "
        "indices; default: the official row counts.")
    allow_missing: bool = setting(
        False, "Zip the files there are when some tasks are missing (they are named).")


CONFIGS = (GlueSubmissionConfig,)  # its flags' definitions


def _runs(runs_dir: str) -> dict:
    """{run directory: its GLUE TaskSpec} for `runs_dir` and its subdirectories."""
    candidates = [runs_dir] + [io.join(runs_dir, name) for name in sorted(io.listdir(runs_dir))]
    runs = {}
    for directory in candidates:
        path = run_of(directory).classifier_config
        if not io.isdir(directory) or not io.exists(path):
            continue
        task_name = io.read_json(path, what="a run_classifier.py run's config").get("task_name")
        spec = glue.GLUE_TASKS.get(str(task_name).lower())
        if spec is None:
            logging.info("%s: task %s is not on the GLUE leaderboard; skipped", directory,
                         task_name)
            continue
        runs[directory] = spec
    return runs


def _expected_indices(spec, suffix: str, glue_dir: str) -> tuple:
    """(the test file, its row ids in order) of the task's test set `suffix`."""
    name = dict(spec.test_files)[suffix]
    path = glue.find_data_file(io.join(glue_dir, glue.GLUE_DIRECTORIES[spec.name]), name)
    examples = glue.read_split(spec, path, "test")
    return path, [e.index if e.index is not None else str(i) for i, e in enumerate(examples)]


def collect(config: GlueSubmissionConfig) -> dict:
    """{file name in the zip: its text}, every file checked (module docstring)."""
    if not config.runs_dir:
        raise UserError("--runs_dir is required (the directory of your run_classifier.py runs)")
    if not io.isdir(config.runs_dir):
        raise UserError(f"--runs_dir {config.runs_dir} is not a directory")
    if config.glue_dir and not io.isdir(config.glue_dir):
        raise UserError(f"--glue_dir {config.glue_dir} is not a directory (GLUE's data, as "
                        "`bert download glue` writes it)")
    runs = _runs(config.runs_dir)
    owner = {}  # leaderboard file → (run directory, spec, test split suffix)
    for directory, spec in runs.items():
        for suffix, name in spec.submission_files:
            if name in owner:
                raise UserError(f"--runs_dir holds two {spec.name} runs ({owner[name][0]} and "
                                f"{directory}): which one's {name}? Keep one, or point "
                                "--runs_dir at a directory of one run per task")
            owner[name] = (directory, spec, suffix)
    files, missing = {}, []
    for name in glue.GLUE_TEST_ROWS:
        directory, spec, suffix = owner.get(name, (None, None, None))
        path = io.join(directory, name) if directory else None
        if path is None or not io.exists(path):
            why = (f"not in the run {directory}: predict its test set with --do_predict"
                   if directory else "no run of its task")
            missing.append(f"{name} ({why})")
            continue
        rows = glue.read_submission(io.read_text(path), spec, path)
        if config.glue_dir:
            test_path, indices = _expected_indices(spec, suffix, config.glue_dir)
        else:
            test_path, indices = "the official test set", None
        count = len(indices) if indices is not None else glue.GLUE_TEST_ROWS[name]
        if len(rows) != count:
            raise BadFileError(path, f"has {len(rows)} predictions, {test_path} has {count} "
                               "rows", fix="predict the whole test set (without "
                               "--max_predict_examples)")
        if indices is not None:
            for number, ((index, _), expected) in enumerate(zip(rows, indices), 2):
                if index != expected:
                    raise BadFileError(path, f"has the index {index!r} where {test_path} has "
                                       f"{expected!r}", line=number,
                                       fix="predict this test file with --do_predict")
        files[name] = io.read_text(path)
    if missing and not config.allow_missing:
        raise UserError(f"missing: {'; '.join(missing)}. Pass --allow_missing to zip the "
                        f"{len(files)} file(s) there are (the leaderboard scores a missing "
                        "task as 0)")
    if not files:
        raise UserError(f"--runs_dir {config.runs_dir} holds no GLUE predictions "
                        "(run_classifier.py --do_predict writes them)")
    for line in missing:
        logging.warning("missing %s", line)
    return files


def write_zip(files: dict, output_file: str) -> None:
    """The zip, atomically, as the output policy found `output_file` (`make_submission`)."""
    buffer = _bytes_io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.comment = ZIP_COMMENT
        for name, text in files.items():
            # A fixed date: the same predictions make the same bytes.
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), text,
                             zipfile.ZIP_DEFLATED)
    io.atomic_write(output_file, buffer.getvalue(), overwrite=False)


def make_submission(config: GlueSubmissionConfig) -> list:
    """Checks everything, then writes the zip; returns the names in it."""
    if not config.output_file:
        raise UserError("--output_file is required (the zip to write, e.g. glue_submission.zip)")
    io.refuse_output_over_input({"--output_file": config.output_file},
                                {"runs_dir": config.runs_dir, "glue_dir": config.glue_dir})
    outputs.ensure_checked(config.output_file, "--output_file", outputs.FILE)
    files = collect(config)
    write_zip(files, config.output_file)
    logging.info("Wrote %s: %s", config.output_file, ", ".join(files))
    return list(files)


def define_flags():
    cli_flags.define_flags(GlueSubmissionConfig)


def main(argv):
    app.refuse_arguments(argv)
    names = make_submission(cli_flags.from_flags(GlueSubmissionConfig, FLAGS))
    print(f"{FLAGS.output_file}: {len(names)} file(s): {', '.join(names)}")


if __name__ == "__main__":
    registry.run_command("glue-submission")
