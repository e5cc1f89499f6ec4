"""`bert download` (data_prep/download.py) against a local HTTP server.

The server (`download_mirror.MirrorServer`, http.server in a thread) serves
small archives in the official layouts, built here from synthetic content
(`download_mirror.mirror_files`); a manifest override points the command's
names, URLs and hashes at them. Checked: every dataset downloads, verifies and
unpacks into the layout the run scripts read; a cut connection resumes with
HTTP Range to a byte-identical file (within one run, and in the next run); a
corrupt or truncated download is refused with one line and removed; a server
that ignores Range starts over; `--source_dir` works without a network and
`--keep_archives` makes one; progress lines; the built-in table's form.
"""

import hashlib
import io
import json
import os
import pathlib
import sys

import pytest

from support import REPO_ROOT, SHARED
from data_prep import configs, datasets, download, glue
from support.download_mirror import UNPINNED, MirrorServer, mirror_files, write_manifest, write_tree
from support import processes

SQUAD = "squad/train-v1.1.json"


@pytest.fixture(scope="module")
def files():
    return mirror_files(None)  # synthetic only: the same everywhere


@pytest.fixture()
def mirror(files, tmp_path):
    with MirrorServer(files) as server:
        server.manifest = write_manifest(tmp_path / "manifest.json", files, server.base_url,
                                         unpinned=UNPINNED)
        yield server


def run_cli(*args, env=None):
    environment = dict(os.environ, **(env or {}))
    environment.pop(configs.MANIFEST_ENV, None)
    return processes.run([sys.executable, "-m", "official_bert.commands.download",
                           *map(str, args)], cwd=REPO_ROOT, env=environment, text=True,
                         capture_output=True, timeout=300)


def fetcher(output_dir, manifest, **options):
    out = io.StringIO()
    options = dict(dict(retries=2, retry_wait=0.01, progress_seconds=60.0), **options)
    return download.Downloader(configs.DownloadOptions(output_dir=str(output_dir),
                                                       manifest=manifest, **options),
                               out=out), out


def error_lines(result):
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def no_temporaries(directory):
    return [p for p in pathlib.Path(directory).rglob("*")
            if ".tmp-" in p.name or p.name.endswith(".part")]


def test_every_dataset_downloads_verifies_and_unpacks(mirror, files, tmp_path):
    out = tmp_path / "data"
    result = run_cli("glue", "squad_v1.1", "squad_v2.0", "swag", "wnut17", "xnli",
                     f"--output_dir={out}", f"--manifest={mirror.manifest}",
                     "--progress_seconds=0")
    assert result.returncode == 0, result.stderr
    for task in ("CoLA", "SST-2", "MRPC", "QQP", "STS-B", "QNLI", "RTE", "WNLI"):
        assert {"train.tsv", "dev.tsv", "test.tsv"} <= set(os.listdir(out / "glue" / task)), task
    assert (out / "glue/MNLI/dev_mismatched.tsv").is_file()
    assert (out / "glue/diagnostic/diagnostic.tsv").read_bytes() == files["glue/AX.tsv"]
    assert (out / "squad_v1.1/train-v1.1.json").read_bytes() == files[SQUAD]
    assert (out / "squad_v2.0/dev-v2.0.json").read_bytes() == files["squad/dev-v2.0.json"]
    assert (out / "swag/val.csv").read_bytes() == files["swag/val.csv"]
    assert (out / "wnut17/emerging.dev.conll").is_file()
    assert (out / "xnli/multinli/multinli.train.zh.tsv").is_file()
    assert (out / "xnli/xnli.dev.tsv").is_file()
    # The printed paths, one a dataset; nothing left behind but the datasets.
    assert len(result.stdout.split()) == 15
    assert not no_temporaries(out)
    assert os.listdir(out / configs.DOWNLOADS) == [] or all(
        not f for _, _, f in os.walk(out / configs.DOWNLOADS))
    info = json.loads((out / "glue/CoLA" / download.INFO_FILE).read_text())
    assert info["files"][0]["sha256"] == hashlib.sha256(files["glue/CoLA.zip"]).hexdigest()
    # Progress (bytes and speed) for every file, and the unpinned scripts are named.
    assert result.stderr.count("B/s") >= len(files)
    assert "sha256 not pinned yet for squad/evaluate-v1.1.py" in result.stderr
    # The run scripts' readers take the layout as it is.
    mrpc = glue.get_task("mrpc")
    dev = glue.read_split(mrpc, str(out / "glue/MRPC/dev.tsv"), "dev")
    train = glue.read_split(mrpc, str(out / "glue/MRPC/train.tsv"), "train")
    assert len(dev) == 6 and len(train) == 24  # GLUE's dev ids split the training file
    xnli = glue.get_task("XNLI")
    assert {e.label for e in glue.read_split(xnli, str(out / "xnli" / xnli.train_file),
                                              "train")} == set(xnli.labels)
    assert len(glue.read_split(xnli, str(out / "xnli/xnli.dev.tsv"), "dev")) == 12


