"""A run's --output_dir: every file in it, by name, in one place.

    bert_config.json       the model's config            } the run's record: written
    vocab.txt              its vocabulary                } before training, compared
    classifier_config.json classification: task, labels, } when the run is resumed,
                           casing, length, windows       } evaluated or exported (a
    label_list.txt         NER: the tag list             } rerun with other model
    tokenizer_config.json  pre-training: the data's casing } files is refused)
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
"""

from __future__ import annotations

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
