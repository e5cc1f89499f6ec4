"""A run's --output_dir: one owner of everything in it.

    layout       every file name of a run directory, once
    record       run.json, the run's record of itself, read through a schema
    lock         one run at a time (`RunLock`)
    checkpoints  the checkpoint lifecycle: written, rotated (only the run's
                 own), TensorFlow's staging, killed runs' leftovers, the
                 checkpoints of a run made before records were kept
    latest       TensorFlow's state file (only here), the latest complete
                 checkpoint, and reading it while the run trains

`RunDirectory` is the one object the rest of the library asks: the path of
each file, the lock, the record (written, read back and compared on resume)
and what identifies a run when the record is missing. Nothing else spells a
file name of a run directory. This package sits below tasks/, serving/ and
training/; `layout`, `record` and `lock` load no TensorFlow.

A directory that holds a checkpoint but no record is either a run made before
records were kept (its record starts now, once the files that carry what it
is agree with this run: `identity_from_files`) or a checkpoint no run wrote (a
pre-trained model): that is no run directory, and `foreign_checkpoint_error`
says so.
"""

from __future__ import annotations

import datetime
import json
import os

from absl import logging

from official_bert import io
from official_bert.errors import RunDirectoryError
from official_bert.run_directory import layout, record as records
from official_bert.run_directory.layout import (  # noqa: F401  (the names, re-exported)
    BERT_CONFIG, BEST, BEST_CHECKPOINT, BEST_STATE, CHECKPOINT_INDEX, CHECKPOINT_NAME,
    CLASSIFIER_CONFIG, EVAL_HISTORY, EVAL_RESULTS, EVAL_SUMMARIES, FEATURE_CACHE, FEATURES,
    LABEL_LIST, RUN_RECORD, TOKENIZER_CONFIG, TRAIN_SUMMARIES, VOCAB)
from official_bert.run_directory.lock import RunLock
from official_bert.run_directory.record import TRAINING_SETTINGS  # noqa: F401

RECORD_FORMAT = records.FORMAT

# What a trained directory without a record is, in words after "--output_dir X":
# which of the two it is (a run older than records, or a record deleted) nothing
# in the directory tells, so the line says both.
UNRECORDED = (f"holds checkpoints a run wrote but no {RUN_RECORD} (it was deleted, or the run "
              "is older than run records)")
ALLOW_CHANGED_SETTINGS = "--allow_changed_settings"

# How messages name a record key that is not a flag (a flag is --<key>).
_KEY_NAMES = {"task": "the task", "labels": "the labels",
              "bert_config": "the model (bert_config.json)",
              "vocab_sha256": "the vocabulary (vocab.txt)", "training_data": "the training data",
              "training_data_content": "the training data's content",
              "windows": "the --long_document windows"}


def run_of(path: str) -> "RunDirectory":
    """The run directory that a path given to read a run names, for reading
    alone (an --init_checkpoint, a --teacher, a run of a GLUE submission): the
    directory itself, or the one holding its ckpt-N or best/best-N. Only the
    run flow makes the RunDirectory it writes (`tasks.runner`)."""
    folder = path if io.isdir(path) else os.path.dirname(path)
    if os.path.basename(os.path.normpath(folder)) == BEST:
        folder = os.path.dirname(os.path.normpath(folder))
    return RunDirectory(folder)


def has_checkpoint(directory: str | None) -> bool:
    """Whether `directory` holds a training checkpoint (its `checkpoint` index file)."""
    return bool(directory) and io.exists(io.join(directory, CHECKPOINT_INDEX))


