"""run_swag.py: SWAG's CSV files."""

from tools.kit import fault_kit as kit

from ..argv import swag
from ..case import Case, at
from ..setups import binary, remember, text, trained_classifier, unchanged

COMMAND = "swag"

OUT = ["out/checkpoint"]

CASES = [
    Case("good input", swag(), control=True),
    Case("file missing", swag(train=at("nope.csv")), names=["nope.csv"], outputs=OUT),
    Case("header without endings", swag(),
         setup=text("swag/train.csv", "sent1,sent2,label\na,b,0\n"), names=["train.csv"],
         outputs=OUT),
    Case("not UTF-8 (line 3)", swag(), setup=text(
        "swag/train.csv", kit.swag_csv().encode().replace(b"v1,", b"v\xff1,")),
         names=["train.csv line 3"], outputs=OUT),
    Case("label out of range", swag(),
         setup=text("swag/train.csv", kit.swag_csv().replace(",1\n", ",7\n")),
         names=["train.csv line"], outputs=OUT),
    Case("a row with fewer endings", swag(), setup=text(
        "swag/train.csv", kit.SWAG_HEADER + "v0,0,a,the cat,sat,gold,mat,dog,0\n"),
         names=["train.csv line 2"], outputs=OUT),
    Case("empty file", swag(), setup=text("swag/train.csv", ""), names=["train.csv"],
         outputs=OUT),
    Case("binary file", swag(), setup=binary("swag/train.csv"), names=["train.csv"],
         outputs=OUT),
    # Issue 36: another task's finished run directory (once a shape ValueError).
    Case("--output_dir holds a classifier's run", swag(),
         setup=(trained_classifier, remember("out")), names=["holds a classification"],
         after=unchanged("out")),
]
