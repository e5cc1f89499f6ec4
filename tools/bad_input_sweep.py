r"""Every command x every bad input we can think of, on tiny data: a table.

    python tools/bad_input_sweep.py                 # all cases (about 20 minutes on 2 cores)
    python tools/bad_input_sweep.py --only=predict  # the cases whose command or input has a word
    python tools/bad_input_sweep.py --list          # the cases, without running them

Each case copies a tiny world (vocabulary, config, checkpoint, the data of
every task, pre-training TFRecords, a fine-tuned classifier and its SavedModel:
`tools/fault_kit.py`), damages it or passes a bad flag, runs the real command
in a subprocess (`bert <command>`, a `run_*.py` script or a `data_prep`
module), and classifies what happened:

    clean error          exit 1 with exactly one `error: ...` line, no traceback,
                         naming the file or flag (or, for a good input, exit 0)
    vague error          an error line that names neither, or several error lines
    traceback            a Python traceback reached the user
    silent wrong result  exit 0 where the input was bad
    data lost            an input was modified or deleted, an output that looks
                         complete was left half-written, or rerunning the same
                         command after the fault did not resume

It prints one Markdown row per case, then the totals (docs/guide.md,
"Troubleshooting", shows the last run's). Exit status 1 unless every bad
input gave a clean error.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time
from typing import Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import fault_kit as kit  # noqa: E402

# Files a failed run may leave in its run directory: they do not make it look
# complete (no checkpoint, no results).
RUN_FILES = {"bert_config.json", "vocab.txt", "tokenizer_config.json", "classifier_config.json",
             "label_list.txt", "squad_config.json", "ner_config.json", ".official_bert.lock"}
# Files that say "this step finished": none may appear when a command fails.
COMPLETE_MARKERS = {"eval_results.txt", "test_results.tsv", "predictions.json",
                    "nbest_predictions.json", "null_odds.json", "saved_model.pb",
                    "test_predictions.txt", "predictions.txt"}


@dataclasses.dataclass
class Ctx:
    """One case's copy of the world."""

    root: pathlib.Path

    def p(self, *parts) -> str:
        return str(self.root.joinpath(*parts))

    def write(self, name, text, encoding="utf-8"):
        return str(kit.write(self.root / name, text, encoding))


@dataclasses.dataclass
class Case:
    command: str  # as the table names it
    name: str  # the bad input
    argv: Callable[[Ctx], list]  # [script, args...] for kit.command
    setup: Callable[[Ctx], None] | None = None
    expect_error: bool = True
    names: Callable[[Ctx], list] | None = None  # one of these must be in the error line
    outputs: Callable[[Ctx], list] | None = None  # must not exist after an error
    stdin: bytes | None = None
    file_size_limit: int | None = None
    after: Callable[[Ctx, kit.Result], tuple] | None = None  # (ok, why) of a follow-up
    timeout: int = 300


CASES: list[Case] = []


def case(command, name, argv, **kw):
    CASES.append(Case(command, name, argv, **kw))


# === Argument builders ===

TINY = ["--max_seq_length=16"]


def classify(c: Ctx, *extra, data="glue", out="out", ckpt="ckpt", modes=("--do_train",)):
    return ["run_classifier.py", "--task_name=sst-2", f"--data_dir={c.p(data)}",
            f"--init_checkpoint={c.p(ckpt)}", *modes, *TINY, "--train_batch_size=4",
            "--eval_batch_size=4", "--predict_batch_size=4", "--num_train_epochs=1",
            "--log_steps=1", f"--output_dir={c.p(out)}", *extra]


def pretrain(c: Ctx, *extra, inputs=None, out="run", steps=2, ckpt=None):
    model = ([f"--init_checkpoint={c.p(ckpt)}"] if ckpt else
             [f"--bert_config_file={c.p('bert_config.json')}", f"--vocab_file={c.p('vocab.txt')}"])
    return ["run_pretraining.py", f"--input_file={inputs or c.p('pretrain.tfrecord')}", *model,
            "--do_train", f"--num_train_steps={steps}", "--num_warmup_steps=0",
            "--save_checkpoints_steps=2", "--train_batch_size=4", "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--log_steps=2", f"--output_dir={c.p(out)}", *extra]


def squad(c: Ctx, *extra, train=None, predict=None):
    files = []
    if train is not False:
        files += ["--do_train", f"--train_file={train or c.p('squad', 'train.json')}"]
    if predict:
        files += ["--do_predict", f"--predict_file={predict}"]
    return ["run_squad.py", f"--init_checkpoint={c.p('ckpt')}", *files, "--max_seq_length=32",
            "--doc_stride=8", "--max_query_length=8", "--train_batch_size=2",
            "--num_train_epochs=1", f"--output_dir={c.p('out')}", *extra]


def swag(c: Ctx, *extra, train=None):
    return ["run_swag.py", f"--init_checkpoint={c.p('ckpt')}", "--do_train",
            f"--train_file={train or c.p('swag', 'train.csv')}", *TINY, "--train_batch_size=2",
            "--num_train_epochs=1", f"--output_dir={c.p('out')}", *extra]


def ner(c: Ctx, *extra, train=None):
    return ["run_ner.py", f"--init_checkpoint={c.p('ckpt')}", "--do_train",
            f"--train_file={train or c.p('conll', 'train.txt')}", *TINY, "--train_batch_size=2",
            "--num_train_epochs=1", f"--output_dir={c.p('out')}", *extra]


def cpd(c: Ctx, *extra, inputs=None, output=None, vocab=None):
    return ["-m data_prep.create_pretraining_data", f"--input_file={inputs or c.p('corpus.txt')}",
            f"--output_file={output or c.p('gen', 'out.tfrecord')}",
            f"--vocab_file={vocab or c.p('vocab.txt')}", "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--dupe_factor=1", "--progress_seconds=0",
            "--num_workers=1", *extra]


def corpus(c: Ctx, *extra, inputs=None, output=None):
    return ["-m data_prep.prepare_corpus", f"--input={inputs or c.p('docs')}",
            f"--output_file={output or c.p('gen', 'corpus.txt')}", *extra]


def vocab(c: Ctx, *extra, inputs=None, output=None):
    return ["-m data_prep.build_vocab", f"--input_file={inputs or c.p('corpus.txt')}",
            f"--output_file={output or c.p('gen', 'vocab.txt')}", "--vocab_size=200",
            "--num_unused=5", *extra]


def predict(c: Ctx, *extra, model=None, input_file=None):
    return ["bert predict", f"--model={model or c.p('export')}",
            *([f"--input_file={input_file}"] if input_file else []), *extra]


def features(c: Ctx, *extra, input_file=None):
    return ["extract_features.py", f"--input_file={input_file or c.p('predict.txt')}",
            f"--output_file={c.p('gen', 'features.jsonl')}", f"--init_checkpoint={c.p('ckpt')}",
            "--layers=-1,-2", *TINY, *extra]


def embed(c: Ctx, *extra, input_file=None, output_file=None):
    return ["bert embed", f"--input_file={input_file or c.p('predict.txt')}",
            f"--output_file={output_file or c.p('gen', 'vectors.npy')}",
            f"--init_checkpoint={c.p('ckpt')}", *TINY, *extra]


def export_google(c: Ctx, *extra, output_dir=None):
    return ["bert export-google", f"--init_checkpoint={c.p('ckpt')}",
            f"--output_dir={output_dir or c.p('gen', 'google')}", *extra]


def split(c: Ctx, *extra, input_file=None, train=None, dev=None):
    return ["-m data_prep.squad", f"--input_file={input_file or c.p('squad3.json')}",
            f"--train_output={train or c.p('gen', 'train.json')}",
            f"--dev_output={dev or c.p('gen', 'dev.json')}", "--num_train_articles=2", *extra]


def export_encoder(c: Ctx, *extra, output_dir=None, ckpt="ckpt"):
    return ["bert export-encoder", f"--init_checkpoint={c.p(ckpt)}",
            f"--output_dir={output_dir or c.p('gen', 'hub')}", *TINY, *extra]


def ids_only(c: Ctx, *extra, source="export", output=None):
    return ["bert export-ids-only", f"--saved_model={c.p(source)}",
            f"--export_dir={output or c.p('gen', 'ids')}", *extra]


def glue_submission(c: Ctx, *extra, runs="runs", output=None, glue_dir="gluedata"):
    return ["bert glue-submission", f"--runs_dir={c.p(runs)}",
            f"--output_file={output or c.p('gen', 'submission.zip')}",
            *([f"--glue_dir={c.p(glue_dir)}"] if glue_dir else []), "--allow_missing", *extra]


def download(c: Ctx, *args, source="src", manifest="manifest.json", output=None):
    return ["bert download", *args, f"--output_dir={output or c.p('gen', 'data')}",
            *([f"--source_dir={c.p(source)}"] if source else []),
            *([f"--manifest={c.p(manifest)}"] if manifest else [])]


def quickstart(c: Ctx, *extra, output=None):
    return ["bert quickstart", f"--output_dir={c.p(output or 'gen/qs')}", *extra]


BINARY = bytes(range(256)) * 40
NOT_UTF8 = b"\xff\xfe bad \xc3\x28 bytes"


def _binary(path):
    return lambda c: kit.write(c.p(path), BINARY)


def _text(path, text):
    return lambda c: kit.write(c.p(path), text)


def _truncate(path, keep=0.5):
    return lambda c: kit.truncate(c.p(path), keep)


def _corrupt(path):
    return lambda c: kit.corrupt(c.p(path))


def _config(**changes):
    def setup(c):
        values = dict(kit.TINY_CONFIG)
        for key, value in changes.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        for where in ("bert_config.json", "ckpt/bert_config.json"):
            kit.write(c.p(where), json.dumps(values))
    return setup


def _vocab_without(*tokens):
    def setup(c):
        words = [t for t in kit.VOCAB if t not in tokens]
        for where in ("vocab.txt", "ckpt/vocab.txt"):
            kit.write(c.p(where), "\n".join(words) + "\n")
    return setup


def _gen_outputs(*names):
    return lambda c: [c.p("gen", n) for n in names]


# === The cases ===


