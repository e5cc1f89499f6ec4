"""run.json, the run's record of itself, read through a schema.

    format         the record's format version (FORMAT); one this version does
                   not know is refused, never rewritten
    project_version  the version of official_bert that last wrote it
    identity       what the run is: the task (and its task name, labels, ...),
                   the model's config, the vocabulary's sha256, the casing,
                   --max_seq_length, a student's --student_layers. A rerun that would change one is refused:
                   the checkpoints belong to that run.
    settings       how it trains (`TRAINING_SETTINGS`, and the training data:
                   path → size, and path → content fingerprint,
                   `io.content_fingerprint`). A training rerun with other values is refused
                   unless --allow_changed_settings; then what changed is logged
                   and appended to `history`.
    checkpoints    the ckpt-<N> this directory's runs wrote: the only ones
                   rotation ever deletes.
    started_from   what the run's first session started from: --init_checkpoint
                   as given, the checkpoint read from it and that one's step (a
                   run directory's latest at the time: it may have trained on).
    eval_schedule  --eval_every_steps and the step it applies from, so that a
                   resume evaluates the steps a killed run left unevaluated.
    history        each session that changed the settings, or started the record.

Every field is checked on read (`read`): a record that is not JSON, whose
format is unknown or one of whose fields has the wrong type is a one-line
`RunDirectoryError` naming the field. Its advice never is to delete the
record: without it a rerun that changes what the run is could not be told
from a resume.
"""

from __future__ import annotations

import json

from official_bert import io
from official_bert.errors import RunDirectoryError

FORMAT = 1

# The training settings a run records (`RunConfig`'s fields, named by their flags);
# the record's settings add "training_data" (path → size of each training file) and
# "training_data_content" (path → `io.content_fingerprint`; records before it lack it).
# The budget and the compute dtype are settings too: a resume that changes either
# trains another schedule (the budget scales the learning rate's decay) or restores
# into another optimizer (float16 adds loss scaling).
TRAINING_SETTINGS = ("learning_rate", "num_train_epochs", "num_train_steps",
                     "warmup_proportion", "num_warmup_steps", "train_batch_size", "optimizer",
                     "gradient_accumulation_steps", "max_train_examples", "max_train_minutes",
                     "dtype", "teacher", "distill_alpha", "distill_temperature")

_NONE = type(None)



class ListOf(tuple):
    """A field that is a list whose every item has one of these types."""


# field → the types its value may have.
FIELDS = {
    "format": (int,),
    "project_version": (str,),
    "identity": (dict,),
    "settings": (dict,),
    "checkpoints": ListOf((str,)),
    "eval_schedule": (dict,),
    "history": ListOf((dict,)),
    "started_from": (dict,),
}

# identity's keys whose type is known (a task may add others: any JSON value).
IDENTITY_FIELDS = {
    "task": (str,),
    "task_name": (str, _NONE),
    "labels": (list, _NONE),
    "regression": (bool, _NONE),
    "windows": (dict, _NONE),
    "bert_config": (dict,),
    "vocab_sha256": (str, _NONE),
    "do_lower_case": (bool, _NONE),
    "max_seq_length": (int,),
    "student_layers": ListOf((int,)),
}

EVAL_SCHEDULE_FIELDS = {"every": (int,), "from_step": (int,)}
STARTED_FROM_FIELDS = {"path": (str,), "checkpoint": (str, _NONE), "step": (int, _NONE)}

# settings' keys (TRAINING_SETTINGS and the training data): a flag left unset is null.
_OPTIONAL_NUMBER = (int, float, _NONE)
_OPTIONAL_COUNT = (int, _NONE)
SETTINGS_FIELDS = {
    "learning_rate": _OPTIONAL_NUMBER, "num_train_epochs": _OPTIONAL_NUMBER,
    "num_train_steps": _OPTIONAL_COUNT, "warmup_proportion": _OPTIONAL_NUMBER,
    "num_warmup_steps": _OPTIONAL_COUNT, "train_batch_size": _OPTIONAL_COUNT,
    "optimizer": (str, _NONE), "gradient_accumulation_steps": _OPTIONAL_COUNT,
    "max_train_examples": _OPTIONAL_COUNT, "max_train_minutes": _OPTIONAL_NUMBER,
    "dtype": (str, _NONE), "training_data": (dict,), "training_data_content": (dict,),
    "teacher": (str, _NONE),
    "distill_alpha": _OPTIONAL_NUMBER, "distill_temperature": _OPTIONAL_NUMBER,
}

_TYPE_NAMES = {int: "a whole number", str: "a string", dict: "an object", list: "a list",
               bool: "true or false", float: "a number", _NONE: "null"}


def read(path: str) -> dict | None:
    """The record at `path` (None when there is none), its every field checked
    (module docstring); `RunDirectoryError` in one line when it is damaged."""
    if not io.exists(path):
        return None
    try:
        record = json.loads(io.read_text(path))
    except ValueError:  # not JSON, or not UTF-8 (a BadFileError is a ValueError)
        record = None
    if not isinstance(record, dict):
        raise damaged(path, "is not a JSON object")
    check(path, record)
    return record


def check(path: str, record: dict) -> None:
    """`RunDirectoryError` naming the first field of `record` that the schema refuses."""
    version = record.get("format", FORMAT)
    if type(version) is int and version != FORMAT:
        raise RunDirectoryError(
            f"{path} has format {version}, which this version of official_bert does not "
            f"read (it reads format {FORMAT}): a newer version wrote it. Run that version, or "
            "use another --output_dir; nothing was changed")
    _check_fields(path, record, FIELDS, "")
    _check_fields(path, record.get("identity") or {}, IDENTITY_FIELDS, "identity.")
    _check_fields(path, record.get("eval_schedule") or {}, EVAL_SCHEDULE_FIELDS,
                  "eval_schedule.")
    _check_fields(path, record.get("settings") or {}, SETTINGS_FIELDS, "settings.")
    _check_fields(path, record.get("started_from") or {}, STARTED_FROM_FIELDS, "started_from.")


def _check_fields(path: str, values: dict, fields: dict, prefix: str) -> None:
    for key, allowed in fields.items():
        if key not in values:
            continue
        value = values[key]
        if isinstance(allowed, ListOf):
            _check_value(path, prefix + key, value, (list,))
            for item in value:
                _check_value(path, f"{prefix}{key}[]", item, tuple(allowed))
        else:
            _check_value(path, prefix + key, value, allowed)


def _check_value(path: str, field: str, value, allowed: tuple) -> None:
    # bool is an int to Python, not to the record: true is no step number.
    if type(value) is bool and bool not in allowed:
        ok = False
    else:
        ok = isinstance(value, allowed)
    if not ok:
        wanted = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in allowed)
        raise damaged(path, f"has {json.dumps(value)[:40]} as its field {field}, which must "
                            f"be {wanted}")


def damaged(path: str, problem: str) -> RunDirectoryError:
    """The one line of a damaged record. It says to restore the record, not to
    delete it: the record is what tells a resume from another run."""
    return RunDirectoryError(
        f"{path} is damaged: it {problem}. Restore it from a copy (or mend that field by "
        "hand), or use another --output_dir; nothing was changed")


def dump(record: dict) -> str:
    """The record's text, as written."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"
