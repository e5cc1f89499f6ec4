"""A `tf.distribute` strategy from a name, as the runners' flags give it."""

from __future__ import annotations

import os

import tensorflow as tf
from absl import logging

from official_bert.configs import STRATEGIES
from official_bert.errors import UserError


def split_cpu(num_devices: int) -> None:
    """Splits the CPU into `num_devices` logical devices (for mirrored tests).

    Must run before TensorFlow initializes its devices (before any op runs).
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current and len(current) == num_devices:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices
        )
    except RuntimeError as e:
        raise UserError(
            f"--num_cpu_devices={num_devices}: cannot split the CPU after TensorFlow "
            f"has started ({e})"
        ) from None


def visible_gpus() -> list[str]:
    """The names of the GPUs TensorFlow sees ("/gpu:0", ...), from the physical
    devices, so asking does not start TensorFlow's runtime (after which the CPU
    could not be split, nor collective ops configured for multi-worker runs)."""
    return [f"/gpu:{i}" for i in range(len(tf.config.list_physical_devices("GPU")))]


def check_gpus(num_gpus: int | None) -> None:
    """`UserError` when `--num_gpus` asks for more GPUs than TensorFlow sees.

    Never a silent fall back to the CPU (a run meant for 8 GPUs would crawl
    on one CPU for days): `--num_gpus=0` is how to ask for the CPU.
    """
    if num_gpus is None or num_gpus <= 0:
        return
    found = len(visible_gpus())
    if found < num_gpus:
        raise UserError(
            f"--num_gpus={num_gpus}, but TensorFlow sees {found} GPU(s) on this machine"
            f"{' (CUDA_VISIBLE_DEVICES is set)' if 'CUDA_VISIBLE_DEVICES' in os.environ else ''}"
            f"; pass --num_gpus={found} ({'the CPU' if not found else 'all of them'}), or check "
            "the GPU driver and CUDA installation")


def _devices(name: str, num_gpus: int | None, num_cpu_devices: int) -> tuple[str, list[str]]:
    """(strategy name, GPU names) of "one_device" or "mirrored": the first
    `num_gpus` GPUs, or when it is None every GPU TensorFlow sees (none when
    --num_cpu_devices asks for the CPU). More than one GPU makes "one_device"
    "mirrored". Logs the devices and why, in one line."""
    if num_gpus is not None:
        gpus = visible_gpus()[:num_gpus] if num_gpus > 0 else []
        why = f"--num_gpus={num_gpus}"
    elif num_cpu_devices:
        gpus, why = [], f"--num_cpu_devices={num_cpu_devices} asks for the CPU"
    else:
        gpus = visible_gpus()
        why = "TensorFlow sees no GPU" if not gpus else (
            f"TensorFlow sees {len(gpus)} GPU(s) and --num_gpus is not given; "
            f"{'--num_gpus=1 uses one, ' if len(gpus) > 1 else ''}--num_gpus=0 the CPU")
    if len(gpus) > 1:
        name = "mirrored"
    if name == "mirrored":
        where = ("MirroredStrategy over " + ", ".join(gpus) if gpus
                 else "MirroredStrategy over the logical CPU devices")
    else:
        where = f"OneDeviceStrategy on {gpus[0] if gpus else '/cpu:0'}"
    logging.info("Devices: %s (%s)", where, why)
    return name, gpus


def get_strategy(
    name: str = "one_device",
    num_gpus: int | None = None,
    tpu: str | None = None,
    num_cpu_devices: int = 0,
    tpu_zone: str | None = None,
    gcp_project: str | None = None,
) -> tf.distribute.Strategy:
    """Returns the strategy called `name`.

    Args:
        name: one of "one_device", "mirrored", "multi_worker_mirrored", "tpu".
        num_gpus: GPUs to use (0 = CPU). None: what TensorFlow sees (no GPU:
            the CPU; one: that GPU; several: all of them), unless
            `num_cpu_devices` asks for the CPU. More than one GPU is
            `mirrored` over them, also for "one_device"; the devices are
            logged. `mirrored` with 0 GPUs mirrors over the logical CPU
            devices.
        tpu: TPU address or name for "tpu" ("" or "local" for a TPU VM).
        num_cpu_devices: split the CPU into this many logical devices first
            (to test `mirrored` on a CPU-only machine).
        tpu_zone, gcp_project: where the TPU is (google-research/bert's
            `--tpu_zone`, `--gcp_project`; default: the VM's own).
    """
    if name not in STRATEGIES:
        raise UserError(
            f"--distribution_strategy {name!r} is unknown; use one of "
            f"{', '.join(STRATEGIES)}"
        )
    if num_cpu_devices:
        split_cpu(num_cpu_devices)
    check_gpus(num_gpus)
    if name in ("one_device", "mirrored"):
        name, gpus = _devices(name, num_gpus, num_cpu_devices)
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else "/cpu:0")
    if name == "mirrored":
        if gpus:
            return tf.distribute.MirroredStrategy(gpus)
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        # NCCL needs GPUs; on CPU reduce through one device.
        return tf.distribute.MirroredStrategy(
            devices, cross_device_ops=tf.distribute.ReductionToOneDevice()
        )
    if name == "multi_worker_mirrored":
        # Cluster membership comes from the TF_CONFIG environment variable.
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu="" if tpu in (None, "local") else tpu, zone=tpu_zone, project=gcp_project
    )
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    logging.info("TPU devices: %s", tf.config.list_logical_devices("TPU"))
    return tf.distribute.TPUStrategy(resolver)


# The TPU flags of google-research/bert's run_classifier.py, run_squad.py and
# run_pretraining.py (plus this project's --tpu): the runners accept them so
# google's commands run unchanged, and map them onto `get_strategy`'s arguments.
GOOGLE_TPU_FLAGS = ("use_tpu", "tpu", "tpu_name", "tpu_zone", "gcp_project", "master",
                    "num_tpu_cores")


def ignored_tpu_flags(strategy: str, given: dict) -> list[str]:
    """One line per TPU flag that was given but has no effect here, saying why
    (the runners log each once, so a TPU user's command runs and says what it
    did not use).

    Args:
        strategy: the --distribution_strategy the run uses (--use_tpu makes it "tpu").
        given: flag name → value, for the `GOOGLE_TPU_FLAGS` given on the command line.
    """
    lines = []
    if "num_tpu_cores" in given:
        lines.append("--num_tpu_cores is not used: the TPU strategy uses every core of the "
                     "TPU it connects to")
    located = [name for name in ("tpu", "tpu_name", "tpu_zone", "gcp_project", "master")
               if given.get(name)]
    if strategy != "tpu":
        lines += [f"--{name} is not used: --distribution_strategy={strategy} (--use_tpu=True or "
                  "--distribution_strategy=tpu runs on a TPU)" for name in located]
    elif given.get("master") and (given.get("tpu") or given.get("tpu_name")):
        # google's scripts: the TPUClusterResolver of --tpu_name overrides --master.
        lines.append(f"--master is not used: --{'tpu' if given.get('tpu') else 'tpu_name'} "
                     "names the TPU to connect to")
    return lines


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes checkpoints and summaries."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    # Without an explicit chief, worker 0 is the chief.
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief
