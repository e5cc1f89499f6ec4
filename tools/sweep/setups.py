"""What a case does to its copy of the world before the run (each step a function of
the copy, `Ctx`; a case's `setup` runs its steps in order), and the follow-ups that
rerun a command after its fault."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

from tools.kit import fault_kit as kit

from . import argv
from .case import Ctx

BINARY = bytes(range(256)) * 40


# === Steps: one change to the copy ===


def text(path, content):
    """Writes `content` (str as UTF-8, or bytes) to the world's `path`."""
    return lambda c: kit.write(c.p(path), content)


def binary(path):
    return text(path, BINARY)


def truncate(path, keep=0.5):
    return lambda c: kit.truncate(c.p(path), keep)


def corrupt(path, offset=0.5, count=8):
    return lambda c: kit.corrupt(c.p(path), offset, count)


def mkdir(path):
    return lambda c: os.makedirs(c.p(path), exist_ok=True)


def remove(path):
    return lambda c: os.remove(c.p(path))


def copytree(source, destination):
    return lambda c: shutil.copytree(c.p(source), c.p(destination))


GEN = mkdir("gen")  # the outputs' directory, for the commands that do not make it


def config(**changes):
    """bert_config.json (beside the vocabulary and in ckpt/) with `changes`; None drops a key."""
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


def config_file(path, **changes):
    """`path`: the tiny config with `changes` (another model's config)."""
    return text(path, json.dumps(dict(kit.TINY_CONFIG, **changes)))


def vocab_without(*tokens):
    """vocab.txt (beside the config and in ckpt/) without `tokens`."""
    def setup(c):
        words = [t for t in kit.VOCAB if t not in tokens]
        for where in ("vocab.txt", "ckpt/vocab.txt"):
            kit.write(c.p(where), "\n".join(words) + "\n")
    return setup


def not_utf8_corpus(path):
    """The world's corpus with one byte that is not UTF-8 (in its first line)."""
    return text(path, kit.corpus_text().encode().replace(b"w1 ", b"w1 \xff ", 1))


def records(path, compress=False):
    """`path`: a copy of the world's pre-training records (GZIP-compressed if `compress`)."""
    def setup(c: Ctx):
        data = pathlib.Path(c.p("pretrain.tfrecord")).read_bytes()
        kit.write(c.p(path), gzip.compress(data) if compress else data)
    return setup


# === Setups that run a command first ===


def killed_generation(c: Ctx):
    """create_pretraining_data with 3 outputs, SIGKILLed after its first rename."""
    os.makedirs(c.p("gen"), exist_ok=True)
    script = (
        "import os, signal, sys\n"
        "from official_bert.io import staging\n"  # every publication renames through it
        "original, count = staging.rename, [0]\n"
        "def rename(source, destination, overwrite=False):\n"
        "    original(source, destination, overwrite)\n"
        "    if '.tfrecord' in str(destination) and not str(destination).endswith('.json'):\n"
        "        count[0] += 1\n"
        "        if count[0] == 1:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "staging.rename = rename\n"
        "from official_bert.commands import registry\n"
        "registry.run_command('create-pretraining-data', sys.argv)\n")
    outputs = ",".join(c.p("gen", f"k-{i}.tfrecord") for i in range(3))
    result = kit.run([sys.executable, "-c", script, *c.resolve(argv.cpd(output=outputs))[1:]])
    assert result.returncode == -9, result.stderr[-2000:]


def set_of_three(c: Ctx):
    """gen/k-{0,1,2}.tfrecord: one set of pre-training files (create_pretraining_data)."""
    os.makedirs(c.p("gen"), exist_ok=True)
    outputs = ",".join(c.p("gen", f"k-{i}.tfrecord") for i in range(3))
    result = kit.run(kit.command(*c.resolve(argv.cpd(output=outputs))))
    assert result.returncode == 0, result.stderr[-2000:]


def without_last_record(path):
    """`path`, a TFRecord, cut at the start of its last record: a valid, shorter file."""
    def setup(c: Ctx):
        import tensorflow as tf

        records = list(tf.data.TFRecordDataset(c.p(path)).as_numpy_iterator())
        kit.truncate(c.p(path), sum(16 + len(r) for r in records[:-1]))
    return setup


