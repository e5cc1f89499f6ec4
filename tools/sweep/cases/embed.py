"""bert embed: sentence vectors of a text file."""

from ..argv import embed
from ..case import Case, at
from ..setups import GEN, kept, mkdir, same_as_without_bom, text, with_bom
from ..shared_cases import text_input_faults

COMMAND = "embed"

OUT = ["gen/vectors.npy"]

CASES = [
    Case("good input", embed(), setup=GEN, control=True),
    *text_input_faults(embed, OUT, setup=GEN),
    Case("empty input", embed(input_file=at("e.txt")), setup=(text("e.txt", ""), GEN),
         names=["e.txt"], outputs=OUT),
    Case("output exists", embed(output_file=at("taken.npy")),
         setup=text("taken.npy", "someone's"), names=["taken.npy"]),
    Case("--output_file=vectors.csv", embed(output_file=at("gen", "vectors.csv")), setup=GEN,
         names=["--output_file"], outputs=["gen/vectors.csv"]),
    Case("output is the input", embed(input_file=at("own.jsonl"), output_file=at("own.jsonl")),
         setup=text("own.jsonl", "a text in a file named .jsonl\n"), names=["own.jsonl"]),
    Case("--pooling=max", embed("--pooling=max"), setup=GEN, names=["--pooling", "pooling"],
         outputs=OUT),
    Case("--batch_size=0", embed("--batch_size=0"), setup=GEN, names=["--batch_size"],
         outputs=OUT),
    Case("--max_seq_length past the model's positions", embed("--max_seq_length=4096"),
         setup=GEN, names=["--max_seq_length"], outputs=OUT),
    # Issue 36: a byte-order mark is not content.
    Case("input with a BOM: the BOM-less vectors", embed(input_file=at("bom.txt")),
         setup=(with_bom("bom.txt", "a good movie\nthe film is awful\n"), GEN), control=True,
         after=same_as_without_bom("bom.txt", outputs=OUT, fresh=["gen"])),
    # Issue 36: outputs checked before any work; one new file, one writer.
    Case("--output_file on a location that refuses writes",
         embed(output_file="/sys/bert_vectors.npy"), names=["--output_file /sys/bert_vectors.npy"]),
    Case("--export_version taken (before embedding)",
         embed(f"--export_dir={at('exp')}", "--export_version=1"), setup=(GEN, mkdir("exp/1")),
         names=["exp/1 exists"], outputs=OUT),
    Case("another process writes --output_file meanwhile",
         ["-m tools.sweep.embed_with_rival", *embed()[1:]], setup=GEN, names=["vectors.npy"],
         after=kept("gen/vectors.npy", b"the rival's output\n")),
]