class RunDirectory:
    """One run's --output_dir (module docstring): its paths, its lock, its record.

    The record is what a run was made with, as file name → text: the model's
    config and vocabulary and the task's own files (`InputRecord.record`). A
    directory that holds a trained checkpoint binds a rerun to the same record
    (`check_record`); only then is it written (`write_record`).

    Example:
    >>> run = RunDirectory("/tmp/run")
    >>> run.eval_results, run.best_checkpoint(20)
    ('/tmp/run/eval_results.txt', '/tmp/run/best/best-20')
    """

    def __init__(self, path: str):
        self.path = path
        # This session's change to the record (`start_session`), written with its
        # first checkpoint (`note_checkpoint`): a session that trains nothing
        # records nothing.
        self._session = None
        self._said_data_known_by_size = False  # (the run flow checks twice: said once)

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

    @property
    def best_state_file(self) -> str:
        """TensorFlow's `checkpoint` state file in best/ (naming the best model)."""
        return io.join(self.best, CHECKPOINT_INDEX)

    def best_checkpoint(self, step: int) -> str:
        """The prefix of the best model's checkpoint of `step`."""
        return io.join(self.best, layout.best_checkpoint_name(step))

    def checkpoint(self, step: int) -> str:
        """The prefix of the run's training checkpoint of `step`."""
        return self.file(layout.checkpoint_name(step))

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

    def latest_checkpoint(self) -> str | None:
        """The prefix of the run's newest complete checkpoint (None: none yet)."""
        from official_bert.run_directory import latest  # (loads TensorFlow)

        return latest.latest_checkpoint(self.path)

    def read_latest(self, read):
        """(prefix, `read(prefix)`) of the latest complete checkpoint, for a
        reader of the run that may be training now (`latest.read_latest`: its
        step and whether it still trains are logged; a checkpoint rotated away
        meanwhile is no damage)."""
        from official_bert.run_directory import latest

        return latest.read_latest(self.path, read)

    def is_classifier_run(self) -> bool:
        """Whether this is a classification run (its classifier_config.json)."""
        return io.exists(self.classifier_config)

    def lock(self) -> RunLock:
        """The run's exclusive use of the directory (a context manager)."""
        return RunLock(self.path)

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
                for name in [EVAL_RESULTS, *names] if name not in layout.MODEL_FILES}

    # --- run.json: what the run is, what it wrote -----------------------------------

    @property
    def run_record(self) -> str:
        return self.file(RUN_RECORD)

    def read_run_record(self) -> dict | None:
        """The directory's run.json (None when there is none), every field
        checked (`record.read`): a damaged one is a one-line `RunDirectoryError`."""
        return records.read(self.run_record)

    def _update_run_record(self, change) -> dict:
        """Reads run.json, applies `change(record)`, writes it back atomically."""
        record = self.read_run_record() or {"format": RECORD_FORMAT}
        change(record)
        records.check(self.run_record, record)  # what is written reads back
        io.atomic_write(self.run_record, records.dump(record))
        return record

    def note_checkpoint(self, name: str) -> None:
        """Records that this run writes checkpoint `name` (`ckpt-<N>`), before it
        writes it: rotation deletes only the checkpoints the record names. The
        session's record (`start_session`) goes with the first one."""
        session = self._session

        def add(record):
            if session is not None:
                session(record)
            names = record.setdefault("checkpoints", [])
            if name not in names:
                names.append(name)
        self._update_run_record(add)
        self._session = None

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
        A trained directory without a record is compared with what the files
        that carry a run say it is (`identity_from_files`)."""
        if not self.has_checkpoint():
            return []
        record = self.read_run_record()
        if not record or not record.get("identity"):
            self._check_identity(self.identity_from_files(), identity,
                                 f" (it {UNRECORDED}: so its files say)")
            return []
        self._check_identity(record["identity"], identity, "")
        if settings is None or not record.get("settings"):
            return []
        self._say_if_data_known_by_size(record["settings"], settings)
        changed = differences(record["settings"], settings)
        if any(key == "training_data" for key, _, _ in changed):  # (its sizes say it already)
            changed = [change for change in changed if change[0] != "training_data_content"]
        if changed and not allow_changes:
            raise RunDirectoryError(
                f"--output_dir {self.path} was trained with other settings: "
                f"{describe_changes(changed)}. Pass {ALLOW_CHANGED_SETTINGS} to resume with "
                f"the new ones (the change is logged and kept in {RUN_RECORD}), or give the "
                "run's own values; nothing was changed")
        return changed

    def _say_if_data_known_by_size(self, old: dict, settings: dict) -> None:
        """A record of an earlier version knows the training data by size alone:
        then only sizes are compared (`differences` compares the keys both
        give), and the log says so once; this session records the content."""
        if "training_data" in old and "training_data_content" not in old and \
                "training_data_content" in settings and not self._said_data_known_by_size:
            self._said_data_known_by_size = True
            logging.info("%s (an earlier version's) knows the training data by its size "
                         "alone: compared by size this time; its content is recorded from this "
                         "session on", self.run_record)

    def _check_identity(self, old: dict, identity: dict, source: str) -> None:
        """`RunDirectoryError` when `identity` is another task's, or changes one of
        the values `old` (the trained run's identity) gives."""
        families = old.get("task")
        families = [families] if isinstance(families, str) else families
        if families and identity.get("task") not in families:
            raise RunDirectoryError(
                f"--output_dir {self.path} holds a {task_words(old)} run{source}, not a "
                f"{task_words(identity)} one: its checkpoints are another task's model; "
                "nothing was changed. Use another --output_dir")
        changed = differences({k: v for k, v in old.items() if k != "task"}, identity)
        if changed:
            raise RunDirectoryError(
                f"--output_dir {self.path} holds a {task_words(old)} run{source} that this "
                f"one would change: {describe_changes(changed)}. A run with other values is "
                "another run, not this one resumed; nothing was changed. Use another "
                "--output_dir, or the run's own values")

    def trained_length(self) -> int | None:
        """The --max_seq_length this directory's run was trained with: its
        record's, else classifier_config.json's (a run made before records);
        None when the directory holds no trained run or nothing says."""
        return self.trained_identity().get("max_seq_length")

    def trained_identity(self) -> dict:
        """What the directory's trained run is: its record's identity, else what
        its files say (`identity_from_files`); {} when it holds no trained run."""
        if not self.has_checkpoint():
            return {}
        record = self.read_run_record()
        return (record or {}).get("identity") or self.identity_from_files()

    def identity_from_files(self) -> dict:
        """What the files that carry a run say it is, for a trained directory
        without a record (a run made before records were kept, or whose record
        was deleted): classifier_config.json's task, labels, casing and length;
        label_list.txt's tags (an NER run); tokenizer_config.json (a pre-training
        run). "task" is the list of families the files fit. The
        model and vocabulary are compared as text (`check_record`), and the
        checkpoint's variables with the model the task builds (the run flow,
        with `checkpoints.model_mismatch`)."""
        classifier = self._json_file(CLASSIFIER_CONFIG)
        if classifier is not None:
            identity = {"task": ["classification"]}
            identity.update({key: classifier[key] for key in (
                "task_name", "labels", "regression", "max_seq_length", "do_lower_case")
                if key in classifier})
            return identity
        if io.exists(self.label_list):
            labels = [line.strip() for line in io.read_text(self.label_list).splitlines()
                      if line.strip()]
            return {"task": ["ner", "feature-based ner"], "labels": labels}
        if io.exists(self.file(TOKENIZER_CONFIG)):  # the data's casing: not the run's
            return {"task": ["pretraining", "distillation"]}  # (one layout: distillation's)
        return {}

    def _json_file(self, name: str) -> dict | None:
        """The JSON object in the directory's file `name` (None: none, or not one)."""
        path = self.file(name)
        if not io.exists(path):
            return None
        try:
            value = json.loads(io.read_text(path))
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def start_session(self, identity: dict, settings: dict | None, changes: list,
                      resumed_from: str | None = None, adopted=(),
                      started_from: dict | None = None) -> None:
        """This training session's record (the chief, holding the lock, after
        `check_run`): a new run's record; a trained run's identity kept, its
        settings replaced and `changes` appended to its history. `adopted`:
        checkpoints of a run made before records were kept, added to those this
        directory wrote (its record starts now). `started_from`: what a new run
        starts from (--init_checkpoint, the checkpoint read and its step; the
        first session's alone: a resume reads the run's own). Written into
        run.json with the session's first checkpoint (`note_checkpoint`), so
        that a session that fails before it trains (a bad flag combination, a
        kill) leaves the record as it was; a session that does not train writes
        no record."""
        trained = self.has_checkpoint()
        if changes:
            logging.info("Resuming with changed settings (%s): %s", ALLOW_CHANGED_SETTINGS,
                         describe_changes(changes))
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        version = project_version()

        def update(record):
            known = bool(record.get("identity")) and trained
            if not known:
                if trained:
                    logging.warning(
                        "--output_dir %s %s: its files agree with this run, but the settings "
                        "it trained with (--max_seq_length, the learning rate, the data) "
                        "cannot be checked; it resumes with this command's, and its record "
                        "starts now", self.path, UNRECORDED)
                    record.setdefault("history", []).append(
                        {"time": now, "project_version": version, "resumed_from": resumed_from,
                         "note": "the record starts here; earlier settings are unknown"})
                record["identity"] = identity
            if started_from and not trained:
                record["started_from"] = started_from
            for key, value in identity.items():  # what records before this version lacked
                record["identity"].setdefault(key, value)
            if settings is not None:
                record["settings"] = settings
            if changes:
                record.setdefault("history", []).append(
                    {"time": now, "project_version": version, "resumed_from": resumed_from,
                     "changed": {key: [old, new] for key, old, new in changes}})
            names = record.setdefault("checkpoints", [])
            names.extend(n for n in adopted if n not in names)
            record.update(format=RECORD_FORMAT, project_version=version)
        self._session = update

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
            if layout.STAGED_CHECKPOINT.match(name) and io.isdir(path):
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
    if key == "training_data_content":  # (a file's fingerprint: its kind and 12 hex digits)
        parts = [f"{path} was {_short_digest(old.get(path))}, now {_short_digest(new.get(path))}"
                 for path in sorted(set(old) & set(new)) if old[path] != new[path]]
        return f"{key_name(key)}: " + "; ".join(parts)
    if isinstance(old, dict) and isinstance(new, dict):
        parts = [f"{k} was {_value(old.get(k, '(none)'))}, now {_value(new.get(k, '(none)'))}"
                 for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        more = f" and {len(parts) - 3} more" if len(parts) > 3 else ""
        return f"{key_name(key)}: {'; '.join(parts[:3])}{more}"
    if key == "vocab_sha256":
        return f"{key_name(key)}: sha256 was {old[:12]}..., now {new[:12]}... (another vocab.txt)"
    return f"{key_name(key)} was {_value(old)}, now {_value(new)}"


def _short_digest(fingerprint: str) -> str:
    kind, _, digest = fingerprint.partition(":")
    return f"{kind} {digest[:12]}..."


def describe_changes(changes: list) -> str:
    """One line of [(key, old, new)]: what changed, from what, to what."""
    return "; ".join(_describe_change(*change) for change in changes)


def task_words(identity: dict) -> str:
    """A task as a message says it: "classification (--task_name=sst-2)"."""
    task = identity.get("task") or "unknown"
    if isinstance(task, list):  # the families a directory's files fit
        task = " or ".join(task)
    name = identity.get("task_name")
    return f"{task} (--task_name={name})" if name else task
