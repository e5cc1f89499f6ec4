"""The TF Serving layout every export shares: `export_dir/<version>/`, written atomically.

A version is staged in a hidden temporary directory inside `export_dir` and
renamed into place, so a model server polling `export_dir` never sees a
half-written version; an existing version is never overwritten. The version
is `--export_version`, or by default the seconds since the epoch (and always
above the versions already there, so a new export is the one served).
"""

from __future__ import annotations

import re
import time

import tensorflow as tf

from official_bert import io
from official_bert.errors import UserError


def version_dir(export_dir: str, version: int | None = None) -> str:
    """`export_dir/<version>`: the given version (refused if it exists), or
    the seconds since the epoch, raised above every version already there."""
    io.makedirs(export_dir)
    versions = [int(n) for n in io.listdir(export_dir) if re.fullmatch(r"\d+", n)]
    if version is None:
        version = max([int(time.time())] + [v + 1 for v in versions])
    elif version in versions:
        raise UserError(f"{io.join(export_dir, str(version))} exists: an export never "
                        "overwrites a version; pass another --export_version")
    return io.join(export_dir, str(version))


def save_versioned(module, export_dir: str, signatures, version: int | None = None) -> str:
    """`tf.saved_model.save` into `export_dir/<version>/`, atomically (staged
    in a hidden directory inside `export_dir`, then renamed). Returns the
    version directory."""
    track_captured_variables(module)
    final = version_dir(export_dir, version)
    staging = io.make_temporary_dir(export_dir, "export")
    try:
        tf.saved_model.save(module, staging, signatures=signatures)
        io.rename(staging, final)
    finally:
        io.remove_tree(staging)
    return final


def track_captured_variables(module) -> None:
    """Makes the `tf.Variable`s of the Keras models in `module` checkpointed objects.

    A Keras 3 variable wraps a `tf.Variable`; `tf.saved_model.save` writes
    the wrapper as a fresh variable (`Variable_N`) while the traced functions
    read the wrapped one. TF2's `tf.saved_model.load` connects the two, but a
    TF1 session loader, which is what TF Serving and `saved_model_cli run`
    use, restores only checkpointed objects and then fails with "Could not
    find variable ...". Tracking the wrapped variables themselves (as
    `keras.export.ExportArchive` does) makes the session restore them too.
    """
    import keras

    seen, captured = set(), []
    for value in list(vars(module).values()):
        if isinstance(value, keras.layers.Layer):
            for variable in value.variables:
                inner = variable.value if isinstance(variable, keras.Variable) else variable
                if isinstance(inner, tf.Variable) and id(inner) not in seen:
                    seen.add(id(inner))
                    captured.append(inner)
    module._serving_variables = captured


def latest_version_dir(path: str) -> str | None:
    """`path` itself when it is a SavedModel, else its highest integer version
    subdirectory that is one; None when there is neither."""
    if io.exists(io.join(path, "saved_model.pb")):
        return path
    if not io.isdir(path):
        return None
    versions = sorted((int(n) for n in io.listdir(path) if re.fullmatch(r"\d+", n)),
                      reverse=True)
    for version in versions:
        candidate = io.join(path, str(version))
        if io.exists(io.join(candidate, "saved_model.pb")):
            return candidate
    return None
