"""run_swag.py: SWAG's CSV files."""

from tools.kit import fault_kit as kit

from ..argv import swag
from ..case import Case
from ..setups import text
from ..shared_cases import holds_a_classifier_run, train_file_faults

COMMAND = "swag"

OUT = ["out/checkpoint"]

CASES = [
    Case("good input", swag(), control=True),
    *train_file_faults(swag, "swag/train.csv", "", OUT),
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
    holds_a_classifier_run(swag()),
]