def test_a_cut_connection_resumes_with_range(mirror, files, tmp_path):
    cut = len(files[SQUAD]) // 3
    mirror.cut[SQUAD] = [cut]
    fetch, out = fetcher(tmp_path / "data", mirror.manifest)
    [path] = fetch.run(datasets.resolve(["squad_v1.1"]))
    assert pathlib.Path(path, "train-v1.1.json").read_bytes() == files[SQUAD]
    assert mirror.range_requests(SQUAD) == [f"bytes={cut}-"]
    assert "retrying from" in out.getvalue() and "resuming at" in out.getvalue()


def test_an_interrupted_run_resumes_in_the_next(mirror, files, tmp_path):
    out = tmp_path / "data"
    cut = len(files[SQUAD]) // 2
    mirror.cut[SQUAD] = [cut]
    first = run_cli("squad_v1.1", f"--output_dir={out}", f"--manifest={mirror.manifest}",
                    "--retries=0")
    assert first.returncode == 1
    [line] = error_lines(first)
    assert "run the same command again to resume" in line and "Traceback" not in first.stderr
    part = out / configs.DOWNLOADS / (SQUAD + ".part")
    assert part.stat().st_size == cut
    assert not (out / "squad_v1.1").exists()
    second = run_cli("squad_v1.1", f"--output_dir={out}", f"--manifest={mirror.manifest}")
    assert second.returncode == 0, second.stderr
    assert mirror.range_requests(SQUAD) == [f"bytes={cut}-"]
    assert (out / "squad_v1.1/train-v1.1.json").read_bytes() == files[SQUAD]
    assert not part.exists()


def test_a_corrupt_download_is_refused_and_removed(mirror, tmp_path):
    out = tmp_path / "data"
    mirror.corrupt.add("glue/RTE.zip")
    result = run_cli("glue/RTE", f"--output_dir={out}", f"--manifest={mirror.manifest}")
    assert result.returncode == 1
    [line] = error_lines(result)
    assert "glue/RTE.zip" in line and "sha256" in line and "deleted" in line
    assert "Traceback" not in result.stderr
    assert not (out / "glue/RTE").exists()
    assert not [p for p in (out / configs.DOWNLOADS).rglob("*") if p.is_file()]
    assert not no_temporaries(out)


def test_a_truncated_file_is_refused(files, tmp_path):
    served = dict(files, **{SQUAD: files[SQUAD][:1000]})  # complete as far as HTTP can tell
    with MirrorServer(served) as server:
        manifest = write_manifest(tmp_path / "m.json", files, server.base_url)
        fetch, _ = fetcher(tmp_path / "data", manifest)
        with pytest.raises(download.UserError, match="has 1000 bytes, not the"):
            fetch.run(datasets.resolve(["squad_v1.1"]))
    assert not (tmp_path / "data/squad_v1.1").exists()
    assert not no_temporaries(tmp_path / "data")


