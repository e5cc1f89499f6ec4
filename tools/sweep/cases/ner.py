"""run_ner.py: CoNLL files and flags."""

from tools.kit import fault_kit as kit

from ..argv import ner
from ..case import Case, at
from ..setups import add_bom, same_as_without_bom, text, with_bom
from ..shared_cases import holds_a_classifier_run, train_file_faults

COMMAND = "ner"

OUT = ["out/checkpoint"]

CASES = [
    Case("good input", ner(), control=True),
    *train_file_faults(ner, "conll/train.txt", "\n\n", OUT),
    Case("a row with another column count", ner(),
         setup=text("conll/train.txt", "the\tO\ncat\tB-ANI\textra\n"),
         names=["train.txt line 2"], outputs=OUT),
    Case("a tag that is not BIO", ner(), setup=text("conll/train.txt", "the\tO\ncat\tX-ANI\n"),
         names=["train.txt line 2"], outputs=OUT),
    Case("not UTF-8 (line 2)", ner(), setup=text("conll/train.txt", b"the\tO\nc\xfft\tB-ANI\n"),
         names=["train.txt line 2"], outputs=OUT),
    Case("--window_stride=0", ner("--window_stride=0"), names=["--window_stride"], outputs=OUT),
    # Issue 36: a byte-order mark is not content (it was copied into the predictions).
    Case("CoNLL files with a BOM: the BOM-less predictions",
         ner("--do_predict", f"--predict_file={at('conll', 'test.txt')}"),
         setup=(add_bom("conll/train.txt"),
                with_bom("conll/test.txt", "-DOCSTART- -X- O O\n\n" + kit.conll_text(2))),
         control=True,
         after=same_as_without_bom("conll/train.txt", "conll/test.txt",
                                   outputs=["out/test_predictions.conll"], fresh=["out"])),
    # Issue 36: here it was written into (label_list.txt) before the shape ValueError.
    holds_a_classifier_run(ner()),
]
