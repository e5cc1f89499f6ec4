"""Without --num_gpus a run uses what TensorFlow sees: no GPU, the CPU; one GPU,
that GPU; several, `MirroredStrategy` over all of them, said in one log line.
--num_gpus=0 is still the CPU, --num_gpus=N uses N (mirrored when N > 1), more
GPUs than TensorFlow sees is still one line, and an explicit
--distribution_strategy keeps its meaning.

There is no GPU here, so GPUs are stood in for, as tests/test_tpu_flags.py
stands in for a TPU. In one fresh process the CPU is split into three logical
devices and `distribution.visible_gpus` (where the strategy asks TensorFlow
which GPUs it sees) reports 0, 1 or 2 of the logical CPU devices 1 and 2 as
the GPUs: each case goes from the command line (run_classifier's flags →
`cli_flags.run_config` → `runner.make_strategy`, the calls the run makes) to a
real strategy, which then sums a value over its replicas. In this process,
TensorFlow's device list and the strategies' constructors are stood in for, to
check the "/gpu:N" names the strategy is given.
"""

import json
import os
import sys

import pytest

from support import processes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DRIVER = r"""
import json, logging, sys

import tensorflow as tf

from official_bert.training import distribution

distribution.split_cpu(3)
CPUS = ["/job:localhost/replica:0/task:0/device:CPU:%d" % i for i in (1, 2)]
messages = []


class Keep(logging.Handler):
    def emit(self, record):
        messages.append(record.getMessage())


logging.getLogger("absl").addHandler(Keep())

from absl import flags

from official_bert.commands import cli_flags, registry
registry.define_flags(registry.command("classify"))  # its flags
from official_bert.errors import UserError
from official_bert.tasks import runner

out = {}
for name, (gpus, argv) in json.loads(sys.argv[1]).items():
    del messages[:]
    distribution.visible_gpus = lambda gpus=gpus: CPUS[:gpus]
    flags.FLAGS.unparse_flags()  # each case starts from the defaults
    flags.FLAGS(["run_classifier.py", "--verbosity=0", *argv])
    config = cli_flags.run_config(flags.FLAGS)
    try:
        strategy = runner.make_strategy(config)
    except UserError as e:
        out[name] = {"error": str(e), "num_gpus": config.num_gpus}
        continue
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)),
                            axis=None)
    out[name] = {"num_gpus": config.num_gpus, "class": type(strategy).__name__,
                 "devices": list(strategy.extended.worker_devices), "sum": float(total),
                 "devices_log": [m for m in messages if m.startswith("Devices: ")]}
print("JSON", json.dumps(out))
"""

CPU = "/job:localhost/replica:0/task:0/device:CPU:%d"
CASES = {
    "no_gpu": (0, []),
    "one_gpu": (1, []),
    "two_gpus": (2, []),
    "two_gpus_num_gpus_0": (2, ["--num_gpus=0"]),
    "two_gpus_num_gpus_1": (2, ["--num_gpus=1"]),
    "two_gpus_num_gpus_2": (2, ["--num_gpus=2"]),
    "two_gpus_num_gpus_3": (2, ["--num_gpus=3"]),
    "two_gpus_mirrored": (2, ["--distribution_strategy=mirrored"]),
    "two_gpus_mirrored_cpu": (2, ["--distribution_strategy=mirrored", "--num_cpu_devices=3"]),
    "no_gpu_mirrored": (0, ["--distribution_strategy=mirrored"]),
}


@pytest.fixture(scope="module")
def runs():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=REPO)
    result = processes.run([sys.executable, "-c", DRIVER, json.dumps(CASES)], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("JSON ")]
    return json.loads(line[len("JSON "):])


def test_the_default_is_every_gpu_tensorflow_sees(runs):
    assert {name: run["num_gpus"] for name, run in runs.items()} == {
        name: int(argv[0].split("=")[1]) if argv and argv[0].startswith("--num_gpus") else None
        for name, (_, argv) in CASES.items()}
    none, one, two = runs["no_gpu"], runs["one_gpu"], runs["two_gpus"]
    assert (none["class"], none["devices"], none["sum"]) == ("OneDeviceStrategy", [CPU % 0], 1)
    assert none["devices_log"] == [
        "Devices: OneDeviceStrategy on /cpu:0 (TensorFlow sees no GPU)"]
    assert (one["class"], one["devices"], one["sum"]) == ("OneDeviceStrategy", [CPU % 1], 1)
    assert one["devices_log"] == [
        f"Devices: OneDeviceStrategy on {CPU % 1} (TensorFlow sees 1 GPU(s) and --num_gpus is "
        "not given; --num_gpus=0 the CPU)"]
    assert (two["class"], two["devices"], two["sum"]) == ("MirroredStrategy",
                                                          [CPU % 1, CPU % 2], 2)
    assert two["devices_log"] == [
        f"Devices: MirroredStrategy over {CPU % 1}, {CPU % 2} (TensorFlow sees 2 GPU(s) and "
        "--num_gpus is not given; --num_gpus=1 uses one, --num_gpus=0 the CPU)"]


