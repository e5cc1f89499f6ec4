"""bert download, from --source_dir (no network): files, the manifest that pins them, flags."""

from ..argv import download
from ..case import Case, at
from ..setups import (binary, edit_manifest, local_files, pin, remove, rerun_succeeds, text,
                      truncate, wnli_zip)

COMMAND = "download"

OUT = ["gen/data/wnut17"]
TRAIN = "wnut17/wnut17train.conll"
BAD_WNLI = (("not a zip", binary("src/WNLI.zip")),
            ("a zip without test.tsv", wnli_zip(drop="test.tsv")),
            ("a zip with a member ../x", wnli_zip(unsafe=True)))

CASES = [
    Case("wnut17 from --source_dir (control)", download("wnut17"), setup=local_files,
         control=True),
    Case("glue/WNLI zip from --source_dir (control)", download("glue/WNLI"), setup=local_files,
         control=True),
    Case("a dataset already there (control: left alone)", download("wnut17", output=at("data")),
         setup=(local_files, text("data/wnut17/mine.txt", "keep")), control=True),
    Case("unknown dataset", download("nosuchdata"), setup=local_files, names=["nosuchdata"]),
    Case("no dataset named", download(), setup=local_files, names=["bert download"]),
    Case("--source_dir does not exist", download("wnut17", source="nope"), setup=local_files,
         names=["nope"], outputs=OUT),
    Case("--source_dir lacks a file", download("wnut17"),
         setup=(local_files, remove("src/emerging.dev.conll")), names=["emerging.dev.conll"],
         outputs=OUT),
    Case("a file unlike the pinned one (no --manifest)", download("wnut17", manifest=None),
         setup=local_files, names=["wnut17train.conll"], outputs=OUT),
    Case("a file truncated after --manifest pinned it", download("wnut17"),
         setup=(local_files, truncate("src/emerging.test.annotated")),
         names=["emerging.test.annotated"], outputs=OUT),
    Case("--manifest not JSON", download("wnut17"),
         setup=(local_files, text("manifest.json", "{files")), names=["manifest.json"],
         outputs=OUT),
    Case("--manifest does not exist", download("wnut17", manifest="nope.json"), setup=local_files,
         names=["nope.json"], outputs=OUT),
    Case("--manifest names an unknown file", download("wnut17"),
         setup=(local_files, edit_manifest({"nope/x.txt": {"size": 1}})),
         names=["manifest.json"], outputs=OUT),
    Case("--manifest sha256 not 64 hex digits", download("wnut17"),
         setup=(local_files, edit_manifest({TRAIN: {"sha256": "abc"}})),
         names=["manifest.json"], outputs=OUT),
    Case("--manifest size not a number", download("wnut17"),
         setup=(local_files, edit_manifest({TRAIN: {"size": "big"}})), names=["manifest.json"],
         outputs=OUT),
    Case("--base_url with --source_dir", download("wnut17", "--base_url=http://127.0.0.1:9/"),
         setup=local_files, names=["--source_dir", "--base_url"], outputs=OUT),
    Case("--retries=-1", download("wnut17", "--retries=-1"), setup=local_files,
         names=["--retries"], outputs=OUT),
    Case("--output_dir is a file", download("wnut17", output=at("corpus.txt")), setup=local_files,
         names=["corpus.txt"]),
    Case("--output_dir on gs://", download("wnut17", output="gs://no-such-bucket/data"),
         setup=local_files, names=["--output_dir"]),
    *[Case(f"glue/WNLI: {label}", download("glue/WNLI"),
           setup=(local_files, damage, pin("glue/WNLI.zip", "WNLI.zip")), names=["WNLI.zip"],
           outputs=["gen/data/glue/WNLI"])
      for label, damage in BAD_WNLI],
    Case("disk full (2 KB file-size limit)", download("wnut17"), setup=local_files,
         file_size_limit=2048, names=["data"], outputs=OUT, after=rerun_succeeds),
    # Issue 36: the output checked before any work.
    Case("--output_dir on a location that refuses writes", download(
        "wnut17", output="/sys/bert_data"), setup=local_files, names=["/sys/bert_data"]),
]
