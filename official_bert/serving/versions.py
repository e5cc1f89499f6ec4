"""TF Serving's export directory: numbered versions, each published whole.

`ExportModule.save` and `export_ids_only` write `export_dir/<version>/`
through this module: staged in a hidden directory inside `export_dir` and renamed when complete;
an existing version is never overwritten. On a local file system the
rename is one `rename(2)`, atomic: a model server polling `export_dir`
never sees a half-written version. An object store (`gs://`, `s3://`) has
no directories to rename: `io.rename` moves the files one by one, so the
version directory appears before it is complete. `saved_model.pb` is moved
last, alone (one object, which appears whole), so until the version is
complete it has no `saved_model.pb`: a server that polls in between fails
to load it ("Could not find SavedModel") and retries (TF Serving:
`--max_num_load_retries=5`, `--load_retry_interval_micros` one minute, by
default), finding it whole; it never loads half a version. (A move that
outlasts the retries, five minutes by default, leaves that version failed
in that server: raise `--max_num_load_retries` for very large models on
slow stores.) The version is the given one (refused before any work when
it exists: `check_export_version_free`), or, chosen as the export is
published, the seconds since the epoch raised above every version already
there, so the new export is the one served; two exports racing for one
version (the same second) both publish, the loser under the next free
version (`publish_new_version`). A staging directory of an export that was
killed (`.export-<host>.tmp-<pid>-<hex>`, its process gone) is removed by
the next export into the directory (`remove_killed_exports`).
"""

from __future__ import annotations

import errno
import os
import re
import socket
import time

from absl import logging
from tensorflow.core.protobuf import saved_model_pb2

from official_bert import checkpoints, io
from official_bert.errors import BadFileError, UserError


def version_dir(export_dir: str, version: int | None = None) -> str:
    """`export_dir/<version>`: the given version (refused if it exists), or
    the seconds since the epoch, raised above every version already there.
    (A name, not a reservation: `publish_new_version` publishes under it, or
    under the next free one when another export took it meanwhile.)"""
    io.makedirs(export_dir)
    versions = [int(n) for n in io.listdir(export_dir) if re.fullmatch(r"\d+", n)]
    if version is None:
        version = max([int(time.time())] + [v + 1 for v in versions])
    elif int(version) <= 0:
        raise UserError(f"--export_version must be positive, got {version}")
    elif int(version) in versions:
        raise _version_taken(export_dir, version)
    return io.join(export_dir, str(int(version)))


def _version_taken(export_dir: str, version: int) -> UserError:
    return UserError(f"{io.join(export_dir, str(int(version)))} exists: an export never "
                     "overwrites a version; pass another --export_version (or none: the "
                     "next free one)")


def check_export_version_free(export_dir: str | None, version: int | None = None) -> None:
    """`UserError` now, before any work, for an export that could not be
    published: `--export_version` not positive, `--export_dir` a file, or
    the explicit version already in it. (The default version is never taken:
    it is chosen when the export is published. An explicit one that another
    export publishes after this check is refused then, in the same words.)
    Nothing is created."""
    if version is not None and int(version) <= 0:
        raise UserError(f"--export_version must be positive, got {version}")
    if not export_dir:
        return
    export_dir = str(export_dir)
    if io.exists(export_dir) and not io.isdir(export_dir):
        what = io.kind_of(export_dir) if io.is_local(export_dir) else "a file"
        raise UserError(f"--export_dir {export_dir} is {what}: TF Serving's directory holds "
                        "numbered version directories; choose another path")
    if version is not None and io.exists(io.join(export_dir, str(int(version)))):
        raise _version_taken(export_dir, version)


def publish_new_version(staging: str, export_dir: str, version: int | None = None) -> str:
    """Publishes a complete staged export as `export_dir/<version>/`; returns
    that directory.

    The version is chosen now, as it is published (`version_dir`: the seconds
    since the epoch, above every version there), so the newest export is the
    highest version even when an older one was slower to write. Locally the
    publication is one `rename(2)`, which fails when the name exists: two
    exports that chose the same version (the same second) cannot both get it,
    and the one that did not takes the next free version. An explicit
    `version` that is taken is refused (`UserError`), never overwritten.
    """
    for _ in range(1000):
        final = version_dir(export_dir, version)
        try:
            publish_version(staging, final)
        except FileExistsError:
            if version is not None:
                raise _version_taken(export_dir, version) from None
            continue  # another export published this version since it was chosen
        return final
    raise UserError(f"{export_dir}: no free version after 1000 tries (other exports keep "
                    "taking them); pass --export_version")


