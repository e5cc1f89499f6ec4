"""extract_features.py: google's per-token features of a text file."""

from ..argv import features
from ..case import Case, at
from ..setups import GEN, text

COMMAND = "extract-features"

OUT = ["gen/features.jsonl"]

CASES = [
    Case("good input", features(), setup=GEN, control=True),
    Case("input missing", features(input_file=at("nope.txt")), setup=GEN, names=["nope.txt"],
         outputs=OUT),
    Case("input not UTF-8", features(input_file=at("bad.txt")),
         setup=(text("bad.txt", b"fine\n\xff\n"), GEN), names=["bad.txt line 2"], outputs=OUT),
    Case("--layers=x", features("--layers=x"), setup=GEN, names=["--layers"], outputs=OUT),
    Case("--layers=-9", features("--layers=-9"), setup=GEN, names=["--layers"], outputs=OUT),
    Case("output is the input", features(f"--output_file={at('predict.txt')}"),
         names=["predict.txt"]),
]