def test_a_server_that_ignores_range_starts_over(mirror, files, tmp_path):
    mirror.ignore_range = True
    mirror.cut[SQUAD] = [len(files[SQUAD]) // 2]
    fetch, out = fetcher(tmp_path / "data", mirror.manifest)
    [path] = fetch.run(datasets.resolve(["squad_v1.1"]))
    assert pathlib.Path(path, "train-v1.1.json").read_bytes() == files[SQUAD]
    assert "does not resume" in out.getvalue()


def test_progress_lines_per_tenth(files, tmp_path):
    big = dict(files, **{SQUAD: json.dumps({"version": "1.1", "data": [],
                                            "pad": "x" * 2_000_000}).encode()})
    with MirrorServer(big) as server:
        manifest = write_manifest(tmp_path / "m.json", big, server.base_url, UNPINNED)
        fetch, out = fetcher(tmp_path / "data", manifest)
        fetch.run(datasets.resolve(["squad_v1.1"]))
    lines = [line for line in out.getvalue().splitlines() if line.startswith(f"  {SQUAD}: ")
             and "%" in line]
    assert 9 <= len(lines) <= 12, lines
    assert "KB of 2.0 MB (" in lines[0] and "B/s" in lines[0] and "s left" in lines[0]


def test_source_dir_needs_no_network(files, tmp_path):
    source = write_tree(tmp_path / "archives", files)
    # The manifest sends every URL to a port where nothing listens.
    manifest = write_manifest(tmp_path / "m.json", files, "http://127.0.0.1:9", UNPINNED)
    out = tmp_path / "data"
    result = run_cli("wnut17", "glue/MRPC", f"--output_dir={out}", f"--manifest={manifest}",
                     f"--source_dir={source}")
    assert result.returncode == 0, result.stderr
    assert (out / "wnut17/wnut17train.conll").read_bytes() == files["wnut17/wnut17train.conll"]
    assert (out / "glue/MRPC/dev_ids.tsv").exists()
    assert (source / "wnut17/wnut17train.conll").exists()  # a source is never removed
    # A base name at the top of the directory works too; a wrong file is refused, kept.
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "XNLI-1.0.zip").write_bytes(files["xnli/XNLI-1.0.zip"])
    (flat / "XNLI-MT-1.0.zip").write_bytes(files["xnli/XNLI-1.0.zip"])  # the wrong one
    bad = run_cli("xnli", f"--output_dir={out}", f"--manifest={manifest}",
                  f"--source_dir={flat}")
    assert bad.returncode == 1
    [line] = error_lines(bad)
    assert str(flat / "XNLI-MT-1.0.zip") in line and "pinned" in line
    assert (flat / "XNLI-MT-1.0.zip").exists() and not (out / "xnli").exists()


def test_kept_archives_are_a_source_dir_for_another_machine(mirror, files, tmp_path):
    fetch, _ = fetcher(tmp_path / "online", mirror.manifest, keep_archives=True)
    fetch.run(datasets.resolve(["glue/WNLI"]))
    kept = tmp_path / "online" / configs.DOWNLOADS
    assert (kept / "glue/WNLI.zip").read_bytes() == files["glue/WNLI.zip"]
    offline, _ = fetcher(tmp_path / "offline", mirror.manifest, source_dir=str(kept))
    requests = len(mirror.requests)
    [path] = offline.run(datasets.resolve(["glue/wnli"]))
    assert len(mirror.requests) == requests
    assert sorted(os.listdir(path)) == [download.INFO_FILE, "dev.tsv", "test.tsv", "train.tsv"]


def test_base_url_names_a_mirror(files, tmp_path):
    with MirrorServer(files) as server:
        manifest = write_manifest(tmp_path / "m.json", files, None, UNPINNED)  # official URLs
        result = run_cli("glue/CoLA", f"--output_dir={tmp_path / 'data'}",
                         f"--manifest={manifest}", f"--base_url={server.base_url}/")
        assert result.returncode == 0, result.stderr
        assert ("glue/CoLA.zip", None) in server.requests