def define_cases():
    # --- prepare-corpus -------------------------------------------------------------
    docs = lambda c: (kit.write(c.p("docs", "a.txt"), "One sentence here. And another one.\n"),  # noqa: E731
                      kit.write(c.p("docs", "b.txt"), "A second document. It ends.\n"))
    out = _gen_outputs("corpus.txt")
    mk = lambda c: os.makedirs(c.p("gen"), exist_ok=True)  # noqa: E731

    def both(*fs):
        return lambda c: [f(c) for f in fs]

    case("prepare-corpus", "good input", lambda c: corpus(c), setup=both(docs, mk),
         expect_error=False)
    case("prepare-corpus", "input does not exist", lambda c: corpus(c, inputs=c.p("nope")),
         setup=mk, names=lambda c: ["nope"], outputs=out)
    case("prepare-corpus", "empty input directory", lambda c: corpus(c),
         setup=both(lambda c: os.makedirs(c.p("docs")), mk), names=lambda c: ["docs"],
         outputs=out)
    case("prepare-corpus", "only empty files", lambda c: corpus(c),
         setup=both(_text("docs/a.txt", ""), mk), names=lambda c: ["--input"], outputs=out)
    case("prepare-corpus", "binary file, --fallback_encoding=''",
         lambda c: corpus(c, "--fallback_encoding="), setup=both(_binary("docs/a.bin"), mk),
         names=lambda c: ["a.bin"], outputs=out)
    case("prepare-corpus", "output directory missing",
         lambda c: corpus(c, output=c.p("no", "such", "c.txt")), setup=docs,
         names=lambda c: ["no/such"])
    case("prepare-corpus", "output is an input", lambda c: corpus(c, output=c.p("docs", "a.txt")),
         setup=docs, names=lambda c: ["a.txt"])
    case("prepare-corpus", "output inside the input directory",
         lambda c: corpus(c, output=c.p("docs", "corpus.txt")), setup=docs,
         names=lambda c: ["corpus.txt"], outputs=lambda c: [c.p("docs", "corpus.txt")])
    case("prepare-corpus", "output is a directory", lambda c: corpus(c, output=c.p("gen")),
         setup=both(docs, mk), names=lambda c: ["gen"])
    case("prepare-corpus", "unknown flag", lambda c: corpus(c, "--no_such_flag=1"),
         setup=both(docs, mk), names=lambda c: ["no_such_flag"], outputs=out)
    case("prepare-corpus", "one 3 MB line", lambda c: corpus(c),
         setup=both(_text("docs/a.txt", "word " * 600_000), mk), expect_error=False)
    case("prepare-corpus", "disk full (1 KB file-size limit)", lambda c: corpus(c),
         setup=both(_text("docs/a.txt", "A sentence that repeats. " * 400), mk),
         file_size_limit=1024, names=lambda c: ["corpus.txt"], outputs=out,
         after=rerun_succeeds)

    # --- build-vocab ----------------------------------------------------------------
    vout = _gen_outputs("vocab.txt")
    case("build-vocab", "good input", lambda c: vocab(c), setup=mk, expect_error=False)
    case("build-vocab", "input does not exist", lambda c: vocab(c, inputs=c.p("nope.txt")),
         setup=mk, names=lambda c: ["nope.txt"], outputs=vout)
    case("build-vocab", "empty input", lambda c: vocab(c, inputs=c.p("empty.txt")),
         setup=both(_text("empty.txt", ""), mk), names=lambda c: ["--input_file"], outputs=vout)
    case("build-vocab", "binary input", lambda c: vocab(c, inputs=c.p("bin.txt")),
         setup=both(_binary("bin.txt"), mk), names=lambda c: ["bin.txt"], outputs=vout)
    case("build-vocab", "--vocab_size=10", lambda c: vocab(c, "--vocab_size=10"), setup=mk,
         names=lambda c: ["--vocab_size"], outputs=vout)
    case("build-vocab", "--vocab_size=-1", lambda c: vocab(c, "--vocab_size=-1"), setup=mk,
         names=lambda c: ["--vocab_size"], outputs=vout)
    case("build-vocab", "--num_unused=-5", lambda c: vocab(c, "--num_unused=-5"), setup=mk,
         names=lambda c: ["--num_unused"], outputs=vout)
    case("build-vocab", "stray positional argument", lambda c: vocab(c, "true"), setup=mk,
         names=lambda c: ["true"], outputs=vout)
    case("build-vocab", "output is the input", lambda c: vocab(c, output=c.p("corpus.txt")),
         names=lambda c: ["corpus.txt"])
    case("build-vocab", "output directory missing",
         lambda c: vocab(c, output=c.p("no", "v.txt")), names=lambda c: ["no/v.txt", "/no"])
    case("build-vocab", "output is a directory", lambda c: vocab(c, output=c.p("glue")),
         names=lambda c: ["glue"])

    # --- create-pretraining-data ------------------------------------------------------
    gout = _gen_outputs("out.tfrecord", ".out_tfrecord.summary.json")
    case("create-pretraining-data", "good input", lambda c: cpd(c), setup=mk, expect_error=False)
    case("create-pretraining-data", "input does not exist",
         lambda c: cpd(c, inputs=c.p("nope.txt")), setup=mk, names=lambda c: ["nope.txt"],
         outputs=gout)
    case("create-pretraining-data", "glob matches nothing",
         lambda c: cpd(c, inputs=c.p("nope*.txt")), setup=mk, names=lambda c: ["nope*"],
         outputs=gout)
    case("create-pretraining-data", "empty input", lambda c: cpd(c, inputs=c.p("e.txt")),
         setup=both(_text("e.txt", "\n\n"), mk), names=lambda c: ["e.txt"], outputs=gout)
    case("create-pretraining-data", "one document", lambda c: cpd(c, inputs=c.p("one.txt")),
         setup=both(_text("one.txt", "w1 w2 .\nw3 w4 .\n"), mk), names=lambda c: ["one.txt"],
         outputs=gout)
    case("create-pretraining-data", "a line that is not UTF-8",
         lambda c: cpd(c, inputs=c.p("bad.txt")),
         setup=both(lambda c: kit.write(c.p("bad.txt"), kit.corpus_text().encode()
                                        .replace(b"w1 ", b"w1 \xff ", 1)), mk),
         names=lambda c: ["bad.txt line"], outputs=gout)
    case("create-pretraining-data", "binary input", lambda c: cpd(c, inputs=c.p("bin.txt")),
         setup=both(_binary("bin.txt"), mk), names=lambda c: ["bin.txt"], outputs=gout)
    case("create-pretraining-data", "--input_file is a directory",
         lambda c: cpd(c, inputs=c.p("glue")), setup=mk, names=lambda c: ["glue"], outputs=gout)
    case("create-pretraining-data", "vocab does not exist",
         lambda c: cpd(c, vocab=c.p("nope.txt")), setup=mk, names=lambda c: ["nope.txt"],
         outputs=gout)
    case("create-pretraining-data", "vocab without [CLS]/[SEP]", lambda c: cpd(c),
         setup=both(_vocab_without("[CLS]", "[SEP]"), mk), names=lambda c: ["vocab.txt"],
         outputs=gout)
    case("create-pretraining-data", "empty vocab", lambda c: cpd(c),
         setup=both(_text("vocab.txt", ""), mk), names=lambda c: ["vocab.txt"], outputs=gout)
    case("create-pretraining-data", "binary vocab", lambda c: cpd(c),
         setup=both(_binary("vocab.txt"), mk), names=lambda c: ["vocab.txt"], outputs=gout)
    case("create-pretraining-data", "output is the input",
         lambda c: cpd(c, output=c.p("corpus.txt")), names=lambda c: ["corpus.txt"])
    case("create-pretraining-data", "output is the vocab",
         lambda c: cpd(c, output=c.p("vocab.txt")), names=lambda c: ["vocab.txt"])
    case("create-pretraining-data", "output directory missing",
         lambda c: cpd(c, output=c.p("no", "o.tfrecord")), names=lambda c: ["o.tfrecord"])
    case("create-pretraining-data", "output is a directory", lambda c: cpd(c, output=c.p("glue")),
         names=lambda c: ["glue"])
    case("create-pretraining-data", "same output twice",
         lambda c: cpd(c, output=c.p("gen", "a.tfrecord") + "," + c.p("gen", "a.tfrecord")),
         setup=mk, names=lambda c: ["a.tfrecord"], outputs=_gen_outputs("a.tfrecord"))
    for flag in ("--max_seq_length=4", "--masked_lm_prob=0", "--masked_lm_prob=1.5",
                 "--dupe_factor=0", "--max_predictions_per_seq=0", "--short_seq_prob=2"):
        case("create-pretraining-data", flag, lambda c, f=flag: cpd(c, f), setup=mk,
             names=lambda c, f=flag: [f.split("=")[0]], outputs=gout)
    case("create-pretraining-data", "stray positional argument",
         lambda c: cpd(c, "extra"), setup=mk, names=lambda c: ["extra"], outputs=gout)
    case("create-pretraining-data", "one 2 MB line", lambda c: cpd(c, inputs=c.p("long.txt")),
         setup=both(_text("long.txt", "w1 " * 700_000 + "\nw2 w3 .\n\nw4 w5 .\nw6 .\n"), mk),
         expect_error=False)
    case("create-pretraining-data", "disk full (4 KB file-size limit)", lambda c: cpd(c),
         setup=mk, file_size_limit=4096, names=lambda c: ["out.tfrecord"], outputs=gout,
         after=rerun_succeeds)
    case("create-pretraining-data", "SIGKILL between renames (3 outputs), then pre-training",
         lambda c: pretrain(c, inputs=c.p("gen", "k-*.tfrecord")), setup=killed_generation,
         names=lambda c: ["k-"], outputs=lambda c: [c.p("run", "checkpoint")])
    case("create-pretraining-data", "a set's file cut at a record boundary, then pre-training",
         lambda c: pretrain(c, inputs=c.p("gen", "k-*.tfrecord")),
         setup=lambda c: set_with_file_gone(c, cut=True), names=lambda c: ["k-1"],
         outputs=lambda c: [c.p("run", "checkpoint")])
    case("create-pretraining-data", "an output of a set deleted, then pre-training",
         lambda c: pretrain(c, inputs=c.p("gen", "k-*.tfrecord")), setup=set_with_file_gone,
         names=lambda c: ["k-"], outputs=lambda c: [c.p("run", "checkpoint")])
    case("create-pretraining-data", "--max_ngram_size=3 (control)",
         lambda c: cpd(c, "--max_ngram_size=3"), setup=mk, expect_error=False)
    for flag in ("--max_ngram_size=0", "--max_ngram_size=-2", "--max_ngram_size=1000000"):
        case("create-pretraining-data", flag, lambda c, f=flag: cpd(c, f), setup=mk,
             names=lambda c: ["--max_ngram_size"], outputs=gout)
    case("create-pretraining-data", "--packing=full_sentences (control)",
         lambda c: cpd(c, "--packing=full_sentences"), setup=mk, expect_error=False)
    case("create-pretraining-data", "--packing=full_sentences, one document (control)",
         lambda c: cpd(c, "--packing=full_sentences", inputs=c.p("one.txt")),
         setup=both(_text("one.txt", "w1 w2 w3 w4 .\nw5 w6 w7 .\n"), mk), expect_error=False)
    case("create-pretraining-data", "--packing=roberta", lambda c: cpd(c, "--packing=roberta"),
         setup=mk, names=lambda c: ["packing"], outputs=gout)
    for flag in ("--short_seq_prob=0.5", "--random_next_pool_size=100"):
        case("create-pretraining-data", f"--packing=full_sentences {flag} (a next-sentence "
             "flag)", lambda c, f=flag: cpd(c, "--packing=full_sentences", f), setup=mk,
             names=lambda c, f=flag: [f.split("=")[0]], outputs=gout)

    # --- pretrain -----------------------------------------------------------------------
    run_out = lambda c: [c.p("run", "checkpoint")]  # noqa: E731
    case("pretrain", "good input", lambda c: pretrain(c), expect_error=False)
    case("pretrain", "glob matches nothing", lambda c: pretrain(c, inputs=c.p("no-*.tfrecord")),
         names=lambda c: ["--input_file"], outputs=run_out)
    for label, damage, compress in (
            ("truncated TFRecord", lambda p: kit.truncate(p, 0.55), False),
            ("corrupt TFRecord", lambda p: kit.corrupt(p, 0.55), False),
            ("truncated GZIP TFRecord", lambda p: kit.truncate(p, 0.55), True),
            ("corrupt GZIP TFRecord", lambda p: kit.corrupt(p, 0.55), True)):
        case("pretrain", label, lambda c: pretrain(c, inputs=c.p("bad.tfrecord"), steps=40),
             setup=lambda c, d=damage, z=compress: damaged_records(c, d, z),
             names=lambda c: ["bad.tfrecord"], outputs=run_out)
    case("pretrain", "--input_file is a directory", lambda c: pretrain(c, inputs=c.p("glue")),
         names=lambda c: ["glue"], outputs=run_out)
    case("pretrain", "--eval_input_file does not exist (--do_eval)",
         lambda c: pretrain(c, "--do_eval", f"--eval_input_file={c.p('nope.tfrecord')}"),
         names=lambda c: ["nope.tfrecord"], outputs=run_out)
    case("pretrain", "a flag's value as a separate word (--do_train true)",
         lambda c: pretrain(c, "true"), names=lambda c: ["true"], outputs=run_out)
    case("pretrain", "text file as TFRecord", lambda c: pretrain(c, inputs=c.p("corpus.txt")),
         names=lambda c: ["corpus.txt"], outputs=run_out)
    case("pretrain", "empty TFRecord file", lambda c: pretrain(c, inputs=c.p("e.tfrecord")),
         setup=_text("e.tfrecord", ""), names=lambda c: ["e.tfrecord"], outputs=run_out)
    case("pretrain", "--max_seq_length unlike the files", lambda c: pretrain(c, "--max_seq_length=64"),
         names=lambda c: ["pretrain.tfrecord"], outputs=run_out)
    case("pretrain", "--max_predictions_per_seq unlike the files",
         lambda c: pretrain(c, "--max_predictions_per_seq=7"),
         names=lambda c: ["pretrain.tfrecord"], outputs=run_out)
    for label, changes in (("config without num_hidden_layers", dict(num_hidden_layers=None)),
                           ("config with hidden_size % heads != 0", dict(hidden_size=18)),
                           ("config with vocab_size 0", dict(vocab_size=0)),
                           ("config with hidden_act 'nope'", dict(hidden_act="nope")),
                           ("config with a string for a number", dict(hidden_size="16"))):
        case("pretrain", label, lambda c: pretrain(c), setup=_config(**changes),
             names=lambda c: ["bert_config.json"], outputs=run_out)
    case("pretrain", "config that is not JSON", lambda c: pretrain(c),
         setup=_text("bert_config.json", "{vocab_size: 3"), names=lambda c: ["bert_config.json"],
         outputs=run_out)
    case("pretrain", "config that is a JSON list", lambda c: pretrain(c),
         setup=_text("bert_config.json", "[1, 2]"), names=lambda c: ["bert_config.json"],
         outputs=run_out)
    case("pretrain", "vocab without [MASK]", lambda c: pretrain(c),
         setup=_vocab_without("[MASK]"), names=lambda c: ["vocab.txt"], outputs=run_out)
    for flag in ("--train_batch_size=0", "--num_train_steps=0", "--learning_rate=0",
                 "--learning_rate=nan", "--max_seq_length=0", "--save_checkpoints_steps=0",
                 "--num_gpus=2", "--num_warmup_steps=-1", "--gradient_accumulation_steps=3",
                 "--max_seq_length=1000", "--masked_lm_prob=1.5", "--dtype=float64"):
        case("pretrain", flag, lambda c, f=flag: pretrain(c, f),
             names=lambda c, f=flag: [f.split("=")[0]], outputs=run_out)
    case("pretrain", "truncated checkpoint .index (resume)", lambda c: pretrain(c, steps=6),
         setup=lambda c: trained_run(c, damage=lambda r: kit.truncate(r / "ckpt-4.index")),
         names=lambda c: ["ckpt-4.index"], after=resumes_after_delete)
    case("pretrain", "truncated checkpoint .data (resume)", lambda c: pretrain(c, steps=6),
         setup=lambda c: trained_run(c, damage=lambda r: kit.truncate(
             r / "ckpt-4.data-00000-of-00001")), names=lambda c: ["ckpt-4.data"],
         after=resumes_after_delete)
    case("pretrain", "corrupt checkpoint .data (resume)", lambda c: pretrain(c, steps=6),
         setup=lambda c: trained_run(c, damage=lambda r: kit.corrupt(
             r / "ckpt-4.data-00000-of-00001", 0.3, 64)), names=lambda c: ["ckpt-4"],
         after=resumes_after_delete)
    case("pretrain", "corrupt `checkpoint` state file", lambda c: pretrain(c, steps=6),
         setup=lambda c: trained_run(c, damage=lambda r: (r / "checkpoint").write_text("}{x")),
         names=lambda c: ["checkpoint"])
    case("pretrain", "disk full while saving a checkpoint (resume)", lambda c: pretrain(c, steps=6),
         setup=lambda c: trained_run(c), file_size_limit=40_000, names=lambda c: ["run"],
         after=rerun_resumes)
    case("pretrain", "--init_checkpoint does not exist",
         lambda c: pretrain(c, ckpt="nope"), names=lambda c: ["nope"], outputs=run_out)
    case("pretrain", "--init_checkpoint with a truncated .data",
         lambda c: pretrain(c, ckpt="ckpt"),
         setup=_truncate("ckpt/ckpt-1.data-00000-of-00001"), names=lambda c: ["ckpt-1.data"],
         outputs=run_out)
    case("pretrain", "--init_checkpoint of another config",
         lambda c: pretrain(c, f"--bert_config_file={c.p('other.json')}", ckpt="ckpt"),
         setup=lambda c: kit.write(c.p("other.json"), json.dumps(
             dict(kit.TINY_CONFIG, hidden_size=32))), names=lambda c: ["ckpt"], outputs=run_out)
    case("pretrain", "--output_dir is a file", lambda c: pretrain(c, out="corpus.txt"),
         names=lambda c: ["corpus.txt"])
    case("pretrain", "--output_dir is the input", lambda c: pretrain(c, out="pretrain.tfrecord"),
         names=lambda c: ["pretrain.tfrecord"])
    text = lambda c, *extra, inputs="corpus.txt": pretrain(  # noqa: E731
        c, "--input_format=text", *extra, inputs=c.p(inputs))
    case("pretrain", "--input_format=text (control)", lambda c: text(c), expect_error=False)
    case("pretrain", "--input_format=text: binary corpus", lambda c: text(c, inputs="bin.txt"),
         setup=_binary("bin.txt"), names=lambda c: ["bin.txt"], outputs=run_out)
    case("pretrain", "--input_format=text: a TFRecord as the corpus",
         lambda c: text(c, inputs="pretrain.tfrecord"), names=lambda c: ["pretrain.tfrecord"],
         outputs=run_out)
    case("pretrain", "--input_format=text: a line that is not UTF-8",
         lambda c: text(c, inputs="bad.txt"),
         setup=lambda c: kit.write(c.p("bad.txt"), kit.corpus_text().encode().replace(
             b"w1 ", b"w1 \xff ", 1)), names=lambda c: ["bad.txt line"], outputs=run_out)
    case("pretrain", "--input_format=text: one document", lambda c: text(c, inputs="one.txt"),
         setup=_text("one.txt", "w1 w2 .\nw3 w4 .\n"), names=lambda c: ["one.txt"],
         outputs=run_out)
    case("pretrain", "--input_format=text: empty corpus", lambda c: text(c, inputs="e.txt"),
         setup=_text("e.txt", "\n\n"), names=lambda c: ["e.txt"], outputs=run_out)
    case("pretrain", "--input_format=text with --dynamic_masking",
         lambda c: text(c, "--dynamic_masking"), names=lambda c: ["--dynamic_masking"],
         outputs=run_out)
    case("pretrain", "--input_format=csv", lambda c: pretrain(c, "--input_format=csv"),
         names=lambda c: ["input_format"], outputs=run_out)
    case("pretrain", "--max_ngram_size=3 --dynamic_masking (control)",
         lambda c: pretrain(c, "--dynamic_masking", "--max_ngram_size=3"), expect_error=False)
    for flag in ("--max_ngram_size=0", "--max_ngram_size=-2", "--max_ngram_size=1000000"):
        case("pretrain", f"{flag} --dynamic_masking",
             lambda c, f=flag: pretrain(c, "--dynamic_masking", f),
             names=lambda c: ["--max_ngram_size"], outputs=run_out)
    case("pretrain", "--max_ngram_size=1000000 --input_format=text",
         lambda c: text(c, "--max_ngram_size=1000000"), names=lambda c: ["--max_ngram_size"],
         outputs=run_out)
    case("pretrain", "--max_ngram_size=3 on statically masked files",
         lambda c: pretrain(c, "--max_ngram_size=3"), names=lambda c: ["--max_ngram_size"],
         outputs=run_out)
    for flag in ("--length_bucket_width=16", "--length_bucket_width=0"):
        case("pretrain", f"{flag} (control)", lambda c, f=flag: pretrain(c, f),
             expect_error=False)
    case("pretrain", "--length_bucket_width=7 (does not divide --max_seq_length; control)",
         lambda c: pretrain(c, "--length_bucket_width=7"), expect_error=False)
    for flag in ("--length_bucket_width=-16", "--length_bucket_width=64"):
        case("pretrain", flag, lambda c, f=flag: pretrain(c, f),
             names=lambda c: ["--length_bucket_width"], outputs=run_out)
    case("pretrain", "--serving_dtype=float16", lambda c: pretrain(c, "--serving_dtype=float16"),
         names=lambda c: ["serving_dtype"], outputs=run_out)
    case("pretrain", "--serving_dtype=bfloat16 without --export_dir",
         lambda c: pretrain(c, "--serving_dtype=bfloat16"), names=lambda c: ["--serving_dtype"],
         outputs=run_out)

    # --- classify ----------------------------------------------------------------------
    cls_out = lambda c: [c.p("out", "eval_results.txt"), c.p("out", "checkpoint")]  # noqa: E731
    case("classify", "good input", lambda c: classify(c), expect_error=False)
    case("classify", "--data_dir does not exist", lambda c: classify(c, data="nope"),
         names=lambda c: ["nope"], outputs=cls_out)
    case("classify", "--data_dir is a file", lambda c: classify(c, data="corpus.txt"),
         names=lambda c: ["corpus.txt"], outputs=cls_out)
    case("classify", "train.tsv is a directory", lambda c: classify(c),
         setup=lambda c: (os.remove(c.p("glue", "train.tsv")), os.makedirs(c.p("glue", "train.tsv"))),
         names=lambda c: ["train.tsv"], outputs=cls_out)
    case("classify", "binary dev.tsv (--do_eval)", lambda c: classify(
        c, modes=("--do_train", "--do_eval")), setup=_binary("glue/dev.tsv"),
         names=lambda c: ["dev.tsv"], outputs=cls_out)
    case("classify", "test.tsv not UTF-8 (--do_predict)", lambda c: classify(
        c, modes=("--do_train", "--do_predict")),
         setup=lambda c: kit.write(c.p("glue", "test.tsv"), b"index\tsentence\n0\tgood\n1\tb\xe9d\n"),
         names=lambda c: ["test.tsv line 3"], outputs=cls_out)
    case("classify", "a BOM and CRLF line ends", lambda c: classify(c),
         setup=lambda c: kit.write(c.p("glue", "train.tsv"), ("\ufeffsentence\tlabel\r\n" + "".join(
             f"{s}\t{y}\r\n" for s, y in kit.SST_TRAIN)).encode("utf-8")), expect_error=False)
    case("classify", "a config with keys BERT does not use", lambda c: classify(c),
         setup=_config(architectures=["BertModel"], model_type="bert"), expect_error=False)
    case("classify", "stray positional argument", lambda c: classify(c, "extra"),
         names=lambda c: ["extra"], outputs=cls_out)
    case("classify", "train.tsv missing", lambda c: classify(c),
         setup=lambda c: os.remove(c.p("glue", "train.tsv")), names=lambda c: ["train.tsv"],
         outputs=cls_out)
    case("classify", "train.tsv not UTF-8 (line 4)", lambda c: classify(c),
         setup=lambda c: kit.write(c.p("glue", "train.tsv"), (
             "sentence\tlabel\nthe movie\t1\nbad\t0\ncaf\xe9\t1\n").encode("latin-1")),
         names=lambda c: ["train.tsv line 4"], outputs=cls_out)
    case("classify", "binary train.tsv", lambda c: classify(c), setup=_binary("glue/train.tsv"),
         names=lambda c: ["train.tsv"], outputs=cls_out)
    case("classify", "empty train.tsv", lambda c: classify(c), setup=_text("glue/train.tsv", ""),
         names=lambda c: ["train.tsv"], outputs=cls_out)
    case("classify", "train.tsv with a CSV header", lambda c: classify(c),
         setup=_text("glue/train.tsv", "sentence,label\ngood,1\n"), names=lambda c: ["train.tsv"],
         outputs=cls_out)
    case("classify", "a row without its label column", lambda c: classify(c),
         setup=_text("glue/train.tsv", "sentence\tlabel\ngood\t1\nbad\n"),
         names=lambda c: ["train.tsv line 3"], outputs=cls_out)
    case("classify", "unknown label", lambda c: classify(c),
         setup=_text("glue/train.tsv", "sentence\tlabel\ngood\t1\nbad\tnegative\n"),
         names=lambda c: ["train.tsv line 3"], outputs=cls_out)
    case("classify", "dev.tsv unknown label (--do_eval)", lambda c: classify(
        c, modes=("--do_train", "--do_eval")),
         setup=_text("glue/dev.tsv", "sentence\tlabel\ngood\t1\nbad\t2\n"),
         names=lambda c: ["dev.tsv line 3"], outputs=cls_out)
    case("classify", "test.tsv missing (--do_predict)", lambda c: classify(
        c, modes=("--do_train", "--do_predict")),
         setup=lambda c: os.remove(c.p("glue", "test.tsv")), names=lambda c: ["test.tsv"],
         outputs=cls_out)
    case("classify", "one 1 MB line", lambda c: classify(c),
         setup=_text("glue/train.tsv", "sentence\tlabel\n" + "good " * 200_000 + "\t1\nbad\t0\n"
                     + "".join(f"{s}\t{y}\n" for s, y in kit.SST_TRAIN)), expect_error=False)
    case("classify", "vocab larger than the config's vocab_size", lambda c: classify(c),
         setup=lambda c: kit.write(c.p("ckpt", "vocab.txt"), "\n".join(
             kit.VOCAB + [f"extra{i}" for i in range(5)]) + "\n"),
         names=lambda c: ["vocab.txt"], outputs=cls_out)
    case("classify", "vocab without [CLS]/[SEP]", lambda c: classify(c),
         setup=_vocab_without("[CLS]", "[SEP]"), names=lambda c: ["vocab.txt"], outputs=cls_out)
    case("classify", "binary vocab", lambda c: classify(c), setup=_binary("ckpt/vocab.txt"),
         names=lambda c: ["vocab.txt"], outputs=cls_out)
    case("classify", "config without num_hidden_layers", lambda c: classify(c),
         setup=_config(num_hidden_layers=None), names=lambda c: ["bert_config.json"],
         outputs=cls_out)
    case("classify", "--init_checkpoint: truncated .index", lambda c: classify(c),
         setup=_truncate("ckpt/ckpt-1.index"), names=lambda c: ["ckpt-1.index"], outputs=cls_out)
    case("classify", "--init_checkpoint: truncated .data", lambda c: classify(c),
         setup=_truncate("ckpt/ckpt-1.data-00000-of-00001"), names=lambda c: ["ckpt-1.data"],
         outputs=cls_out)
    case("classify", "--init_checkpoint: .data deleted", lambda c: classify(c),
         setup=lambda c: os.remove(c.p("ckpt", "ckpt-1.data-00000-of-00001")),
         names=lambda c: ["ckpt"], outputs=cls_out)
    case("classify", "--init_checkpoint: truncated model.safetensors",
         lambda c: classify(c, ckpt="hf"), setup=lambda c: hf_checkpoint(c, truncate=True),
         names=lambda c: ["model.safetensors"], outputs=cls_out)
    case("classify", "--init_checkpoint: empty directory", lambda c: classify(c, ckpt="empty"),
         setup=lambda c: os.makedirs(c.p("empty")), names=lambda c: ["empty"], outputs=cls_out)
    for flag in ("--train_batch_size=0", "--num_train_epochs=0", "--num_train_epochs=-1",
                 "--num_gpus=2", "--max_seq_length=1", "--max_seq_length=0",
                 "--max_seq_length=100000", "--learning_rate=-1", "--warmup_proportion=2",
                 "--task_name=sst-3", "--distribution_strategy=nope", "--export_version=0"):
        case("classify", flag, lambda c, f=flag: classify(c, f),
             names=lambda c, f=flag: [f.split("=")[0]], outputs=cls_out)
    case("classify", "nothing to do (no --do_*)", lambda c: classify(c, modes=()),
         names=lambda c: ["--do_train"], outputs=cls_out)
    case("classify", "--export_dir is --output_dir",
         lambda c: classify(c, f"--export_dir={c.p('out')}"), names=lambda c: ["--export_dir"],
         outputs=cls_out)
    case("classify", "--output_dir is --data_dir", lambda c: classify(c, out="glue"),
         names=lambda c: ["glue"])
    case("classify", "evaluate a run directory without a trained head",
         lambda c: classify(c, modes=("--do_eval",)), names=lambda c: ["--do_train"],
         outputs=cls_out)
    windows = ("--long_document=windows", "--doc_stride=4", "--max_windows=4")
    case("classify", "--long_document=windows (control)", lambda c: classify(c, *windows),
         expect_error=False)
    case("classify", "--long_document=sliding", lambda c: classify(c, "--long_document=sliding"),
         names=lambda c: ["long_document"], outputs=cls_out)
    for flag in ("--doc_stride=0", "--max_windows=0"):
        case("classify", f"--long_document=windows {flag}",
             lambda c, f=flag: classify(c, *windows, f), names=lambda c, f=flag: [f.split("=")[0]],
             outputs=cls_out)
    case("classify", "--serving_dtype=float16",
         lambda c: classify(c, "--serving_dtype=float16", f"--export_dir={c.p('gen', 'export')}"),
         names=lambda c: ["serving_dtype"], outputs=cls_out)
    case("classify", "--serving_dtype=bfloat16 without --export_dir",
         lambda c: classify(c, "--serving_dtype=bfloat16"), names=lambda c: ["--serving_dtype"],
         outputs=cls_out)

    # --- squad ----------------------------------------------------------------------------
    sq_out = lambda c: [c.p("out", "predictions.json"), c.p("out", "checkpoint")]  # noqa: E731
    case("squad", "good input", lambda c: squad(c), expect_error=False)
    case("squad", "train file missing", lambda c: squad(c, train=c.p("nope.json")),
         names=lambda c: ["nope.json"], outputs=sq_out)
    case("squad", "not JSON", lambda c: squad(c), setup=_text("squad/train.json", '{"data": ['),
         names=lambda c: ["train.json"], outputs=sq_out)
    case("squad", "not UTF-8", lambda c: squad(c),
         setup=lambda c: kit.write(c.p("squad", "train.json"),
                                   json.dumps(kit.squad_json()).encode()[:-2] + b"\xff]}"),
         names=lambda c: ["train.json"], outputs=sq_out)
    case("squad", "binary file", lambda c: squad(c), setup=_binary("squad/train.json"),
         names=lambda c: ["train.json"], outputs=sq_out)
    case("squad", "wrong structure (answers not a list)", lambda c: squad(c),
         setup=lambda c: kit.write(c.p("squad", "train.json"), json.dumps(
             {"data": [{"paragraphs": [{"context": "a b", "qas": [
                 {"id": "x", "question": "q", "answers": "a"}]}]}]})),
         names=lambda c: ["train.json"], outputs=sq_out)
    case("squad", "duplicate question ids (predict)",
         lambda c: squad(c, train=False, predict=c.p("squad", "dup.json")),
         setup=lambda c: kit.write(c.p("squad", "dup.json"), json.dumps(kit.squad_json(
             [("same", "where is the cat", "mat"), ("same", "who sat", "the dog")]))),
         names=lambda c: ["dup.json"], outputs=sq_out)
    case("squad", "every answer_start outside its context", lambda c: squad(c),
         setup=lambda c: kit.write(c.p("squad", "train.json"), json.dumps(
             {"data": [{"paragraphs": [{"context": "a b", "qas": [
                 {"id": "x", "question": "q", "answers": [
                     {"text": "b", "answer_start": 40}]}]}]}]})),
         names=lambda c: ["train.json"], outputs=sq_out)
    case("squad", "binary predict file", lambda c: squad(c, train=False,
                                                          predict=c.p("squad", "bin.json")),
         setup=_binary("squad/bin.json"), names=lambda c: ["bin.json"], outputs=sq_out)
    case("squad", "is_impossible without --version_2_with_negative", lambda c: squad(c),
         setup=lambda c: kit.write(c.p("squad", "train.json"), json.dumps(
             {"data": [{"paragraphs": [{"context": "a b", "qas": [
                 {"id": "x", "question": "q", "answers": [], "is_impossible": True}]}]}]})),
         names=lambda c: ["train.json"], outputs=sq_out)
    case("squad", "a 100,000-character context",
         lambda c: squad(c, "--max_seq_length=64", "--doc_stride=120", "--train_batch_size=32"),
         setup=lambda c: kit.write(c.p("squad", "train.json"), json.dumps(kit.squad_json(
             context=("the cat sat on the mat . " * 4200) + "the dog sat on the cat ."))),
         expect_error=False)
    for flag in ("--num_train_epochs=0", "--doc_stride=0", "--max_query_length=40",
                 "--n_best_size=0", "--max_answer_length=0"):
        case("squad", flag, lambda c, f=flag: squad(c, f), names=lambda c, f=flag: [
            f.split("=")[0], "--max_seq_length"], outputs=sq_out)

    # --- swag / ner -------------------------------------------------------------------------
    mc_out = lambda c: [c.p("out", "checkpoint")]  # noqa: E731
    case("swag", "good input", lambda c: swag(c), expect_error=False)
    case("swag", "file missing", lambda c: swag(c, train=c.p("nope.csv")),
         names=lambda c: ["nope.csv"], outputs=mc_out)
    case("swag", "header without endings", lambda c: swag(c),
         setup=_text("swag/train.csv", "sent1,sent2,label\na,b,0\n"), names=lambda c: ["train.csv"],
         outputs=mc_out)
    case("swag", "not UTF-8 (line 3)", lambda c: swag(c),
         setup=lambda c: kit.write(c.p("swag", "train.csv"), kit.swag_csv().encode().replace(
             b"v1,", b"v\xff1,")), names=lambda c: ["train.csv line 3"], outputs=mc_out)
    case("swag", "label out of range", lambda c: swag(c),
         setup=lambda c: kit.write(c.p("swag", "train.csv"), kit.swag_csv().replace(",1\n", ",7\n")),
         names=lambda c: ["train.csv line"], outputs=mc_out)
    case("swag", "a row with fewer endings", lambda c: swag(c),
         setup=lambda c: kit.write(c.p("swag", "train.csv"), kit.SWAG_HEADER
                                   + "v0,0,a,the cat,sat,gold,mat,dog,0\n"),
         names=lambda c: ["train.csv line 2"], outputs=mc_out)
    case("swag", "empty file", lambda c: swag(c), setup=_text("swag/train.csv", ""),
         names=lambda c: ["train.csv"], outputs=mc_out)
    case("swag", "binary file", lambda c: swag(c), setup=_binary("swag/train.csv"),
         names=lambda c: ["train.csv"], outputs=mc_out)
    case("ner", "good input", lambda c: ner(c), expect_error=False)
    case("ner", "file missing", lambda c: ner(c, train=c.p("nope.txt")),
         names=lambda c: ["nope.txt"], outputs=mc_out)
    case("ner", "a row with another column count", lambda c: ner(c),
         setup=_text("conll/train.txt", "the\tO\ncat\tB-ANI\textra\n"),
         names=lambda c: ["train.txt line 2"], outputs=mc_out)
    case("ner", "a tag that is not BIO", lambda c: ner(c),
         setup=_text("conll/train.txt", "the\tO\ncat\tX-ANI\n"),
         names=lambda c: ["train.txt line 2"], outputs=mc_out)
    case("ner", "not UTF-8 (line 2)", lambda c: ner(c),
         setup=lambda c: kit.write(c.p("conll", "train.txt"), b"the\tO\nc\xfft\tB-ANI\n"),
         names=lambda c: ["train.txt line 2"], outputs=mc_out)
    case("ner", "empty file", lambda c: ner(c), setup=_text("conll/train.txt", "\n\n"),
         names=lambda c: ["train.txt"], outputs=mc_out)
    case("ner", "binary file", lambda c: ner(c), setup=_binary("conll/train.txt"),
         names=lambda c: ["train.txt"], outputs=mc_out)
    case("ner", "--window_stride=0", lambda c: ner(c, "--window_stride=0"),
         names=lambda c: ["--window_stride"], outputs=mc_out)

    # --- predict ------------------------------------------------------------------------------
    case("predict", "good input", lambda c: predict(c, input_file=c.p("predict.txt")),
         expect_error=False)
    case("predict", "--model does not exist", lambda c: predict(c, model=c.p("nope")),
         names=lambda c: ["nope"])
    case("predict", "--model is an empty directory", lambda c: predict(c, model=c.p("empty")),
         setup=lambda c: os.makedirs(c.p("empty")), names=lambda c: ["empty"])
    case("predict", "--model is a pre-training checkpoint", lambda c: predict(c, model=c.p("ckpt")),
         names=lambda c: ["ckpt"])
    case("predict", "truncated saved_model.pb", lambda c: predict(c, input_file=c.p("predict.txt")),
         setup=lambda c: kit.truncate(saved_model(c) / "saved_model.pb"), names=lambda c: ["export"])
    case("predict", "truncated variables.data", lambda c: predict(c, input_file=c.p("predict.txt")),
         setup=lambda c: kit.truncate(saved_model(c) / "variables" /
                                      "variables.data-00000-of-00001"),
         names=lambda c: ["export"])
    case("predict", "SavedModel without its variables",
         lambda c: predict(c, input_file=c.p("predict.txt")),
         setup=lambda c: shutil.rmtree(saved_model(c) / "variables"), names=lambda c: ["export"])
    case("predict", "--model is a file", lambda c: predict(c, model=c.p("vocab.txt")),
         names=lambda c: ["vocab.txt"])
    case("predict", "--output_format=xml", lambda c: predict(c, "--output_format=xml"),
         names=lambda c: ["output_format"])
    case("predict", "stray positional argument", lambda c: predict(c, "text"),
         names=lambda c: ["text"])
    case("predict", "input not UTF-8 (line 2)", lambda c: predict(c, input_file=c.p("bad.txt")),
         setup=lambda c: kit.write(c.p("bad.txt"), b"a good movie\nbad \xff film\n"),
         names=lambda c: ["bad.txt line 2"])
    case("predict", "stdin not UTF-8 (line 3)", lambda c: predict(c),
         stdin=b"a good movie\nfun\nbad \xc3\x28 film\n", names=lambda c: ["standard input line 3"])
    case("predict", "input file missing", lambda c: predict(c, input_file=c.p("nope.txt")),
         names=lambda c: ["nope.txt"])
    case("predict", "empty input", lambda c: predict(c, input_file=c.p("e.txt")),
         setup=_text("e.txt", "\n\n"), names=lambda c: ["e.txt"])
    case("predict", "a tab in a single-sentence model's input",
         lambda c: predict(c, input_file=c.p("tab.txt")), setup=_text("tab.txt", "a\tb\n"),
         names=lambda c: ["tab.txt line 1"])
    case("predict", "binary input", lambda c: predict(c, input_file=c.p("bin.txt")),
         setup=_binary("bin.txt"), names=lambda c: ["bin.txt"])
    case("predict", "--batch_size=0", lambda c: predict(c, "--batch_size=0"),
         names=lambda c: ["--batch_size"])
    case("predict", "one 1 MB line", lambda c: predict(c, input_file=c.p("long.txt")),
         setup=_text("long.txt", "good " * 200_000 + "\n"), expect_error=False)

    # --- extract-features, squad-split, bert ---------------------------------------------------------
    case("extract-features", "good input", lambda c: features(c), setup=mk, expect_error=False)
    case("extract-features", "input missing", lambda c: features(c, input_file=c.p("nope.txt")),
         setup=mk, names=lambda c: ["nope.txt"], outputs=_gen_outputs("features.jsonl"))
    case("extract-features", "input not UTF-8", lambda c: features(c, input_file=c.p("bad.txt")),
         setup=both(lambda c: kit.write(c.p("bad.txt"), b"fine\n\xff\n"), mk),
         names=lambda c: ["bad.txt line 2"], outputs=_gen_outputs("features.jsonl"))
    case("extract-features", "--layers=x", lambda c: features(c, "--layers=x"), setup=mk,
         names=lambda c: ["--layers"], outputs=_gen_outputs("features.jsonl"))
    case("extract-features", "--layers=-9", lambda c: features(c, "--layers=-9"), setup=mk,
         names=lambda c: ["--layers"], outputs=_gen_outputs("features.jsonl"))
    case("extract-features", "output is the input",
         lambda c: features(c, f"--output_file={c.p('predict.txt')}"),
         names=lambda c: ["predict.txt"])
    vectors = _gen_outputs("vectors.npy")
    case("embed", "good input", lambda c: embed(c), setup=mk, expect_error=False)
    case("embed", "input missing", lambda c: embed(c, input_file=c.p("nope.txt")), setup=mk,
         names=lambda c: ["nope.txt"], outputs=vectors)
    case("embed", "input not UTF-8 (line 2)", lambda c: embed(c, input_file=c.p("bad.txt")),
         setup=both(lambda c: kit.write(c.p("bad.txt"), b"fine\n\xff\n"), mk),
         names=lambda c: ["bad.txt line 2"], outputs=vectors)
    case("embed", "empty input", lambda c: embed(c, input_file=c.p("e.txt")),
         setup=both(_text("e.txt", ""), mk), names=lambda c: ["e.txt"], outputs=vectors)
    case("embed", "output exists", lambda c: embed(c, output_file=c.p("taken.npy")),
         setup=_text("taken.npy", "someone's"), names=lambda c: ["taken.npy"])
    case("embed", "--output_file=vectors.csv",
         lambda c: embed(c, output_file=c.p("gen", "vectors.csv")), setup=mk,
         names=lambda c: ["--output_file"], outputs=_gen_outputs("vectors.csv"))
    case("embed", "output is the input",
         lambda c: embed(c, input_file=c.p("own.jsonl"), output_file=c.p("own.jsonl")),
         setup=_text("own.jsonl", "a text in a file named .jsonl\n"),
         names=lambda c: ["own.jsonl"])
    case("embed", "--pooling=max", lambda c: embed(c, "--pooling=max"), setup=mk,
         names=lambda c: ["--pooling", "pooling"], outputs=vectors)
    case("embed", "--batch_size=0", lambda c: embed(c, "--batch_size=0"), setup=mk,
         names=lambda c: ["--batch_size"], outputs=vectors)
    case("embed", "--max_seq_length past the model's positions",
         lambda c: embed(c, "--max_seq_length=4096"), setup=mk,
         names=lambda c: ["--max_seq_length"], outputs=vectors)
    google = _gen_outputs("google")
    case("export-google", "good input", lambda c: export_google(c, "--exact_gelu_as=gelu_exact"),
         setup=mk, expect_error=False)
    case("export-google", "exact GELU without --exact_gelu_as", lambda c: export_google(c),
         setup=mk, names=lambda c: ["--exact_gelu_as"], outputs=google)
    case("export-google", "--output_dir holds a file",
         lambda c: export_google(c, "--exact_gelu_as=tanh", output_dir=c.p("busy")),
         setup=_text("busy/keep.txt", "mine"), names=lambda c: ["busy"])
    case("export-google", "--init_checkpoint missing",
         lambda c: ["bert export-google", f"--init_checkpoint={c.p('nope')}",
                    f"--output_dir={c.p('gen', 'google')}"], setup=mk,
         names=lambda c: ["nope"], outputs=google)
    case("export-google", "--exact_gelu_as=erf",
         lambda c: export_google(c, "--exact_gelu_as=erf"), setup=mk,
         names=lambda c: ["exact_gelu_as"], outputs=google)
    three = lambda c: kit.write(c.p("squad3.json"), json.dumps(  # noqa: E731
        {"version": "1.1", "data": kit.squad_json()["data"] * 3}))
    sp_out = _gen_outputs("train.json", "dev.json")
    case("squad-split", "good input", lambda c: split(c), setup=both(three, mk),
         expect_error=False)
    case("squad-split", "--train_output is the input",
         lambda c: split(c, train=c.p("squad3.json")), setup=both(three, mk),
         names=lambda c: ["squad3.json"])
    case("squad-split", "--num_train_articles too large",
         lambda c: split(c, "--num_train_articles=3"), setup=both(three, mk),
         names=lambda c: ["--num_train_articles"], outputs=sp_out)
    case("squad-split", "not JSON", lambda c: split(c), setup=both(
        _text("squad3.json", "{"), mk), names=lambda c: ["squad3.json"], outputs=sp_out)
    case("bert", "unknown command", lambda c: ["bert nosuchcommand"],
         names=lambda c: ["nosuchcommand"])
    case("bert", "unknown flag", lambda c: ["bert classify", "--no_such_flag"],
         names=lambda c: ["no_such_flag"])

    # --- export-encoder -------------------------------------------------------------------
    hub = _gen_outputs("hub/encoder", "hub/preprocessor", "export")
    case("export-encoder", "good input (--export_dir, --serving_dtype=bfloat16)",
         lambda c: export_encoder(c, f"--export_dir={c.p('gen', 'export')}",
                                  "--serving_dtype=bfloat16"), setup=mk, expect_error=False)
    case("export-encoder", "--init_checkpoint missing",
         lambda c: export_encoder(c, ckpt="nope"), setup=mk, names=lambda c: ["nope"],
         outputs=hub)
    case("export-encoder", "no --output_dir",
         lambda c: [a for a in export_encoder(c) if not a.startswith("--output_dir")], setup=mk,
         names=lambda c: ["--output_dir"], outputs=hub)
    case("export-encoder", "--output_dir already holds encoder/", lambda c: export_encoder(c),
         setup=_text("gen/hub/encoder/keep.txt", "mine"), names=lambda c: ["encoder"])
    case("export-encoder", "--output_dir is the checkpoint",
         lambda c: export_encoder(c, output_dir=c.p("ckpt")), names=lambda c: ["ckpt"])
    case("export-encoder", "--export_dir is --output_dir",
         lambda c: export_encoder(c, f"--export_dir={c.p('gen', 'hub')}"), setup=mk,
         names=lambda c: ["--export_dir"], outputs=hub)
    for flag in ("--max_seq_length=2", "--max_seq_length=4096", "--max_batch_size=0",
                 "--edge_formats=xml", "--quantize", "--export_version=0",
                 "--serving_dtype=float16", "--serving_dtype=bfloat16"):
        extra = ([] if flag.startswith(("--serving_dtype=b", "--quantize")) else
                 ["--export_dir=EXPORT"])
        case("export-encoder", flag + (" without --export_dir" if flag == "--serving_dtype="
                                       "bfloat16" else ""),
             lambda c, f=flag, e=extra: export_encoder(
                 c, f, *[x.replace("EXPORT", c.p("gen", "export")) for x in e]), setup=mk,
             names=lambda c, f=flag: [f.split("=")[0], f.split("=")[0].lstrip("-")],
             outputs=hub)
    case("export-encoder", "--init_checkpoint: truncated .index", lambda c: export_encoder(c),
         setup=both(_truncate("ckpt/ckpt-1.index"), mk), names=lambda c: ["ckpt-1.index"],
         outputs=hub)
    case("export-encoder", "--init_checkpoint: truncated model.safetensors",
         lambda c: export_encoder(c, ckpt="hf"),
         setup=both(lambda c: hf_checkpoint(c, truncate=True), mk),
         names=lambda c: ["model.safetensors"], outputs=hub)
    case("export-encoder", "stray positional argument", lambda c: export_encoder(c, "extra"),
         setup=mk, names=lambda c: ["extra"], outputs=hub)

    # --- export-ids-only ------------------------------------------------------------------
    ids_out = _gen_outputs("ids")
    case("export-ids-only", "good input", lambda c: ids_only(c), setup=mk, expect_error=False)
    case("export-ids-only", "no --saved_model",
         lambda c: [a for a in ids_only(c) if not a.startswith("--saved_model")], setup=mk,
         names=lambda c: ["--saved_model"], outputs=ids_out)
    case("export-ids-only", "no --export_dir",
         lambda c: [a for a in ids_only(c) if not a.startswith("--export_dir")], setup=mk,
         names=lambda c: ["--export_dir"], outputs=ids_out)
    case("export-ids-only", "--saved_model does not exist", lambda c: ids_only(c, source="nope"),
         setup=mk, names=lambda c: ["nope"], outputs=ids_out)
    case("export-ids-only", "--saved_model is a checkpoint, not an export",
         lambda c: ids_only(c, source="ckpt"), setup=mk, names=lambda c: ["ckpt"],
         outputs=ids_out)
    case("export-ids-only", "--saved_model: truncated saved_model.pb", lambda c: ids_only(c),
         setup=both(lambda c: kit.truncate(saved_model(c) / "saved_model.pb"), mk),
         names=lambda c: ["saved_model.pb"], outputs=ids_out)
    case("export-ids-only", "--export_dir is --saved_model's own directory",
         lambda c: ids_only(c, output=c.p("export")), names=lambda c: ["--export_dir"])
    case("export-ids-only", "--export_version=0", lambda c: ids_only(c, "--export_version=0"),
         setup=mk, names=lambda c: ["--export_version"], outputs=ids_out)
    case("export-ids-only", "--export_version already there",
         lambda c: ids_only(c, "--export_version=7"),
         setup=_text("gen/ids/7/keep.txt", "mine"), names=lambda c: ["7"])
    case("export-ids-only", "stray positional argument", lambda c: ids_only(c, "extra"),
         setup=mk, names=lambda c: ["extra"], outputs=ids_out)

    # --- glue-submission ------------------------------------------------------------------
    zip_out = _gen_outputs("submission.zip")
    case("glue-submission", "good input (--allow_missing, --glue_dir)",
         lambda c: glue_submission(c), setup=both(glue_runs, mk), expect_error=False)
    case("glue-submission", "good input, official row counts (control)",
         lambda c: glue_submission(c, glue_dir=None),
         setup=both(lambda c: glue_runs(c, rows=1821), mk), expect_error=False)
    case("glue-submission", "--runs_dir does not exist",
         lambda c: glue_submission(c, runs="nope"), setup=both(glue_runs, mk),
         names=lambda c: ["nope"], outputs=zip_out)
    case("glue-submission", "--runs_dir holds no runs", lambda c: glue_submission(c, runs="glue"),
         setup=both(glue_runs, mk), names=lambda c: ["glue"], outputs=zip_out)
    case("glue-submission", "tasks missing, without --allow_missing",
         lambda c: [a for a in glue_submission(c) if a != "--allow_missing"],
         setup=both(glue_runs, mk), names=lambda c: ["--allow_missing"], outputs=zip_out)
    case("glue-submission", "rows unlike the official test set (no --glue_dir)",
         lambda c: glue_submission(c, glue_dir=None), setup=both(glue_runs, mk),
         names=lambda c: ["SST-2.tsv"], outputs=zip_out)
    for label, content, where in (  # not `text`: the pretrain cases' helper of that name
            ("a file without its header", "0\t1\n1\t0\n2\t1\n3\t0\n", "SST-2.tsv line 1"),
            ("an unknown label", "index\tprediction\n0\t1\n1\tpositive\n2\t1\n3\t0\n",
             "SST-2.tsv line 3"),
            ("an index twice", "index\tprediction\n0\t1\n0\t0\n2\t1\n3\t0\n", "SST-2.tsv line 3"),
            ("rows fewer than --glue_dir's test set", "index\tprediction\n0\t1\n1\t0\n",
             "SST-2.tsv"),
            ("indices unlike --glue_dir's test set", "index\tprediction\n0\t1\n1\t0\n9\t1\n3\t0\n",
             "SST-2.tsv line 4")):
        case("glue-submission", label, lambda c: glue_submission(c),
             setup=both(lambda c, t=content: glue_runs(c, text=t), mk),
             names=lambda c, w=where: [w], outputs=zip_out)
    case("glue-submission", "a predictions file not UTF-8", lambda c: glue_submission(c),
         setup=both(lambda c: glue_runs(c, text=b"index\tprediction\n0\t1\n1\t\xff\n"), mk),
         names=lambda c: ["SST-2.tsv"], outputs=zip_out)
    case("glue-submission", "a run's classifier_config.json not JSON",
         lambda c: glue_submission(c),
         setup=both(glue_runs, _text("runs/sst2/classifier_config.json", "{task"), mk),
         names=lambda c: ["classifier_config.json"], outputs=zip_out)
    case("glue-submission", "two runs of one task", lambda c: glue_submission(c),
         setup=both(glue_runs, lambda c: shutil.copytree(c.p("runs", "sst2"), c.p("runs", "b")),
                    mk), names=lambda c: ["--runs_dir"], outputs=zip_out)
    case("glue-submission", "--glue_dir is not a directory",
         lambda c: glue_submission(c, glue_dir="corpus.txt"), setup=both(glue_runs, mk),
         names=lambda c: ["corpus.txt"], outputs=zip_out)
    case("glue-submission", "--output_file exists (someone's file)",
         lambda c: glue_submission(c, output=c.p("taken.zip")),
         setup=both(glue_runs, _text("taken.zip", "someone's")), names=lambda c: ["taken.zip"])
    case("glue-submission", "--output_file inside --runs_dir is the predictions file",
         lambda c: glue_submission(c, output=c.p("runs", "sst2", "SST-2.tsv")),
         setup=glue_runs, names=lambda c: ["SST-2.tsv"])
    case("glue-submission", "stray positional argument", lambda c: glue_submission(c, "extra"),
         setup=both(glue_runs, mk), names=lambda c: ["extra"], outputs=zip_out)

    # --- download (--source_dir, no network) ------------------------------------------------
    wnut = _gen_outputs("data/wnut17")
    case("download", "wnut17 from --source_dir (control)", lambda c: download(c, "wnut17"),
         setup=local_files, expect_error=False)
    case("download", "glue/WNLI zip from --source_dir (control)",
         lambda c: download(c, "glue/WNLI"), setup=local_files, expect_error=False)
    case("download", "a dataset already there (control: left alone)",
         lambda c: download(c, "wnut17", output=c.p("data")),
         setup=both(local_files, _text("data/wnut17/mine.txt", "keep")), expect_error=False)
    case("download", "unknown dataset", lambda c: download(c, "nosuchdata"), setup=local_files,
         names=lambda c: ["nosuchdata"])
    case("download", "no dataset named", lambda c: download(c), setup=local_files,
         names=lambda c: ["bert download"])
    case("download", "--source_dir does not exist",
         lambda c: download(c, "wnut17", source="nope"), setup=local_files,
         names=lambda c: ["nope"], outputs=wnut)
    case("download", "--source_dir lacks a file", lambda c: download(c, "wnut17"),
         setup=both(local_files, lambda c: os.remove(c.p("src", "emerging.dev.conll"))),
         names=lambda c: ["emerging.dev.conll"], outputs=wnut)
    case("download", "a file unlike the pinned one (no --manifest)",
         lambda c: download(c, "wnut17", manifest=None), setup=local_files,
         names=lambda c: ["wnut17train.conll"], outputs=wnut)
    case("download", "a file truncated after --manifest pinned it",
         lambda c: download(c, "wnut17"),
         setup=both(local_files, _truncate("src/emerging.test.annotated")),
         names=lambda c: ["emerging.test.annotated"], outputs=wnut)
    case("download", "--manifest not JSON", lambda c: download(c, "wnut17"),
         setup=both(local_files, _text("manifest.json", "{files")),
         names=lambda c: ["manifest.json"], outputs=wnut)
    case("download", "--manifest does not exist",
         lambda c: download(c, "wnut17", manifest="nope.json"), setup=local_files,
         names=lambda c: ["nope.json"], outputs=wnut)
    case("download", "--manifest names an unknown file", lambda c: download(c, "wnut17"),
         setup=both(local_files, lambda c: edit_manifest(c, {"nope/x.txt": {"size": 1}})),
         names=lambda c: ["manifest.json"], outputs=wnut)
    case("download", "--manifest sha256 not 64 hex digits", lambda c: download(c, "wnut17"),
         setup=both(local_files, lambda c: edit_manifest(
             c, {"wnut17/wnut17train.conll": {"sha256": "abc"}})),
         names=lambda c: ["manifest.json"], outputs=wnut)
    case("download", "--manifest size not a number", lambda c: download(c, "wnut17"),
         setup=both(local_files, lambda c: edit_manifest(
             c, {"wnut17/wnut17train.conll": {"size": "big"}})),
         names=lambda c: ["manifest.json"], outputs=wnut)
    case("download", "--base_url with --source_dir",
         lambda c: download(c, "wnut17", "--base_url=http://127.0.0.1:9/"), setup=local_files,
         names=lambda c: ["--source_dir", "--base_url"], outputs=wnut)
    case("download", "--retries=-1", lambda c: download(c, "wnut17", "--retries=-1"),
         setup=local_files, names=lambda c: ["--retries"], outputs=wnut)
    case("download", "--output_dir is a file",
         lambda c: download(c, "wnut17", output=c.p("corpus.txt")), setup=local_files,
         names=lambda c: ["corpus.txt"])
    case("download", "--output_dir on gs://",
         lambda c: download(c, "wnut17", output="gs://no-such-bucket/data"), setup=local_files,
         names=lambda c: ["--output_dir"])
    for label, damage in (("not a zip", lambda c: kit.write(c.p("src", "WNLI.zip"), BINARY)),
                          ("a zip without test.tsv", lambda c: wnli_zip(c, drop="test.tsv")),
                          ("a zip with a member ../x", lambda c: wnli_zip(c, unsafe=True))):
        case("download", f"glue/WNLI: {label}", lambda c: download(c, "glue/WNLI"),
             setup=lambda c, d=damage: (local_files(c), d(c), pin(c, "glue/WNLI.zip", "WNLI.zip")),
             names=lambda c: ["WNLI.zip"], outputs=_gen_outputs("data/glue/WNLI"))
    case("download", "disk full (2 KB file-size limit)", lambda c: download(c, "wnut17"),
         setup=local_files, file_size_limit=2048, names=lambda c: ["data"], outputs=wnut,
         after=rerun_succeeds)

    # --- quickstart (its flags only; nothing is trained) ------------------------------------
    qs_out = _gen_outputs("qs/summary.json", "qs/corpus.txt")
    for flag, named in (("--stages=nope", "--stages"), ("--stages=", "--stages"),
                        ("--fast --full", "--fast"), ("--pretrain_steps=0", "--pretrain_steps"),
                        ("--pretrain_steps=-5", "--pretrain_steps"), ("extra", "extra"),
                        ("--no_such_flag", "no_such_flag")):
        case("quickstart", flag if flag != "extra" else "stray positional argument",
             lambda c, f=flag: quickstart(c, *f.split()), setup=mk,
             names=lambda c, n=named: [n], outputs=qs_out, timeout=120)
    case("quickstart", "--output_dir is a file",
         lambda c: quickstart(c, "--stages=serve", output="corpus.txt"),
         names=lambda c: ["corpus.txt"], timeout=120)
    case("quickstart", "a corrupt summary.json in --output_dir",
         lambda c: quickstart(c, "--stages=serve"), setup=_text("gen/qs/summary.json", "{x"),
         names=lambda c: ["summary.json"], timeout=120)
    case("quickstart", "--stages=serve before any fine-tuning",
         lambda c: quickstart(c, "--stages=serve"), setup=mk, names=lambda c: ["qnli_export"],
         outputs=qs_out, timeout=120)


