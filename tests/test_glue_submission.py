"""GLUE leaderboard files: `run_classifier.py --do_predict` writes them (MNLI's
matched, mismatched and AX from one run, with the test files' own indices), and
`bert glue-submission` zips a directory of runs after checking every file
against tiny fake GLUE test sets (the real test sets are not in ../shared)."""

import json
import os
import sys
import zipfile

import numpy as np
import pytest

from data_prep import glue
from official_bert.commands.glue_submission import GlueSubmissionConfig, make_submission
from official_bert.errors import BadFileError, UserError
from test_run_classifier import make_checkpoint, run
from support import processes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALL_FILES = ["CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv",
             "MNLI-mm.tsv", "QNLI.tsv", "RTE.tsv", "WNLI.tsv", "AX.tsv"]
PAIRS = [("the movie was good", "a good film"), ("a bad film", "the film is great"),
         ("very dull", "it was fun")]


def tsv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join("\t".join(map(str, r)) for r in [header] + rows) + "\n")


def fake_glue(root):
    """GLUE's test files in GLUE's layout and columns, three rows each; the ids
    are not the row numbers, so the test sees that the file's own are used."""
    a, b = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    ids = [7, 8, 9]
    tsv(root / "CoLA/test.tsv", ["index", "sentence"], list(zip(ids, a)))
    tsv(root / "SST-2/test.tsv", ["index", "sentence"], list(zip(ids, a)))
    tsv(root / "MRPC/test.tsv", ["index", "#1 ID", "#2 ID", "#1 String", "#2 String"],
        [(i, 1, 2, x, y) for i, x, y in zip(ids, a, b)])
    tsv(root / "STS-B/test.tsv", ["index", "genre", "filename", "year", "old_index", "source1",
                                  "source2", "sentence1", "sentence2"],
        [(i, "news", "f", "2012", i, "s", "s", x, y) for i, x, y in zip(ids, a, b)])
    tsv(root / "QQP/test.tsv", ["id", "question1", "question2"], list(zip(ids, a, b)))
    mnli = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
            "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
            "sentence2"]
    for name, first in (("test_matched", 100), ("test_mismatched", 200)):
        tsv(root / f"MNLI/{name}.tsv", mnli,
            [(first + k, 1, 2, "fiction", "(", "(", "(", "(", x, y)
             for k, (x, y) in enumerate(PAIRS)])
    tsv(root / "diagnostic/diagnostic.tsv", ["index", "sentence1", "sentence2"],
        [(k, x, y) for k, (x, y) in enumerate(PAIRS + PAIRS)])
    for task, header in (("QNLI", ["index", "question", "sentence"]),
                         ("RTE", ["index", "sentence1", "sentence2"]),
                         ("WNLI", ["index", "sentence1", "sentence2"])):
        tsv(root / f"{task}/test.tsv", header, list(zip(ids, a, b)))


# What the hand-made runs predicted (MNLI's come from a real run).
HAND_MADE = {
    "cola": {"CoLA.tsv": ["1", "0", "1"]},
    "sst-2": {"SST-2.tsv": ["0", "0", "1"]},
    "mrpc": {"MRPC.tsv": ["1", "1", "0"]},
    "sts-b": {"STS-B.tsv": ["4.250000", "0.500000", "2.000000"]},
    "qqp": {"QQP.tsv": ["0", "1", "0"]},
    "qnli": {"QNLI.tsv": ["entailment", "not_entailment", "entailment"]},
    "rte": {"RTE.tsv": ["not_entailment", "entailment", "entailment"]},
    "wnli": {"WNLI.tsv": ["0", "0", "0"]},
}


def hand_made_run(runs, task, files):
    directory = runs / task
    directory.mkdir(parents=True)
    (directory / "classifier_config.json").write_text(json.dumps({"task_name": task}))
    for name, predictions in files.items():
        tsv(directory / name, ["index", "prediction"], [(7 + k, p) for k, p in
                                                        enumerate(predictions)])


@pytest.fixture(scope="module")
def glue_runs(tmp_path_factory):
    """A fake GLUE directory, and a run of each task with its predictions."""
    root = tmp_path_factory.mktemp("glue_submission")
    data = root / "glue"
    fake_glue(data)
    runs = root / "runs"
    for task, files in HAND_MADE.items():
        hand_made_run(runs, task, files)
    mnli = runs / "mnli"
    mnli.mkdir()
    (mnli / "classifier_config.json").write_text(json.dumps({"task_name": "mnli"}))
    for name, first, n in (("MNLI-m.tsv", 100, 3), ("MNLI-mm.tsv", 200, 3), ("AX.tsv", 0, 6)):
        tsv(mnli / name, ["index", "prediction"],
            [(first + k, ["neutral", "entailment", "contradiction"][k % 3]) for k in range(n)])
    return dict(root=root, data=data, runs=runs)


