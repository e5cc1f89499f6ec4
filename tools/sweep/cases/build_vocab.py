"""bert build-vocab (official_bert.commands.build_vocab): a WordPiece vocabulary from a
corpus."""

from ..argv import vocab
from ..case import Case, at
from ..setups import GEN, add_bom, binary, same_as_without_bom, text

COMMAND = "build-vocab"

OUT = ["gen/vocab.txt"]

CASES = [
    Case("good input", vocab(), setup=GEN, control=True),
    Case("input does not exist", vocab(inputs=at("nope.txt")), setup=GEN, names=["nope.txt"],
         outputs=OUT),
    Case("empty input", vocab(inputs=at("empty.txt")), setup=(text("empty.txt", ""), GEN),
         names=["--input_file"], outputs=OUT),
    Case("binary input", vocab(inputs=at("bin.txt")), setup=(binary("bin.txt"), GEN),
         names=["bin.txt"], outputs=OUT),
    Case("--vocab_size=10", vocab("--vocab_size=10"), setup=GEN, names=["--vocab_size"],
         outputs=OUT),
    Case("--vocab_size=-1", vocab("--vocab_size=-1"), setup=GEN, names=["--vocab_size"],
         outputs=OUT),
    Case("--num_unused=-5", vocab("--num_unused=-5"), setup=GEN, names=["--num_unused"],
         outputs=OUT),
    Case("stray positional argument", vocab("true"), setup=GEN, names=["true"], outputs=OUT),
    Case("output is the input", vocab(output=at("corpus.txt")), names=["corpus.txt"]),
    Case("output directory missing", vocab(output=at("no", "v.txt")),
         names=["no/v.txt", "/no"]),
    Case("output is a directory", vocab(output=at("glue")), names=["glue"]),
    # Issue 36: a byte-order mark is not content.
    Case("corpus with a BOM: the BOM-less vocabulary", vocab(),
         setup=(add_bom("corpus.txt"), GEN), control=True,
         after=same_as_without_bom("corpus.txt", outputs=OUT, fresh=["gen"])),
]
