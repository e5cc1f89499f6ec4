"""Copy an export with only its ids signature, for servers without the text ops.

Every export's raw-text `serving_default` tokenizes in the graph with three
tensorflow-text ops (`NormalizeUTF8`, `RegexSplitWithOffsets`,
`WordpieceTokenizeWithOffsets`). TF Serving's model server links them; a
binary that does not (the `saved_model_cli` script run as it is, a model
server built without tensorflow-text) cannot load such a graph at all, not
even to call `serve_ids`. This command writes `--export_dir/<version>/`, a
copy holding only the ids signature (as `serving_default` and `serve_ids`:
int32 `input_word_ids`, `input_mask`, `input_type_ids` in, the task's numeric
outputs out), with the same layout, atomic write and warm-up file as
every export. Clients tokenize themselves (the vocabulary
is the source's `assets/vocab.txt`).

Example:
  bert export-ids-only --saved_model=/tmp/sst2_export --export_dir=/tmp/sst2_ids
  saved_model_cli run --dir /tmp/sst2_ids/$(ls /tmp/sst2_ids) --tag_set serve \\
      --signature_def serve_ids \\
      --input_exprs 'input_word_ids=[[101,1037,102]];input_mask=[[1,1,1]];input_type_ids=[[0,0,0]]'
"""

from __future__ import annotations

import dataclasses
import os

from absl import flags

from official_bert.commands import app, cli_flags, registry
from official_bert import io
from official_bert.errors import UserError
from official_bert.settings import setting

FLAGS = flags.FLAGS


def export(saved_model: str | None, export_dir: str | None,
           export_version: int | None = None) -> str:
    """Writes the ids-only copy; returns its version directory."""
    from official_bert.serving import base, versions

    if not saved_model:
        raise UserError("--saved_model is required: the export to copy (a version directory, "
                        "or the TF Serving directory holding versions)")
    if not export_dir:
        raise UserError("--export_dir is required: the TF Serving directory to write the "
                        "copy's <version>/ into")
    if export_version is not None and export_version <= 0:
        raise UserError(f"--export_version must be positive, got {export_version}")
    source = versions.latest_version_dir(saved_model)
    if source is None:
        raise UserError(f"--saved_model={saved_model} is not an export: it holds no "
                        "saved_model.pb and no numbered version that does")
    # The copy must not land among the source's versions (a server would then serve
    # the copy as the newest version of the raw-text model) nor inside the source.
    base_dir = os.path.dirname(source.rstrip("/"))
    if io.same_path(export_dir, base_dir) or _inside(export_dir, source):
        raise UserError(f"--export_dir={export_dir} is --saved_model's own directory "
                        f"({base_dir}): the copy would become the raw-text model's newest "
                        "version; choose another --export_dir")
    path = base.export_ids_only(source, export_dir, export_version)
    print(f"serving\t{path}", flush=True)
    return path


def _inside(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or below it."""
    if io.is_local(path) and io.is_local(directory):
        path, directory = (os.path.realpath(p.removeprefix("file://")) for p in (path, directory))
        return os.path.commonpath([path, directory]) == directory
    path, directory = os.fspath(path).rstrip("/"), os.fspath(directory).rstrip("/")
    return path == directory or path.startswith(directory + "/")


@dataclasses.dataclass
class ExportIdsOnlyConfig:
    """The command's flags (`main` passes them to `export`)."""

    saved_model: str | None = setting(
        None, "The export to copy: a version directory (holding saved_model.pb), or the TF "
        "Serving directory, whose highest version is used.")
    export_dir: str | None = setting(
        None, "The TF Serving directory to write the copy's <version>/ into (not the source's: "
        "the copy would become its newest version).")
    export_version: int | None = setting(
        None, "The copy's version number (default: seconds since the epoch). An existing "
        "version is never overwritten.")


CONFIGS = (ExportIdsOnlyConfig,)  # its flags' definitions


def define_flags():
    cli_flags.define_flags(ExportIdsOnlyConfig)


def main(argv):
    app.refuse_arguments(argv)
    export(FLAGS.saved_model, FLAGS.export_dir, FLAGS.export_version)


if __name__ == "__main__":
    registry.run_command("export-ids-only")
