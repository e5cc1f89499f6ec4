"""A run's --output_dir: every file in it, by name, in one place.

    run.json               the run's record of itself (below)
    bert_config.json       the model's config            } the record's files: written
    vocab.txt              its vocabulary                } before training; once the
    classifier_config.json classification: task, labels, } directory holds a trained
                           casing, length, windows       } checkpoint a rerun must
    label_list.txt         NER: the tag list             } give the same text (a rerun
    tokenizer_config.json  pre-training: the data's casing } with other model files is
                                                           } refused)
    checkpoint, ckpt-<N>.* the training checkpoints (TensorFlow's index file and prefix)
    train/  eval/          TensorBoard summaries of training and of each evaluation
    eval_results.txt       the final evaluation (google's `key = value` lines)
    eval_history.jsonl     each evaluation while training (--eval_every_steps)
    best/                  the best model so far: best.json (its step and metrics) and
                           best-<step>.* (--keep_best_metric)
    features/              classification's cached TFRecords of converted examples
    feature_cache/         feature-based NER's cached encoder features
    .official_bert.lock    one run at a time (`run_lock.RunLock`)

besides each task's own prediction files (`Task.result_files`). Code that
writes, reads or compares any of these asks `RunDirectory`; nothing else
spells their names. This module sits below tasks/, serving/ and training/ and
imports only `io`, `errors` and the run lock.

`run.json`, the run's record of itself (JSON, written atomically):

    identity       what the run is: the task (and its task name, labels, ...),
                   the model's config, the vocabulary's sha256, the casing,
                   --max_seq_length. A rerun that would change one is refused
                   (`check_run`): the checkpoints belong to that run.
    settings       how it trains: learning rate, steps or epochs, warm-up, batch
                   size, optimizer, accumulation, the training data (paths and
                   sizes). A training rerun with other values is refused unless
                   --allow_changed_settings; then what changed is logged and
                   appended to `history`.
    checkpoints    the ckpt-<N> this directory's runs wrote: the only ones
                   `keep_checkpoint_max` ever deletes (`note_checkpoint`).
    eval_schedule  --eval_every_steps and the step it applies from, so that a
                   resume evaluates the steps a killed run left unevaluated.
    history        each session that changed the settings, or started the record.

A directory that holds a checkpoint but no record is either a run made before
records were kept (its record starts now) or a checkpoint no run wrote (a
pre-trained model): that is no run directory, and `refuse_foreign` says so.
"""

from __future__ import annotations

import datetime
import json
import re

from absl import logging

from official_bert import io, run_lock
from official_bert.errors import RunDirectoryError

BERT_CONFIG = "bert_config.json"
VOCAB = "vocab.txt"
CLASSIFIER_CONFIG = "classifier_config.json"
LABEL_LIST = "label_list.txt"
TOKENIZER_CONFIG = "tokenizer_config.json"
CHECKPOINT_INDEX = "checkpoint"  # tf.train's state file: the directory holds a checkpoint
CHECKPOINT_NAME = "ckpt"  # the checkpoints' prefix: ckpt-<step>.index, ...
TRAIN_SUMMARIES = "train"
EVAL_SUMMARIES = "eval"
EVAL_RESULTS = "eval_results.txt"
EVAL_HISTORY = "eval_history.jsonl"
BEST = "best"
BEST_STATE = "best.json"
BEST_CHECKPOINT = "best-"  # best/best-<step>.*: the kept model's checkpoint files
FEATURES = "features"
FEATURE_CACHE = "feature_cache"
RUN_RECORD = "run.json"
RECORD_FORMAT = 1

# The training settings a run records (`RunConfig`'s fields, named by their flags);
# the record's settings add "training_data" (path → size of each training file).
TRAINING_SETTINGS = ("learning_rate", "num_train_epochs", "num_train_steps",
                     "warmup_proportion", "num_warmup_steps", "train_batch_size", "optimizer",
                     "gradient_accumulation_steps", "max_train_examples")
ALLOW_CHANGED_SETTINGS = "--allow_changed_settings"

# How messages name a record key that is not a flag (a flag is --<key>).
_KEY_NAMES = {"task": "the task", "labels": "the labels",
              "bert_config": "the model (bert_config.json)",
              "vocab_sha256": "the vocabulary (vocab.txt)", "training_data": "the training data",
              "windows": "the --long_document windows"}

# TensorFlow stages checkpoint N in `ckpt-N_temp/` and renames its files out when
# complete: one left behind is a killed save's.
_STAGED_CHECKPOINT = re.compile(rf"^{CHECKPOINT_NAME}-\d+_temp$")