# The staging directories of `ExportModule.save` and `export_ids_only`:
# `.export-<host>.tmp-<pid>-<hex>` (`io.temporary_name`), or `.export.tmp-<pid>-<hex>`
# as earlier versions named them. The host tells whose they are where several
# machines (or containers, each with its own process ids) share the export
# directory: only this host's can be known to be dead.
_STAGING = re.compile(r"^\.export(?:-(?P<host>[A-Za-z0-9._-]+))?\.tmp-(?P<pid>\d+)-[0-9a-f]+$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "localhost"


def staging_dir(export_dir: str) -> str:
    """A new staging directory for an export into `export_dir`
    (`.export-<host>.tmp-<pid>-<hex>`), after removing the leftovers of
    killed exports (`remove_killed_exports`)."""
    remove_killed_exports(export_dir)
    return io.make_temporary_dir(export_dir, f"export-{_host()}")


def remove_killed_exports(export_dir: str) -> list[str]:
    """Removes the staging directories that exports killed before publishing
    left in a local `export_dir`: only those named by this module, made on
    this host (or named as before hosts were), whose process is gone.
    Returns the removed paths."""
    if not io.is_local(export_dir) or not os.path.isdir(io.local_path(export_dir)):
        return []
    removed = []
    for name in sorted(os.listdir(io.local_path(export_dir))):
        match = _STAGING.match(name)
        if not match or match.group("host") not in (None, _host()):
            continue
        if io.process_alive(int(match.group("pid"))):
            continue
        path = os.path.join(io.local_path(export_dir), name)
        if os.path.isdir(path) and not os.path.islink(path):
            io.remove_tree(path)
            removed.append(path)
            logging.info("Removed %s, left by an export that was killed before it finished", path)
    return removed


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


def check_saved_model(version: str) -> None:
    """`BadFileError` naming the file of the SavedModel in the version directory
    `version` that is truncated or corrupt (its saved_model.pb, or its
    variables' .index / .data): loading one raises a protobuf or TensorFlow
    error that names neither the file nor the fix."""
    graph = io.join(version, "saved_model.pb")
    try:
        with io.open_file(graph, "rb") as f:
            saved_model_pb2.SavedModel().ParseFromString(f.read())
    except Exception as e:  # noqa: BLE001 - google.protobuf.message.DecodeError
        if type(e).__name__ != "DecodeError":
            raise
        raise BadFileError(graph, f"is truncated or corrupt ({e})",
                           fix="copy or export the SavedModel again") from None
    variables = io.join(version, "variables", "variables")
    if not io.exists(variables + ".index"):
        if io.isdir(io.join(version, "variables")):
            raise BadFileError(variables + ".index", "is missing",
                               fix="copy or export the SavedModel again")
        return
    damage = checkpoints.checkpoint_damage(variables)
    if damage is not None:
        raise BadFileError(damage[0], damage[1], fix="copy or export the SavedModel again")


def publish_version(staging: str, final: str) -> None:
    """Renames a complete staged version directory to its version's name;
    `FileExistsError` when that name exists (the staging is then as it was).

    Locally one rename, atomic, and exclusive: `rename(2)` onto a directory
    that is not empty fails, so of two exports racing for one name exactly
    one gets it. On a file system with a scheme (`gs://`, `s3://`, `hdfs://`),
    where `io.rename` moves a directory file by file, `saved_model.pb` is held
    back and moved last, alone: until the version is complete it has no
    `saved_model.pb`, so a polling server fails to load it and retries rather
    than loading part of it (module docstring). (There, existence is checked
    before the move: an object store has no exclusive rename.)
    """
    if io.is_local(staging):
        try:
            io.rename(staging, final)
        except FileExistsError:
            raise
        except OSError as e:
            if e.errno in (errno.EEXIST, errno.ENOTEMPTY):  # taken since io.rename looked
                raise FileExistsError(final) from None
            raise
        return
    if io.exists(final):
        raise FileExistsError(final)
    graph = io.join(staging, "saved_model.pb")
    held = io.temporary_name(staging.rstrip("/") + ".saved_model.pb")  # hidden, in export_dir
    io.rename(graph, held)
    try:
        try:
            io.rename(staging, final)
        except FileExistsError:
            io.rename(held, graph)  # the staging whole again, for another name
            raise
        io.rename(held, io.join(final, "saved_model.pb"))
    finally:
        io.remove(held)
