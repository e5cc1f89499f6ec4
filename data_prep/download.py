r"""`bert download <dataset>`: the fine-tuning datasets, from their official sources.

    bert download glue squad_v1.1 --output_dir=~/bert_data
    bert download glue/MRPC --output_dir=~/bert_data            # one GLUE task
    bert download xnli --base_url=https://mirror.example.org/bert-data
    bert download wnut17 --source_dir=/media/usb/bert-data       # no network
    bert download --list                                        # what, where from, pinned?

Datasets and the layout each gets under `--output_dir` (what the run scripts
read):

    glue             every task below (GLUE's download script's layout)
    glue/<TASK>      glue/<TASK>/{train,dev,test}.tsv for CoLA, SST-2, MRPC, QQP,
                     STS-B, MNLI (dev_/test_ matched and mismatched), QNLI, RTE,
                     WNLI: `run_classifier.py --task_name=<task> --data_dir=glue/<TASK>`;
                     glue/diagnostic/diagnostic.tsv (AX)
    squad_v1.1       squad_v1.1/{train,dev}-v1.1.json, evaluate-v1.1.py
    squad_v2.0       squad_v2.0/{train,dev}-v2.0.json, evaluate-v2.0.py
    swag             swag/{train,val,test}.csv (SWAG's regular CSV: run_swag.py)
    wnut17           wnut17/{wnut17train.conll, emerging.dev.conll,
                     emerging.test.annotated} (run_ner.py)
    xnli             xnli/xnli.{dev,test}.tsv, xnli/multinli/multinli.train.<lang>.tsv
                     (`run_classifier.py --task_name=xnli --data_dir=xnli`, the
                     layout google-research/bert's XnliProcessor reads)

How a file is fetched (`REMOTES`: each file's official URL, size and sha256):

* **Resumable.** Bytes go to `<output_dir>/downloads/<name>.part`; a dropped
  connection is retried (`--retries`) with an HTTP Range request from the
  last byte, and so is the next run of the same command after a failure or
  Ctrl-C. A server that ignores Range starts over.
* **Progress**: a line per 10% or every `--progress_seconds` (bytes, speed,
  time left).
* **Verified.** The size and the pinned sha256 are checked before anything
  is unpacked; a file that does not match is deleted and the command stops
  with one line. A file whose sha256 is not pinned yet (`sha256=None` below:
  only SQuAD's evaluation scripts, which have an md5 from NVIDIA's scripts)
  is checked for what can be checked (size, md5, format) and the output says
  that its hash is not pinned.
* **Atomic.** A dataset is unpacked into a hidden directory beside its
  destination and renamed into place when complete: `glue/MRPC` exists
  complete or not at all. An existing dataset directory is left alone
  (delete it to download again). Verified archives are deleted after
  unpacking unless `--keep_archives`; kept, `downloads/` is itself a
  `--source_dir` for another machine.
* **Mirrors.** `--base_url=URL` fetches `URL/<name>` instead of the official
  address (`<name>` as in `--list`: e.g. `glue/CoLA.zip`, `swag/train.csv`);
  `--source_dir=DIR` reads `DIR/<name>` (or `DIR/<basename>`), no network.
  `--manifest=FILE.json` (default: the `BERT_DOWNLOAD_MANIFEST` environment
  variable) overrides entries of the table: `{"base_url": ..., "files":
  {"<name>": {"url": ..., "sha256": ..., "size": ..., "md5": ...}}}`, for a
  mirror that serves other files (and for the tests' local server).

Where the digests come from (`pinned_by`): the download records of Hugging
Face's `datasets` (its `dataset_infos.json` for glue, squad, squad_v2, swag,
wnut_17 and xnli), which its loader verified on every download; most are
also pinned by other projects, and the WNUT-17 train/dev files and MRPC's
dev ids were checked here against the copies in `../shared/data`.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import http.client
import json
import os
import re
import shutil
import sys
import time
import urllib.error
import urllib.request
import zipfile
from typing import Callable, Dict, Optional, Sequence, Tuple

from official_bert import io
from official_bert.errors import BadFileError, UserError

MANIFEST_ENV = "BERT_DOWNLOAD_MANIFEST"
DEFAULT_OUTPUT_DIR = "~/bert_data"
DOWNLOADS = "downloads"  # under --output_dir: partial and kept archives
INFO_FILE = ".download.json"  # in each dataset directory: what it was made from
CHUNK = 1 << 16


@dataclasses.dataclass(frozen=True)
class Remote:
    """One file to fetch.

    Args:
        name: its name on a mirror and in `--source_dir` (`<group>/<file>`).
        url: the official address.
        size: bytes, or None when unknown.
        sha256: the pinned digest, or None when not pinned yet.
        md5: a second digest where one is published (checked when given).
        pinned_by: where the digest comes from.
    """

    name: str
    url: str
    size: Optional[int]
    sha256: Optional[str]
    md5: Optional[str] = None
    pinned_by: str = ""


_HF = "huggingface/datasets dataset_infos.json"
_GLUE = "https://dl.fbaipublicfiles.com/glue/data/"
_SENTEVAL = "https://dl.fbaipublicfiles.com/senteval/senteval_data/"
_SQUAD = "https://rajpurkar.github.io/SQuAD-explorer/dataset/"
_SWAG = "https://raw.githubusercontent.com/rowanz/swagaf/master/data/"
_WNUT = "https://raw.githubusercontent.com/leondz/emerging_entities_17/master/"
_XNLI = "https://dl.fbaipublicfiles.com/XNLI/"
_NVIDIA = "md5 from NVIDIA DeepLearningExamples' squad_download.sh; sha256 not pinned yet"

REMOTES: Dict[str, Remote] = {r.name: r for r in [
    # GLUE: the archives of GLUE's own download script (download_glue_data.py);
    # MRPC comes as SentEval's copy of the Microsoft files plus GLUE's dev ids.
    Remote("glue/CoLA.zip", _GLUE + "CoLA.zip", 376971,
           "f212fcd832b8f7b435fb991f101abf89f96b933ab400603bf198960dfc32cbff", pinned_by=_HF),
    Remote("glue/SST-2.zip", _GLUE + "SST-2.zip", 7439277,
           "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa", pinned_by=_HF),
    Remote("glue/msr_paraphrase_train.txt", _SENTEVAL + "msr_paraphrase_train.txt", 1047044,
           "60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89", pinned_by=_HF),
    Remote("glue/msr_paraphrase_test.txt", _SENTEVAL + "msr_paraphrase_test.txt", 441275,
           "a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784", pinned_by=_HF),
    Remote("glue/mrpc_dev_ids.tsv", _GLUE + "mrpc_dev_ids.tsv", 6222,
           "971d7767d81b997fd9060ade0ec23c4fc31cbb226a55d1bd4a1bac474eb81dc7",
           pinned_by=_HF + "; equal to ../shared/data/glue/MRPC/dev_ids.tsv"),
    Remote("glue/QQP-clean.zip", _GLUE + "QQP-clean.zip", 41696084,
           "40e7c862c04eb26ee04b67fd900e76c45c6ba8e6d8fab4f8f1f8072a1a3fbae0", pinned_by=_HF),
    Remote("glue/STS-B.zip", _GLUE + "STS-B.zip", 802872,
           "e60a6393de5a8b5b9bac5020a1554b54e3691f9d600b775bd131e613ac179c85", pinned_by=_HF),
    Remote("glue/MNLI.zip", _GLUE + "MNLI.zip", 312783507,
           "e7c1d896d26ed6caf700110645df426cc2d8ebf02a5ab743d5a5c68ac1c83633", pinned_by=_HF),
    Remote("glue/QNLIv2.zip", _GLUE + "QNLIv2.zip", 10627589,
           "e634e78627a29adaecd4f955359b22bf5e70f2cbd93b493f2d624138a0c0e5f5", pinned_by=_HF),
    Remote("glue/RTE.zip", _GLUE + "RTE.zip", 697150,
           "6bf86de103ecd335f3441bd43574d23fef87ecc695977a63b82d5efb206556ee", pinned_by=_HF),
    Remote("glue/WNLI.zip", _GLUE + "WNLI.zip", 28999,
           "ae0e8e4d16f4d46d4a0a566ec7ecceccfd3fbfaa4a7a4b4e02848c0f2561ac46", pinned_by=_HF),
    Remote("glue/AX.tsv", _GLUE + "AX.tsv", 222257,
           "0e13510b1bb14436ff7e2ee82338f0efb0133ecf2e73507a697dc210db3f05fd", pinned_by=_HF),
    # SQuAD: the files google-research/bert's README links.
    Remote("squad/train-v1.1.json", _SQUAD + "train-v1.1.json", 30288272,
           "3527663986b8295af4f7fcdff1ba1ff3f72d07d61a20f487cb238a6ef92fd955", pinned_by=_HF),
    Remote("squad/dev-v1.1.json", _SQUAD + "dev-v1.1.json", 4854279,
           "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9", pinned_by=_HF),
    Remote("squad/evaluate-v1.1.py",
           "https://worksheets.codalab.org/rest/bundles/0xbcd57bee090b421c982906709c8c27e1"
           "/contents/blob/", None, None, md5="afb04912d18ff20696f7f88eed49bea9",
           pinned_by=_NVIDIA),
    Remote("squad/train-v2.0.json", _SQUAD + "train-v2.0.json", 42123633,
           "68dcfbb971bd3e96d5b46c7177b16c1a4e7d4bdef19fb204502738552dede002", pinned_by=_HF),
    Remote("squad/dev-v2.0.json", _SQUAD + "dev-v2.0.json", 4370528,
           "80a5225e94905956a6446d296ca1093975c4d3b3260f1d6c8f68bc2ab77182d8", pinned_by=_HF),
    Remote("squad/evaluate-v2.0.py",
           "https://worksheets.codalab.org/rest/bundles/0x6b567e1cf2e041ec80d7098f031c5c9e"
           "/contents/blob/", None, None, md5="ff23213bed5516ea4a6d9edb6cd7d627",
           pinned_by=_NVIDIA),
    # SWAG (regular: sent1, sent2, ending0-3, label), from its authors' repository.
    Remote("swag/train.csv", _SWAG + "train.csv", 28243333,
           "5748b51126ac255c5a6f26e1ba473b51116d6c822aeb25e63ecba282c9d0e610", pinned_by=_HF),
    Remote("swag/val.csv", _SWAG + "val.csv", 7893588,
           "c0497b2cd7f3e6b7df995524b1853f62285d60d110d659b19545ca80b2903234", pinned_by=_HF),
    Remote("swag/test.csv", _SWAG + "test.csv", 7817885,
           "a689a1a4e892a65ca625c1f0fcf77bcce004b59ad1caeb134ca5ec080a711cb6", pinned_by=_HF),
    # WNUT-17 emerging entities (CoNLL, 2 columns), from its authors' repository.
    Remote("wnut17/wnut17train.conll", _WNUT + "wnut17train.conll", 493781,
           "731820e13f71af324c6b55a1575ec2ce59fbaa2a0806f8f0400b98d56cd6a7a5",
           pinned_by=_HF + "; equal to ../shared/data/ner/wnut17"),
    Remote("wnut17/emerging.dev.conll", _WNUT + "emerging.dev.conll", 114749,
           "e053b752b8155113ca66e7db08af5f2f5f43ab993694e4774f1ec5bad42312d8",
           pinned_by=_HF + "; equal to ../shared/data/ner/wnut17"),
    Remote("wnut17/emerging.test.annotated", _WNUT + "emerging.test.annotated", 192425,
           "2aa79b764e56ec9264a1b30fdd9b70195bd00ff400b62edd8f399d5f13c178f0", pinned_by=_HF),
    # XNLI: dev/test (human translations) and the machine-translated MultiNLI training set.
    Remote("xnli/XNLI-1.0.zip", _XNLI + "XNLI-1.0.zip", 17865352,
           "4ba1d5e1afdb7161f0f23c66dc787802ccfa8a25a3ddd3b165a35e50df346ab1", pinned_by=_HF),
    Remote("xnli/XNLI-MT-1.0.zip", _XNLI + "XNLI-MT-1.0.zip", 466098360,
           "f732517ba2fb1d550e9f3c2aabaef6017c91ee2dcec90e878f138764d224db05", pinned_by=_HF),
]}


# === Unpacking: local files (by remote name) → a staging directory ===


def _write_from(source, path: str) -> None:
    with io.atomic_output(path, "wb") as out:
        shutil.copyfileobj(source, out, 1 << 20)


def _unzip(archive: str, top: str, staging: str, into: str = "") -> int:
    """Extracts the members under `top/` of `archive` into `staging/into/`
    (the `top/` prefix dropped); returns how many files."""
    prefix = top.rstrip("/") + "/"
    count = 0
    try:
        with zipfile.ZipFile(archive) as z:
            for member in z.infolist():
                name = member.filename.replace("\\", "/")
                if member.is_dir() or not name.startswith(prefix) or "__MACOSX" in name:
                    continue
                relative = name[len(prefix):]
                parts = relative.split("/")
                if not relative or relative.startswith("/") or ".." in parts:
                    raise BadFileError(archive, f"holds an unsafe member name {name!r}")
                destination = os.path.join(staging, into, *parts)
                with z.open(member) as source:
                    _write_from(source, destination)
                count += 1
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
        raise BadFileError(archive, f"is not a readable zip archive ({e})") from None
    if not count:
        raise BadFileError(archive, f"holds no files under {prefix}")
    return count


def _copy(source: str, staging: str, name: str) -> None:
    with open(source, "rb") as f:
        _write_from(f, os.path.join(staging, name))


def _format_mrpc(train_txt: str, test_txt: str, dev_ids: str, staging: str) -> None:
    """MRPC's train/dev/test.tsv exactly as GLUE's download_glue_data.py
    (format_mrpc) writes them from the Microsoft files and GLUE's dev ids."""
    with open(dev_ids, encoding="utf-8") as f:
        ids = {tuple(row.strip().split("\t")) for row in f}

    def rows(path):
        with open(path, encoding="utf-8") as f:
            header = f.readline()
            for number, row in enumerate(f, 2):
                fields = row.strip().split("\t")
                if len(fields) != 5:
                    raise BadFileError(path, f"has {len(fields)} tab-separated fields, not 5",
                                       line=number)
                yield header, fields

    with io.atomic_output(os.path.join(staging, "test.tsv")) as out:
        out.write("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
        for index, (_, (_, id1, id2, s1, s2)) in enumerate(rows(test_txt)):
            out.write(f"{index}\t{id1}\t{id2}\t{s1}\t{s2}\n")
    with io.atomic_output(os.path.join(staging, "train.tsv")) as train, \
            io.atomic_output(os.path.join(staging, "dev.tsv")) as dev:
        first = True
        for header, (label, id1, id2, s1, s2) in rows(train_txt):
            if first:
                train.write(header)
                dev.write(header)
                first = False
            out = dev if (id1, id2) in ids else train
            out.write(f"{label}\t{id1}\t{id2}\t{s1}\t{s2}\n")
    _copy(dev_ids, staging, "dev_ids.tsv")


@dataclasses.dataclass(frozen=True)
class Dataset:
    """One directory under --output_dir and how to make it.

    Args:
        name: as given to the command (`glue/MRPC`); also its directory.
        files: the `REMOTES` it is made from.
        unpack: (local path of each remote name, staging directory) → None.
        expect: files that must exist afterwards (checked before publishing).
        what: one line for `--list`.
    """

    name: str
    files: Tuple[str, ...]
    unpack: Callable[[Dict[str, str], str], None]
    expect: Tuple[str, ...]
    what: str


def _glue_zip(task: str, archive: str, expect=("train.tsv", "dev.tsv", "test.tsv")) -> Dataset:
    remote = f"glue/{archive}"
    return Dataset(f"glue/{task}", (remote,),
                   lambda files, staging: _unzip(files[remote], task, staging), expect,
                   f"GLUE {task}")


def _copies(name: str, what: str, remotes: Sequence[str]) -> Dataset:
    def unpack(files, staging):
        for remote in remotes:
            _copy(files[remote], staging, remote.split("/", 1)[1])
    return Dataset(name, tuple(remotes), unpack,
                   tuple(r.split("/", 1)[1] for r in remotes), what)


def _unpack_xnli(files, staging):
    _unzip(files["xnli/XNLI-1.0.zip"], "XNLI-1.0", staging)
    _unzip(files["xnli/XNLI-MT-1.0.zip"], "XNLI-MT-1.0/multinli", staging, into="multinli")


_MRPC = ("glue/msr_paraphrase_train.txt", "glue/msr_paraphrase_test.txt", "glue/mrpc_dev_ids.tsv")
DATASETS: Dict[str, Dataset] = {d.name: d for d in [
    _glue_zip("CoLA", "CoLA.zip"),
    _glue_zip("SST-2", "SST-2.zip"),
    Dataset("glue/MRPC", _MRPC,
            lambda files, staging: _format_mrpc(*(files[n] for n in _MRPC), staging),
            ("train.tsv", "dev.tsv", "test.tsv"), "GLUE MRPC (train/dev split by GLUE's ids)"),
    _glue_zip("QQP", "QQP-clean.zip"),
    _glue_zip("STS-B", "STS-B.zip"),
    _glue_zip("MNLI", "MNLI.zip", ("train.tsv", "dev_matched.tsv", "dev_mismatched.tsv")),
    _glue_zip("QNLI", "QNLIv2.zip"),
    _glue_zip("RTE", "RTE.zip"),
    _glue_zip("WNLI", "WNLI.zip"),
    Dataset("glue/diagnostic", ("glue/AX.tsv",),
            lambda files, staging: _copy(files["glue/AX.tsv"], staging, "diagnostic.tsv"),
            ("diagnostic.tsv",), "GLUE diagnostic (AX), test only"),
    _copies("squad_v1.1", "SQuAD v1.1 and its evaluation script",
            ("squad/train-v1.1.json", "squad/dev-v1.1.json", "squad/evaluate-v1.1.py")),
    _copies("squad_v2.0", "SQuAD 2.0 and its evaluation script",
            ("squad/train-v2.0.json", "squad/dev-v2.0.json", "squad/evaluate-v2.0.py")),
    _copies("swag", "SWAG (regular CSV: 73,546 train, 20,006 val, 20,005 unlabeled test)",
            ("swag/train.csv", "swag/val.csv", "swag/test.csv")),
    _copies("wnut17", "WNUT-17 emerging entities (CoNLL)",
            ("wnut17/wnut17train.conll", "wnut17/emerging.dev.conll",
             "wnut17/emerging.test.annotated")),
    Dataset("xnli", ("xnli/XNLI-1.0.zip", "xnli/XNLI-MT-1.0.zip"), _unpack_xnli,
            ("xnli.dev.tsv", "xnli.test.tsv", "multinli/multinli.train.zh.tsv"),
            "XNLI dev/test and machine-translated MultiNLI training data, 15 languages"),
]}
GROUPS = {"glue": tuple(name for name in DATASETS if name.startswith("glue/"))}
_GLUE_NAMES = {"sst2": "SST-2", "stsb": "STS-B", "sts": "STS-B", "ax": "diagnostic"}


def resolve(names: Sequence[str]) -> list:
    """Dataset names (groups expanded, GLUE task names in any case) → `Dataset`s."""
    out = []
    for raw in names:
        key = raw.strip().rstrip("/")
        found = GROUPS.get(key.lower())
        if found is None and key.lower().startswith("glue/"):
            task = key.split("/", 1)[1].lower()
            task = _GLUE_NAMES.get(task, task)
            found = tuple(n for n in DATASETS if n.lower() == f"glue/{task.lower()}")
        if found is None:
            found = tuple(n for n in DATASETS if n.lower() == key.lower())
        if not found:
            raise UserError(f"unknown dataset {raw!r}; known: {', '.join(sorted(GROUPS))}, "
                            f"{', '.join(DATASETS)} (bert download --list)")
        out.extend(DATASETS[n] for n in found if DATASETS[n] not in out)
    return out


# === The manifest ===


def load_manifest(path: Optional[str]) -> Tuple[Dict[str, Remote], Optional[str]]:
    """`REMOTES` with the entries of the JSON file `path` applied (None: as is);
    and the file's `base_url`, if any."""
    remotes = dict(REMOTES)
    if not path:
        return remotes, None
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise BadFileError(path, "does not exist", fix=f"check --manifest (or ${MANIFEST_ENV})"
                           ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadFileError(path, f"is not JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("files", {}), dict):
        raise BadFileError(path, 'is not a manifest: expected {"base_url": ..., "files": '
                           '{"<name>": {"url", "sha256", "size", "md5"}}}')
    fields = {"url", "sha256", "size", "md5", "pinned_by"}
    for name, entry in data.get("files", {}).items():
        if name not in remotes:
            raise BadFileError(path, f"names an unknown file {name!r}",
                               fix="the names are those of bert download --list")
        unknown = set(entry) - fields if isinstance(entry, dict) else {"(not an object)"}
        if unknown:
            raise BadFileError(path, f"has unknown keys for {name}: {', '.join(sorted(unknown))}")
        sha = entry.get("sha256", remotes[name].sha256)
        if sha is not None and not re.fullmatch(r"[0-9a-f]{64}", str(sha)):
            raise BadFileError(path, f"has a sha256 for {name} that is not 64 hex digits")
        md5 = entry.get("md5")
        if md5 is not None and not re.fullmatch(r"[0-9a-f]{32}", str(md5)):
            raise BadFileError(path, f"has an md5 for {name} that is not 32 hex digits")
        size = entry.get("size")
        if size is not None and (type(size) is not int or size < 0):
            raise BadFileError(path, f"has a size for {name} that is not a whole number of "
                               f"bytes: {size!r}")
        if not isinstance(entry.get("url", ""), str):
            raise BadFileError(path, f"has a url for {name} that is not a string")
        remotes[name] = dataclasses.replace(
            remotes[name], **dict({"pinned_by": f"manifest {path}"}, **entry))
    base_url = data.get("base_url")
    if base_url is not None and not isinstance(base_url, str):
        raise BadFileError(path, f"has a base_url that is not a string: {base_url!r}")
    return remotes, base_url


# === Fetching ===


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} GB"


class Progress:
    """Prints `name: done of total (p%) at speed, t left` per 10% or every `seconds`."""

    def __init__(self, name: str, total: Optional[int], start: int, seconds: float, out):
        self.name, self.total, self.seconds, self.out = name, total, seconds, out
        self.start_bytes, self.done = start, start
        self.t0 = self.last = time.monotonic()
        self.next_tenth = (start * 10 // total + 1) if total else None

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.t0, 1e-6)
        speed = (self.done - self.start_bytes) / elapsed
        text = f"  {self.name}: {_human(self.done)}"
        if self.total:
            text += f" of {_human(self.total)} ({100 * self.done // self.total}%)"
        text += f" at {_human(speed)}/s"
        if self.total and speed > 0 and self.done < self.total:
            text += f", {(self.total - self.done) / speed:.0f} s left"
        return text

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        tenth = self.done * 10 // self.total if self.total else None
        if (tenth is not None and tenth >= self.next_tenth) or now - self.last >= self.seconds:
            print(self.line(), file=self.out, flush=True)
            self.last = now
            if tenth is not None:
                self.next_tenth = tenth + 1


class _Interrupted(Exception):
    """The connection ended before the whole file came."""


def _digest(path: str, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fetch_once(url: str, part: str, remote: Remote, timeout: float, progress_seconds: float,
                out) -> None:
    """One HTTP request: appends to `part` from its current size (Range)."""
    have = os.path.getsize(part) if os.path.exists(part) else 0
    headers = {"User-Agent": "official_bert-download/1.0", "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing after the bytes we have: the file is whole
            return
        raise
    with response:
        status = getattr(response, "status", 200)
        total = remote.size
        length = response.headers.get("Content-Length")
        if have and status == 206:
            match = re.match(r"bytes (\d+)-(\d+)/(\d+|\*)",
                             response.headers.get("Content-Range", ""))
            if not match or int(match.group(1)) != have:
                print(f"  {remote.name}: the server resumed at the wrong place; starting over",
                      file=out, flush=True)
                os.remove(part)
                raise _Interrupted("bad Content-Range")
            if match.group(3) != "*":
                total = total or int(match.group(3))
            print(f"  {remote.name}: resuming at {_human(have)}", file=out, flush=True)
            mode = "ab"
        else:
            if have:
                print(f"  {remote.name}: the server does not resume (HTTP {status}); starting "
                      "over", file=out, flush=True)
            have, mode = 0, "wb"
            if total is None and length is not None:
                total = int(length)
        expected_end = have + int(length) if length is not None else total
        progress = Progress(remote.name, total, have, progress_seconds, out)
        with io.open_file(part, mode) as f:
            while True:
                block = response.read(CHUNK)
                if not block:
                    break
                f.write(block)
                progress.update(len(block))
            io.sync(f)
        if expected_end is not None and progress.done < expected_end:
            raise _Interrupted(f"the connection closed at {_human(progress.done)} of "
                               f"{_human(expected_end)}")
        print(progress.line().replace(f"  {remote.name}:", f"  {remote.name}: done,"),
              file=out, flush=True)


def fetch(url: str, part: str, remote: Remote, retries: int = 5, timeout: float = 60.0,
          progress_seconds: float = 5.0, out=sys.stderr, wait: float = 1.0) -> None:
    """Downloads `url` into `part` (resuming it), retrying a dropped connection."""
    attempt = 0
    while True:
        try:
            _fetch_once(url, part, remote, timeout, progress_seconds, out)
            return
        except urllib.error.HTTPError as e:
            if e.code < 500 and e.code != 429:
                raise UserError(f"cannot download {remote.name} from {url}: HTTP {e.code} "
                                f"{e.reason}; use --base_url (a mirror) or --source_dir "
                                "(a directory with the file)") from None
            reason = f"HTTP {e.code} {e.reason}"
        except (_Interrupted, urllib.error.URLError, http.client.HTTPException, OSError) as e:
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
                io.reraise_disk_full(e, part)
            reason = str(getattr(e, "reason", None) or e) or type(e).__name__
        attempt += 1
        have = os.path.getsize(part) if os.path.exists(part) else 0
        if attempt > retries:
            raise UserError(
                f"downloading {remote.name} from {url} stopped at {_human(have)} ({reason}); "
                f"run the same command again to resume from there"
                + ("" if retries else " (or allow retries with --retries)")) from None
        delay = min(wait * 2 ** (attempt - 1), 30.0)
        print(f"  {remote.name}: {reason}; retrying from {_human(have)} in {delay:.1f} s "
              f"({attempt} of {retries})", file=out, flush=True)
        time.sleep(delay)


def _check_format(path: str, name: str) -> None:
    """What can be checked without a digest: the file parses as its kind."""
    extension = os.path.splitext(name)[1]
    try:
        if extension == ".zip":
            if not zipfile.is_zipfile(path):
                raise ValueError("not a zip archive")
        elif extension == ".json":
            with open(path, encoding="utf-8") as f:
                json.load(f)
        elif extension == ".py":
            with open(path, encoding="utf-8") as f:
                compile(f.read(), name, "exec")
        else:
            with open(path, encoding="utf-8") as f:
                for _ in f:
                    pass
    except (ValueError, SyntaxError, UnicodeDecodeError) as e:
        raise ValueError(f"is not a valid {extension or 'text'} file ({e})") from None


def verify(path: str, remote: Remote) -> list:
    """Raises `ValueError` (what is wrong) unless `path` is `remote`'s file;
    returns notes for the output (e.g. that the hash is not pinned)."""
    size = os.path.getsize(path)
    if remote.size is not None and size != remote.size:
        raise ValueError(f"has {size:,} bytes, not the {remote.size:,} of the pinned file")
    if remote.sha256 is not None:
        got = _digest(path, "sha256")
        if got != remote.sha256:
            raise ValueError(f"has sha256 {got}, not the pinned {remote.sha256}")
        return []
    notes = [f"sha256 not pinned yet ({_digest(path, 'sha256')}, {size:,} bytes)"]
    if remote.md5 is not None:
        got = _digest(path, "md5")
        if got != remote.md5:
            raise ValueError(f"has md5 {got}, not the pinned {remote.md5}")
        notes.append("md5 matches")
    _check_format(path, remote.name)
    notes.append("format checked")
    return notes


# === The command ===


@dataclasses.dataclass
class Options:
    output_dir: str = DEFAULT_OUTPUT_DIR
    base_url: Optional[str] = None
    source_dir: Optional[str] = None
    manifest: Optional[str] = None
    keep_archives: bool = False
    retries: int = 5
    timeout: float = 60.0
    progress_seconds: float = 5.0
    retry_wait: float = 1.0


class Downloader:
    """Gets the files of datasets and publishes each dataset directory atomically."""

    def __init__(self, options: Options, out=sys.stderr):
        self.options, self.out = options, out
        self.remotes, self.manifest_base = load_manifest(options.manifest)
        self.output_dir = os.path.abspath(os.path.expanduser(options.output_dir))
        self.downloads = os.path.join(self.output_dir, DOWNLOADS)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def url_of(self, remote: Remote) -> str:
        base = self.options.base_url or (None if remote.url != REMOTES[remote.name].url
                                         else self.manifest_base)
        return base.rstrip("/") + "/" + remote.name if base else remote.url

    def _from_source_dir(self, remote: Remote) -> Tuple[str, list]:
        source = os.path.expanduser(self.options.source_dir)
        candidates = [os.path.join(source, remote.name),
                      os.path.join(source, os.path.basename(remote.name))]
        path = next((p for p in candidates if os.path.isfile(p)), None)
        if path is None:
            raise UserError(f"--source_dir {source} has no {remote.name} (nor "
                            f"{os.path.basename(remote.name)}); get it from {remote.url}")
        try:
            notes = verify(path, remote)
        except ValueError as e:
            raise BadFileError(path, str(e), fix=f"it is not {remote.name} as pinned (from "
                               f"{remote.url}); replace it") from None
        self.say(f"  {remote.name}: {path}, verified" + "".join(f"; {n}" for n in notes))
        return path, notes

    def get(self, name: str) -> Tuple[str, list, bool]:
        """The local path of remote `name` (verified), its notes, and whether it
        is a download of ours (deleted after unpacking unless --keep_archives)."""
        remote = self.remotes[name]
        if self.options.source_dir:
            path, notes = self._from_source_dir(remote)
            return path, notes, False
        final = os.path.join(self.downloads, name)
        part = final + ".part"
        if os.path.exists(final):  # kept by an earlier run
            try:
                notes = verify(final, remote)
                self.say(f"  {name}: already downloaded ({final})")
                return final, notes, True
            except ValueError as e:
                self.say(f"  {name}: the kept copy {e}; downloading it again")
                io.remove(final)
        io.makedirs(os.path.dirname(final))
        url = self.url_of(remote)
        self.say(f"  {name}: {url}" + (f" ({_human(remote.size)})" if remote.size else ""))
        fetch(url, part, remote, self.options.retries, self.options.timeout,
              self.options.progress_seconds, self.out, self.options.retry_wait)
        try:
            notes = verify(part, remote)
        except ValueError as e:
            io.remove(part)
            raise UserError(f"{name} from {url} {e}: the download is corrupt (or the file "
                            "changed at its source); it was deleted, nothing was unpacked") \
                from None
        io.rename(part, final, overwrite=True)
        self.say(f"  {name}: verified" + (f" (sha256 {remote.sha256[:16]}...)" if remote.sha256
                                          else "".join(f"; {n}" for n in notes)))
        return final, notes, True

    def dataset(self, dataset: Dataset) -> str:
        destination = os.path.join(self.output_dir, dataset.name)
        if os.path.exists(destination):
            self.say(f"{dataset.name}: already in {destination} (delete it to download again)")
            return destination
        self.say(f"{dataset.name}: {dataset.what}")
        files, notes, ours = {}, {}, []
        for name in dataset.files:
            files[name], notes[name], mine = self.get(name)
            if mine:
                ours.append(files[name])
        parent = os.path.dirname(destination)
        io.makedirs(parent)
        io.remove_stale_temporaries(parent)
        staging = io.make_temporary_dir(parent, os.path.basename(destination))
        try:
            dataset.unpack(files, staging)
            missing = [f for f in dataset.expect if not os.path.isfile(os.path.join(staging, f))]
            if missing:
                raise BadFileError(files[dataset.files[0]], f"unpacked without "
                                   f"{', '.join(missing)}", fix="is it the right file?")
            info = {"dataset": dataset.name, "files": [
                {"name": n, "url": self.url_of(self.remotes[n]) if not self.options.source_dir
                 else files[n], "sha256": self.remotes[n].sha256, "size": self.remotes[n].size,
                 "notes": notes[n]} for n in dataset.files]}
            io.atomic_write(os.path.join(staging, INFO_FILE), json.dumps(info, indent=2) + "\n")
            io.rename(staging, destination)
        except BaseException:
            io.remove_tree(staging)
            raise
        if not self.options.keep_archives:
            for path in ours:
                io.remove(path)
        unpinned = [n for n in dataset.files if self.remotes[n].sha256 is None]
        self.say(f"{dataset.name}: ready in {destination}" + (
            f" (sha256 not pinned yet for {', '.join(unpinned)}: size, md5 and format were "
            "checked)" if unpinned else ""))
        return destination

    def run(self, datasets: Sequence[Dataset]) -> list:
        # The flag as given: `self.output_dir` went through abspath, which makes
        # "gs://b/x" the local "<cwd>/gs:/b/x". Local only, because a download
        # resumes by appending to a `.part` file and unpacks with zipfile/tarfile.
        if not io.is_local(self.options.output_dir):
            raise UserError(f"--output_dir {self.options.output_dir}: downloads go to a local "
                            "directory (copy the result to other storage afterwards)")
        if self.options.source_dir and not os.path.isdir(
                os.path.expanduser(self.options.source_dir)):
            raise UserError(f"--source_dir {self.options.source_dir} is not a directory")
        if self.options.source_dir:  # its <group>/ directories would pass for unpacked datasets
            io.refuse_output_over_input(
                {"--output_dir": self.output_dir},
                {"source_dir": os.path.expanduser(self.options.source_dir)})
        io.makedirs(self.output_dir)
        with io.RunLock(self.output_dir):
            return [self.dataset(d) for d in datasets]


def listing(remotes: Dict[str, Remote]) -> str:
    lines = []
    for dataset in DATASETS.values():
        lines.append(f"{dataset.name}: {dataset.what}")
        for name in dataset.files:
            r = remotes[name]
            size = _human(r.size) if r.size else "size unknown"
            pin = f"sha256 {r.sha256}" if r.sha256 else (
                f"sha256 NOT PINNED YET (md5 {r.md5})" if r.md5 else "sha256 NOT PINNED YET")
            lines.append(f"    {name}  {size}  {pin}\n        from {r.url}")
    lines.append("groups: " + ", ".join(f"{g} = {' '.join(m)}" for g, m in GROUPS.items()))
    return "\n".join(lines)


def _define_flags():
    from absl import flags

    flags.DEFINE_string("output_dir", os.environ.get("BERT_DATA", DEFAULT_OUTPUT_DIR),
                        "Where the datasets go, one directory each (default: $BERT_DATA, "
                        f"else {DEFAULT_OUTPUT_DIR}); partial downloads wait in its "
                        f"{DOWNLOADS}/.")
    flags.DEFINE_string("base_url", None,
                        "A mirror that serves the same files as <base_url>/<name> (names as "
                        "in --list, e.g. glue/CoLA.zip).")
    flags.DEFINE_string("source_dir", None,
                        "A local directory with the files (as <name> or its base name): "
                        "nothing is downloaded, everything is verified.")
    flags.DEFINE_string("manifest", os.environ.get(MANIFEST_ENV),
                        f"JSON overriding file entries (url, sha256, size, md5) and base_url "
                        f"(default: ${MANIFEST_ENV}).")
    flags.DEFINE_bool("keep_archives", False,
                      f"Keep the verified archives in <output_dir>/{DOWNLOADS}/ (a "
                      "--source_dir for another machine).")
    flags.DEFINE_integer("retries", 5, "Reconnections (resuming with HTTP Range) per file.")
    flags.DEFINE_float("timeout", 60.0, "Seconds without data before a connection counts as "
                       "dropped.")
    flags.DEFINE_float("progress_seconds", 5.0,
                       "Seconds between progress lines (also one per 10%).")
    flags.DEFINE_bool("list", False, "List the datasets, their files, URLs and checksums.")


def main(argv):
    from absl import flags

    FLAGS = flags.FLAGS
    names = argv[1:]
    if FLAGS.list:
        remotes, _ = load_manifest(FLAGS.manifest)
        print(listing(remotes))
        return
    if not names:
        raise UserError("name the datasets to download, e.g. `bert download glue squad_v1.1` "
                        f"(known: {', '.join(sorted(GROUPS))}, {', '.join(DATASETS)})")
    if FLAGS.base_url and FLAGS.source_dir:
        raise UserError("--base_url and --source_dir exclude each other")
    if FLAGS.retries < 0:
        raise UserError(f"--retries must be 0 or more, got {FLAGS.retries}")
    datasets = resolve(names)
    options = Options(output_dir=FLAGS.output_dir, base_url=FLAGS.base_url,
                      source_dir=FLAGS.source_dir, manifest=FLAGS.manifest,
                      keep_archives=FLAGS.keep_archives, retries=FLAGS.retries,
                      timeout=FLAGS.timeout, progress_seconds=FLAGS.progress_seconds)
    downloader = Downloader(options, out=sys.stderr)
    if options.manifest:
        downloader.say(f"manifest: {options.manifest}")
    for path in downloader.run(datasets):
        print(path)


def entry(argv=None):
    """Console entry point (`bert download` and `python -m data_prep.download`)."""
    from official_bert import app

    _define_flags()
    app.run(main, argv)


if __name__ == "__main__":
    entry()
