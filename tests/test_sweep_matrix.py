"""The sweep's matrix (`tools/sweep/matrix.py`): its cases come from the command registry,
so a new command or a new output gets them without anyone writing one; and a few cheap
generated cases run end to end as the sweep runs them."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys

import pytest

from tests.support import fault_kit as kit

sys.path.insert(1, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))

from sweep import matrix  # noqa: E402

from official_bert.commands import registry  # noqa: E402


def test_the_matrix_reads_the_registry():
    assert [c.name for c in matrix.registered_commands()] == [
        c.name for c in registry.COMMANDS]


@pytest.mark.parametrize("command", matrix.registered_commands(), ids=lambda c: c.name)
def test_every_registered_command_gets_a_case_of_every_class(command):
    mine = matrix.generate([command])
    assert len(mine) == matrix.expected_count(command)
    for flag in command.outputs:
        hit = {g.klass for g in mine if g.target == f"--{flag}"}
        assert set(matrix.OUTPUT_FAULTS) <= hit, flag
        if flag in matrix.recorded_runs(command):
            assert "record" in hit, flag
    for klass in matrix.SIGNALS:
        assert sorted(g.target for g in mine if g.klass == klass) == sorted(
            command.phases * len(matrix.pools(command)))  # (a pool's: forked and spawned)
    for flag, way in matrix.input_flags(command).items():  # the registry's inputs
        hit = {g.klass for g in mine if g.target == f"--{flag}"}
        assert set(matrix.ANY_INPUT_FAULTS) <= hit, flag
        if way in matrix.CONTENT_WAYS:
            assert set(matrix.INPUT_FAULTS) <= hit, flag
    # every flag that may name a run still training (the registry's reads_runs)
    assert sorted(g.target for g in mine if g.klass == "live-run") == sorted(
        f"--{flag}" for flag in matrix.live_flags(command))
    # every command: each resource limit, and a standard output closed two ways
    for klass in (*matrix.LIMITS, *matrix.STDOUT_FAULTS):
        assert sum(g.klass == klass for g in mine) == 1, klass


def test_a_command_without_a_control_case_still_gets_its_cases(tmp_path):
    """Coverage follows the registry: a new command's cases are made, and report that
    the sweep has no good run of it yet."""
    new = matrix.Command("new-thing", {"output_file": "file", "output_dir": "run_dir"},
                         ("read", "train"), reads_runs=("init_checkpoint",))
    made = matrix.generate([new])
    assert len(made) == matrix.expected_count(new) == (
        2 * 9 + 2 * len(matrix.SIGNALS) + 4 + 1 + len(matrix.LIMITS) + len(matrix.STDOUT_FAULTS))
    world = tmp_path / "world"
    world.mkdir()
    row = matrix.run_generated(world, tmp_path, 0, made[0])
    assert row["outcome"] == matrix.SETUP_FAILED and "no control case" in row["why"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("matrix") / "world"
    kit.World(root).build(checkpoint=False, pretraining_data=False)
    return root


def _case(command, klass, name_part):
    found = [g for g in matrix.select(matrix.generate(), command, klass)
             if name_part in g.case.name]
    assert len(found) == 1, [g.case.name for g in found]
    return found[0]


def test_build_vocab_over_a_foreign_file_is_refused_and_the_file_kept(world, tmp_path):
    row = matrix.run_generated(world, tmp_path, 0, _case("build-vocab", "foreign", ""))
    assert row["outcome"] == matrix.CLEAN, row["why"]
    kept = tmp_path / "case-000" / "mx" / "vocab.txt"
    assert kept.read_bytes() == matrix.FOREIGN


def test_prepare_corpus_to_a_null_device_writes_through(world, tmp_path):
    row = matrix.run_generated(world, tmp_path, 0, _case("prepare-corpus", "device", "(null)"))
    assert row["outcome"] in (matrix.OK, matrix.CLEAN), row["why"]
    assert stat.S_ISCHR(os.lstat(tmp_path / "case-000" / "mx" / "null").st_mode)


def test_build_vocab_stopped_by_sigterm_while_reading(world, tmp_path):
    """The driver pauses the command as it opens its corpus; SIGTERM lands there: exit
    75, one line, no temporaries, and the same command then finishes."""
    row = matrix.run_generated(world, tmp_path, 0, _case("build-vocab", "sigterm", "read"))
    assert row["outcome"] == matrix.CLEAN, row["why"]
    assert row["why"].startswith("preempted:") and "the rerun finished" in row["why"]


@pytest.mark.parametrize("klass, phase", [("sighup", "read"), ("sigquit", "data")])
def test_build_vocab_stopped_by_a_terminals_signal(world, tmp_path, klass, phase):
    """The policy's other signals are cases too: a closed terminal's SIGHUP (exit 75) and
    Ctrl-\\ (131), to the process group, each one line, and the same command then finishes."""
    row = matrix.run_generated(world, tmp_path, 0, _case("build-vocab", klass, phase))
    assert row["outcome"] == matrix.CLEAN, row["why"]
    assert "the rerun finished" in row["why"]


def test_a_pooled_command_is_signalled_with_its_workers_forked_and_spawned(world, tmp_path):
    """create_pretraining_data's pool, spawned (as from a program that loaded TensorFlow):
    a closed terminal's SIGHUP reaches the workers and multiprocessing's resource tracker,
    and the stop is still one line, with no warning of a helper that died after it."""
    names = [g.case.name for g in matrix.select(matrix.generate(), "create-pretraining-data",
                                                "sighup")]
    assert "SIGHUP during data, 2 forked workers" in names
    row = matrix.run_generated(world, tmp_path, 0, _case("create-pretraining-data", "sighup",
                                                         "data, 2 spawned"))
    assert row["outcome"] == matrix.CLEAN, row["why"]
    assert "the rerun finished" in row["why"]


def test_a_python_warning_after_the_stop_line_is_not_clean():
    """A helper process the signal killed (the resource tracker, once) warns after the
    job's one line: the cell says so."""
    generated = _case("create-pretraining-data", "sighup", "data, 2 spawned")
    stop = ("preempted: stopped by SIGHUP outside training: nothing was lost; run the same "
            "command again to finish")
    warned = ("/usr/lib/python3.11/multiprocessing/resource_tracker.py:123: UserWarning: "
              "resource_tracker: process died unexpectedly, relaunching.")
    result = kit.Result([], 75, "", f"{stop}\n{warned}\n", 1.0)
    assert matrix.judge_stop(generated, result)[0] == matrix.VAGUE
    result = kit.Result([], 75, "", f"{warned}\n{stop}\n", 1.0)  # (before it: the run's own)
    assert matrix.judge_stop(generated, result)[0] == matrix.CLEAN


