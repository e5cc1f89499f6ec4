"""extract_features.py: google's per-token features of a text file."""

from ..argv import features
from ..case import Case, at
from ..setups import GEN
from ..shared_cases import text_input_faults

COMMAND = "extract-features"

OUT = ["gen/features.jsonl"]

CASES = [
    Case("good input", features(), setup=GEN, control=True),
    *text_input_faults(features, OUT, setup=GEN),
    Case("--layers=x", features("--layers=x"), setup=GEN, names=["--layers"], outputs=OUT),
    Case("--layers=-9", features("--layers=-9"), setup=GEN, names=["--layers"], outputs=OUT),
    Case("output is the input", features(f"--output_file={at('predict.txt')}"),
         names=["predict.txt"]),
]