def test_an_existing_dataset_is_left_alone(mirror, tmp_path):
    fetch, _ = fetcher(tmp_path / "data", mirror.manifest)
    fetch.run(datasets.resolve(["glue/WNLI"]))
    again, out = fetcher(tmp_path / "data", mirror.manifest)
    requests = len(mirror.requests)
    again.run(datasets.resolve(["glue/WNLI"]))
    assert "already in" in out.getvalue() and len(mirror.requests) == requests


def test_a_failed_unpack_publishes_nothing(files, tmp_path):
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\n")
    broken = dict(files, **{"glue/RTE.zip": buffer.getvalue()})
    with MirrorServer(broken) as server:
        manifest = write_manifest(tmp_path / "m.json", broken, server.base_url)
        fetch, _ = fetcher(tmp_path / "data", manifest)
        with pytest.raises(download.BadFileError, match="unpacked without dev.tsv, test.tsv"):
            fetch.run(datasets.resolve(["glue/RTE"]))
    assert not (tmp_path / "data/glue/RTE").exists()
    assert not no_temporaries(tmp_path / "data")


def test_an_unpinned_file_is_checked_for_what_can_be_checked(files, tmp_path):
    name = "squad/evaluate-v1.1.py"
    for served, match in ((b"def (:\n", "is not a valid .py file"), (None, "has md5")):
        body = dict(files, **{name: served or files[name]})
        with MirrorServer(body) as server:
            pinned = dict(files, **{name: served or b"other content"})
            manifest = write_manifest(tmp_path / "m.json", pinned, server.base_url, UNPINNED)
            fetch, _ = fetcher(tmp_path / "data", manifest)
            with pytest.raises(download.UserError, match=match):
                fetch.run(datasets.resolve(["squad_v1.1"]))
        assert not (tmp_path / "data/squad_v1.1").exists()


def test_http_errors_are_one_line(mirror, tmp_path):
    mirror.missing.add("wnut17/wnut17train.conll")
    result = run_cli("wnut17", f"--output_dir={tmp_path}", f"--manifest={mirror.manifest}")
    assert result.returncode == 1
    [line] = error_lines(result)
    assert "HTTP 404" in line and "--source_dir" in line
    refused = run_cli("wnut17", f"--output_dir={tmp_path}", "--retries=0",
                      "--base_url=http://127.0.0.1:9")
    [line] = error_lines(refused)
    assert "stopped at 0 B" in line


def test_manifest_and_flag_errors(tmp_path):
    bad = tmp_path / "bad.json"
    for text, match in (("{", "is not JSON"), ('{"files": {"nope.zip": {}}}', "unknown file"),
                        ('{"files": {"glue/CoLA.zip": {"sha256": "abc"}}}', "64 hex"),
                        ('{"files": {"glue/CoLA.zip": {"sha": "abc"}}}', "unknown keys")):
        bad.write_text(text)
        with pytest.raises(download.BadFileError, match=match):
            datasets.load_manifest(str(bad))
    with pytest.raises(download.UserError, match="unknown dataset 'glue/XYZ'"):
        datasets.resolve(["glue/XYZ"])
    result = run_cli("glue", "--base_url=http://x", "--source_dir=/tmp")
    assert error_lines(result) == ["error: --base_url and --source_dir exclude each other"]