# === Setups that need more than a write ===


def damaged_records(c: Ctx, damage, compress: bool):
    data = pathlib.Path(c.p("pretrain.tfrecord")).read_bytes()
    if compress:
        data = gzip.compress(data)
    path = kit.write(c.p("bad.tfrecord"), data)
    damage(path)


def killed_generation(c: Ctx):
    """create_pretraining_data with 3 outputs, SIGKILLed after its first rename."""
    os.makedirs(c.p("gen"), exist_ok=True)
    script = (
        "import os, signal, sys\n"
        "from official_bert import io\n"
        "original, count = io.rename, [0]\n"
        "def rename(source, destination, overwrite=False):\n"
        "    original(source, destination, overwrite)\n"
        "    if '.tfrecord' in str(destination) and not str(destination).endswith('.json'):\n"
        "        count[0] += 1\n"
        "        if count[0] == 1:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "io.rename = rename\n"
        "from data_prep import create_pretraining_data as cpd\n"
        "cpd.entry(sys.argv)\n")
    outputs = ",".join(c.p("gen", f"k-{i}.tfrecord") for i in range(3))
    result = kit.run([sys.executable, "-c", script, *cpd(c, output=outputs)[1:]])
    assert result.returncode == -9, result.stderr[-2000:]


def set_with_file_gone(c: Ctx, cut=False):
    os.makedirs(c.p("gen"), exist_ok=True)
    outputs = ",".join(c.p("gen", f"k-{i}.tfrecord") for i in range(3))
    result = kit.run(kit.command(*cpd(c, output=outputs)))
    assert result.returncode == 0, result.stderr[-2000:]
    path = c.p("gen", "k-1.tfrecord")
    if cut:  # the last record off: a valid, shorter TFRecord, which only the manifest notices
        import tensorflow as tf

        records = list(tf.data.TFRecordDataset(path).as_numpy_iterator())
        size = sum(16 + len(r) for r in records[:-1])
        kit.truncate(path, size)
    else:
        os.remove(path)


