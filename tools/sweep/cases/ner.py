"""run_ner.py: CoNLL files and flags."""

from tools.kit import fault_kit as kit

from ..argv import ner
from ..case import Case, at
from ..setups import (add_bom, binary, remember, same_as_without_bom, text, trained_classifier,
                      unchanged, with_bom)

COMMAND = "ner"

OUT = ["out/checkpoint"]

CASES = [
    Case("good input", ner(), control=True),
    Case("file missing", ner(train=at("nope.txt")), names=["nope.txt"], outputs=OUT),
    Case("a row with another column count", ner(),
         setup=text("conll/train.txt", "the\tO\ncat\tB-ANI\textra\n"),
         names=["train.txt line 2"], outputs=OUT),
    Case("a tag that is not BIO", ner(), setup=text("conll/train.txt", "the\tO\ncat\tX-ANI\n"),
         names=["train.txt line 2"], outputs=OUT),
    Case("not UTF-8 (line 2)", ner(), setup=text("conll/train.txt", b"the\tO\nc\xfft\tB-ANI\n"),
         names=["train.txt line 2"], outputs=OUT),
    Case("empty file", ner(), setup=text("conll/train.txt", "\n\n"), names=["train.txt"],
         outputs=OUT),
    Case("binary file", ner(), setup=binary("conll/train.txt"), names=["train.txt"],
         outputs=OUT),
    Case("--window_stride=0", ner("--window_stride=0"), names=["--window_stride"], outputs=OUT),
    # Issue 36: a byte-order mark is not content (it was copied into the predictions).
    Case("CoNLL files with a BOM: the BOM-less predictions",
         ner("--do_predict", f"--predict_file={at('conll', 'test.txt')}"),
         setup=(add_bom("conll/train.txt"),
                with_bom("conll/test.txt", "-DOCSTART- -X- O O\n\n" + kit.conll_text(2))),
         control=True,
         after=same_as_without_bom("conll/train.txt", "conll/test.txt",
                                   outputs=["out/test_predictions.conll"], fresh=["out"])),
    # Issue 36: another task's finished run directory (once a shape ValueError, after label_list.txt was written into it).
    Case("--output_dir holds a classifier's run", ner(),
         setup=(trained_classifier, remember("out")), names=["holds a classification"],
         after=unchanged("out")),
]
