"""bert predict: the export of a fine-tuned classifier, its input and flags."""

from ..argv import predict
from ..case import Case, at
from ..setups import (binary, mkdir, remove_from_export, same_as_without_bom, text,
                      truncate_in_export, with_bom)

COMMAND = "predict"

INPUT = at("predict.txt")

CASES = [
    Case("good input", predict(input_file=INPUT), control=True),
    Case("--model does not exist", predict(model=at("nope")), names=["nope"]),
    Case("--model is an empty directory", predict(model=at("empty")), setup=mkdir("empty"),
         names=["empty"]),
    Case("--model is a pre-training checkpoint", predict(model=at("ckpt")), names=["ckpt"]),
    Case("truncated saved_model.pb", predict(input_file=INPUT),
         setup=truncate_in_export("saved_model.pb"), names=["export"]),
    Case("truncated variables.data", predict(input_file=INPUT),
         setup=truncate_in_export("variables", "variables.data-00000-of-00001"),
         names=["export"]),
    Case("SavedModel without its variables", predict(input_file=INPUT),
         setup=remove_from_export("variables"), names=["export"]),
    Case("--model is a file", predict(model=at("vocab.txt")), names=["vocab.txt"]),
    Case("--output_format=xml", predict("--output_format=xml"), names=["output_format"]),
    Case("stray positional argument", predict("text"), names=["text"]),
    Case("input not UTF-8 (line 2)", predict(input_file=at("bad.txt")),
         setup=text("bad.txt", b"a good movie\nbad \xff film\n"), names=["bad.txt line 2"]),
    Case("stdin not UTF-8 (line 3)", predict(), stdin=b"a good movie\nfun\nbad \xc3\x28 film\n",
         names=["standard input line 3"]),
    Case("input file missing", predict(input_file=at("nope.txt")), names=["nope.txt"]),
    Case("empty input", predict(input_file=at("e.txt")), setup=text("e.txt", "\n\n"),
         names=["e.txt"]),
    Case("a tab in a single-sentence model's input", predict(input_file=at("tab.txt")),
         setup=text("tab.txt", "a\tb\n"), names=["tab.txt line 1"]),
    Case("binary input", predict(input_file=at("bin.txt")), setup=binary("bin.txt"),
         names=["bin.txt"]),
    Case("--batch_size=0", predict("--batch_size=0"), names=["--batch_size"]),
    Case("one 1 MB line", predict(input_file=at("long.txt")),
         setup=text("long.txt", "good " * 200_000 + "\n"), control=True),
    # Issue 36: a byte-order mark is not content (line 1 only: one inside the file stays).
    Case("input with a BOM: the BOM-less answers", predict(input_file=at("bom.txt")),
         setup=with_bom("bom.txt", "a good movie\nthe film is awful\n"), control=True,
         after=same_as_without_bom("bom.txt", stdout=True)),
]
