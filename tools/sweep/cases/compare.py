"""bert compare: exports scored and timed on a labelled file."""

from ..argv import compare
from ..case import Case, at
from ..setups import GEN

COMMAND = "compare"

OUT = ["gen/compare.json", "gen/compare.png"]

CASES = [
    Case("good input", compare(), setup=GEN, control=True),
    Case("--models does not exist", compare(models="nope"), setup=GEN, names=["nope"],
         outputs=OUT),
    Case("--models is a checkpoint, not an export", compare(models="ckpt"), setup=GEN,
         names=["ckpt"], outputs=OUT),
    Case("--data_file does not exist", compare(data_file=at("nope.tsv")), setup=GEN,
         names=["nope.tsv"], outputs=OUT),
    # The export's own check of a request's length was a traceback ("a bug").
    Case("--seq_length longer than the model's positions", compare("--seq_length=100"),
         setup=GEN, names=["--seq_length"], outputs=OUT),
]
