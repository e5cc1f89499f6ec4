"""The shared training loop: exact distribution, accumulation and resume.

Each run is a subprocess (tests/support/toy_training.py) so that the CPU can be split
into two logical devices for MirroredStrategy before TensorFlow starts.
"""

import os
import sys

import pytest

from support import processes

TOY = os.path.join(os.path.dirname(__file__), "support", "toy_training.py")


def _run(out_dir, strategy, steps, accum, kill_at=None, dropout="0", jit=False):
    args = [sys.executable, TOY, str(out_dir), strategy, str(steps), str(accum)]
    if kill_at is not None:
        args.append(str(kill_at))
    env = dict(os.environ, TOY_DROPOUT=dropout, TOY_JIT="1" if jit else "0",
               TF_CPP_MIN_LOG_LEVEL="3")
    proc = processes.run(args, capture_output=True, text=True, env=env, timeout=300)
    if kill_at is None:
        assert proc.returncode == 0, proc.stderr[-3000:]
    else:
        assert proc.returncode == -9, proc.stderr[-3000:]
    losses = {}
    for line in proc.stdout.splitlines():
        step, loss = line.split()
        losses[int(step)] = float(loss)
    return losses


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("one"), "one_device", 6, 1)


@pytest.mark.slow  # 40 s; the micro-batch split and tests/test_run_pretraining.py's mirrored run stay by default
def test_mirrored_and_accumulation_match_one_device(baseline, tmp_path):
    # The toy loss is token-weighted, so each replica's denominator differs:
    # only globally summed normalizers make these equal. (Mirrored alone, without
    # accumulation, is tests/test_run_pretraining.py's case, on the masked LM's weights.)
    for strategy, accum in [("one_device", 2), ("mirrored", 2)]:
        losses = _run(tmp_path / f"{strategy}{accum}", strategy, 6, accum)
        assert sorted(losses) == list(range(1, 7))
        diff = max(abs(losses[s] - baseline[s]) for s in losses)
        assert diff < 1e-5, (strategy, accum, losses, baseline)
    # Training changes the loss (the comparison is not vacuous).
    assert abs(baseline[6] - baseline[1]) > 1e-3


def test_xla_training_equals_the_plain_one(baseline, tmp_path):
    # --jit_compile compiles the forward and backward pass with XLA: the same losses.
    # (The real MiniLM's trajectory under XLA against transformers' is a slow test in
    # tests/test_finetuning_trajectory.py.)
    losses = _run(tmp_path / "xla", "one_device", 6, 1, jit=True)
    assert sorted(losses) == list(range(1, 7))
    diff = max(abs(losses[s] - baseline[s]) for s in losses)
    assert diff < 1e-5, (losses, baseline)


@pytest.mark.slow  # 36 s; tests/test_run_pretraining.py's resume-after-SIGKILL runs by default
def test_resume_after_sigkill_equals_uninterrupted(tmp_path):
    # With dropout on: the RNG state is part of the checkpoint.
    full = _run(tmp_path / "full", "one_device", 6, 1, dropout="0.1")
    killed = _run(tmp_path / "resumed", "one_device", 6, 1, kill_at=3, dropout="0.1")
    assert sorted(killed) == [1, 2, 3]
    # Checkpoints every 2 steps: the kill at 3 loses step 3, which is redone.
    resumed = _run(tmp_path / "resumed", "one_device", 6, 1, dropout="0.1")
    assert sorted(resumed) == [3, 4, 5, 6]
    for step in resumed:
        assert abs(resumed[step] - full[step]) <= 1e-6, (step, resumed, full)
    # Running again after the end trains nothing more.
    assert _run(tmp_path / "resumed", "one_device", 6, 1, dropout="0.1") == {}


def test_one_replica_on_the_host_reads_the_dataset_itself(tmp_path):
    # A strategy's input (a multi-device iterator) would copy each batch to the
    # device it is already on, and deleting its iterator waits out tf.data's
    # autotuning period: up to a minute after every training run, evaluation
    # and prediction. On the host's one CPU replica the trainer iterates the
    # dataset itself; a GPU, or several replicas, keep the strategy's input
    # (the mirrored run above and tests/test_run_pretraining.py's give the
    # same losses both ways).
    import tensorflow as tf

    from support import toy_training as toy
    from official_bert.training import distribution
    from official_bert.training import trainer as training

    config = training.TrainingConfig(output_dir=str(tmp_path), num_train_steps=1)
    trainer = training.Trainer(toy.ToyTask(), distribution.get_strategy("one_device"), config)
    dataset = trainer._distribute(lambda context: toy.make_dataset(toy.GLOBAL_BATCH))
    assert isinstance(dataset, tf.data.Dataset)
    assert training._on_the_host_alone(tf.distribute.get_strategy())
    assert not training._on_the_host_alone(tf.distribute.OneDeviceStrategy("/gpu:0"))

    class TwoReplicas:
        num_replicas_in_sync = 2

    assert not training._on_the_host_alone(TwoReplicas())


