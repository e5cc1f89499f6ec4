"""bert distill: a student of the world's checkpoint on its corpus; teachers that do not fit."""

import pathlib
import shutil

from ..argv import distill, without
from ..case import Case

COMMAND = "distill"

OUT = ["run/checkpoint"]


def other_vocabulary(c):
    """ckpt2/: the world's checkpoint with its vocabulary's last word changed."""
    shutil.copytree(c.p("ckpt"), c.p("ckpt2"))
    vocab = pathlib.Path(c.p("ckpt2/vocab.txt"))
    words = vocab.read_text(encoding="utf-8").splitlines()
    vocab.write_text("\n".join(words[:-1] + ["zzz"]) + "\n", encoding="utf-8")


CASES = [
    Case("good input", distill(), control=True),
    Case("no --teacher", without(distill(), "--teacher"), names=["--teacher"], outputs=OUT),
    Case("--teacher does not exist", distill(teacher="nope"), names=["nope"], outputs=OUT),
    Case("--teacher is a file", distill(teacher="corpus.txt"), names=["corpus.txt"],
         outputs=OUT),
    Case("--teacher with another vocabulary", distill(teacher="ckpt2"),
         setup=other_vocabulary, names=["--teacher"], outputs=OUT),
    Case("--distill_alpha=2", distill("--distill_alpha=2"), names=["--distill_alpha"],
         outputs=OUT),
    Case("--distill_temperature=0", distill("--distill_temperature=0"),
         names=["--distill_temperature"], outputs=OUT),
    Case("--student_layers=7 (the teacher has 2)", distill("--student_layers=7"),
         names=["--student_layers"], outputs=OUT),
]