def trained_run(c: Ctx, damage=None):
    """A pre-training run to step 4 (checkpoints 2 and 4) in `run`, then `damage`."""
    result = kit.run(kit.command(*pretrain(c, steps=4)))
    assert result.returncode == 0, result.stderr[-3000:]
    if damage:
        damage(pathlib.Path(c.p("run")))


def hf_checkpoint(c: Ctx, truncate=False):
    kit.make_huggingface(c.p("hf"), c.p("ckpt"))
    shutil.copy(c.p("ckpt", "vocab.txt"), c.p("hf", "vocab.txt"))
    if truncate:
        kit.truncate(c.p("hf", "model.safetensors"))


def glue_runs(c: Ctx, text=None, rows=4):
    """runs/sst2: a run_classifier.py run's config and its SST-2.tsv; gluedata/SST-2:
    GLUE's layout with the 4-row test.tsv those predictions are of."""
    kit.write(c.p("runs", "sst2", "classifier_config.json"), json.dumps({"task_name": "sst-2"}))
    if text is None:
        text = "index\tprediction\n" + "".join(f"{i}\t{i % 2}\n" for i in range(rows))
    kit.write(c.p("runs", "sst2", "SST-2.tsv"), text)
    shutil.copytree(c.p("glue"), c.p("gluedata", "SST-2"))