def test_sigterm_ends_a_long_host_call_at_the_next_step(tmp_path):
    # One tf.function call of 3,000 updates (steps_per_loop): Python cannot run a
    # signal handler until the call returns, so without the watcher thread the
    # run would stop only after all of them. With it, the call ends at the next
    # step and the checkpoint of that step is saved.
    import signal
    import threading
    import time

    from support import toy_training as toy
    from official_bert.commands import app
    from official_bert.errors import Preempted
    from official_bert.training import distribution, optimization
    from official_bert.training import trainer as training

    steps = 3000
    config = training.TrainingConfig(output_dir=str(tmp_path), num_train_steps=steps,
                                     log_steps=steps, steps_per_loop=steps,
                                     save_checkpoints_steps=steps)
    trainer = training.Trainer(
        toy.ToyTask(), distribution.get_strategy("one_device"), config,
        optimizer_fn=lambda: optimization.create_optimizer(optimization.OptimizerConfig(
            learning_rate=1e-3, num_train_steps=steps, num_warmup_steps=1)))
    sent_at = []

    def preempt():
        deadline = time.time() + 120
        while int(trainer.global_step.numpy()) < 20 and time.time() < deadline:
            time.sleep(0.01)
        sent_at.append(int(trainer.global_step.numpy()))
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=preempt)
    thread.start()
    # The boundary's signal policy (which every command runs in) makes SIGTERM a request.
    with app.signal_policy(), pytest.raises(Preempted) as stopped:
        trainer.train(lambda ctx: toy.make_dataset(toy.GLOBAL_BATCH), toy.GLOBAL_BATCH)
    thread.join()
    step = int(trainer.global_step.numpy())
    assert 20 <= sent_at[0] <= step < sent_at[0] + 50 < steps, (sent_at, step)
    assert f"at step {step}" in str(stopped.value)
    assert os.path.exists(os.path.join(tmp_path, f"ckpt-{step}.index"))
    # The handlers are back as they were, and the same command resumes there.
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.set_wakeup_fd(-1) == -1
    resumed = training.Trainer(toy.ToyTask(), distribution.get_strategy("one_device"), config)
    assert int(resumed.global_step.numpy()) == step


def _clocked_trainer(tmp_path, monkeypatch, steps, first, each, **config):
    """A toy `Trainer` whose progress clock reads `first` seconds after its
    first step (which traces) and `each` more per later step; and the list of
    its host calls' sizes."""
    from support import toy_training as toy
    from official_bert.training import distribution, optimization
    from official_bert.training import trainer as training

    holder = {}

    def clock():
        step = int(holder["trainer"].global_step.numpy()) if "trainer" in holder else 0
        return 0.0 if step == 0 else first + each * (step - 1)

    monkeypatch.setattr(training.Trainer, "clock", staticmethod(clock))
    trainer = holder["trainer"] = training.Trainer(
        toy.ToyTask(), distribution.get_strategy("one_device"),
        training.TrainingConfig(output_dir=str(tmp_path), num_train_steps=steps,
                                save_checkpoints_steps=steps, **config),
        optimizer_fn=lambda: optimization.create_optimizer(optimization.OptimizerConfig(
            learning_rate=1e-3, num_train_steps=steps, num_warmup_steps=1)))
    calls = []
    call = trainer._call_train_loop
    monkeypatch.setattr(trainer, "_call_train_loop",
                        lambda iterator, n: calls.append(n) or call(iterator, n))
    return trainer, calls


def _train_lines(trainer, caplog):
    import logging

    from support import toy_training as toy

    with caplog.at_level(logging.INFO, logger="absl"):
        trainer.train(lambda ctx: toy.make_dataset(toy.GLOBAL_BATCH), toy.GLOBAL_BATCH)
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]


def test_progress_lines_end_with_elapsed_and_time_left(tmp_path, monkeypatch, caplog):
    """The first host call is one step (it traces, and compiles with XLA), and
    the second one more, to time a step: the time left is measured from there.
    On a clock where the first step takes 30 s and every later one 2 s, 8 steps
    left of 12 are 16 s, not the 36 s the mean would give. Later calls hold
    about `CALL_SECONDS` (5 s: 2 steps) of steps; between two --log_steps lines
    one with the time alone comes every 10 s or more. The fields before it are
    as they were."""
    trainer, calls = _clocked_trainer(tmp_path, monkeypatch, 12, first=30.0, each=2.0,
                                      log_steps=4, steps_per_loop=4)
    lines = _train_lines(trainer, caplog)
    assert calls == [1, 1, 2, 2, 2, 2, 2]
    assert [line.split(";")[0].split(":")[0] for line in lines] == [
        "step 1/12", "step 4/12", "step 6/12", "step 8/12", "step 12/12"]
    assert lines[0] == "step 1/12; 30 s elapsed"  # (one step: no rate yet)
    assert lines[1].endswith("; 36 s elapsed, about 16 s left")
    assert lines[2] == "step 6/12; 40 s elapsed, about 12 s left"
    assert lines[3].endswith("; 44 s elapsed, about 8 s left")
    assert lines[4].endswith("; 52 s elapsed, about 0 s left")
    assert "loss = " in lines[1] and "examples_per_second = " in lines[1]


def test_the_first_progress_line_comes_within_30_s_whatever_log_steps_is(
        tmp_path, monkeypatch, caplog):
    """Pre-training logs every 100 steps: at 2 s a step its first line used to
    come after more than 3 minutes. Host calls of about 5 s let a line with
    the time elapsed and left come at 10 s."""
    trainer, calls = _clocked_trainer(tmp_path, monkeypatch, 60, first=8.0, each=2.0,
                                      log_steps=100, steps_per_loop=100)
    lines = _train_lines(trainer, caplog)
    assert lines[0] == "step 2/60; 10 s elapsed, about 116 s left"
    assert max(calls) <= 3 and sum(calls) == 60