# Files rewritten only when their text is the same (the record's model files),
# so they are never an output that could replace an input.
_MODEL_FILES = (BERT_CONFIG, VOCAB)


def has_checkpoint(directory: str | None) -> bool:
    """Whether `directory` holds a training checkpoint (its `checkpoint` index file)."""
    return bool(directory) and io.exists(io.join(directory, CHECKPOINT_INDEX))


class RunDirectory:
    """One run's --output_dir (module docstring): its paths, its lock, its record.

    The record is what a run was made with, as file name → text: the model's
    config and vocabulary and the task's own files (`Task.record_files`). A
    directory that holds a trained checkpoint binds a rerun to the same record
    (`check_record`); only then is it written (`write_record`).

    Example:
    >>> run = RunDirectory("/tmp/run")
    >>> run.eval_results, run.best_checkpoint(20)
    ('/tmp/run/eval_results.txt', '/tmp/run/best/best-20')
    """

    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str:
        """The path of `name` in the directory (a task's own prediction file)."""
        return io.join(self.path, name)

    # --- the files, by what they are ---------------------------------------

    @property
    def bert_config(self) -> str:
        return self.file(BERT_CONFIG)

    @property
    def vocab(self) -> str:
        return self.file(VOCAB)

    @property
    def classifier_config(self) -> str:
        return self.file(CLASSIFIER_CONFIG)

    @property
    def label_list(self) -> str:
        return self.file(LABEL_LIST)

    @property
    def train_summaries(self) -> str:
        return self.file(TRAIN_SUMMARIES)

    @property
    def eval_summaries(self) -> str:
        return self.file(EVAL_SUMMARIES)

    @property
    def eval_results(self) -> str:
        return self.file(EVAL_RESULTS)

    @property
    def eval_history(self) -> str:
        return self.file(EVAL_HISTORY)

    @property
    def best(self) -> str:
        return self.file(BEST)

    @property
    def best_state(self) -> str:
        return io.join(self.best, BEST_STATE)

    def best_checkpoint(self, step: int) -> str:
        """The prefix of the best model's checkpoint of `step`."""
        return io.join(self.best, f"{BEST_CHECKPOINT}{step}")

    @property
    def features(self) -> str:
        return self.file(FEATURES)

    @property
    def feature_cache(self) -> str:
        return self.file(FEATURE_CACHE)

    # --- state ----------------------------------------------------------------

    def has_checkpoint(self) -> bool:
        """Whether the run has trained (holds a checkpoint)."""
        return has_checkpoint(self.path)

    def is_classifier_run(self) -> bool:
        """Whether this is a classification run (its classifier_config.json)."""
        return io.exists(self.classifier_config)

    def lock(self) -> run_lock.RunLock:
        """The run's exclusive use of the directory (a context manager)."""
        return run_lock.RunLock(self.path)

    # --- the record -------------------------------------------------------------

    @staticmethod
    def record(bert_config: str, vocab_file: str | None, task_files: dict) -> dict:
        """The record of a run: file name → text, from the model's config (its
        JSON), its vocabulary file (None: none kept) and the task's own files."""
        files = {BERT_CONFIG: bert_config}
        if vocab_file:
            files[VOCAB] = io.read_text(vocab_file)
        files.update(task_files)
        return files

    def trained_text(self, name: str) -> str | None:
        """The text of the record's file `name` when the directory holds a
        trained run (whose record binds a rerun); None otherwise."""
        path = self.file(name)
        if self.has_checkpoint() and io.exists(path):
            return io.read_text(path)
        return None

    def check_record(self, files: dict, sources: dict | None = None) -> None:
        """`RunDirectoryError` when a trained run's record holds another text
        for one of `files` (name → text). `sources`: name → what this run's
        text comes from, for the message (default: "the flags and checkpoint")."""
        if not self.has_checkpoint():
            return
        for name, text in files.items():
            path = self.file(name)
            if io.exists(path) and io.read_text(path) != text:
                source = (sources or {}).get(name, "the flags and checkpoint")
                raise RunDirectoryError(
                    f"--output_dir {self.path} holds a run trained with another {name} "
                    f"than this run would use (from {source}); nothing was changed. Use "
                    "another --output_dir, or the same model files")

    def write_record(self, files: dict) -> None:
        """Writes each of `files` (name → text) whose text the directory does
        not hold yet (atomically; a file already equal is left untouched)."""
        for name, text in files.items():
            path = self.file(name)
            if not (io.exists(path) and io.read_text(path) == text):
                io.atomic_write(path, text)

    def overwritten_files(self, names) -> dict:
        """{"the run's <name>": path} of the files the run writes over: its
        results and `names` (the task's record and result files), but not the
        model files, which are rewritten only when equal. For
        `io.refuse_output_over_input`."""
        return {f"the run's {name}": self.file(name)
                for name in [EVAL_RESULTS, *names] if name not in _MODEL_FILES}

    # --- run.json: what the run is, what it wrote -----------------------------------

    @property
    def run_record(self) -> str:
        return self.file(RUN_RECORD)

    def read_run_record(self) -> dict | None:
        """The directory's run.json (None when there is none); a damaged one is
        a `RunDirectoryError` saying how to start the record anew."""
        if not io.exists(self.run_record):
            return None
        try:
            record = json.loads(io.read_text(self.run_record))
        except ValueError:  # not JSON, or not UTF-8 (a BadFileError is a ValueError)
            record = None
        if not isinstance(record, dict):
            raise RunDirectoryError(
                f"{self.run_record} is damaged (not a JSON object): restore it, or delete it "
                "to start the run's record anew (the checkpoints are kept)")
        return record

    def _update_run_record(self, change) -> dict:
        """Reads run.json, applies `change(record)`, writes it back atomically."""
        record = self.read_run_record() or {"format": RECORD_FORMAT}
        change(record)
        io.atomic_write(self.run_record, json.dumps(record, indent=2, sort_keys=True) + "\n")
        return record

    def note_checkpoint(self, name: str) -> None:
        """Records that this run writes checkpoint `name` (`ckpt-<N>`), before it
        writes it: rotation deletes only the checkpoints the record names."""
        def add(record):
            names = record.setdefault("checkpoints", [])
            if name not in names:
                names.append(name)
        self._update_run_record(add)

    def forget_checkpoints(self, names) -> None:
        """Takes deleted checkpoints off the record's list."""
        gone = set(names)
        self._update_run_record(lambda record: record.update(checkpoints=[
            n for n in record.get("checkpoints", []) if n not in gone]))

    def written_checkpoints(self) -> list:
        """The names (`ckpt-<N>`) of the checkpoints the record says this
        directory's runs wrote."""
        return list((self.read_run_record() or {}).get("checkpoints", []))

    def is_unrecorded(self) -> bool:
        """Whether the directory holds a checkpoint but no record of what the run is
        (a run made before records were kept, or a checkpoint no run wrote)."""
        record = self.read_run_record()
        return self.has_checkpoint() and not (record and record.get("identity"))

    def foreign_checkpoint_error(self) -> RunDirectoryError:
        """The refusal of a directory whose checkpoint no run of this project wrote."""
        return RunDirectoryError(
            f"--output_dir {self.path} holds a checkpoint that no run of this project wrote "
            f"(a pre-trained model?) and no {RUN_RECORD}: it is not a run directory to resume, "
            "and a run there could delete that checkpoint; nothing was changed. Use another "
            "--output_dir (the checkpoint can be its --init_checkpoint)")

    def check_run(self, identity: dict, settings: dict | None, allow_changes: bool) -> list:
        """Compares this run with the directory's trained run, before anything is
        written. `RunDirectoryError` for a change of what the run is (`identity`),
        and for a change of training settings unless `allow_changes`; returns the
        allowed changes, [(key, old, new)]. `settings` is None for a run that does
        not train: then only the identity is compared (the keys both give).
        Nothing is compared when no trained run is recorded here."""
        record = self.read_run_record()
        if not self.has_checkpoint() or not record or not record.get("identity"):
            return []
        old = record["identity"]
        if old.get("task") != identity.get("task"):
            raise RunDirectoryError(
                f"--output_dir {self.path} holds a {_task_words(old)} run, not a "
                f"{_task_words(identity)} one: its checkpoints are another task's model; "
                "nothing was changed. Use another --output_dir")
        changed = differences(old, identity)
        if changed:
            raise RunDirectoryError(
                f"--output_dir {self.path} holds a {_task_words(old)} run that this one would "
                f"change: {describe_changes(changed)}. A run with other values is another run, "
                "not this one resumed; nothing was changed. Use another --output_dir, or the "
                "run's own values")
        if settings is None or not record.get("settings"):
            return []
        changed = differences(record["settings"], settings)
        if changed and not allow_changes:
            raise RunDirectoryError(
                f"--output_dir {self.path} was trained with other settings: "
                f"{describe_changes(changed)}. Pass {ALLOW_CHANGED_SETTINGS} to resume with "
                f"the new ones (the change is logged and kept in {RUN_RECORD}), or give the "
                "run's own values; nothing was changed")
        return changed

    def start_session(self, identity: dict, settings: dict | None, changes: list,
                      resumed_from: str | None = None, adopted=()) -> None:
        """Writes run.json for this run (the chief, holding the lock, after
        `check_run`): a new run's record; a trained run's identity kept and, when
        training (`settings`), its settings replaced and `changes` appended to its
        history. `adopted`: checkpoints of a run made before records were kept,
        added to those this directory wrote (its record starts now)."""
        trained = self.has_checkpoint()
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        version = project_version()

        def update(record):
            known = bool(record.get("identity")) and trained
            if not known:
                if trained:
                    logging.info("--output_dir %s was made before runs kept a record: its "
                                 "record (%s) starts now", self.path, RUN_RECORD)
                    record.setdefault("history", []).append(
                        {"time": now, "project_version": version, "resumed_from": resumed_from,
                         "note": "the record starts here; earlier settings are unknown"})
                record["identity"] = identity
            for key, value in identity.items():  # what records before this version lacked
                record["identity"].setdefault(key, value)
            if settings is not None:
                record["settings"] = settings
            if changes:
                logging.info("Resuming with changed settings (%s): %s", ALLOW_CHANGED_SETTINGS,
                             describe_changes(changes))
                record.setdefault("history", []).append(
                    {"time": now, "project_version": version, "resumed_from": resumed_from,
                     "changed": {key: [old, new] for key, old, new in changes}})
            names = record.setdefault("checkpoints", [])
            names.extend(n for n in adopted if n not in names)
            record.update(format=RECORD_FORMAT, project_version=version)
        self._update_run_record(update)

    def eval_schedule_start(self, every: int, step: int, write: bool) -> int:
        """The step from which --eval_every_steps=`every` has applied: the
        record's when it names the same `every`, else `step` (the schedule
        starts now; recorded when `write`, the chief)."""
        schedule = (self.read_run_record() or {}).get("eval_schedule") or {}
        if schedule.get("every") == every:
            return int(schedule.get("from_step", 0))
        if write:
            self._update_run_record(lambda record: record.update(
                eval_schedule={"every": every, "from_step": step}))
        return step

    def remove_killed_leftovers(self) -> list:
        """Removes what killed runs left here (the caller holds the lock, so their
        writers are gone): TensorFlow's staging directories of checkpoints
        (`ckpt-<N>_temp`), and our temporary files (`io.temporary_name`'s) in
        the subdirectories (the directory's own: `RunLock`). Nothing else.
        Returns the removed paths."""
        if not io.isdir(self.path):
            return []
        removed = []
        for name in io.listdir(self.path):
            path = self.file(name)
            if _STAGED_CHECKPOINT.match(name) and io.isdir(path):
                io.remove_tree(path)
                removed.append(path)
        for directory in (self.best, self.features, self.feature_cache):
            removed += io.remove_stale_temporaries(directory)
        for path in removed:
            logging.info("Removed %s, left by a run that was killed", path)
        return removed


