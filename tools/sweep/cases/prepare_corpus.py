"""bert prepare-corpus (official_bert.commands.prepare_corpus): documents to one corpus
file."""

from ..argv import corpus
from ..case import Case, at
from ..setups import GEN, binary, mkdir, rerun_succeeds, text

COMMAND = "prepare-corpus"

DOCS = (text("docs/a.txt", "One sentence here. And another one.\n"),
        text("docs/b.txt", "A second document. It ends.\n"))
OUT = ["gen/corpus.txt"]

CASES = [
    Case("good input", corpus(), setup=(DOCS, GEN), control=True),
    Case("input does not exist", corpus(inputs=at("nope")), setup=GEN, names=["nope"],
         outputs=OUT),
    Case("empty input directory", corpus(), setup=(mkdir("docs"), GEN), names=["docs"],
         outputs=OUT),
    Case("only empty files", corpus(), setup=(text("docs/a.txt", ""), GEN), names=["--input"],
         outputs=OUT),
    Case("binary file, --fallback_encoding=''", corpus("--fallback_encoding="),
         setup=(binary("docs/a.bin"), GEN), names=["a.bin"], outputs=OUT),
    Case("output directory missing", corpus(output=at("no", "such", "c.txt")), setup=DOCS,
         names=["no/such"]),
    Case("output is an input", corpus(output=at("docs", "a.txt")), setup=DOCS, names=["a.txt"]),
    Case("output inside the input directory", corpus(output=at("docs", "corpus.txt")),
         setup=DOCS, names=["corpus.txt"], outputs=["docs/corpus.txt"]),
    Case("output is a directory", corpus(output=at("gen")), setup=(DOCS, GEN), names=["gen"]),
    Case("unknown flag", corpus("--no_such_flag=1"), setup=(DOCS, GEN), names=["no_such_flag"],
         outputs=OUT),
    Case("one 3 MB line", corpus(), setup=(text("docs/a.txt", "word " * 600_000), GEN),
         control=True),
    Case("disk full (1 KB file-size limit)", corpus(),
         setup=(text("docs/a.txt", "A sentence that repeats. " * 400), GEN),
         file_size_limit=1024, names=["corpus.txt"], outputs=OUT, after=rerun_succeeds),
]
