"""The resource policy (`official_bert/resources.py`): a command that runs a model is
refused in one line, naming the limit, when the process's limits leave less than
TensorFlow needs (it would abort in C++ with a dump of its threads); and a limit met
while reading a checkpoint is never called damage."""

from __future__ import annotations

import errno
import resource
import subprocess
import sys

import pytest

from support import REPO_ROOT

from official_bert import errors, resources
from official_bert.commands import registry

MiB = resources.MiB


@pytest.fixture
def limits(monkeypatch):
    """Sets the process's limits as `resources` reads them (soft, hard)."""
    values = {}
    real = resource.getrlimit

    def getrlimit(which):
        return values.get(which, real(which))

    monkeypatch.setattr(resources.resource, "getrlimit", getrlimit)
    monkeypatch.setattr(resources.os, "getuid", lambda: 1000)  # (root is not held to -u)
    monkeypatch.setattr(resources, "threads_of_user", lambda uid: 3)
    monkeypatch.setattr(resources, "_mapped", lambda: 300 * MiB)  # (TensorFlow not loaded)
    for which in (resource.RLIMIT_NPROC, resource.RLIMIT_AS, resource.RLIMIT_NOFILE):
        values[which] = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    return values


@pytest.mark.parametrize("which, value, says", [
    (resource.RLIMIT_NPROC, 16, "ulimit -u 16, 3 in use by this user) leaves 13"),
    (resource.RLIMIT_AS, 2 << 30, "the address-space limit (ulimit -v 2097152, 2048 MB)"),
    (resource.RLIMIT_NOFILE, 8, "the limit on open files (ulimit -n 8)"),
])
def test_a_limit_below_what_a_model_needs_is_one_line_naming_it(limits, which, value, says):
    limits[which] = (value, value)
    with pytest.raises(errors.UserError, match=r"raise it") as raised:
        resources.check(registry.command("classify"))
    assert says in str(raised.value)
    resources.check(registry.command("build-vocab"))  # runs no model: not held to it


def test_limits_that_leave_enough_pass(limits):
    limits[resource.RLIMIT_NPROC] = (4096, 4096)
    limits[resource.RLIMIT_AS] = (64 << 30, 64 << 30)
    limits[resource.RLIMIT_NOFILE] = (1024, 1024)
    for command in registry.COMMANDS:
        resources.check(command)


def test_the_address_space_counts_tensorflow_before_it_is_loaded(limits):
    """The limits are checked before a command imports TensorFlow, when the process maps
    a few hundred MB: a 3 GB limit would look roomy, and the run would abort later."""
    limits[resource.RLIMIT_AS] = (3 << 30, 3 << 30)
    with pytest.raises(errors.UserError, match=r"beyond the 1536 MB a process maps with "
                                               r"TensorFlow loaded"):
        resources.check(registry.command("classify"))


def test_the_estimate_grows_with_the_cpus():
    small, large = resources.needs(2), resources.needs(64)
    assert small.threads >= 17 and large.threads > small.threads  # (17 measured on 2 CPUs)
    assert large.address_space > small.address_space


def test_a_machine_limit_while_reading_a_checkpoint_is_not_damage(tmp_path):
    """Too many open files while a checkpoint is read was "is damaged: truncated or
    corrupt ... copy or download the checkpoint again": the limit is raised as it is."""
    import tensorflow as tf

    from official_bert.checkpoints import tf_checkpoints

    error = tf.errors.UnknownError(None, None, f"{tmp_path}/ckpt-1.data-00000-of-00001; "
                                               "Too many open files")
    assert errors.is_machine_limit(error)
    assert errors.is_machine_limit(OSError(errno.EMFILE, "Too many open files"))
    assert not errors.is_machine_limit(OSError(errno.ENOENT, "No such file or directory"))
    with pytest.raises(tf.errors.UnknownError, match="Too many open files"):
        tf_checkpoints.damaged_checkpoint_error(str(tmp_path / "ckpt-1"), error)


def test_a_model_command_under_a_low_limit_on_open_files_is_one_line(tmp_path):
    """End to end, in a real process: no thread dump, one line naming the limit."""
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))

    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_classifier.py"), "--task_name=sst-2",
         f"--data_dir={tmp_path}", f"--init_checkpoint={tmp_path}", "--do_train",
         f"--output_dir={tmp_path / 'out'}"],
        preexec_fn=limit, capture_output=True, text=True, timeout=300, cwd=str(REPO_ROOT),
        env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3",
             "PYTHONPATH": str(REPO_ROOT)})
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1, result.stderr[-2000:]
    assert len(lines) == 1 and "ulimit -n 8" in lines[0], result.stderr[-2000:]
    assert "Fatal" not in result.stderr and "Traceback" not in result.stderr