@pytest.mark.parametrize("klass, outcome", [("fifo", "ok"), ("stdin", "ok"),
                                            ("empty-stdin", "clean"), ("unreadable", "clean")])
def test_build_vocab_input_kinds(world, tmp_path, klass, outcome):
    """Input faults come from the registry's inputs: a FIFO and standard input are read in
    full; an empty stdin and an unreadable file are one line naming the flag."""
    row = matrix.run_generated(world, tmp_path, 0, _case("build-vocab", klass, "input_file"))
    assert row["outcome"] == outcome, row["why"]
    if outcome == "clean":
        assert row["why"].startswith("error: --input_file "), row["why"]


def test_a_resumed_matrix_keeps_its_clean_cases_and_runs_the_others_again(tmp_path):
    """--resume: a matrix too long for one sitting goes on where it stopped; a case that
    was not clean or ok runs again (a fix since), and a case the registry no longer
    generates is dropped."""
    import json

    import bad_input_sweep

    generated = matrix.select(matrix.generate(), "build-vocab", "sigint,empty")
    first, second, third = generated[:3]
    written = [dict(command=g.command, klass=g.klass, target=g.target, case=g.case.name,
                    outcome=outcome, why="", seconds=1.0)
               for g, outcome in [(first, matrix.CLEAN), (second, "vague"), (third, matrix.OK)]]
    written.append(dict(written[0], case="a case no longer generated"))
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(written))
    kept = bad_input_sweep.resumed_rows(str(path), generated)
    assert [r["case"] for r in kept] == [first.case.name, third.case.name]
    assert bad_input_sweep.resumed_rows(str(tmp_path / "not yet.json"), generated) == []
    rows = [bad_input_sweep.row_of(r) for r in kept]
    assert matrix.as_json(rows) == written[0:1] + written[2:3]
    path.write_text("{")
    with pytest.raises(SystemExit, match="--resume: .* is not an earlier run's --json"):
        bad_input_sweep.resumed_rows(str(path), generated)