# === Comparing records ===


def project_version() -> str:
    """This project's version (the installed package's), for the record."""
    from importlib import metadata

    try:
        return metadata.version("official-bert")
    except metadata.PackageNotFoundError:
        return "unknown"


def _plain(value):
    """`value` as JSON gives it back (tuples as lists, ...), to compare with a record."""
    return json.loads(json.dumps(value))


def differences(old: dict, new: dict) -> list:
    """[(key, old value, new value)] of the keys both give whose values differ."""
    return [(key, old[key], _plain(new[key])) for key in new
            if key in old and _plain(old[key]) != _plain(new[key])]


def key_name(key: str) -> str:
    """How a message names a record key: a flag, or what it is."""
    return _KEY_NAMES.get(key, f"--{key}")


def _value(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def _describe_change(key: str, old, new) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        parts = [f"{k} was {_value(old.get(k, '(none)'))}, now {_value(new.get(k, '(none)'))}"
                 for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        more = f" and {len(parts) - 3} more" if len(parts) > 3 else ""
        return f"{key_name(key)}: {'; '.join(parts[:3])}{more}"
    if key == "vocab_sha256":
        return f"{key_name(key)}: sha256 was {old[:12]}..., now {new[:12]}... (another vocab.txt)"
    return f"{key_name(key)} was {_value(old)}, now {_value(new)}"


def describe_changes(changes: list) -> str:
    """One line of [(key, old, new)]: what changed, from what, to what."""
    return "; ".join(_describe_change(*change) for change in changes)


def _task_words(identity: dict) -> str:
    """A task as a message says it: "classification (--task_name=sst-2)"."""
    task = identity.get("task") or "unknown"
    name = identity.get("task_name")
    return f"{task} (--task_name={name})" if name else task
