"""THE run flow: what every task does the same way.

    run_task(task_class, config, run_config)
      1. check the flags (`RunConfig.validate`, the family's row, then
         `Task.check_flags` at the run's length) and that --output_dir and
         --export_dir can be written and --export_version is free; the run's
         --max_seq_length is decided here, once (`run_directory.length`: the
         flag, the run's record, --init_checkpoint's record)
      2. resolve checkpoint / config / vocabulary and check they fit each other
         (`model_files`); build the task, complete, from its configs, these
         files and the run directory
      3. read and validate every input file (`Task.read_inputs`); with
         --teacher, load the teacher and check it fits (`tasks.teacher`)
      4. refuse an output that is one of the inputs (`Task.run_files`: the
         task's inputs, training files and result files; `base.InputRecord`:
         its record files and identity, for steps 4 and 5)
      5. refuse --output_dir if it holds another run (`run_directory`'s record,
         run.json: another task, labels, model, vocabulary, casing or length;
         other training settings without --allow_changed_settings) or a
         checkpoint no run wrote; then lock it, remove what killed runs left,
         check again and only then write the record
      6. seed, dtype policy, distribution strategy, `Trainer` (which resumes
         from the latest checkpoint in --output_dir, or initializes the encoder
         and any matching head from --init_checkpoint: `Task.initialize`); with
         --teacher, it trains `teacher.Distillation`; then run.json records
         this session
      7. evaluate the steps a killed run was to evaluate and did not; train
         (with --eval_every_steps: evaluations while training, the best model
         kept, early stopping: `evaluation.BestCheckpoint`; SIGINT / SIGTERM
         save and exit 130 / 75) → evaluate (eval_results.txt) → predict → export

A task family is a row (`tasks.families.TaskSpec`) and a `base.Task`
subclass that fills in only what is its own: how it reads its files, its
model and loss (the `Trainer`'s protocol), its training data, its metrics,
its prediction files and its export. A new task is one such module, which
registers its row (docs/contributing.md shows one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import time

import keras
from absl import logging

from official_bert import inputs, io, model_files
from official_bert.errors import RunDirectoryError, UserError
from official_bert.model_files import SPECIAL_TOKENS
from official_bert.progress import duration
from official_bert.run_directory import TRAINING_SETTINGS, UNRECORDED, VOCAB, RunDirectory
from official_bert.run_directory.checkpoints import model_mismatch, unrecorded_run_checkpoints
from official_bert.run_directory.length import resolve_max_seq_length
from official_bert.serving import edge
from official_bert.serving.base import with_weights_in
from official_bert.serving.versions import check_export_version_free
from official_bert.tasks.evaluation import BestCheckpoint, final_evaluation
from official_bert.tasks.teacher import Distillation, Teacher
from official_bert.training import distribution, input_pipeline, optimization, precision
from official_bert.training.budget import TimeBudget
from official_bert.training.trainer import Trainer, training_config


def run_task(task_class, config, run_config) -> dict:
    """Carries out a task: `task_class` (a `base.Task` subclass) built from its
    own config and `run_config` (see the module docstring). Returns the eval
    results (empty without --do_eval), and the predictions' scores of a task
    that scores them (SQuAD's official metric of --predict_file)."""
    spec = task_class.spec
    run_directory = _run_directory(run_config)
    run_config = _check_flags(task_class, config, run_config, run_directory)     # 1
    _check_outputs(run_config)
    # Before any TensorFlow op (reading the inputs below runs some): logical devices,
    # and the collective ops of MultiWorkerMirroredStrategy, cannot be set up once
    # TensorFlow's runtime has started.
    strategy = make_strategy(run_config)
    files = task_class.run_files(config, run_config)
    resolved = model_files.resolve_model_files(                                   # 2
        run_config, SPECIAL_TOKENS if spec.required_tokens is None else spec.required_tokens,
        spec.vocab_required, files.vocab, run_config.output_dir)
    task = task_class(config, run_config, model_files=resolved, run_directory=run_directory)
    found = task.read_inputs()                                                    # 3
    teacher = _teacher(task, found)  # (a tagger's labels come from its training file)
    _refuse_outputs_over_inputs(task, files, found)                               # 4

    first = _check_run_directory(task, files, found, teacher)                     # 5
    _check_unrecorded_model(task)
    # The chief owns the run directory (its lock and files); the other workers of a
    # multi-worker run write their checkpoints to scratch directories (Trainer).
    chief = distribution.is_chief(strategy)
    with run_directory.lock() if chief else contextlib.nullcontext():
        if chief:
            run_directory.remove_killed_leftovers()
        # Again: no other run can change it now (the data's fingerprints read once).
        session = _check_run_directory(task, files, found, teacher, first.settings)
        if chief:
            run_directory.write_record(session.files)
        return _train_evaluate_predict_export(task, teacher, strategy, session)   # 6, 7


def _run_directory(run_config) -> RunDirectory:
    """The run's --output_dir: where each of its files goes. One object for the
    whole run (the flow, the `Trainer` and the task share it: it holds the
    session's record until the first checkpoint)."""
    run_config.validate()  # (--output_dir is required)
    return RunDirectory(run_config.output_dir)


def _train_evaluate_predict_export(task, teacher, strategy, session: "Session") -> dict:
    config = task.run_config
    _check_batch_size(config, strategy.num_replicas_in_sync)
    keras.utils.set_random_seed(config.seed)
    precision.use_policy(config.dtype_policy)
    task.prepare()
    distilling = Distillation(task, teacher) if teacher is not None else None
    trainer, data = _start_trainer(task, distilling, strategy)
    # Training alone writes the record (evaluating, predicting or exporting a run
    # never needs to: its run.json may be read-only); once the resume read its
    # checkpoint, and into run.json with the first save.
    if trainer.is_chief and config.do_train:
        task.run_directory.start_session(
            session.identity, session.settings, session.changes,
            os.path.basename(trainer.resumed_from) if trainer.resumed_from else None,
            session.adopted, _started_from(task))
    best = BestCheckpoint(task, trainer) if config.eval_every_steps else None
    if config.do_train:
        _train(task, trainer, data, best, distilling)
    # The step whose weights the model now holds: the best one when it was kept.
    model_step = best.restore() if best is not None else None
    if model_step is None:
        model_step = int(trainer.global_step.numpy())

    results = {}
    if config.do_eval:
        logging.info("Evaluating step %d", model_step)
        results = final_evaluation(task, trainer, best)
    if config.do_predict:
        logging.info("Predicting with step %d", model_step)
        results = {**results, **(task.predict(trainer) or {})}
    if config.export_dir:
        # Tracing the signatures and writing the SavedModel: a minute or so, silent.
        logging.info("Exporting step %d to %s (this can take a minute)", model_step,
                     config.export_dir)
        start = time.time()
        path = task.export(with_weights_in(trainer.model, config.serving_dtype),
                           config.export_dir, config.export_version)
        logging.info("Exported step %d to %s in %.0f s", model_step, path, time.time() - start)
        if config.quantize:
            edge.check_int8(path, task.evaluation_arrays())
    return results


def _started_from(task) -> dict | None:
    """What the run starts from, for its record: --init_checkpoint as given, the
    checkpoint read from it and its step (a live run's latest, when it was one)."""
    ckpt = task.model_files.checkpoint if task.model_files else None
    if ckpt is None or not task.run_config.init_checkpoint:
        return None
    return {"path": task.run_config.init_checkpoint, "step": ckpt.step,
            "checkpoint": os.path.basename(ckpt.prefix) if ckpt.prefix else None}


# === The steps ===


def _check_flags(task_class, task_config, config, run_directory):
    """Step 1: the shared flags, what the run is asked to do, the family's
    flags at the run's length. Returns the run's config, resolved: its
    --max_seq_length decided (`run_directory.length`), and --jit_compile off
    for a model XLA does badly (the row's `xla_off`)."""
    spec = task_class.spec
    model_files.check_model_source(config)
    modes = [m for m in ("train", "eval", "predict") if getattr(config, f"do_{m}")]
    if not modes and not config.export_dir:
        raise UserError("nothing to do: set --do_train, --do_eval, --do_predict or --export_dir")
    _check_distill_text(spec, config)
    length = resolve_max_seq_length(
        run_directory, config, lambda: task_class.run_files(task_config, config).training)
    why = config.jit_compile and spec.xla_off and spec.xla_off(task_config)
    if why:
        logging.warning("%s", why)
    config = dataclasses.replace(config, max_seq_length=length,
                                 jit_compile=config.jit_compile and not why)
    task_class.check_flags(task_config, config)
    if config.eval_every_steps and not getattr(config, spec.evaluation_flag):
        raise UserError(f"--eval_every_steps needs --{spec.evaluation_flag} (the data "
                        "to evaluate on)")
    if config.eval_every_steps and not config.do_train:
        raise UserError("--eval_every_steps evaluates while training: add --do_train")
    return config


def _check_distill_text(spec, config) -> None:
    """--distill_text: with a teacher, on a task that reads it, an existing file."""
    if config.distill_text and not (config.teacher and spec.reads_distill_text):
        raise UserError("--distill_text is text a teacher labels for the student: add "
                        "--teacher" if spec.reads_distill_text else
                        f"--distill_text: the {spec.name} task does not read unlabelled "
                        "text (classification and tagging do); leave it out")
    if config.distill_text and not io.isfile(config.distill_text):
        raise UserError(f"--distill_text: {config.distill_text} is not a file: give a file of "
                        "the training file's format (its text columns; labels are not needed)")


def _teacher(task, found) -> Teacher | None:
    """Step 3's teacher (--teacher, task or general distillation): None without
    one. `found`: what the inputs say (the labels it must have)."""
    config = task.run_config
    if not config.teacher:
        return None
    if not task.spec.distils:
        raise UserError(f"--teacher: the {task.spec.name} task does not learn from a teacher "
                        "(its features come from a frozen encoder); fine-tune with "
                        "without --feature_based to distil")
    if not config.do_train:
        raise UserError("--teacher is what a run learns from while it trains: add --do_train, "
                        "or leave it out to evaluate, predict or export")
    return Teacher.load(config.teacher, task, found.identity)


def _refuse_outputs_over_inputs(task, run_files, found) -> None:
    """Step 4: no output (the run directory, its files, the export) may be one
    of the inputs (the task's and the model files)."""
    config = task.run_config
    outputs = {"--output_dir": config.output_dir, "--export_dir": config.export_dir,
               **task.run_directory.overwritten_files([*found.record, *run_files.results])}
    model_files.refuse_outputs_over_inputs(config, task.model_files, run_files.inputs,
                                           outputs, own_run_dir=config.output_dir)
    if config.export_dir and io.same_path(config.export_dir, config.output_dir):
        raise UserError("--export_dir must not be --output_dir: give the SavedModels a "
                        "directory of their own")


def _check_outputs(config) -> None:
    """Step 1's outputs: --output_dir and --export_dir can be written, and an
    --export_version is free, before any work (not found after training)."""
    io.check_writable(config.output_dir, "--output_dir")
    if config.export_dir:
        io.check_writable(config.export_dir, "--export_dir")
        check_export_version_free(config.export_dir, config.export_version)


@dataclasses.dataclass(frozen=True)
class Session:
    """What step 5 found and the chief then writes: the record's files (name →
    text, at once), what the run is (run.json's identity), its training settings
    (None when it does not train), the changes --allow_changed_settings let
    through ((name, old, new)) and the checkpoints adopted from a run made before
    records were kept."""

    files: dict
    identity: dict
    settings: dict | None
    changes: list
    adopted: list


def _check_run_directory(task, run_files, found, teacher,
                         settings: dict | None = None) -> Session:
    """Step 5's checks, which write nothing: the record's files
    (`RunDirectory.check_record`), what the run is and, when training, its
    settings (`RunDirectory.check_run`; `settings`: those an earlier check
    found); a directory holding a checkpoint that no run wrote is refused.
    Returns the `Session` the chief then writes (the record's files at once;
    run.json once the `Trainer` has read the checkpoint it resumes from)."""
    config, files, run_directory = task.run_config, task.model_files, task.run_directory
    adopted = unrecorded_run_checkpoints(run_directory) if run_directory.is_unrecorded() else []
    record_files = run_directory.record(files.config.to_json_string(), files.vocab_file,
                                        found.record)
    run_directory.check_record(record_files, {VOCAB: f"--vocab_file {files.vocab_file}"})
    identity = _identity(task, found.identity, record_files.get(VOCAB))
    if settings is None and config.do_train:
        settings = _training_settings(task, run_files.training, teacher)
    if not config.do_train:  # evaluating or exporting at another length is not another run
        identity.pop("max_seq_length")
    changes = run_directory.check_run(identity, settings, config.allow_changed_settings)
    _refuse_loss_scaling_change(run_directory, changes)
    _refuse_teacher_change(run_directory, changes)
    return Session(files=record_files, identity=identity, settings=settings, changes=changes,
                   adopted=adopted)


def _refuse_teacher_change(run_directory, changes: list) -> None:
    """A resume with another teacher (or none, or one where there was none), even
    allowed: the student would learn two teachers' outputs in one run."""
    for key, old, new in changes:
        if key == "teacher":
            raise RunDirectoryError(
                f"--output_dir {run_directory.path} was trained with --teacher={old}, not "
                f"{new}: a run learns from one teacher; nothing was changed. Give the same "
                "--teacher, or start another --output_dir (this run's checkpoint can be its "
                "--init_checkpoint)")


def _refuse_loss_scaling_change(run_directory, changes: list) -> None:
    """A --dtype change into or out of float16, even allowed: float16 wraps the
    optimizer in loss scaling, whose state the checkpoint holds (or lacks), so
    the resume could not restore it."""
    for key, old, new in changes:
        if key == "dtype" and (old == "float16") != (new == "float16"):
            raise RunDirectoryError(
                f"--output_dir {run_directory.path} was trained with --dtype={old}, not {new}: "
                "float16's loss scaling is part of the optimizer its checkpoints hold, so a run "
                "cannot resume into or out of float16; nothing was changed. Keep "
                f"--dtype={old}, or start another --output_dir from this run's checkpoint "
                "(--init_checkpoint)")


def _identity(task, task_identity: dict, vocab_text: str | None) -> dict:
    """What the run is (the record's identity): the task and what it adds
    (`InputRecord.identity`), the model's config, the vocabulary, the casing
    and --max_seq_length; for a student made now from --init_checkpoint, the
    teacher's layers it kept (--student_layers: 1,3,5 is another model than
    0,2,4 of the same config; a resume from the run's own checkpoint does not
    say, and is not compared)."""
    files = task.model_files
    identity = {"task": task.spec.name, **task_identity,
                "bert_config": json.loads(files.config.to_json_string()),
                "vocab_sha256": (hashlib.sha256(vocab_text.encode("utf-8")).hexdigest()
                                 if vocab_text is not None else None),
                "do_lower_case": files.do_lower_case,
                "max_seq_length": task.run_config.max_seq_length}
    if files.student_layers is not None:
        identity["student_layers"] = list(files.student_layers)
    return identity


def _training_settings(task, training_files, teacher) -> dict:
    """The training settings of the record (`run_directory.TRAINING_SETTINGS`)
    and the training data: each file's absolute path, size and content
    (`io.content_fingerprint`: a same-size edit is a change too)."""
    config = task.run_config
    settings = {name: getattr(config, name, None) for name in TRAINING_SETTINGS}
    if teacher is not None:  # the checkpoint read, not the path given (a run trains on)
        settings["teacher"] = teacher.path
    else:
        settings.update(distill_alpha=None, distill_temperature=None)  # (they do nothing)
    # (A stream spooled by the input policy is known by the name it was given.)
    paths = {_record_name(p): p for p in training_files if p and io.isfile(p)}
    settings["training_data"] = {name: io.size(p) for name, p in paths.items()}
    started = time.monotonic()
    settings["training_data_content"] = {name: io.content_fingerprint(p)
                                         for name, p in paths.items()}
    if time.monotonic() - started > 2:  # (many or large shards: say where the time went)
        logging.info("Fingerprinted the training data (%d files) in %.0f s", len(paths),
                     time.monotonic() - started)
    return settings


def _record_name(path: str) -> str:
    """How the record names a training file: the path the user gave (a
    spool's stream: `inputs.given_path`), absolute when local."""
    given = inputs.given_path(path)
    return os.path.abspath(given) if io.is_local(given) and given != "-" else given


def _check_unrecorded_model(task) -> None:
    """Step 5 for a trained directory without a record (made before records were
    kept, or its record deleted): its latest checkpoint must restore into the
    model this task builds, or it is another task's run (another head, other
    labels), refused before anything is written (the `Trainer` would fail only
    after the task's files were written over the other run's)."""
    run_directory = task.run_directory
    latest = run_directory.latest_checkpoint()
    if not (latest and run_directory.is_unrecorded()):
        return
    mismatch = model_mismatch(latest, task.build_model())
    if mismatch:
        raise RunDirectoryError(
            f"--output_dir {run_directory.path} {UNRECORDED}, and its checkpoint "
            f"{os.path.basename(latest)} is not this {task.spec.name} task's "
            f"model ({mismatch}): it is another task's or another model's run; nothing was "
            "changed. Use another --output_dir")


def _check_batch_size(config, replicas: int) -> None:
    if not config.do_train:
        return
    if config.train_batch_size % (replicas * config.gradient_accumulation_steps):
        raise UserError(f"--train_batch_size={config.train_batch_size} is not divisible by the "
                        f"{replicas} replica(s) x --gradient_accumulation_steps="
                        f"{config.gradient_accumulation_steps}")
    logging.info("%d replica(s), batch %d (%d per replica x %d accumulation steps)",
                 replicas, config.train_batch_size,
                 config.train_batch_size // replicas // config.gradient_accumulation_steps,
                 config.gradient_accumulation_steps)


def _start_trainer(task, distilling, strategy):
    """Step 6: the `Trainer` (resumed, or initialized from --init_checkpoint), of
    the task or, with a teacher, of its `Distillation`; refuses to evaluate,
    predict or export a head that is still random. Returns it and the training
    data (None when not training)."""
    config = task.run_config
    num_train_steps = num_warmup_steps = 0
    data = task.train_dataset() if config.do_train else None
    if config.do_train:
        num_train_steps = train_steps(task.spec, config, data.examples)
        num_warmup_steps = warmup_steps(config, num_train_steps)
        logging.info("train: %sbatch %d, %d steps (%d warm-up)",
                     "" if config.num_train_steps else f"{data.examples} examples, ",
                     config.train_batch_size, num_train_steps, num_warmup_steps)
    initialize = Initialization(task)
    trainer = make_trainer(task, strategy, num_train_steps, num_warmup_steps, config.do_train,
                           distilling=distilling, init_fn=initialize)
    _say_what_was_restored(config, trainer)
    precision.log_precision(trainer.model, config.dtype)
    usable = task.spec.head_always_usable or bool(initialize.report)
    if not config.do_train and trainer.resumed_from is None and not usable:
        source = (f"--init_checkpoint {config.init_checkpoint} " + (
            initialize.report.what_the_checkpoint_holds() if initialize.report is not None else
            f"holds no trained {type(task).__name__} head for this task")
            if config.init_checkpoint else "There is no --init_checkpoint")
        raise UserError(
            f"{source}, and --output_dir holds no checkpoint: evaluating or exporting "
            "now would use a random head. Add --do_train, or point --init_checkpoint / "
            "--output_dir at a fine-tuned run")
    return trainer, data


class Initialization:
    """The `Trainer`'s `init_fn`: --init_checkpoint into the model
    (`Task.initialize`), keeping what the task's head got (`report`: None when
    nothing was read, or no head looked for)."""

    def __init__(self, task):
        self.task, self.report = task, None
        self.checkpoint = task.model_files.checkpoint if task.model_files else None

    def __call__(self, model) -> None:
        if self.checkpoint is not None:
            self.report = self.task.initialize(model, self.checkpoint)


def train_steps(spec, config, examples: int | None) -> int:
    """Optimizer updates of the run: --num_train_steps when given, else
    google-research/bert's int(examples / batch * epochs) (rounded up, for a
    family that counts so: `spec.round_steps_up`)."""
    if config.num_train_steps:
        return config.num_train_steps
    if examples is None:
        raise UserError(f"--num_train_steps is required: the {spec.name} task does not count "
                        "its training examples")
    if spec.round_steps_up:
        return max(1, math.ceil(examples * config.num_train_epochs / config.train_batch_size))
    steps = int(examples / config.train_batch_size * config.num_train_epochs)
    if steps <= 0:
        raise UserError(f"{examples} training examples make no step of --train_batch_size="
                        f"{config.train_batch_size} over --num_train_epochs="
                        f"{config.num_train_epochs}; lower the batch size or add data")
    return steps


def warmup_steps(config, num_train_steps: int) -> int:
    """--num_warmup_steps, or --warmup_proportion of the run's steps."""
    if config.num_warmup_steps is not None:
        return config.num_warmup_steps
    return int(num_train_steps * config.warmup_proportion)


def _say_what_was_restored(config, trainer) -> None:
    """A run that resumes from a checkpoint in --output_dir (the `Trainer`
    logs `Resumed from ...` when it trains, `Using ...` when not) restores
    the whole model from it, task head included, and reads nothing of
    --init_checkpoint (no `Task head: ...` lines): says so; a warning when
    --init_checkpoint names another of --output_dir's checkpoints, which is
    not the one used."""
    resumed, init = trainer.resumed_from, config.init_checkpoint
    if resumed is None or not init:
        return
    if io.same_path(init, resumed) or io.same_path(init, config.output_dir):
        logging.info("The whole model, task head included, comes from %s (--output_dir's "
                     "latest checkpoint)", resumed)
    elif io.same_path(os.path.dirname(os.fspath(init).rstrip("/")), config.output_dir):
        logging.warning("--init_checkpoint %s is not used: a run resumes from --output_dir's "
                        "latest checkpoint, %s (the whole model, task head included); to use "
                        "%s, pass it with another --output_dir", init, resumed,
                        os.path.basename(init))
    else:
        logging.info("The whole model, task head included, comes from %s (--output_dir's "
                     "latest checkpoint); --init_checkpoint %s is not read again", resumed,
                     init)


def _train(task, trainer, data, best: BestCheckpoint | None, distilling) -> None:
    """Step 7's training on `data` (a `base.TrainingSet`; with --teacher, once
    `distilling` labelled it), evaluating on the way with --eval_every_steps,
    after the evaluations a killed run left undone
    (`BestCheckpoint.evaluate_missed`)."""
    config = task.run_config
    start = time.time()
    if best is not None:
        best.evaluate_missed(trainer.config.num_train_steps)
    else:  # no schedule from here on: no step of it is missed
        task.run_directory.eval_schedule_start(0, int(trainer.global_step.numpy()),
                                               write=trainer.is_chief)
    if best is not None and best.state["stopped_at"] is not None:
        logging.info("This run stopped early at step %d (no better %s in %d evaluations): "
                     "nothing more to train", best.state["stopped_at"], best.metric,
                     config.early_stopping_patience)
        logging.info("Training took %s", duration(time.time() - start))
        return
    if distilling is not None:  # the teacher's pass over the training data
        data = distilling.labelled(data)
    dataset = training_batches(task.spec, config, data)
    prepared = time.time()
    trainer.train(dataset, config.train_batch_size, evaluate_every=config.eval_every_steps,
                  on_evaluate=best.evaluate if best else None)
    # The steps' time is what the progress lines count as elapsed; the data's before.
    logging.info("Training took %s: %s preparing the training data, %s of steps",
                 duration(time.time() - start), duration(prepared - start),
                 duration(time.time() - prepared))


def training_batches(spec, config, data):
    """The `dataset_fn` of a `base.TrainingSet`: the task's own pipeline, or
    its in-memory features shuffled, repeated and batched (cut to each batch's
    longest sequence with --dynamic_padding, where the family allows:
    `spec.trims_padding`; split for gradient accumulation)."""
    if data.dataset_fn is not None:
        return data.dataset_fn
    return input_pipeline.numpy_dataset(
        data.features, config.train_batch_size, True, config.seed,
        config.padding_multiple() if spec.trims_padding else None,
        micro_batches=config.gradient_accumulation_steps)


# === The strategy, the trainer, preemption ===


def make_strategy(config):
    """The `tf.distribute` strategy of a `RunConfig`'s distribution flags."""
    return distribution.get_strategy(config.distribution_strategy, config.num_gpus, config.tpu,
                                     num_cpu_devices=config.num_cpu_devices,
                                     tpu_zone=config.tpu_zone, gcp_project=config.gcp_project)


def make_trainer(task, strategy, num_train_steps: int, num_warmup_steps: int, train: bool,
                 *, distilling=None, init_fn=None):
    """The `Trainer` of a run, with BERT's optimizer recipe (when `train`): of
    the task, or of its `teacher.Distillation` (`distilling`). `init_fn`:
    --init_checkpoint's (default: `Initialization(task)`)."""
    config = task.run_config
    trainer_config = training_config(config, max(num_train_steps, 1), config.jit_compile)
    optimizer_fn = budget = None
    if train and config.max_train_minutes:
        budget = TimeBudget.of_run(strategy, config.max_train_minutes, num_train_steps,
                                   num_warmup_steps)
    if train:
        optimizer_fn = lambda: optimization.create_optimizer(  # noqa: E731
            optimization.OptimizerConfig.of_run(config, num_train_steps, num_warmup_steps,
                                                time_budget=budget))
    return Trainer(distilling or task, strategy, trainer_config, optimizer_fn=optimizer_fn,
                   init_fn=init_fn or Initialization(task), loss_scale=config.dtype == "float16",
                   time_budget=budget, run_directory=task.run_directory)