def trained_run(c: Ctx):
    """A pre-training run to step 4 (checkpoints 2 and 4) in `run`."""
    result = kit.run(kit.command(*c.resolve(argv.pretrain(steps=4))))
    assert result.returncode == 0, result.stderr[-3000:]


def hf_checkpoint(c: Ctx):
    """hf/: the checkpoint as Hugging Face files (model.safetensors) and its vocabulary."""
    kit.make_huggingface(c.p("hf"), c.p("ckpt"))
    shutil.copy(c.p("ckpt", "vocab.txt"), c.p("hf", "vocab.txt"))


def saved_model(c: Ctx) -> pathlib.Path:
    """The newest version of the world's export (the fine-tuned classifier)."""
    versions = sorted(p for p in pathlib.Path(c.p("export")).iterdir() if p.name.isdigit())
    return versions[-1]


def truncate_in_export(*parts):
    """A file of the newest version of the world's export, cut in half."""
    return lambda c: kit.truncate(saved_model(c).joinpath(*parts))


def remove_from_export(*parts):
    """A directory of the newest version of the world's export, deleted."""
    return lambda c: shutil.rmtree(saved_model(c).joinpath(*parts))


# === glue-submission and download ===


def glue_runs(text=None, rows=4):
    """runs/sst2: a run_classifier.py run's config and its SST-2.tsv (`text`, or `rows`
    rows of predictions); gluedata/SST-2: GLUE's layout with the 4-row test.tsv."""
    def setup(c: Ctx):
        kit.write(c.p("runs", "sst2", "classifier_config.json"),
                  json.dumps({"task_name": "sst-2"}))
        content = text
        if content is None:
            content = "index\tprediction\n" + "".join(f"{i}\t{i % 2}\n" for i in range(rows))
        kit.write(c.p("runs", "sst2", "SST-2.tsv"), content)
        shutil.copytree(c.p("glue"), c.p("gluedata", "SST-2"))
    return setup


WNLI = {"train.tsv": "index\tsentence1\tsentence2\tlabel\n0\ta\tb\t1\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\ta\tb\t0\n",
        "test.tsv": "index\tsentence1\tsentence2\n0\ta\tb\n"}


def wnli_zip(drop=None, unsafe=False):
    """src/WNLI.zip: GLUE's WNLI (without the member `drop`; with one outside if `unsafe`)."""
    def setup(c: Ctx):
        with zipfile.ZipFile(c.p("src", "WNLI.zip"), "w") as z:
            for name, content in WNLI.items():
                if name != drop:
                    z.writestr(f"WNLI/{name}", content)
            if unsafe:
                z.writestr("WNLI/../../x.txt", "outside")
    return setup


def pin(name: str, file: str):
    """--manifest pins `name` to src/`file` as it is now (size and sha256)."""
    def setup(c: Ctx):
        data = pathlib.Path(c.p("src", file)).read_bytes()
        edit_manifest({name: {"size": len(data),
                              "sha256": hashlib.sha256(data).hexdigest()}})(c)
    return setup


def edit_manifest(entries: dict):
    """manifest.json with `entries` added to (or replacing) its files."""
    def setup(c: Ctx):
        path = pathlib.Path(c.p("manifest.json"))
        manifest = json.loads(path.read_text()) if path.exists() else {"files": {}}
        manifest["files"].update(entries)
        path.write_text(json.dumps(manifest, indent=1))
    return setup


def local_files(c: Ctx):
    """src/: tiny stand-ins of WNUT-17's three files and GLUE's WNLI.zip, and
    manifest.json pinning them (`bert download --source_dir=src --manifest=...`)."""
    kit.write(c.p("src", "wnut17train.conll"), kit.conll_text(100))
    kit.write(c.p("src", "emerging.dev.conll"), kit.conll_text(8))
    kit.write(c.p("src", "emerging.test.annotated"), kit.conll_text(8))
    wnli_zip()(c)
    for name in ("wnut17/wnut17train.conll", "wnut17/emerging.dev.conll",
                 "wnut17/emerging.test.annotated", "glue/WNLI.zip"):
        pin(name, name.split("/")[1])(c)


# === Follow-ups: the same command again, without the fault ===


def _last_line(result) -> str:
    return result.stderr.strip().splitlines()[-1][:200]