WNLI = {"train.tsv": "index\tsentence1\tsentence2\tlabel\n0\ta\tb\t1\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\ta\tb\t0\n",
        "test.tsv": "index\tsentence1\tsentence2\n0\ta\tb\n"}


def wnli_zip(c: Ctx, drop=None, unsafe=False):
    import zipfile

    with zipfile.ZipFile(c.p("src", "WNLI.zip"), "w") as z:
        for name, text in WNLI.items():
            if name != drop:
                z.writestr(f"WNLI/{name}", text)
        if unsafe:
            z.writestr("WNLI/../../x.txt", "outside")


def pin(c: Ctx, name: str, file: str):
    """--manifest pins `name` to src/`file` as it is now (size and sha256)."""
    import hashlib

    data = pathlib.Path(c.p("src", file)).read_bytes()
    edit_manifest(c, {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}})


def edit_manifest(c: Ctx, entries: dict):
    path = pathlib.Path(c.p("manifest.json"))
    manifest = json.loads(path.read_text()) if path.exists() else {"files": {}}
    manifest["files"].update(entries)
    path.write_text(json.dumps(manifest, indent=1))


def local_files(c: Ctx):
    """src/: tiny stand-ins of WNUT-17's three files and GLUE's WNLI.zip, and
    manifest.json pinning them (`bert download --source_dir=src --manifest=...`)."""
    kit.write(c.p("src", "wnut17train.conll"), kit.conll_text(100))
    kit.write(c.p("src", "emerging.dev.conll"), kit.conll_text(8))
    kit.write(c.p("src", "emerging.test.annotated"), kit.conll_text(8))
    wnli_zip(c)
    for name in ("wnut17/wnut17train.conll", "wnut17/emerging.dev.conll",
                 "wnut17/emerging.test.annotated", "glue/WNLI.zip"):
        pin(c, name, name.split("/")[1])


