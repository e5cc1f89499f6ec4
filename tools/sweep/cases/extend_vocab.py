"""bert extend-vocab (official_bert.commands.extend_vocab): a corpus's frequent words added to
a checkpoint's vocabulary, in a new checkpoint directory."""

from ..case import Case, at
from ..setups import binary, text

COMMAND = "extend-vocab"

OUT = ["gen/extended"]


def extend(*extra, inputs=None, output_dir=None, ckpt="ckpt"):
    """The world's corpus (words like w3p2, split as w3 ##p2) into the tiny checkpoint."""
    return ["bert extend-vocab", f"--init_checkpoint={at(ckpt)}",
            f"--input_file={inputs or at('corpus.txt')}",
            f"--output_dir={output_dir or at('gen', 'extended')}", "--min_count=1", *extra]


CASES = [
    Case("good input", extend(), control=True),
    Case("input does not exist", extend(inputs=at("nope.txt")), names=["nope.txt"],
         outputs=OUT),
    Case("empty input", extend(inputs=at("empty.txt")), setup=text("empty.txt", ""),
         names=["--input_file"], outputs=OUT),
    Case("binary input", extend(inputs=at("bin.txt")), setup=binary("bin.txt"),
         names=["bin.txt"], outputs=OUT),
    Case("--num_new_tokens=0", extend("--num_new_tokens=0"), names=["--num_new_tokens"],
         outputs=OUT),
    Case("--min_count=0", extend("--min_count=0"), names=["--min_count"], outputs=OUT),
    Case("--min_count above every count", extend("--min_count=100000"), names=["--min_count"],
         outputs=OUT),
    Case("--init_checkpoint missing", extend(ckpt="nope"), names=["nope"], outputs=OUT),
    Case("output is the checkpoint", extend(output_dir=at("ckpt")), names=["ckpt"]),
    Case("output is the input", extend(output_dir=at("corpus.txt")), names=["corpus.txt"]),
    Case("--output_dir holds a file", extend(output_dir=at("busy")),
         setup=text("busy/keep.txt", "mine"), names=["busy"]),
    Case("stray positional argument", extend("true"), names=["true"], outputs=OUT),
]