def rerun_succeeds(c: Ctx, case) -> tuple:
    result = kit.run(kit.command(*c.resolve(case.argv)), timeout=case.timeout)
    return result.returncode == 0, "rerun without the fault: " + (
        "succeeded" if result.returncode == 0 else _last_line(result))


def rerun_resumes(c: Ctx, case) -> tuple:
    result = kit.run(kit.command(*c.resolve(case.argv)), timeout=case.timeout)
    ok = result.returncode == 0 and "Resumed from" in result.stderr
    return ok, "rerun without the fault: " + ("resumed" if ok else _last_line(result))


def resumes_after_delete(c: Ctx, case) -> tuple:
    """Follows the error's advice (delete the damaged checkpoint), then reruns."""
    run = pathlib.Path(c.p("run"))
    for path in run.glob("ckpt-4.*"):
        path.unlink()
    result = kit.run(kit.command(*c.resolve(case.argv)), timeout=case.timeout)
    ok = result.returncode == 0 and "Resumed from" in result.stderr and "ckpt-2" in result.stderr
    return ok, "deleted ckpt-4 as told, reran: " + (
        "resumed from ckpt-2" if ok else _last_line(result))


BOM = b"\xef\xbb\xbf"


def with_bom(path, content):
    """Writes `content` (str as UTF-8, or bytes) to the world's `path`, a UTF-8
    byte-order mark first."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    return text(path, BOM + data)


def add_bom(path):
    """The world's `path` as it is, a UTF-8 byte-order mark first."""
    return lambda c: kit.write(c.p(path), BOM + pathlib.Path(c.p(path)).read_bytes())


def same_as_without_bom(*inputs, outputs=(), fresh=(), stdout=False):
    """A control's follow-up: what the command made of `inputs` (world paths that
    start with a byte-order mark) is what it makes of them without it.

    `outputs`: world paths compared byte for byte with those of a rerun on the
    inputs without their BOM (none of them may start with a BOM); `fresh`: world
    paths cleared before that rerun (a directory emptied: the run directory; a
    file removed: an output that must not exist); `stdout`: the command is run
    with the BOM and without it, and its standard outputs are compared."""
    def follow(c: Ctx, case) -> tuple:
        def run_it():
            return kit.run(kit.command(*c.resolve(case.argv)), stdin=case.stdin,
                           timeout=case.timeout)

        first = run_it() if stdout else None
        made = {o: pathlib.Path(c.p(o)).read_bytes() for o in outputs
                if os.path.exists(c.p(o))}
        missing = sorted(set(outputs) - set(made))
        if missing:
            return False, f"the run with a BOM left no {', '.join(missing)}"
        for path in inputs:
            data = pathlib.Path(c.p(path)).read_bytes()
            if not data.startswith(BOM):
                return False, f"{path} does not start with a BOM (a broken case)"
            kit.write(c.p(path), data[len(BOM):])
        for path in fresh:  # a directory is emptied, a file removed
            target = pathlib.Path(c.p(path))
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir()
            else:
                target.unlink(missing_ok=True)
        second = run_it()
        if second.returncode != 0:
            return False, "the run without the BOM failed: " + _last_line(second)
        differ = [o for o in outputs if pathlib.Path(c.p(o)).read_bytes() != made[o]]
        if stdout and first.stdout != second.stdout:
            differ.append("the standard output")
        if differ:
            return False, f"with a BOM, {', '.join(differ)} differ from the BOM-less run's"
        kept = [o for o in outputs if made[o].startswith(BOM)]
        if kept:
            return False, f"the BOM was copied into {', '.join(kept)}"
        what = ", ".join([*outputs, *(["standard output"] if stdout else [])])
        return True, f"{what}: the same as without the BOM"
    return follow


# === Issue 36: what a run directory is, and what killed runs leave ===


def trained_classifier(c: Ctx):
    """out/: the sweep's run_classifier.py run, trained (its run.json records it)."""
    result = kit.run(kit.command(*c.resolve(argv.classify())))
    assert result.returncode == 0, result.stderr[-3000:]


def symlink(path, target):
    """The world's `path`: a symbolic link to its `target`."""
    return lambda c: os.symlink(c.p(target), c.p(path))


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def killed_run_leftovers(directory):
    """In `directory` (a run directory): TensorFlow's staging of a checkpoint and a
    temporary file, as a killed run leaves them (their writer is gone)."""
    def setup(c: Ctx):
        kit.write(c.p(directory, "ckpt-99_temp", "part-00000-of-00001.index"), "half")
        kit.write(c.p(directory, f".eval_results.txt.tmp-{_dead_pid()}-0a1b2c3d"), "half")
    return setup