def test_an_explicit_num_gpus_is_used_as_given(runs):
    zero, one, two = (runs[f"two_gpus_num_gpus_{n}"] for n in range(3))
    assert (zero["class"], zero["devices"], zero["devices_log"]) == (
        "OneDeviceStrategy", [CPU % 0], ["Devices: OneDeviceStrategy on /cpu:0 (--num_gpus=0)"])
    assert (one["class"], one["devices"], one["devices_log"]) == (
        "OneDeviceStrategy", [CPU % 1], [f"Devices: OneDeviceStrategy on {CPU % 1} (--num_gpus=1)"])
    # More than one GPU is mirrored over them (never one of them, the others idle).
    assert (two["class"], two["devices"], two["sum"], two["devices_log"]) == (
        "MirroredStrategy", [CPU % 1, CPU % 2], 2,
        [f"Devices: MirroredStrategy over {CPU % 1}, {CPU % 2} (--num_gpus=2)"])
    assert runs["two_gpus_num_gpus_3"]["error"] == (
        "--num_gpus=3, but TensorFlow sees 2 GPU(s) on this machine (CUDA_VISIBLE_DEVICES is "
        "set); pass --num_gpus=2 (all of them), or check the GPU driver and CUDA installation")


def test_an_explicit_strategy_keeps_its_meaning(runs):
    mirrored = runs["two_gpus_mirrored"]
    assert (mirrored["class"], mirrored["devices"], mirrored["sum"]) == (
        "MirroredStrategy", [CPU % 1, CPU % 2], 2)
    # --num_cpu_devices asks for the CPU's logical devices (testing mirrored without GPUs).
    cpu = runs["two_gpus_mirrored_cpu"]
    assert (cpu["class"], cpu["devices"], cpu["sum"]) == (
        "MirroredStrategy", [CPU % i for i in range(3)], 3)
    assert cpu["devices_log"] == ["Devices: MirroredStrategy over the logical CPU devices "
                                  "(--num_cpu_devices=3 asks for the CPU)"]
    plain = runs["no_gpu_mirrored"]
    assert (plain["class"], plain["devices"]) == ("MirroredStrategy", [CPU % i for i in range(3)])


# --- in this process: what TensorFlow is asked, and what the strategies are given ---


class Recorder:
    def __init__(self, calls, name):
        self.calls, self.name = calls, name

    def __call__(self, *args, **kwargs):
        self.calls.append((self.name, args, kwargs))
        return self.name


@pytest.fixture
def standins(monkeypatch):
    """TensorFlow reporting `gpus[0]` GPUs; the strategy constructors recording their calls."""
    import tensorflow as tf

    from official_bert.training import distribution

    gpus, calls = [0], []
    real = tf.config.list_physical_devices

    def devices(kind=None):
        if kind == "GPU":
            return [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU")
                    for i in range(gpus[0])]
        return real(kind)

    monkeypatch.setattr(tf.config, "list_physical_devices", devices)
    for name in ("OneDeviceStrategy", "MirroredStrategy", "MultiWorkerMirroredStrategy"):
        monkeypatch.setattr(tf.distribute, name, Recorder(calls, name))
    return distribution, gpus, calls


@pytest.mark.parametrize("found, strategy, devices", [
    (0, "OneDeviceStrategy", "/cpu:0"),
    (1, "OneDeviceStrategy", "/gpu:0"),
    (2, "MirroredStrategy", ["/gpu:0", "/gpu:1"]),
    (8, "MirroredStrategy", [f"/gpu:{i}" for i in range(8)]),
])
def test_the_strategy_gets_the_gpus_tensorflow_sees(standins, found, strategy, devices):
    distribution, gpus, calls = standins
    gpus[0] = found
    assert distribution.visible_gpus() == [f"/gpu:{i}" for i in range(found)]
    assert distribution.get_strategy() == strategy
    assert calls == [(strategy, (devices,), {})]
    del calls[:]
    assert distribution.get_strategy("one_device", 0) == "OneDeviceStrategy"
    assert calls == [("OneDeviceStrategy", ("/cpu:0",), {})]
    if found > 1:
        del calls[:]
        assert distribution.get_strategy("one_device", 2) == "MirroredStrategy"
        assert calls == [("MirroredStrategy", (["/gpu:0", "/gpu:1"],), {})]


def test_multi_worker_and_tpu_do_not_look_for_gpus(standins, monkeypatch):
    distribution, _, calls = standins

    def asked():
        raise AssertionError("visible_gpus was asked")

    monkeypatch.setattr(distribution, "visible_gpus", asked)
    assert distribution.get_strategy("multi_worker_mirrored") == "MultiWorkerMirroredStrategy"
    assert calls == [("MultiWorkerMirroredStrategy", (), {})]


def test_a_negative_num_gpus_is_refused():
    from official_bert.errors import UserError
    from official_bert.configs import RunConfig

    assert RunConfig().num_gpus is None
    with pytest.raises(UserError, match="--num_gpus and --num_cpu_devices cannot be negative"):
        RunConfig(output_dir="out", num_gpus=-1).validate()
    RunConfig(output_dir="out").validate()
