"""create_pretraining_data.py (official_bert.commands.create_pretraining_data): a corpus to
TFRecords, and the sets of files it writes as pre-training reads them."""

from tools.kit import fault_kit as kit

from ..argv import cpd, pretrain, vocab
from ..case import Case, at
from ..setups import (GEN, add_bom, binary, killed_generation, not_utf8_corpus, remove,
                      rerun_succeeds, same_as_without_bom, set_of_three, text, vocab_without,
                      without_last_record)

COMMAND = "create-pretraining-data"

OUT = ["gen/out.tfrecord", "gen/.out_tfrecord.summary.json"]
NO_RUN = ["run/checkpoint"]  # pre-training on the damaged set
FLAGS = ("--max_seq_length=4", "--masked_lm_prob=0", "--masked_lm_prob=1.5", "--dupe_factor=0",
         "--max_predictions_per_seq=0", "--short_seq_prob=2")
NGRAMS = ("--max_ngram_size=0", "--max_ngram_size=-2", "--max_ngram_size=1000000")
NEXT_SENTENCE_FLAGS = ("--short_seq_prob=0.5", "--random_next_pool_size=100")



def built_vocab(path, repeat=None):
    """A setup: `bert build-vocab` on the corpus writes the world's `path`; `repeat`: a
    token of it appended once more (a user's edit of the output given back)."""
    def setup(c):
        result = kit.run(kit.command(*c.resolve(vocab(output=at(path)))))
        if result.returncode:
            raise RuntimeError("build-vocab failed: " + result.stderr[-300:])
        if repeat is not None:
            with open(c.p(path), "a", encoding="utf-8") as f:
                f.write(repeat + "\n")
    return setup


CASES = [
    Case("good input", cpd(), setup=GEN, control=True),
    Case("input does not exist", cpd(inputs=at("nope.txt")), setup=GEN, names=["nope.txt"],
         outputs=OUT),
    Case("glob matches nothing", cpd(inputs=at("nope*.txt")), setup=GEN, names=["nope*"],
         outputs=OUT),
    Case("empty input", cpd(inputs=at("e.txt")), setup=(text("e.txt", "\n\n"), GEN),
         names=["e.txt"], outputs=OUT),
    Case("one document", cpd(inputs=at("one.txt")),
         setup=(text("one.txt", "w1 w2 .\nw3 w4 .\n"), GEN), names=["one.txt"], outputs=OUT),
    Case("a line that is not UTF-8", cpd(inputs=at("bad.txt")),
         setup=(not_utf8_corpus("bad.txt"), GEN), names=["bad.txt line"], outputs=OUT),
    Case("binary input", cpd(inputs=at("bin.txt")), setup=(binary("bin.txt"), GEN),
         names=["bin.txt"], outputs=OUT),
    Case("--input_file is a directory", cpd(inputs=at("glue")), setup=GEN, names=["glue"],
         outputs=OUT),
    Case("vocab does not exist", cpd(vocab=at("nope.txt")), setup=GEN, names=["nope.txt"],
         outputs=OUT),
    Case("vocab without [CLS]/[SEP]", cpd(), setup=(vocab_without("[CLS]", "[SEP]"), GEN),
         names=["vocab.txt"], outputs=OUT),
    Case("empty vocab", cpd(), setup=(text("vocab.txt", ""), GEN), names=["vocab.txt"],
         outputs=OUT),
    Case("binary vocab", cpd(), setup=(binary("vocab.txt"), GEN), names=["vocab.txt"],
         outputs=OUT),
    Case("output is the input", cpd(output=at("corpus.txt")), names=["corpus.txt"]),
    Case("output is the vocab", cpd(output=at("vocab.txt")), names=["vocab.txt"]),
    Case("output directory missing", cpd(output=at("no", "o.tfrecord")), names=["o.tfrecord"]),
    Case("output is a directory", cpd(output=at("glue")), names=["glue"]),
    Case("same output twice", cpd(output=at("gen", "a.tfrecord") + "," + at("gen", "a.tfrecord")),
         setup=GEN, names=["a.tfrecord"], outputs=["gen/a.tfrecord"]),
    *[Case(flag, cpd(flag), setup=GEN, names=[flag.split("=")[0]], outputs=OUT)
      for flag in FLAGS],
    Case("stray positional argument", cpd("extra"), setup=GEN, names=["extra"], outputs=OUT),
    Case("one 2 MB line", cpd(inputs=at("long.txt")),
         setup=(text("long.txt", "w1 " * 700_000 + "\nw2 w3 .\n\nw4 w5 .\nw6 .\n"), GEN),
         control=True),
    Case("disk full (4 KB file-size limit)", cpd(), setup=GEN, file_size_limit=4096,
         names=["out.tfrecord"], outputs=OUT, after=rerun_succeeds),
    Case("SIGKILL between renames (3 outputs), then pre-training",
         pretrain(inputs=at("gen", "k-*.tfrecord")), setup=killed_generation, names=["k-"],
         outputs=NO_RUN),
    Case("a set's file cut at a record boundary, then pre-training",
         pretrain(inputs=at("gen", "k-*.tfrecord")),
         setup=(set_of_three, without_last_record("gen/k-1.tfrecord")), names=["k-1"],
         outputs=NO_RUN),
    Case("an output of a set deleted, then pre-training",
         pretrain(inputs=at("gen", "k-*.tfrecord")),
         setup=(set_of_three, remove("gen/k-1.tfrecord")), names=["k-"], outputs=NO_RUN),
    Case("--max_ngram_size=3 (control)", cpd("--max_ngram_size=3"), setup=GEN, control=True),
    *[Case(flag, cpd(flag), setup=GEN, names=["--max_ngram_size"], outputs=OUT)
      for flag in NGRAMS],
    Case("--packing=full_sentences (control)", cpd("--packing=full_sentences"), setup=GEN,
         control=True),
    Case("--packing=full_sentences, one document (control)",
         cpd("--packing=full_sentences", inputs=at("one.txt")),
         setup=(text("one.txt", "w1 w2 w3 w4 .\nw5 w6 w7 .\n"), GEN), control=True),
    Case("--packing=roberta", cpd("--packing=roberta"), setup=GEN, names=["packing"],
         outputs=OUT),
    *[Case(f"--packing=full_sentences {flag} (a next-sentence flag)",
           cpd("--packing=full_sentences", flag), setup=GEN, names=[flag.split("=")[0]],
           outputs=OUT)
      for flag in NEXT_SENTENCE_FLAGS],
    # Issue 36: a vocabulary lists each token once; a byte-order mark is not content.
    Case("--vocab_file: build-vocab's output given back", cpd(vocab=at("gen", "built.txt")),
         setup=(GEN, built_vocab("gen/built.txt")), control=True),
    Case("--vocab_file: build-vocab's output with a token added twice",
         cpd(vocab=at("gen", "built.txt")), setup=(GEN, built_vocab("gen/built.txt", "[MASK]")),
         names=["built.txt has the token '[MASK]' twice"], outputs=OUT),
    Case("vocab and corpus with a BOM: the BOM-less records", cpd(),
         setup=(GEN, add_bom("vocab.txt"), add_bom("corpus.txt")), control=True,
         after=same_as_without_bom("vocab.txt", "corpus.txt", outputs=["gen/out.tfrecord"],
                                   fresh=["gen"])),
]