@pytest.mark.slow  # a training run (about 20 s on one core)
def test_mnli_run_writes_matched_mismatched_and_ax(tmp_path):
    """One MNLI run predicts test_matched, test_mismatched and AX (GLUE's
    diagnostic/diagnostic.tsv beside the MNLI directory) into its three files,
    with the test files' own indices and the most probable label."""
    data = tmp_path / "glue"
    fake_glue(data)
    labels = ["contradiction", "entailment", "neutral"]
    tsv(data / "MNLI/train.tsv", ["index", "sentence1", "sentence2", "gold_label"],
        [(k, x, y, labels[k % 3]) for k, (x, y) in enumerate(PAIRS * 4)])
    ckpt = make_checkpoint(str(tmp_path / "ckpt"))
    run_dir = tmp_path / "mnli"
    result = run("run_classifier.py", "--task_name=mnli", f"--data_dir={data / 'MNLI'}",
                 f"--init_checkpoint={ckpt}", "--do_train", "--do_predict",
                 "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1",
                 f"--output_dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    for name, results, ids in (("MNLI-m.tsv", "test_results.tsv", [100, 101, 102]),
                               ("MNLI-mm.tsv", "test_results_mismatched.tsv", [200, 201, 202]),
                               ("AX.tsv", "test_results_ax.tsv", list(range(6)))):
        probabilities = np.loadtxt(run_dir / results, delimiter="\t", ndmin=2)
        expected = ["index\tprediction"] + [f"{i}\t{labels[k]}" for i, k in
                                            zip(ids, probabilities.argmax(1))]
        assert (run_dir / name).read_text().splitlines() == expected
    # The zip takes them as they are.
    names = make_submission(GlueSubmissionConfig(runs_dir=str(tmp_path), glue_dir=str(data),
                                                 output_file=str(tmp_path / "s.zip"),
                                                 allow_missing=True))
    assert names == ["MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv"]


def test_sst2_run_writes_its_file(tmp_path):
    """A single-sentence task: 0/1 labels; and the file's header and rows exactly."""
    spec = glue.get_task("sst-2")
    examples = glue.read_split(spec, str(_sst2_test(tmp_path)), "test")
    assert [e.index for e in examples] == ["7", "8", "9"]
    assert glue.submission_text(spec, examples, ["1", "0", "1"]) == (
        "index\tprediction\n7\t1\n8\t0\n9\t1\n")
    scores = glue.submission_text(glue.get_task("sts-b"), examples, np.array([4.25, 0.5, 5.0]))
    assert scores == "index\tprediction\n7\t4.250000\n8\t0.500000\n9\t5.000000\n"


def _sst2_test(tmp_path):
    fake_glue(tmp_path)
    return tmp_path / "SST-2" / "test.tsv"


def test_zip_of_every_task(glue_runs, tmp_path):
    out = tmp_path / "submission.zip"
    names = make_submission(GlueSubmissionConfig(runs_dir=str(glue_runs["runs"]),
                                                 output_file=str(out),
                                                 glue_dir=str(glue_runs["data"])))
    assert names == ALL_FILES
    with zipfile.ZipFile(out) as archive:
        assert archive.namelist() == ALL_FILES  # at the zip's top level
        texts = {name: archive.read(name).decode() for name in ALL_FILES}
    for files in HAND_MADE.values():
        for name, predictions in files.items():
            assert texts[name] == "index\tprediction\n" + "".join(
                f"{7 + k}\t{p}\n" for k, p in enumerate(predictions))
    assert texts["MNLI-mm.tsv"] == (
        "index\tprediction\n200\tneutral\n201\tentailment\n202\tcontradiction\n")
    assert texts["AX.tsv"] == (glue_runs["runs"] / "mnli" / "AX.tsv").read_text()
    assert len(texts["AX.tsv"].splitlines()) == 7
    # Run again: its own zip is replaced, with the same bytes.
    before = out.read_bytes()
    make_submission(GlueSubmissionConfig(runs_dir=str(glue_runs["runs"]), output_file=str(out),
                                         glue_dir=str(glue_runs["data"])))
    assert out.read_bytes() == before