def test_the_builtin_table():
    names = [d.name for d in datasets.resolve(["glue"])]
    assert names == [f"glue/{t}" for t in ("CoLA", "SST-2", "MRPC", "QQP", "STS-B", "MNLI",
                                           "QNLI", "RTE", "WNLI", "diagnostic")]
    assert [d.name for d in datasets.resolve(["GLUE/sst2", "SQuAD_v1.1", "glue/ax"])] == [
        "glue/SST-2", "squad_v1.1", "glue/diagnostic"]
    for dataset in datasets.DATASETS.values():
        assert set(dataset.files) <= set(datasets.REMOTES), dataset.name
    unpinned = []
    for name, remote in datasets.REMOTES.items():
        assert remote.url.startswith("https://"), name
        assert remote.pinned_by, name
        if remote.sha256 is None:
            unpinned.append(name)
            assert remote.md5 and len(remote.md5) == 32
        else:
            assert len(remote.sha256) == 64 and int(remote.sha256, 16) >= 0
            assert isinstance(remote.size, int) and remote.size > 0
    assert unpinned == list(UNPINNED)
    listing = processes.run([sys.executable, "-m", "official_bert.commands.cli", "download", "--list"],
                            cwd=REPO_ROOT, text=True, capture_output=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "sha256 NOT PINNED YET (md5 afb04912d18ff20696f7f88eed49bea9)" in listing.stdout
    assert "https://dl.fbaipublicfiles.com/XNLI/XNLI-MT-1.0.zip" in listing.stdout


def test_mrpc_is_glue_scripts_split(tmp_path):
    """From the Microsoft files and GLUE's dev ids, train/dev/test.tsv byte for byte as
    GLUE's download_glue_data.py made the copies in ../shared."""
    mrpc = SHARED / "data" / "glue" / "MRPC"
    if not (mrpc / "original").exists():
        pytest.skip(f"{mrpc} is absent")
    datasets._format_mrpc(str(mrpc / "original/msr_paraphrase_train.txt"),
                          str(mrpc / "original/msr_paraphrase_test.txt"),
                          str(mrpc / "dev_ids.tsv"), str(tmp_path))
    for name in ("train.tsv", "dev.tsv", "test.tsv", "dev_ids.tsv"):
        assert (tmp_path / name).read_bytes() == (mrpc / name).read_bytes(), name


def test_pinned_hashes_match_the_copies_in_shared():
    """Where ../shared holds an official file unchanged, its sha256 is the pinned one."""
    data = SHARED / "data"
    copies = {"wnut17/wnut17train.conll": data / "ner/wnut17/wnut17train.conll",
              "wnut17/emerging.dev.conll": data / "ner/wnut17/emerging.dev.conll",
              "glue/mrpc_dev_ids.tsv": data / "glue/MRPC/dev_ids.tsv"}
    if not all(p.exists() for p in copies.values()):
        pytest.skip(f"{data} is absent")
    for name, path in copies.items():
        remote = datasets.REMOTES[name]
        assert download.verify(str(path), remote) == [], name


@pytest.mark.parametrize("entry, says", [
    ({"size": "12"}, "has a size for wnut17/wnut17train.conll that is not a whole number of "
                     "bytes: '12'"),
    ({"size": -1}, "that is not a whole number of bytes: -1"),
    ({"size": True}, "that is not a whole number of bytes: True"),
    ({"md5": "abc"}, "has an md5 for wnut17/wnut17train.conll that is not 32 hex digits"),
    ({"sha256": "0" * 63}, "has a sha256 for wnut17/wnut17train.conll that is not 64 hex digits"),
    ({"url": 5}, "has a url for wnut17/wnut17train.conll that is not a string"),
])
def test_a_manifest_value_of_the_wrong_kind_names_the_manifest(tmp_path, entry, says):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"files": {"wnut17/wnut17train.conll": entry}}))
    with pytest.raises(download.BadFileError) as info:
        datasets.load_manifest(str(path))
    assert str(path) in str(info.value) and says in str(info.value)


def test_a_manifest_base_url_that_is_not_a_string_names_the_manifest(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"base_url": ["http://x"], "files": {}}))
    with pytest.raises(download.BadFileError, match="has a base_url that is not a string"):
        datasets.load_manifest(str(path))
    good = {"base_url": "http://x/", "files": {"wnut17/wnut17train.conll": {"size": 12}}}
    path.write_text(json.dumps(good))
    remotes, base_url = datasets.load_manifest(str(path))
    assert base_url == "http://x/" and remotes["wnut17/wnut17train.conll"].size == 12
