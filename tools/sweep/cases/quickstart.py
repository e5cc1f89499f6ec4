"""bert quickstart: its flags only (nothing is trained)."""

from ..argv import quickstart
from ..case import Case
from ..setups import GEN, text

COMMAND = "quickstart"

OUT = ["gen/qs/summary.json", "gen/qs/corpus.txt"]
FLAGS = (  # the case, its flags, what the error line names
    ("--stages=nope", "--stages=nope", "--stages"), ("--stages=", "--stages=", "--stages"),
    ("--fast --full", "--fast --full", "--fast"),
    ("--pretrain_steps=0", "--pretrain_steps=0", "--pretrain_steps"),
    ("--pretrain_steps=-5", "--pretrain_steps=-5", "--pretrain_steps"),
    ("stray positional argument", "extra", "extra"),
    ("--no_such_flag", "--no_such_flag", "no_such_flag"),
)

CASES = [
    *[Case(name, quickstart(*flags.split()), setup=GEN, names=[named], outputs=OUT, timeout=120)
      for name, flags, named in FLAGS],
    Case("--output_dir is a file", quickstart("--stages=serve", output="corpus.txt"),
         names=["corpus.txt"], timeout=120),
    Case("a corrupt summary.json in --output_dir", quickstart("--stages=serve"),
         setup=text("gen/qs/summary.json", "{x"), names=["summary.json"], timeout=120),
    Case("--stages=serve before any fine-tuning", quickstart("--stages=serve"), setup=GEN,
         names=["qnli_export"], outputs=OUT, timeout=120),
]
