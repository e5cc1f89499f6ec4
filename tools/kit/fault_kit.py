"""Tiny inputs and a runner for fault tests: every kind of file the project
reads, made in seconds, and the commands run as a user runs them.

Used by `tests/test_faults.py` (the fault-injection tests),
`tests/test_run_directory.py` and `tools/bad_input_sweep.py` (every command x
every bad input, a table). Nothing here is part of the library.

    world = World(tmp_dir).build()          # vocab, config, checkpoint, data of every task
    result = run(["run_classifier.py", "--task_name=sst-2", ...])
    outcome = classify(result, expect="error", ...)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import random
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]

WORDS = [f"w{i}" for i in range(40)]
PIECES = [f"##p{i}" for i in range(6)]
CLASSIFIER_WORDS = ("the a movie film is was very good bad great awful fun dull boring "
                    "charming where who what cat dog sat on mat").split()
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + PIECES + CLASSIFIER_WORDS
         + [",", ".", "!", "?"])
TINY_CONFIG = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2,
                   num_attention_heads=4, intermediate_size=32, hidden_act="gelu",
                   hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                   max_position_embeddings=64, type_vocab_size=2, initializer_range=0.02)

SST_TRAIN = [("the movie was good", 1), ("a very bad film", 0), ("great fun !", 1),
             ("dull and boring", 0), ("charming , charming movie", 1), ("an awful film .", 0),
             ("very good .", 1), ("bad , bad , bad", 0)]
SST_DEV = [("a good movie", 1), ("the film is awful", 0), ("great !", 1), ("boring", 0)]

ENV = dict(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO),
           PYTHONDONTWRITEBYTECODE="1")


# === The files ===


def write(path, text, encoding="utf-8"):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding=encoding)
    return path


def corpus_text(n_docs=10, seed=0) -> str:
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        sentences = []
        for _ in range(rng.randint(3, 8)):
            words = [rng.choice(WORDS) + (f"p{rng.randrange(6)}" if rng.random() < 0.2 else "")
                     for _ in range(rng.randint(3, 12))]
            sentences.append(" ".join(words) + " .")
        docs.append("\n".join(sentences))
    return "\n\n".join(docs) + "\n"


def squad_json(questions=None, context="the cat sat on the mat . the dog sat on the cat ."):
    questions = questions or [("q1", "where is the cat", "mat"),
                              ("q2", "who sat on the cat", "the dog")]
    qas = [{"id": qid, "question": q,
            "answers": [{"text": a, "answer_start": context.index(a)}]}
           for qid, q, a in questions]
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]}


SWAG_HEADER = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"


def swag_csv(rows=4) -> str:
    lines = [SWAG_HEADER]
    for i in range(rows):
        lines.append(f"v{i},{i},the cat sat,the cat sat,on the,gold,mat,dog,film,movie,{i % 4}\n")
    return "".join(lines)


def conll_text(sentences=4) -> str:
    out = []
    for i in range(sentences):
        out.append("the\tO\ncat\tB-ANI\nsat\tO\non\tO\nthe\tO\nmat\tB-OBJ\n")
    return "\n".join(out)


@dataclasses.dataclass
class World:
    """Every kind of input, tiny, under `root` (built once, then copied from)."""

    root: pathlib.Path

    def __post_init__(self):
        self.root = pathlib.Path(self.root)

    def path(self, *parts) -> pathlib.Path:
        return self.root.joinpath(*parts)

    @property
    def vocab(self):
        return self.path("vocab.txt")

    @property
    def config(self):
        return self.path("bert_config.json")

    @property
    def ckpt(self):
        return self.path("ckpt")

    def build(self, checkpoint=True, pretraining_data=True, huggingface=False):
        write(self.vocab, "\n".join(VOCAB) + "\n")
        write(self.config, json.dumps(TINY_CONFIG, indent=2) + "\n")
        write(self.path("corpus.txt"), corpus_text())
        write(self.path("glue", "train.tsv"),
              "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in SST_TRAIN))
        write(self.path("glue", "dev.tsv"),
              "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in SST_DEV))
        write(self.path("glue", "test.tsv"),
              "index\tsentence\n" + "".join(f"{i}\t{s}\n" for i, (s, _) in enumerate(SST_DEV)))
        write(self.path("squad", "train.json"), json.dumps(squad_json()))
        write(self.path("squad", "dev.json"), json.dumps(squad_json()))
        write(self.path("swag", "train.csv"), swag_csv())
        write(self.path("swag", "val.csv"), swag_csv())
        write(self.path("conll", "train.txt"), conll_text())
        write(self.path("conll", "dev.txt"), conll_text())
        write(self.path("predict.txt"), "a good movie\nthe film is awful\n")
        if checkpoint:
            make_checkpoint(self.ckpt, self.vocab)
        if huggingface:
            make_huggingface(self.path("hf"), self.ckpt)
        if pretraining_data:
            make_pretraining_data(self.path("corpus.txt"), self.path("pretrain.tfrecord"),
                                  self.vocab)
        return self


def make_checkpoint(directory, vocab_file):
    """An official_bert checkpoint of a random tiny encoder (config and vocab beside)."""
    from official_bert import checkpoints
    from official_bert.modeling.configs import BertConfig
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs

    os.makedirs(directory, exist_ok=True)
    encoder = BertEncoder.from_bert_config(BertConfig(**TINY_CONFIG))
    encoder(dummy_inputs())
    checkpoints.save_checkpoint(encoder, str(directory), vocab_file=str(vocab_file))
    return directory


def make_huggingface(directory, ckpt):
    from official_bert import checkpoints

    encoder, _ = checkpoints.load_encoder(str(ckpt))
    checkpoints.export_huggingface(encoder, str(directory))
    return directory


def make_pretraining_data(corpus, output, vocab_file, **overrides):
    from data_prep.create_pretraining_data import create_pretraining_data
    from data_prep.pretraining_instances import PretrainingDataConfig

    config = dict(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=2,
                  short_seq_prob=0.1)
    config.update(overrides)
    create_pretraining_data(str(corpus), str(output), str(vocab_file),
                            PretrainingDataConfig(**config), num_workers=1, log=None)
    return output


# === Damage ===


def truncate(path, keep: float | int = 0.5):
    """Cuts `path` to a fraction (float) or a byte count (int) of its size."""
    path = pathlib.Path(path)
    size = path.stat().st_size
    n = int(size * keep) if isinstance(keep, float) else keep
    with open(path, "r+b") as f:
        f.truncate(n)
    return path


def corrupt(path, offset: float = 0.5, count: int = 8):
    """Flips `count` bytes in the middle (by default) of `path`."""
    path = pathlib.Path(path)
    data = bytearray(path.read_bytes())
    start = int(len(data) * offset)
    for i in range(start, min(start + count, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


# === Running ===


@dataclasses.dataclass
class Result:
    command: list
    returncode: int
    stdout: str
    stderr: str
    seconds: float = 0.0

    @property
    def error_lines(self) -> list:
        """The user-facing error lines: ours (`error: ...`) and absl's one line
        for a flag it cannot parse (`FATAL Flags parsing error: ...`)."""
        return [line for line in self.stderr.splitlines()
                if line.startswith(("error:", "FATAL Flags parsing error:"))]

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stderr


def command(script: str, *args) -> list:
    """`script` is a run_*.py file, `bert <command>`, or `-m module`."""
    if script.startswith("bert "):
        return [sys.executable, "-m", "official_bert.commands.cli", script.split()[1], *map(str, args)]
    if script.startswith("-m "):
        return [sys.executable, "-m", script.split()[1], *map(str, args)]
    return [sys.executable, str(REPO / script), *map(str, args)]


def run(argv: list, *, stdin=None, timeout=300, file_size_limit=None, env=None,
        cwd=None) -> Result:
    """Runs a command (a list from `command`), returns its `Result`. A Python
    command starts from the fork server (`processes`: its own process, without
    TensorFlow's import time)."""
    import time

    from .processes import run as run_process

    environment = {**os.environ, **ENV, **(env or {})}
    start = time.time()
    try:
        p = run_process(argv, input=stdin, timeout=timeout, env=environment,
                        cwd=str(cwd or REPO), file_size_limit=file_size_limit, text=False)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode("utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Result(argv, -9, out, err + f"\n[timed out after {timeout} s]", time.time() - start)
    decode = lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else b  # noqa: E731
    return Result(argv, p.returncode, decode(p.stdout), decode(p.stderr), time.time() - start)


# === Snapshots: was an input changed, or a half output left? ===


def snapshot(*roots) -> dict:
    """path → sha1 of every file under `roots` (hidden files included)."""
    files = {}
    for root in roots:
        root = pathlib.Path(root)
        if root.is_file():
            files[str(root)] = hashlib.sha1(root.read_bytes()).hexdigest()
            continue
        for path in sorted(root.rglob("*")) if root.exists() else ():
            if path.is_file():
                files[str(path)] = hashlib.sha1(path.read_bytes()).hexdigest()
    return files


def changed(before: dict, after: dict) -> list:
    """Files of `before` that are gone or different in `after`."""
    return sorted(p for p, digest in before.items() if after.get(p) != digest)


# === Outcomes ===

CLEAN = "clean error"
TRACEBACK = "traceback"
SILENT = "silent wrong result"
LOST = "data lost"
OK = "ok"
VAGUE = "vague error"


def classify(result: Result, expect_error: bool = True, names=(), inputs_changed=(),
             partial_outputs=()) -> tuple[str, str]:
    """(outcome, why) of one run.

    expect_error: the input is bad, so a non-zero exit is right.
    names: strings of which at least one must appear in the error line (the
        file, the flag): an error line naming none of them is "vague".
    inputs_changed: input files the run modified or deleted (data lost).
    partial_outputs: outputs that look complete but are not (data lost).
    """
    if inputs_changed:
        return LOST, f"input changed: {', '.join(map(str, inputs_changed))}"
    if partial_outputs:
        return LOST, f"half-written output: {', '.join(map(str, partial_outputs))}"
    if result.traceback:
        last = [l for l in result.stderr.splitlines() if l.strip()][-3:]
        return TRACEBACK, " | ".join(last)[-300:]
    if result.returncode == 0:
        return (SILENT, "exit 0 where an error was expected") if expect_error else (OK, "")
    lines = result.error_lines
    if len(lines) != 1:
        tail = " | ".join(result.stderr.strip().splitlines()[-2:])[-300:]
        return VAGUE, f"{len(lines)} error lines (exit {result.returncode}): {tail}"
    if not expect_error:
        return CLEAN, f"unexpected error: {lines[0][:300]}"
    if names and not any(str(n) in lines[0] for n in names):
        return VAGUE, f"names none of {', '.join(map(str, names))}: {lines[0][:300]}"
    return CLEAN, lines[0][:300]


def strip_paths(text: str, root) -> str:
    """`text` with `root` written as `$TMP` (for tables)."""
    return re.sub(re.escape(str(root)), "$TMP", text)
