"""google-research/bert's TPU flags reach the TPU strategy, and the ones that
change nothing say so once.

There is no TPU here, so one process replaces TensorFlow's TPU entry points:
`TPUClusterResolver` records the arguments it is built with, connecting and
initializing do nothing, and `TPUStrategy` hands back a one-device CPU
strategy. With google's TPU flags, run_classifier then trains its 4 steps to
the end as it would after connecting; `TrainingConfig` is wrapped to record the
`steps_per_loop` the trainer gets, and the absl log is collected. The other
cases go as far as the strategy (flags → `cli_flags.run_config` →
`runner.make_strategy`, the calls the run makes), which is where they differ.
"""

import json
import os
import sys

import pytest

from support import processes
from test_run_classifier import TRAIN, TRAIN_LABELS, make_checkpoint, write_sst2

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DRIVER = r"""
import json, logging, sys

import tensorflow as tf

resolvers = []


class FakeResolver:
    def __init__(self, tpu=None, zone=None, project=None, **kwargs):
        resolvers.append({"tpu": tpu, "zone": zone, "project": project, **kwargs})


tf.distribute.cluster_resolver.TPUClusterResolver = FakeResolver
tf.config.experimental_connect_to_cluster = lambda resolver: None
tf.tpu.experimental.initialize_tpu_system = lambda resolver: None
tf.distribute.TPUStrategy = lambda resolver: tf.distribute.OneDeviceStrategy("/cpu:0")

from official_bert.training import trainer

loops, TrainingConfig = [], trainer.TrainingConfig


def recording(**kwargs):
    config = TrainingConfig(**kwargs)
    loops.append(config.steps_per_loop)
    return config


trainer.TrainingConfig = recording
messages = []


class Keep(logging.Handler):
    def emit(self, record):
        messages.append(record.getMessage())


logging.getLogger("absl").addHandler(Keep())

from absl import flags

from official_bert.commands import cli_flags, registry
registry.define_flags(registry.command("classify"))  # the flags the cases parse
from official_bert.tasks import runner

out = {}
for name, argv in json.loads(sys.argv[1]).items():
    del resolvers[:], loops[:], messages[:]
    flags.FLAGS.unparse_flags()  # each case starts from the defaults
    argv = ["run_classifier.py", "--verbosity=0", *argv]  # (unparsing set it to WARNING)
    if name == "tpu_name":  # the whole run
        try:
            registry.run_command("classify", argv)
        except SystemExit as e:
            if e.code:
                raise
    else:  # the first steps of run_classifier.main and runner.run_task: flags, config, strategy
        flags.FLAGS(argv)
        config = cli_flags.run_config(flags.FLAGS)
        runner.make_strategy(config)
        loops.append(min(config.iterations_per_loop, config.log_steps))  # as runner.make_trainer
    out[name] = {"resolvers": list(resolvers), "steps_per_loop": list(loops),
                 "not_used": [m for m in messages if " is not used: " in m]}
print("JSON", json.dumps(out))
"""

TPU_NAME = ["--use_tpu=True", "--tpu_name=my-tpu", "--tpu_zone=us-central1-b",
            "--gcp_project=my-project", "--master=grpc://10.0.0.2:8470", "--num_tpu_cores=8",
            "--iterations_per_loop=2", "--log_steps=4"]
MASTER = ["--use_tpu=True", "--master=grpc://10.0.0.2:8470", "--iterations_per_loop=1000",
          "--log_steps=3"]
NO_TPU = ["--use_tpu=False", "--tpu_name=my-tpu", "--tpu_zone=us-central1-b",
          "--gcp_project=my-project", "--num_tpu_cores=8", "--iterations_per_loop=1",
          "--log_steps=4"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tpu_flags")
    ckpt = make_checkpoint(str(root / "ckpt"))
    data = write_sst2(root / "sst", (TRAIN, TRAIN_LABELS))
    common = ["--task_name=sst-2", f"--data_dir={data}", f"--init_checkpoint={ckpt}",
              "--do_train", "--max_seq_length=16", "--train_batch_size=2",
              "--num_train_epochs=1", "--learning_rate=1e-3"]  # 8 examples: 4 steps
    cases = {name: common + flags + [f"--output_dir={root / name}"]
             for name, flags in (("tpu_name", TPU_NAME), ("master", MASTER), ("no_tpu", NO_TPU))}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=REPO)
    result = processes.run([sys.executable, "-c", DRIVER, json.dumps(cases)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("JSON ")]
    out = json.loads(line[len("JSON "):])
    # The whole run trained to the end: model_checkpoint_path: "ckpt-4"
    out["tpu_name"]["global_step"] = (root / "tpu_name" / "checkpoint").read_text().split(
        '"')[1].split("-")[-1]
    return out


def test_tpu_name_zone_and_project_reach_the_resolver(runs):
    run = runs["tpu_name"]
    # google's `TPUClusterResolver(FLAGS.tpu_name, zone=FLAGS.tpu_zone, project=FLAGS.gcp_project)`
    assert run["resolvers"] == [{"tpu": "my-tpu", "zone": "us-central1-b",
                                 "project": "my-project"}]
    # --iterations_per_loop is the updates per host call (at most --log_steps)
    assert run["steps_per_loop"] and set(run["steps_per_loop"]) == {2}
    assert run["global_step"] == "4"
    # Each flag with no effect is logged once, with why: --num_tpu_cores always,
    # --master because --tpu_name names the TPU (google's resolver overrides the master).
    assert sorted(run["not_used"]) == [
        "--master is not used: --tpu_name names the TPU to connect to",
        "--num_tpu_cores is not used: the TPU strategy uses every core of the TPU it "
        "connects to"]


def test_master_is_the_tpu_address_without_a_tpu_name(runs):
    run = runs["master"]
    assert run["resolvers"] == [{"tpu": "grpc://10.0.0.2:8470", "zone": None, "project": None}]
    assert set(run["steps_per_loop"]) == {3}  # 1000 capped at --log_steps=3
    assert run["not_used"] == []


def test_without_use_tpu_the_tpu_flags_are_logged_as_unused(runs):
    run = runs["no_tpu"]
    assert run["resolvers"] == []  # no TPU is looked for
    assert set(run["steps_per_loop"]) == {1}
    why = ("is not used: --distribution_strategy=one_device (--use_tpu=True or "
           "--distribution_strategy=tpu runs on a TPU)")
    assert sorted(run["not_used"]) == sorted(
        ["--num_tpu_cores is not used: the TPU strategy uses every core of the TPU it "
         "connects to"] + [f"--{name} {why}" for name in ("tpu_name", "tpu_zone", "gcp_project")])


def test_ignored_tpu_flags_known_answers():
    from official_bert.training.distribution import ignored_tpu_flags

    assert ignored_tpu_flags("tpu", {"use_tpu": True, "tpu_name": "t"}) == []
    assert ignored_tpu_flags("tpu", {"tpu": "t", "master": "grpc://m"}) == [
        "--master is not used: --tpu names the TPU to connect to"]
    assert ignored_tpu_flags("mirrored", {"master": "grpc://m", "tpu_zone": ""}) == [
        "--master is not used: --distribution_strategy=mirrored (--use_tpu=True or "
        "--distribution_strategy=tpu runs on a TPU)"]  # an empty --tpu_zone asks for nothing