def saved_model(c: Ctx) -> pathlib.Path:
    versions = sorted(p for p in pathlib.Path(c.p("export")).iterdir() if p.name.isdigit())
    return versions[-1]


# === Follow-ups ===


def rerun_succeeds(c: Ctx, case: Case) -> tuple:
    result = kit.run(kit.command(*case.argv(c)), timeout=case.timeout)
    return result.returncode == 0, "rerun without the fault: " + (
        "succeeded" if result.returncode == 0 else result.stderr.strip().splitlines()[-1][:200])


def rerun_resumes(c: Ctx, case: Case) -> tuple:
    result = kit.run(kit.command(*case.argv(c)), timeout=case.timeout)
    ok = result.returncode == 0 and "Resumed from" in result.stderr
    return ok, "rerun without the fault: " + ("resumed" if ok else
                                               result.stderr.strip().splitlines()[-1][:200])


def resumes_after_delete(c: Ctx, case: Case) -> tuple:
    """Follows the error's advice (delete the damaged checkpoint), then reruns."""
    run = pathlib.Path(c.p("run"))
    for path in run.glob("ckpt-4.*"):
        path.unlink()
    result = kit.run(kit.command(*case.argv(c)), timeout=case.timeout)
    ok = result.returncode == 0 and "Resumed from" in result.stderr and "ckpt-2" in result.stderr
    return ok, "deleted ckpt-4 as told, reran: " + (
        "resumed from ckpt-2" if ok else result.stderr.strip().splitlines()[-1][:200])


