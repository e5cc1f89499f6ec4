"""bert export-google: a checkpoint as google's TF1 checkpoint."""

from ..argv import export_google
from ..case import Case, at
from ..setups import GEN, text

COMMAND = "export-google"

OUT = ["gen/google"]

CASES = [
    Case("good input", export_google("--exact_gelu_as=gelu_exact"), setup=GEN, control=True),
    Case("exact GELU without --exact_gelu_as", export_google(), setup=GEN,
         names=["--exact_gelu_as"], outputs=OUT),
    Case("--output_dir holds a file", export_google("--exact_gelu_as=tanh", output_dir=at("busy")),
         setup=text("busy/keep.txt", "mine"), names=["busy"]),
    Case("--init_checkpoint missing", ["bert export-google", f"--init_checkpoint={at('nope')}",
                                       f"--output_dir={at('gen', 'google')}"],
         setup=GEN, names=["nope"], outputs=OUT),
    Case("--exact_gelu_as=erf", export_google("--exact_gelu_as=erf"), setup=GEN,
         names=["exact_gelu_as"], outputs=OUT),
]
