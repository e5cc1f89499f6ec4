"""Cases that several commands' tables share: the same fault of an input that each of
those commands reads alike, written once (`cases/` lists them among its own)."""

from __future__ import annotations

from .case import Case, at
from .setups import binary, remember, text, trained_classifier, unchanged


def text_input_faults(argv, outputs, setup=()) -> list:
    """A command reading lines of text from `argv(input_file=...)`: the file missing,
    and a byte that is not UTF-8 on its line 2; the error names the file (and the line)
    and leaves none of `outputs`. `setup`: what the command needs besides."""
    return [
        Case("input missing", argv(input_file=at("nope.txt")), setup=setup,
             names=["nope.txt"], outputs=outputs),
        Case("input not UTF-8 (line 2)", argv(input_file=at("bad.txt")),
             setup=(text("bad.txt", b"fine\n\xff\n"), setup), names=["bad.txt line 2"],
             outputs=outputs),
    ]


def train_file_faults(argv, path, empty, outputs) -> list:
    """A fine-tuning script's --train_file (`argv(train=...)`; the world's `path` by
    default) missing, empty (`empty`: the file's text) and binary: the error names the
    file and leaves none of `outputs`."""
    name = path.rsplit("/", 1)[-1]
    missing = "nope" + name[name.rindex("."):]  # of the same kind, for the same reader
    return [
        Case("file missing", argv(train=at(missing)), names=[missing], outputs=outputs),
        Case("empty file", argv(), setup=text(path, empty), names=[name], outputs=outputs),
        Case("binary file", argv(), setup=binary(path), names=[name], outputs=outputs),
    ]


def holds_a_classifier_run(argv) -> Case:
    """Issue 36: --output_dir (out/) holds another task's finished run: refused by name,
    and left as it was (once a shape ValueError, or files of the wrong task written)."""
    return Case("--output_dir holds a classifier's run", argv,
                setup=(trained_classifier, remember("out")), names=["holds a classification"],
                after=unchanged("out"))
