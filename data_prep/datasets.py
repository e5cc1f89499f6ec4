"""The datasets `bert download` knows: where each file comes from, and what it becomes.

`REMOTES` lists every file: its official URL, size and pinned sha256 (see
`official_bert/commands/download.py` for where the digests come from);
`DATASETS` says how each dataset directory under --output_dir is made from
its files (unzipped, copied, or MRPC's split rebuilt as GLUE's script does);
`load_manifest` applies a mirror's overrides to the table. `download` fetches
and verifies the files and publishes the directories.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import zipfile
from typing import Callable, Dict, Optional, Sequence, Tuple

from data_prep.configs import MANIFEST_ENV
from official_bert import io
from official_bert.errors import BadFileError, UserError


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


def _file(base: str, name: str, size: int, sha256: str) -> Remote:
    """A file whose digest huggingface/datasets pins, fetched from `base` + the
    `<file>` of its name (`<group>/<file>`)."""
    return Remote(name, base + name.split("/", 1)[1], size, sha256, pinned_by=_HF)


def _squad(version: str, train: tuple, dev: tuple, evaluation: tuple) -> list:
    """SQuAD `version`'s three files: train and dev ((size, sha256) each) and its
    evaluation script (its CodaLab bundle, and the md5 that is its only digest)."""
    bundle, md5 = evaluation
    return [_file(_SQUAD, f"squad/train-v{version}.json", *train),
            _file(_SQUAD, f"squad/dev-v{version}.json", *dev),
            Remote(f"squad/evaluate-v{version}.py",
                   f"https://worksheets.codalab.org/rest/bundles/{bundle}/contents/blob/",
                   None, None, md5=md5, pinned_by=_NVIDIA)]


REMOTES: Dict[str, Remote] = {r.name: r for r in [
    # GLUE: the archives of GLUE's own download script (download_glue_data.py);
    # MRPC comes as SentEval's copy of the Microsoft files plus GLUE's dev ids.
    _file(_GLUE, "glue/CoLA.zip", 376971,
          "f212fcd832b8f7b435fb991f101abf89f96b933ab400603bf198960dfc32cbff"),
    _file(_GLUE, "glue/SST-2.zip", 7439277,
          "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa"),
    _file(_SENTEVAL, "glue/msr_paraphrase_train.txt", 1047044,
          "60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89"),
    _file(_SENTEVAL, "glue/msr_paraphrase_test.txt", 441275,
          "a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784"),
    # The same file as ../shared/data/glue/MRPC/dev_ids.tsv.
    _file(_GLUE, "glue/mrpc_dev_ids.tsv", 6222,
          "971d7767d81b997fd9060ade0ec23c4fc31cbb226a55d1bd4a1bac474eb81dc7"),
    _file(_GLUE, "glue/QQP-clean.zip", 41696084,
          "40e7c862c04eb26ee04b67fd900e76c45c6ba8e6d8fab4f8f1f8072a1a3fbae0"),
    _file(_GLUE, "glue/STS-B.zip", 802872,
          "e60a6393de5a8b5b9bac5020a1554b54e3691f9d600b775bd131e613ac179c85"),
    _file(_GLUE, "glue/MNLI.zip", 312783507,
          "e7c1d896d26ed6caf700110645df426cc2d8ebf02a5ab743d5a5c68ac1c83633"),
    _file(_GLUE, "glue/QNLIv2.zip", 10627589,
          "e634e78627a29adaecd4f955359b22bf5e70f2cbd93b493f2d624138a0c0e5f5"),
    _file(_GLUE, "glue/RTE.zip", 697150,
          "6bf86de103ecd335f3441bd43574d23fef87ecc695977a63b82d5efb206556ee"),
    _file(_GLUE, "glue/WNLI.zip", 28999,
          "ae0e8e4d16f4d46d4a0a566ec7ecceccfd3fbfaa4a7a4b4e02848c0f2561ac46"),
    _file(_GLUE, "glue/AX.tsv", 222257,
          "0e13510b1bb14436ff7e2ee82338f0efb0133ecf2e73507a697dc210db3f05fd"),
    # SQuAD: the files google-research/bert's README links.
    *_squad("1.1",
            (30288272, "3527663986b8295af4f7fcdff1ba1ff3f72d07d61a20f487cb238a6ef92fd955"),
            (4854279, "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"),
            ("0xbcd57bee090b421c982906709c8c27e1", "afb04912d18ff20696f7f88eed49bea9")),
    *_squad("2.0",
            (42123633, "68dcfbb971bd3e96d5b46c7177b16c1a4e7d4bdef19fb204502738552dede002"),
            (4370528, "80a5225e94905956a6446d296ca1093975c4d3b3260f1d6c8f68bc2ab77182d8"),
            ("0x6b567e1cf2e041ec80d7098f031c5c9e", "ff23213bed5516ea4a6d9edb6cd7d627")),
    # SWAG (regular: sent1, sent2, ending0-3, label), from its authors' repository.
    _file(_SWAG, "swag/train.csv", 28243333,
          "5748b51126ac255c5a6f26e1ba473b51116d6c822aeb25e63ecba282c9d0e610"),
    _file(_SWAG, "swag/val.csv", 7893588,
          "c0497b2cd7f3e6b7df995524b1853f62285d60d110d659b19545ca80b2903234"),
    _file(_SWAG, "swag/test.csv", 7817885,
          "a689a1a4e892a65ca625c1f0fcf77bcce004b59ad1caeb134ca5ec080a711cb6"),
    # WNUT-17 emerging entities (CoNLL, 2 columns), from its authors' repository; train
    # and dev are the same files as ../shared/data/ner/wnut17's.
    _file(_WNUT, "wnut17/wnut17train.conll", 493781,
          "731820e13f71af324c6b55a1575ec2ce59fbaa2a0806f8f0400b98d56cd6a7a5"),
    _file(_WNUT, "wnut17/emerging.dev.conll", 114749,
          "e053b752b8155113ca66e7db08af5f2f5f43ab993694e4774f1ec5bad42312d8"),
    _file(_WNUT, "wnut17/emerging.test.annotated", 192425,
          "2aa79b764e56ec9264a1b30fdd9b70195bd00ff400b62edd8f399d5f13c178f0"),
    # XNLI: dev/test (human translations) and the machine-translated MultiNLI training set.
    _file(_XNLI, "xnli/XNLI-1.0.zip", 17865352,
          "4ba1d5e1afdb7161f0f23c66dc787802ccfa8a25a3ddd3b165a35e50df346ab1"),
    _file(_XNLI, "xnli/XNLI-MT-1.0.zip", 466098360,
          "f732517ba2fb1d550e9f3c2aabaef6017c91ee2dcec90e878f138764d224db05"),
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