def _copy_runs(glue_runs, tmp_path, drop=()):
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(glue_runs["runs"], runs)
    for task in drop:
        shutil.rmtree(runs / task)
    return runs


def test_missing_tasks_refused_unless_allowed(glue_runs, tmp_path):
    runs = _copy_runs(glue_runs, tmp_path, drop=["qqp"])
    os.remove(runs / "mnli" / "AX.tsv")
    out = tmp_path / "submission.zip"
    config = GlueSubmissionConfig(runs_dir=str(runs), output_file=str(out),
                                  glue_dir=str(glue_runs["data"]))
    with pytest.raises(UserError) as error:
        make_submission(config)
    message = str(error.value)
    assert "QQP.tsv (no run of its task)" in message
    assert f"AX.tsv (not in the run {runs / 'mnli'}" in message
    assert "--allow_missing" in message and not out.exists()
    config.allow_missing = True
    assert make_submission(config) == [n for n in ALL_FILES if n not in ("QQP.tsv", "AX.tsv")]


@pytest.mark.parametrize("task,name,text,problem", [
    ("rte", "RTE.tsv", "index\tprediction\n7\tentailment\n8\t1\n9\tentailment\n",
     "line 3 has the label '1'; rte's labels are entailment, not_entailment"),
    ("sts-b", "STS-B.tsv", "index\tprediction\n7\t1.0\n8\tnan\n9\t2\n",
     "line 3 has the score 'nan', not a finite number"),
    ("cola", "CoLA.tsv", "index\tprediction\n7\t1\n8\t0\n",
     "has 2 predictions, {data}/CoLA/test.tsv has 3 rows; predict the whole test set"),
    ("cola", "CoLA.tsv", "index\tprediction\n7\t1\n9\t0\n8\t1\n",
     "line 3 has the index '9' where {data}/CoLA/test.tsv has '8'"),
    ("wnli", "WNLI.tsv", "id\tlabel\n7\t1\n8\t0\n9\t1\n",
     "line 1 does not start with the header index<TAB>prediction"),
    ("qqp", "QQP.tsv", "index\tprediction\n7\t1\n7\t0\n9\t1\n",
     "line 3 has the index '7' twice (lines 2 and 3)"),
])
def test_bad_files_named_with_line(glue_runs, tmp_path, task, name, text, problem):
    runs = _copy_runs(glue_runs, tmp_path)
    (runs / task / name).write_text(text)
    with pytest.raises(BadFileError) as error:
        make_submission(GlueSubmissionConfig(runs_dir=str(runs), glue_dir=str(glue_runs["data"]),
                                             output_file=str(tmp_path / "s.zip")))
    assert str(error.value).startswith(str(runs / task / name))
    assert problem.format(data=glue_runs["data"]) in str(error.value)
    assert not (tmp_path / "s.zip").exists()


def test_official_row_counts_without_glue_dir(glue_runs, tmp_path):
    """Without --glue_dir each file must have the official test set's rows."""
    with pytest.raises(BadFileError, match="has 3 predictions, the official test set has 1063 "
                                           "rows"):
        make_submission(GlueSubmissionConfig(runs_dir=str(glue_runs["runs"]),
                                             output_file=str(tmp_path / "s.zip")))


def test_command_line(glue_runs, tmp_path):
    """`bert glue-submission`: one line on success; a one-line error, nothing
    written, for an output that is another file; two runs of one task refused."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = tmp_path / "glue.zip"
    command = [sys.executable, "-m", "official_bert.commands.cli", "glue-submission",
               f"--runs_dir={glue_runs['runs']}", f"--glue_dir={glue_runs['data']}"]
    result = processes.run(command + [f"--output_file={out}"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == f"{out}: 11 file(s): {', '.join(ALL_FILES)}\n"
    other = tmp_path / "notes.zip"
    other.write_text("my notes")
    result = processes.run(command + [f"--output_file={other}"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --output_file {other} exists (a file this project did not write, or one "
        "changed since it did): it is kept; choose another name, or add --overwrite to "
        "replace it")
    assert other.read_text() == "my notes"
    runs = _copy_runs(glue_runs, tmp_path)
    (runs / "sst-2-again").mkdir()
    (runs / "sst-2-again" / "classifier_config.json").write_text('{"task_name": "sst-2"}')
    with pytest.raises(UserError, match="two sst-2 runs"):
        make_submission(GlueSubmissionConfig(runs_dir=str(runs), output_file=str(out)))