def test_the_counts_table_adds_up_to_the_generated_cases():
    """--counts: the troubleshooting page's table of the matrix's size, from the registry."""
    import bad_input_sweep

    generated = matrix.generate()
    table = bad_input_sweep.counts(generated).splitlines()
    header, total = table[0], table[-1].strip("|").split("|")
    assert header.startswith("| command | outputs | inputs | live runs | signals |")
    assert total[0].strip() == "all" and int(total[-1]) == len(generated)
    rows = {r.strip("|").split("|")[0].strip(): [int(x) for x in r.strip("|").split("|")[1:]]
            for r in table[2:-1]}
    assert set(rows) == {g.command for g in generated}
    assert sum(r[-1] for r in rows.values()) == len(generated)
    signals = sum(g.command == "classify" and g.klass in matrix.SIGNALS for g in generated)
    assert rows["classify"][3] == signals == 8 * len(registry.command("classify").phases)


def test_a_sweep_started_by_nohup_delivers_its_stop_signals(capsys):
    """A sweep started by `nohup` (or `&` from a script) inherits SIGHUP (SIGINT,
    SIGQUIT) ignored, which every command keeps ignored: its signal cases would
    end "silent". The sweep puts them back to their default action first."""
    import signal

    import bad_input_sweep
    saved = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGQUIT, signal.SIGINT)}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        bad_input_sweep.deliverable_stop_signals()
        assert signal.getsignal(signal.SIGINT) == signal.default_int_handler
        assert "SIGHUP was ignored" in capsys.readouterr().err
        # a case's process: every one at its default action
        seen = subprocess.run([sys.executable, "-c", "import signal; print([signal.getsignal(s)"
                               " for s in (signal.SIGHUP, signal.SIGQUIT, signal.SIGINT)])"],
                              capture_output=True, text=True, check=True).stdout
        assert seen.count("Handlers.SIG_DFL") == 2 and "default_int_handler" in seen
        # the sweep itself still shrugs off a closed terminal's SIGHUP (nohup's point)
        os.kill(os.getpid(), signal.SIGHUP)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def test_a_part_resumed_keeps_the_other_parts_rows_in_its_json(tmp_path):
    """--resume with a narrower selection (--commands=, --classes=) writes the file back
    with the rows of the cases outside it: another part's outcomes are never dropped."""
    import json

    other = dict(command="download", klass="sigint", target="read", case="SIGINT during read",
                 outcome=matrix.CLEAN, why="kept", seconds=1.0)
    path = tmp_path / "part.json"
    path.write_text(json.dumps([other]))
    result = subprocess.run(
        [sys.executable, "tools/bad_input_sweep.py", "--matrix", "--resume", "--jobs=1",
         "--commands=build-vocab", "--classes=sigint", "--only=SIGINT during read",
         f"--json={path}"], cwd=kit.REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(path.read_text())
    assert other in rows
    assert [r["command"] for r in rows if r is not other and r != other] == ["build-vocab"]