# === Running ===


def build_world(root: pathlib.Path) -> kit.World:
    world = kit.World(root).build(checkpoint=True, pretraining_data=True)
    export = root / "export"
    result = kit.run(kit.command(*classify(Ctx(root), f"--export_dir={export}",
                                           out="trained", modes=("--do_train",))))
    if result.returncode:
        raise SystemExit("could not train the classifier for `bert predict`:\n"
                         + result.stderr[-3000:])
    shutil.rmtree(root / "trained")
    return world


def run_case(world_root: pathlib.Path, scratch: pathlib.Path, index: int, c_: Case) -> dict:
    root = scratch / f"case-{index:03d}"
    shutil.copytree(world_root, root, symlinks=True)
    ctx = Ctx(root)
    start = time.time()
    try:
        if c_.setup:
            c_.setup(ctx)
    except Exception as e:  # noqa: BLE001 - a broken case is reported, not fatal
        return dict(case=c_, outcome="setup failed", why=f"{type(e).__name__}: {e}"[:300],
                    seconds=time.time() - start)
    argv = c_.argv(ctx)
    outputs = c_.outputs(ctx) if c_.outputs else []
    before = kit.snapshot(root)
    result = kit.run(kit.command(*argv), stdin=c_.stdin, timeout=c_.timeout,
                     file_size_limit=c_.file_size_limit)
    after = kit.snapshot(root)
    # An input is what existed before and is not an output of this run.
    run_dirs = {os.path.join(str(root), d) for d in ("run", "out", "gen", "trained")}
    inputs_changed = [p for p in kit.changed(before, after)
                      if not any(p.startswith(d + os.sep) for d in run_dirs)
                      and p not in outputs]
    partial = []
    if result.returncode != 0:
        partial = [p for p in outputs if os.path.exists(p)]
        partial += sorted(p for p in set(after) - set(before)
                          if os.path.basename(p) in COMPLETE_MARKERS)
    names = c_.names(ctx) if c_.names else ()
    outcome, why = kit.classify(result, c_.expect_error, names=names,
                                inputs_changed=[os.path.relpath(p, root) for p in inputs_changed],
                                partial_outputs=[os.path.relpath(p, root) for p in partial])
    if c_.after and outcome == kit.CLEAN:
        ok, note = c_.after(ctx, c_)
        why = f"{why} — {note}"
        if not ok:
            outcome = kit.LOST
    return dict(case=c_, outcome=outcome, why=kit.strip_paths(why, root),
                seconds=time.time() - start)


