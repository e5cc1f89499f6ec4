"""--max_train_minutes: a budget of training time (official_bert/training/budget.py).

The schedule at given fractions of the budget against a hand computation;
tiny pre-training runs (run_pretraining.py) on a fake clock, where every step
takes 7 s, that stop at the step crossing the budget and save there, between
host calls and inside one (mirrored over two CPUs, with XLA: slow), and on
two workers that agree on the clock (slow); a run SIGKILLed midway and run
again that stops at the same total time with the same learning rates and
losses; the default (no budget) with the losses it had before the budget
existed; a real-clock run of the training loop that stops within a step of
its budget; fine-tuning (run_classifier.py) stopped and evaluated at the
budget; and one-line errors for bad values.

The fake clock replaces `Trainer.time_fn`, which the training `tf.function`
reads when a host call starts and after each step, with a counter that
advances 7 s per reading: every step then takes exactly 7 s.
"""

import math
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from support import processes
from test_run_pretraining import SCRIPT, REPO, common, data, results  # noqa: F401 (data: a fixture)
from official_bert.errors import UserError
from official_bert.configs import RunConfig
from official_bert.training import optimization
from official_bert.training.budget import TimeBudget

WRAPPER = r"""
import os, runpy, sys
import tensorflow as tf
from official_bert.training import trainer as training
tick = float(os.environ.get("FAKE_SECONDS_PER_STEP", "0"))
kill_at = int(os.environ.get("BUDGET_KILL_AT", "0"))
if tick:
    clock = []
    def fake_time():
        if not clock:
            with tf.init_scope():
                clock.append(tf.Variable(0.0, dtype=tf.float64, trainable=False))
        return tf.identity(clock[0].assign_add(tick))  # the value now, not when used
    training.Trainer.time_fn = staticmethod(fake_time)
original = training.Trainer.train
def train(self, dataset_fn, global_batch_size, hooks=None, **kwargs):
    def report(step, results):
        print("RESULT", step, repr(results["loss"]), repr(results["learning_rate"]), flush=True)
        if step == kill_at:
            os.kill(os.getpid(), 9)
    return original(self, dataset_fn, global_batch_size, hooks=list(hooks or []) + [report],
                    **kwargs)
training.Trainer.train = train
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

TICK = 7.0  # fake seconds per step
PEAK = 5e-3  # common()'s --learning_rate
# A budget of 30 s with warm-up over half of it (--num_warmup_steps=10 of 20): the steps
# end at 7, 14, 21, 28, 35 s, so the 5th is the one that crosses the budget.
BUDGET = ("--max_train_minutes=0.5", "--num_train_steps=20", "--num_warmup_steps=10")


def run(*args, tick=TICK, kill_at=None, timeout=300):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=str(REPO), FAKE_SECONDS_PER_STEP=str(tick),
               BUDGET_KILL_AT=str(kill_at or 0))
    return processes.run([sys.executable, "-c", WRAPPER, SCRIPT, *map(str, args)], cwd=REPO,
                         env=env, timeout=timeout)


def train_seconds(checkpoint):
    return float(tf.train.load_variable(str(checkpoint),
                                        "train_seconds/.ATTRIBUTES/VARIABLE_VALUE"))


def expected_rate(seconds, budget=30.0, warmup=0.5):
    """The schedule by hand: warm-up over `warmup` of the budget, then linear to 0."""
    spent = seconds / budget
    if spent < warmup:
        return PEAK * spent / warmup
    return max(PEAK * (1 - spent) / (1 - warmup), 0.0)


# --- the schedule ------------------------------------------------------------------


def test_schedule_at_fractions_of_the_budget():
    budget = TimeBudget(seconds=600, warmup_fraction=0.1)
    schedule = optimization.BudgetLinearDecay(1e-4, budget)
    # (seconds, rate): the start, mid warm-up, the end of warm-up, half the budget
    # (1e-4 * 0.5 / 0.9), the end, and past it.
    for seconds, rate in [(0, 0.0), (30, 5e-5), (60, 1e-4), (300, 5.5555556e-5), (600, 0.0),
                          (700, 0.0)]:
        budget.advance(seconds)
        for step in (0, 12345):  # the step does not matter
            assert float(schedule(step)) == pytest.approx(rate, rel=1e-6, abs=1e-12), seconds
    no_warmup = optimization.BudgetLinearDecay(2e-5, TimeBudget(100, 0.0))
    assert float(no_warmup(0)) == pytest.approx(2e-5)


def test_the_optimizer_reads_the_clock_and_the_default_reads_the_steps():
    budget = TimeBudget(seconds=100, warmup_fraction=0.0)
    optimizer = optimization.create_optimizer(optimization.OptimizerConfig(
        learning_rate=1e-3, num_train_steps=10, num_warmup_steps=0, time_budget=budget))
    assert float(optimizer.learning_rate) == pytest.approx(1e-3)
    budget.advance(75)
    assert float(optimizer.learning_rate) == pytest.approx(2.5e-4)
    default = optimization.create_optimizer(optimization.OptimizerConfig(
        learning_rate=1e-3, num_train_steps=10, num_warmup_steps=0))
    assert isinstance(default._learning_rate, optimization.WarmupLinearDecay)


@pytest.mark.parametrize("minutes, message", [
    (0, "--max_train_minutes must be a positive number of minutes, got 0"),
    (-5, "--max_train_minutes must be a positive number of minutes, got -5"),
    (math.nan, "--max_train_minutes must be a positive number of minutes, got nan"),
    (math.inf, "--max_train_minutes must be a positive number of minutes, got inf"),
    # (it overflowed the float32 clock: a warning, and training at learning rate 0)
    (1e300, r"^--max_train_minutes=1e\+300 is more than ten years \(5256000 minutes\): give "
            "the training budget in minutes$"),
])
def test_bad_budgets_are_refused(minutes, message):
    with pytest.raises(UserError, match=message):
        RunConfig(output_dir="out", do_train=True, max_train_minutes=minutes).validate()
    if not 0 < minutes < math.inf or minutes > 1e10:
        with pytest.raises(UserError, match=message):
            TimeBudget(minutes * 60, 0.1)


@pytest.mark.parametrize("epochs", [0, -1, math.nan, math.inf])  # (inf was a traceback)
def test_a_run_of_no_or_endless_epochs_is_refused(epochs):
    with pytest.raises(UserError, match=f"^--num_train_epochs must be a positive number, got "
                                        f"{epochs}$"):
        RunConfig(output_dir="out", do_train=True, num_train_epochs=epochs).validate()


def test_a_budget_without_training_is_one_line(data, tmp_path):
    result = run(*common(data, tmp_path / "out", "--do_eval", "--max_train_minutes=5"))
    assert result.returncode == 1, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert lines == ["error: --max_train_minutes is a training budget: add --do_train, or leave "
                     "it out to evaluate, predict or export"], result.stderr[-3000:]
    assert "Traceback" not in result.stderr


# --- pre-training runs on the fake clock ----------------------------------------------


@pytest.fixture(scope="module")
def budgeted(data):
    """The uninterrupted budgeted run: a step per host call (--log_steps=1)."""
    out = data / "budgeted"
    result = run(*common(data, out, "--do_train", *BUDGET))
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(out=out, results=results(result.stdout), stderr=result.stderr)


def test_stops_at_the_step_that_crosses_the_budget_and_saves(budgeted):
    out, steps = budgeted["out"], budgeted["results"]
    assert sorted(steps) == [1, 2, 3, 4, 5]  # 35 s >= 30 s, before --num_train_steps=20
    assert (out / "ckpt-5.index").exists()
    assert train_seconds(out / "ckpt-5") == 5 * TICK
    # The rate logged after step k is the schedule at 7k s: warm-up to 15 s, 0 at 30 s.
    for step, (_, rate) in steps.items():
        assert rate == pytest.approx(expected_rate(step * TICK), rel=1e-5, abs=1e-12), step
    assert steps[5][1] == 0.0
    assert "Budget spent at step 5: trained 0.58 of 0.5 min, 0.00 min left" in budgeted["stderr"]
    assert "step 3/20: " in budgeted["stderr"] and (
        "trained 0.35 of 0.5 min, 0.15 min left" in budgeted["stderr"])


@pytest.mark.slow  # 10 s or more here
def test_killed_and_run_again_stops_at_the_same_total_time(budgeted, data):
    out = data / "budget_killed"
    killed = run(*common(data, out, "--do_train", *BUDGET), kill_at=3)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert train_seconds(out / "ckpt-2") == 2 * TICK  # the clock is in the checkpoint
    resumed = run(*common(data, out, "--do_train", *BUDGET))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = results(resumed.stdout)
    # From ckpt-2 (14 s): steps 3, 4 and 5 again, then the budget is spent, as uninterrupted.
    assert sorted(after) == [3, 4, 5]
    assert train_seconds(out / "ckpt-5") == 5 * TICK
    for step, (loss, rate) in after.items():
        assert rate == budgeted["results"][step][1], step
        assert abs(loss - budgeted["results"][step][0]) <= 1e-6, step
    again = run(*common(data, out, "--do_train", *BUDGET))
    assert again.returncode == 0 and results(again.stdout) == {}
    assert "Already trained 0.58 of 0.5 min, 0.00 min left at step 5: nothing to train" in (
        again.stderr)


@pytest.mark.slow  # mirrored with XLA: minutes on 2 CPUs (the real-clock test covers the stop)
def test_stops_inside_a_host_call_mirrored_with_xla(budgeted, data):
    # One host call of up to 100 steps: the clock is checked before each step inside
    # it. Over two logical CPUs (the clock is a mirrored variable), with XLA.
    out = data / "budget_mirrored_xla"
    result = run(*common(data, out, "--do_train", *BUDGET, "--log_steps=100",
                         "--iterations_per_loop=100", "--save_checkpoints_steps=100",
                         "--distribution_strategy=mirrored", "--num_cpu_devices=2",
                         "--jit_compile"))
    assert result.returncode == 0, result.stderr[-3000:]
    logged = results(result.stdout)
    assert sorted(logged) == [5]
    assert (out / "ckpt-5.index").exists() and train_seconds(out / "ckpt-5") == 5 * TICK
    mean_loss = np.mean([budgeted["results"][s][0] for s in range(1, 6)])
    assert logged[5][0] == pytest.approx(mean_loss, rel=1e-4)
    assert logged[5][1] == 0.0


@pytest.mark.slow  # two worker processes
def test_two_workers_agree_on_the_clock_and_stop_together(budgeted, data, tmp_path):
    # multi_worker_mirrored on localhost: each host call (one step here) is timed by the
    # host, 7 s on the fake clock, and the workers agree on their mean: both stop after
    # step 5 with the same losses and rates, and the chief's ckpt-5 holds 35 s.
    import json
    import subprocess

    from test_run_pretraining import _free_ports

    out = data / "budget_workers"
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    procs = []
    for index in range(2):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=str(REPO), FAKE_SECONDS_PER_STEP=str(TICK), TMPDIR=str(tmp_path),
                   TF_CONFIG=json.dumps({"cluster": cluster,
                                         "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen(
            [sys.executable, "-c", WRAPPER, SCRIPT, *common(data, out, "--do_train", *BUDGET,
                                                            "--distribution_strategy="
                                                            "multi_worker_mirrored")],
            cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, stderr) in zip(procs, outputs):
        assert p.returncode == 0, stderr[-3000:]
    chief, other = (results(stdout) for stdout, _ in outputs)
    assert sorted(chief) == [1, 2, 3, 4, 5] and chief == other
    for step, (_, rate) in chief.items():
        assert rate == pytest.approx(expected_rate(step * TICK), rel=1e-5, abs=1e-12), step
    assert train_seconds(out / "ckpt-5") == 5 * TICK


# --- the default is as before ----------------------------------------------------------

# The losses of common()'s 8 steps without a budget, printed by run_pretraining.py at
# commit aa301d7 (before the budget existed) on the same data: the same to the bit.
LOSSES_BEFORE_THE_BUDGET = [7.329919815063477, 7.330364227294922, 7.348609924316406,
                            7.332182884216309, 7.328006267547607, 7.31749153137207,
                            7.315567493438721, 7.2721943855285645]


@pytest.mark.slow  # 10 s or more here
def test_without_a_budget_training_is_as_before(data):
    out = data / "no_budget"
    result = run(*common(data, out, "--do_train"), tick=0)
    assert result.returncode == 0, result.stderr[-3000:]
    losses = [loss for _, (loss, _) in sorted(results(result.stdout).items())]
    np.testing.assert_allclose(losses, LOSSES_BEFORE_THE_BUDGET, rtol=0, atol=1e-6)
    names = [name for name, _ in tf.train.list_variables(str(out / "ckpt-8"))]
    assert not any("train_seconds" in name for name in names)
    assert "Time budget" not in result.stderr and "min left" not in result.stderr


# --- the training loop on the real clock -----------------------------------------------


def _toy_trainer(out_dir, budget_seconds, steps, task=None):
    from support import toy_training as toy
    from official_bert.training import distribution
    from official_bert.training import trainer as training

    strategy = distribution.get_strategy("one_device")
    with strategy.scope():
        budget = TimeBudget(budget_seconds, 0.1)
    config = training.TrainingConfig(output_dir=str(out_dir), num_train_steps=steps,
                                     log_steps=steps, steps_per_loop=steps,
                                     save_checkpoints_steps=steps)
    trainer = training.Trainer(
        task or toy.ToyTask(), strategy, config, time_budget=budget,
        optimizer_fn=lambda: optimization.create_optimizer(optimization.OptimizerConfig(
            learning_rate=1e-3, num_train_steps=steps, num_warmup_steps=1,
            time_budget=budget)))
    return trainer, lambda: trainer.train(lambda ctx: toy.make_dataset(toy.GLOBAL_BATCH),
                                          toy.GLOBAL_BATCH)


@pytest.mark.slow  # (minutes of CI: its runs; `pytest -m slow`)
def test_the_clock_counts_the_backward_pass(tmp_path):
    # The loss is ready after the forward pass; a clock read then missed the
    # backward pass (two thirds of a real step: a 15-minute budget trained for
    # 24). Here each backward pass sleeps 0.3 s, the forward pass takes
    # milliseconds: three steps count at least 0.9 s.
    import time

    from support import toy_training as toy

    @tf.custom_gradient
    def slow_backward(x):
        def grad(dy):
            # Stateless, as math is (not ordered with the clock), and fed the
            # step's data (a constant input may be computed once).
            slept = tf.numpy_function(lambda d, _: (time.sleep(0.3), d)[1], [dy, x], dy.dtype,
                                      stateful=False)
            return tf.ensure_shape(slept, dy.shape)
        return tf.identity(x), grad

    class SlowBackward(toy.ToyTask):
        def loss_and_metrics(self, model, features, normalizers, training):
            loss, metrics = super().loss_and_metrics(model, features, normalizers, training)
            return slow_backward(loss), metrics

    trainer, train = _toy_trainer(tmp_path, budget_seconds=600.0, steps=3, task=SlowBackward())
    trainer.config.steps_per_loop = 1
    train()
    assert int(trainer.global_step.numpy()) == 3
    assert trainer.budget.seconds_spent >= 0.9, trainer.budget.seconds_spent


@pytest.mark.slow  # about 28 s here (CI time); the fake clock's tests run by default
def test_real_clock_stops_within_a_step_of_the_budget(tmp_path):
    import time

    trainer, train = _toy_trainer(tmp_path, budget_seconds=2.0, steps=100_000)
    started = time.monotonic()
    results = train()
    wall = time.monotonic() - started
    step = int(trainer.global_step.numpy())
    seconds = train_seconds(tmp_path / f"ckpt-{step}")
    # One host call of up to 100,000 steps, stopped inside it at the step that
    # crossed 2 s: a toy step takes milliseconds.
    assert 10 < step < 100_000
    assert 2.0 <= seconds < 2.0 + 0.5, (seconds, step)
    assert wall > seconds  # start-up (tracing, graph optimization) is not counted
    assert results["learning_rate"] == 0.0
    # Run again: the clock comes back from the checkpoint, and the budget is spent.
    again, train_again = _toy_trainer(tmp_path, budget_seconds=2.0, steps=100_000)
    assert train_again() == {} and int(again.global_step.numpy()) == step


def test_the_steps_bound_a_budget_and_say_so(tmp_path, caplog):
    trainer, train = _toy_trainer(tmp_path, budget_seconds=3600.0, steps=3)
    with caplog.at_level("WARNING"):
        train()
    assert int(trainer.global_step.numpy()) == 3
    assert "Reached --num_train_steps=3 before the budget" in caplog.text
    assert 0 < train_seconds(tmp_path / "ckpt-3") < 3600


# --- fine-tuning --------------------------------------------------------------------


@pytest.mark.slow  # 10 s or more here
def test_fine_tuning_stops_at_the_budget_and_evaluates_there(tmp_path):
    # run_classifier.py: 4 epochs of 2 steps, a 12 s budget on the 7 s fake clock: it
    # stops after step 2 and evaluates (while training and after it) the model of step 2.
    from test_run_classifier import DEV, DEV_LABELS, TRAIN, TRAIN_LABELS, make_checkpoint, \
        write_sst2

    checkpoint = make_checkpoint(str(tmp_path / "ckpt"))
    sst = write_sst2(tmp_path / "sst", (TRAIN, TRAIN_LABELS), (DEV, DEV_LABELS))
    out = tmp_path / "out"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=str(REPO), FAKE_SECONDS_PER_STEP=str(TICK))
    result = processes.run(
        [sys.executable, "-c", WRAPPER, str(REPO / "run_classifier.py"), "--task_name=sst-2",
         f"--data_dir={sst}", f"--init_checkpoint={checkpoint}", "--do_train", "--do_eval",
         "--max_seq_length=16", "--train_batch_size=4", "--eval_batch_size=2",
         "--num_train_epochs=4", "--learning_rate=1e-3", "--log_steps=1",
         "--eval_every_steps=1", "--max_train_minutes=0.2", f"--output_dir={out}"],
        cwd=REPO, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(results(result.stdout)) == [1, 2]
    assert train_seconds(out / "ckpt-2") == 2 * TICK
    evaluated = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text()
                     .splitlines())
    assert evaluated["global_step"] == "2"
    assert len((out / "eval_history.jsonl").read_text().splitlines()) == 2
