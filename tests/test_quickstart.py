"""The quickstart's reruns are honest: a rerun with other settings starts the
stage afresh (also after a stage that failed), one with the same settings
resumes and says how many steps were done before and now, and --fresh starts
over. What it prints is what a user should see: a line per logged step with the
time left, why next-sentence accuracy is at chance, and none of TensorFlow's
start-up chatter. (The whole quickstart runs in the slow docs tests:
`python quickstart.py --fast`.)"""

import io
import json
import os
import pathlib
import shlex
import sys

import pytest

from support import REPO_ROOT, processes

from official_bert.commands import quickstart as qs
from official_bert.errors import Interrupted, Preempted
from test_faults import assert_quiet, user_env


def run_quickstart(out, *args, env=None):
    env = env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return processes.run([sys.executable, str(REPO_ROOT / "quickstart.py"),
                           f"--output_dir={out}", *args], cwd=REPO_ROOT, env=env, text=True,
                         capture_output=True, timeout=900)


def quickstart(out, *args, env=None):
    result = run_quickstart(out, *args, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


PRETRAIN_RESULTS = {"masked_lm_accuracy": 0.084, "next_sentence_accuracy": 0.504,
                    "global_step": 300.0}


def test_the_summary_says_why_next_sentence_accuracy_is_at_chance(tmp_path):
    entry = qs.pretrain_summary(tmp_path / "pretrain", PRETRAIN_RESULTS)
    assert entry["next_sentence_note"] == qs.NSP_NOTE
    assert "near chance" in qs.NSP_NOTE and "68% at 3,000" in qs.NSP_NOTE
    summary = {"pretrain": dict(entry, finished="2026-01-01 00:00:00")}
    assert qs.summary_lines(summary, ["pretrain"], {}) == [
        f"  pre-trained tiny BERT   {tmp_path / 'pretrain'}  (masked-LM acc 0.084, "
        f"next-sentence acc 0.504: {qs.NSP_NOTE})"]
    # Once next sentence is learned there is nothing to explain.
    learned = qs.pretrain_summary(tmp_path, dict(PRETRAIN_RESULTS, next_sentence_accuracy=0.68))
    assert "next_sentence_note" not in learned
    assert qs.summary_lines({"pretrain": learned}, ["pretrain"], {})[0].endswith(
        "next-sentence acc 0.680)")


def test_the_summary_names_a_stage_that_did_not_finish():
    summary = {"pretrain": {"settings": {"steps": 4}, "unfinished": True,
                            "started": "2026-01-01 00:00:00"}}
    assert qs.summary_lines(summary, ["data"], {}) == [
        "  [pretrain] did not finish (started 2026-01-01 00:00:00): --stages=pretrain takes "
        "it up again"]


def test_the_commands_it_shows_are_short_lines_a_shell_reads_back():
    args = ["python", "run_pretraining.py", "--do_train", "--name=a b",
            *[f"--file{i}=/tmp/pytest-of-user/{'x' * 20}/quickstart_output/{i}.tfrecord"
              for i in range(12)]]
    lines = qs.shell_command(args).splitlines()
    assert len(lines) == 13 and lines[0] == (
        "      $ python run_pretraining.py --do_train '--name=a b' \\")
    assert max(map(len, lines)) <= 100
    assert shlex.split(" ".join(line.rstrip("\\") for line in lines).split("$", 1)[1]) == args


def test_progress_shows_the_time_left(monkeypatch, capsys):
    clock = iter([100.0, 110.0, 130.0])
    monkeypatch.setattr(qs.time, "time", lambda: next(clock))
    progress = qs.Progress()
    for line in ["I1125 trainer.py:452] step 50/200: loss = 5.1",
                 "I1125 glue.py:859] Wrote train features",
                 "I1125 trainer.py:452] step 100/200: loss = 4.9",
                 "I1125 trainer.py:452] step 150/200: loss = 4.8"]:
        progress.update(line)
    # 50 steps in 10 s, then 100 in 30 s: 5 and 3.3 steps a second.
    assert capsys.readouterr().out.splitlines() == [
        "      step 50/200", "      step 100/200, about 20 s left",
        "      step 150/200, about 15 s left"]


def test_progress_takes_the_trainers_estimate_and_passes_on_other_stages(capsys):
    """The trainer's line ends with its own estimate (measured after the first
    step, which compiles): that one is shown, from the first line on. The
    lines of data preparation, evaluation, prediction and export are passed on:
    no silence before the first step or after the last."""
    progress = qs.Progress()
    for line in [
            "I1125 create_pretraining_data.py:384] progress: 40 / 120 documents, 300 "
            "instances (30/s), 10 s elapsed, about 20 s left",
            "I1125 trainer.py:452] step 10/125: loss = 0.7, examples_per_second = 9.1; "
            "41 s elapsed, about 3 min 20 s left",
            "step 125/125: loss = 0.5; 4 min 10 s elapsed, about 0 s left",
            "I1125 runner.py:121] Evaluating step 125",
            "I1125 trainer.py:633] predicted 512 / 1725 examples, 10 s elapsed, about 24 s "
            "left",
            "I1125 glue.py:859] Wrote eval features",
            "Exporting step 125 to /q/qnli_export (this can take a minute)",
            "I1125 runner.py:115] Exported step 125 to /q/qnli_export/1 in 48 s"]:
        progress.update(line)
    assert capsys.readouterr().out.splitlines() == [
        "      progress: 40 / 120 documents, 300 instances (30/s), 10 s elapsed, about 20 s "
        "left",
        "      step 10/125, about 3 min 20 s left",
        "      step 125/125, about 0 s left",
        "      Evaluating step 125",
        "      predicted 512 / 1725 examples, 10 s elapsed, about 24 s left",
        "      Exporting step 125 to /q/qnli_export (this can take a minute)",
        "      Exported step 125 to /q/qnli_export/1 in 48 s"]


def test_a_rerun_reuses_the_vocabulary_of_an_unchanged_corpus(tmp_path, monkeypatch, capsys):
    """build-vocab takes half a minute: a rerun whose corpus, settings and
    vocabulary are as the last build left them reuses it; another corpus, an
    edited vocabulary or --fresh (which removes it and its record) rebuilds."""
    builds = []

    def fake_run(script, **flags):
        assert script.endswith("build-vocab") and flags["vocab_size"] == 8000
        builds.append(flags["input_file"])
        pathlib.Path(flags["output_file"]).write_text(f"vocabulary of build {len(builds)}\n")
        return 33.0

    monkeypatch.setattr(qs, "run", fake_run)
    corpus, vocab = tmp_path / "corpus.txt", tmp_path / "vocab.txt"
    corpus.write_text("A first document.\n\nA second one.\n")
    assert qs.build_vocabulary(corpus, vocab) == "vocabulary of 8000 WordPieces (33 s)"
    assert qs.build_vocabulary(corpus, vocab).startswith(
        "vocabulary of 8000 WordPieces reused from an earlier run (the corpus and settings are "
        "unchanged")
    assert len(builds) == 1 and vocab.read_text() == "vocabulary of build 1\n"
    corpus.write_text("Another corpus.\n")  # prepare-corpus made another corpus
    qs.build_vocabulary(corpus, vocab)
    assert len(builds) == 2
    vocab.write_text("edited\n")  # not the vocabulary that was built
    qs.build_vocabulary(corpus, vocab)
    assert len(builds) == 3
    qs.start_afresh(tmp_path, "data")  # --fresh
    assert not vocab.exists() and not qs.vocabulary_source(vocab).exists()
    corpus.write_text("Another corpus.\n")  # the same corpus as the last build's
    qs.build_vocabulary(corpus, vocab)
    assert len(builds) == 4


@pytest.mark.slow  # 10 s or more here
def test_a_failed_stage_keeps_its_settings_for_the_next_run(tmp_path):
    """A stage that fails (or is killed) leaves its settings in summary.json:
    a rerun with other settings starts it afresh instead of resuming the
    partial run as if it were its own."""
    out = tmp_path / "qs"
    # One of the data stage's files without the others: the stage starts, then
    # run_pretraining refuses (as a killed stage would stop).
    out.mkdir()
    (out / "pretrain_train.tfrecord").write_bytes(b"")
    failed = run_quickstart(out, "--stages=pretrain", "--pretrain_steps=4")
    assert failed.returncode == 1, failed.stderr[-2000:]
    assert "error: run_pretraining.py failed" in failed.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pretrain"]["settings"] == {"steps": 4}
    assert summary["pretrain"]["unfinished"] is True
    # What a run killed after its first checkpoint leaves.
    (out / "pretrain").mkdir()
    (out / "pretrain" / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    again = run_quickstart(out, "--stages=pretrain", "--pretrain_steps=6")
    assert ("[pretrain] settings changed ({'steps': 4} → {'steps': 6}): starting this stage "
            "afresh") in again.stdout
    assert not (out / "pretrain").exists()
    assert json.loads((out / "summary.json").read_text())["pretrain"]["settings"] == {"steps": 6}


@pytest.mark.parametrize("stages, message", [
    ("pretrain", "error: no pre-training data in"),
    ("serve", "error: no SavedModel under"),
    ("pretrain,serve", "error: no pre-training data in"),
])
def test_a_stage_without_its_input_is_refused_before_anything_is_written(tmp_path, stages,
                                                                         message):
    """Nothing an earlier stage would make is in --output_dir and that stage is not
    asked for: one line, and no directory, summary or partial output is left."""
    out = tmp_path / "qs"
    result = run_quickstart(out, f"--stages={stages}")
    assert result.returncode == 1
    assert_quiet(result.stderr)
    assert message in result.stderr and "run the" in result.stderr
    assert not out.exists()
    # Its first line says where it writes and how much, before it writes anything.
    assert result.stdout.splitlines()[0] == (
        f"quickstart: writing under {out.resolve()} (about {qs.FOOTPRINT_MIB} MiB; "
        "--output_dir=PATH puts it elsewhere)")


@pytest.mark.slow
def test_reruns_say_what_they_did(tmp_path):
    out = tmp_path / "qs"
    # As a user runs it (no test settings): two logged steps (every 50th), so a time left.
    result = run_quickstart(out, "--stages=data,pretrain", "--pretrain_steps=51",
                            env=user_env())
    assert result.returncode == 0, result.stderr[-3000:]
    first = result.stdout
    assert "step 50/51, about " in first and "step 51/51, about 0 s left" in first
    assert "resumed" not in first
    assert_quiet(result.stdout + result.stderr)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pretrain"]["steps_before"] == 0 and summary["pretrain"]["steps_now"] == 51
    assert "unfinished" not in summary["pretrain"] and "unfinished" not in summary["data"]
    # Why next sentence is at chance, in the summary and its file (when it is).
    at_chance = summary["pretrain"]["next_sentence_accuracy"] < qs.NSP_NEAR_CHANCE
    assert (summary["pretrain"].get("next_sentence_note") == qs.NSP_NOTE) == at_chance
    assert (f"next-sentence acc {summary['pretrain']['next_sentence_accuracy']:.3f}: "
            f"{qs.NSP_NOTE})" in first) == at_chance

    # Other settings: the old run is not resumed as if it were this one.
    changed = quickstart(out, "--stages=pretrain", "--pretrain_steps=6")
    assert "settings changed ({'steps': 51} → {'steps': 6}): starting this stage afresh" in changed
    assert json.loads((out / "summary.json").read_text())["pretrain"]["steps_now"] == 6

    # The same settings again: it resumes, and the summary says so.
    again = quickstart(out, "--stages=pretrain", "--pretrain_steps=6")
    assert "6 steps were done before, 0 now" in again
    assert "afresh" not in again

    # Stages not run now are shown as an earlier run's.
    shown = quickstart(out, "--stages=data")
    assert "[from an earlier run, " in shown

    # --fresh removes what the quickstart wrote and starts over.
    fresh = quickstart(out, "--fresh", "--stages=data,pretrain", "--pretrain_steps=4")
    assert "resumed" not in fresh and "step 4/4" in fresh


def test_a_stopped_stage_says_the_checkpoint_it_saved():
    """Ctrl-C while a stage trains: the quickstart's one line is the stage's (its step and
    checkpoint, which a rerun resumes from), not "outside training"."""
    said = Interrupted(42, "/q/pretrain/ckpt-42")  # the stage's own line, as app prints it

    class Stage:
        stdout = io.StringIO("I1128 trainer.py:300] step 40/300: loss = 5.1\n"
                             f"{said.PREFIX}: {said}\n")

    stop = qs._stage_stop(Stage(), Interrupted())
    assert isinstance(stop, Interrupted) and (stop.step, stop.checkpoint) == (
        42, "/q/pretrain/ckpt-42")
    assert str(stop).startswith("stopped by SIGINT at step 42: checkpoint /q/pretrain/ckpt-42")

    class Quiet:
        stdout = io.StringIO("progress: 3 / 10 documents\n")

    unchanged = Preempted()
    assert qs._stage_stop(Quiet(), unchanged) is unchanged