def table(rows: list) -> str:
    lines = ["| command | input | outcome | detail |", "|---|---|---|---|"]
    for row in rows:
        detail = row["why"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {row['case'].command} | {row['case'].name} | {row['outcome']} | "
                     f"{detail} |")
    return "\n".join(lines)


def totals(rows: list) -> str:
    bad = [r for r in rows if r["case"].expect_error]
    good = [r for r in rows if not r["case"].expect_error]
    count = lambda outcome, rs=bad: sum(r["outcome"] == outcome for r in rs)  # noqa: E731
    lines = ["| bad inputs tried | clean errors | vague errors | tracebacks | silent wrong "
             "results | data lost | setup failed |", "|---|---|---|---|---|---|---|",
             f"| {len(bad)} | {count(kit.CLEAN)} | {count(kit.VAGUE)} | {count(kit.TRACEBACK)} | "
             f"{count(kit.SILENT)} | {count(kit.LOST)} | {count('setup failed')} |"]
    lines.append("")
    lines.append(f"Good inputs (controls): {len(good)} tried, {count(kit.OK, good)} ran "
                 "through.")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run the cases whose command or input "
                        "contains this text (comma-separated: any of them)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    define_cases()
    words = [w.strip().lower() for w in args.only.split(",")] if args.only else [""]
    cases = [c for c in CASES if any(w in f"{c.command}: {c.name}".lower() for w in words)]
    if args.list:
        for c in cases:
            print(f"{c.command}: {c.name}")
        return 0
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="bad_input_sweep-"))
    start = time.time()
    try:
        print(f"building the tiny world in {scratch} ...", file=sys.stderr, flush=True)
        build_world(scratch / "world")
        rows = []
        for i, c in enumerate(cases):
            row = run_case(scratch / "world", scratch, i, c)
            rows.append(row)
            print(f"[{i + 1}/{len(cases)}] {c.command}: {c.name}: {row['outcome']} "
                  f"({row['seconds']:.0f} s) {row['why'][:160]}", file=sys.stderr, flush=True)
            if not args.keep:
                shutil.rmtree(scratch / f"case-{i:03d}", ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print(table(rows))
    print()
    print(totals(rows))
    print()
    print(f"`python tools/bad_input_sweep.py` ({len(rows)} cases, {time.time() - start:.0f} s)")
    bad = [r for r in rows if r["case"].expect_error and r["outcome"] != kit.CLEAN]
    good = [r for r in rows if not r["case"].expect_error and r["outcome"] != kit.OK]
    return 1 if bad or good else 0


if __name__ == "__main__":
    sys.exit(main())
