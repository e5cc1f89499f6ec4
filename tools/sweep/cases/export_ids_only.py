"""bert export-ids-only: a copy of an export without the text ops."""

from ..argv import ids_only, without
from ..case import Case, at
from ..setups import GEN, text, truncate_in_export

COMMAND = "export-ids-only"

OUT = ["gen/ids"]

CASES = [
    Case("good input", ids_only(), setup=GEN, control=True),
    Case("no --saved_model", without(ids_only(), "--saved_model"), setup=GEN,
         names=["--saved_model"], outputs=OUT),
    Case("no --export_dir", without(ids_only(), "--export_dir"), setup=GEN,
         names=["--export_dir"], outputs=OUT),
    Case("--saved_model does not exist", ids_only(source="nope"), setup=GEN, names=["nope"],
         outputs=OUT),
    Case("--saved_model is a checkpoint, not an export", ids_only(source="ckpt"), setup=GEN,
         names=["ckpt"], outputs=OUT),
    Case("--saved_model: truncated saved_model.pb", ids_only(),
         setup=(truncate_in_export("saved_model.pb"), GEN), names=["saved_model.pb"],
         outputs=OUT),
    Case("--export_dir is --saved_model's own directory", ids_only(output=at("export")),
         names=["--export_dir"]),
    Case("--export_version=0", ids_only("--export_version=0"), setup=GEN,
         names=["--export_version"], outputs=OUT),
    Case("--export_version already there", ids_only("--export_version=7"),
         setup=text("gen/ids/7/keep.txt", "mine"), names=["7"]),
    Case("stray positional argument", ids_only("extra"), setup=GEN, names=["extra"], outputs=OUT),
]