def killed_while_evaluating(case_argv):
    """Runs `case_argv` (run_classifier.py with --eval_every_steps) SIGKILLed as it
    starts to evaluate step 2, which it has saved."""
    def setup(c: Ctx):
        script = ("import os, signal, sys\n"
                  "from official_bert.tasks import evaluation\n"
                  "original = evaluation.BestCheckpoint.evaluate\n"
                  "def evaluate(self, step):\n"
                  "    if step == 2:\n"
                  "        os.kill(os.getpid(), signal.SIGKILL)\n"
                  "    return original(self, step)\n"
                  "evaluation.BestCheckpoint.evaluate = evaluate\n"
                  "from official_bert.commands import registry\n"
                  "registry.run_command('classify', sys.argv)\n")
        result = kit.run([sys.executable, "-c", script, *c.resolve(case_argv)[1:]])
        assert result.returncode == -9, result.stderr[-2000:]
    return setup


def rerun_with(*extra, resumes=True):
    """A follow-up: the command again with `extra` (the fix its error named)
    must succeed, and resume the run when `resumes`."""
    def follow(c: Ctx, case) -> tuple:
        result = kit.run(kit.command(*c.resolve([*case.argv, *extra])), timeout=case.timeout)
        ok = result.returncode == 0 and (not resumes or "Resumed from" in result.stderr)
        return ok, f"rerun with {' '.join(extra)}: " + (
            ("resumed" if resumes else "succeeded") if ok else _last_line(result))
    return follow


def records_change(directory, key):
    """A control's follow-up: `directory`'s run.json keeps the change of `key` in
    its history."""
    def follow(c: Ctx, case) -> tuple:
        record = json.loads(pathlib.Path(c.p(directory, "run.json")).read_text())
        changes = [h["changed"] for h in record.get("history", []) if "changed" in h]
        ok = any(key in change for change in changes)
        return ok, f"run.json records the change of {key}" if ok else (
            f"run.json's history lacks {key}: {changes}")
    return follow


def evaluated_steps(directory, steps):
    """A control's follow-up: `directory`'s eval_history.jsonl holds `steps`."""
    def follow(c: Ctx, case) -> tuple:
        path = pathlib.Path(c.p(directory, "eval_history.jsonl"))
        found = [json.loads(line)["global_step"] for line in path.read_text().splitlines()]
        ok = sorted(found) == sorted(steps)
        return ok, f"evaluated steps {found}" + ("" if ok else f", not {steps}")
    return follow


def leftovers_removed(directory):
    """A control's follow-up: `killed_run_leftovers` are gone from `directory`."""
    def follow(c: Ctx, case) -> tuple:
        left = [n for n in os.listdir(c.p(directory)) if "_temp" in n or ".tmp-" in n]
        return not left, "the killed run's leftovers were removed" if not left else (
            f"left: {', '.join(left)}")
    return follow


def kept(path, content):
    """A follow-up after a clean error: the world's `path` still holds `content`."""
    def follow(c: Ctx, case) -> tuple:
        ok = pathlib.Path(c.p(path)).read_bytes() == content
        return ok, f"{path} kept" if ok else f"{path} was replaced"
    return follow


def remember(directory):
    """A last setup step: notes every file of `directory` (for `unchanged`)."""
    def setup(c: Ctx):
        snapshot = kit.snapshot(c.p(directory))
        kit.write(c.p(f".{directory}.snapshot.json"), json.dumps(snapshot))
    return setup


def unchanged(directory):
    """A follow-up after a clean error: `directory` is as `remember` noted it
    (nothing written, nothing removed)."""
    def follow(c: Ctx, case) -> tuple:
        before = json.loads(pathlib.Path(c.p(f".{directory}.snapshot.json")).read_text())
        after = kit.snapshot(c.p(directory))
        differ = sorted(set(kit.changed(before, after)) | (set(after) - set(before)))
        names = [os.path.relpath(p, c.p(directory)) for p in differ]
        return not differ, f"{directory}/ unchanged" if not differ else (
            f"{directory}/ changed: {', '.join(names)}")
    return follow
