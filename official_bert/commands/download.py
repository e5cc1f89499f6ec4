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

How a file is fetched (`bert download --list` shows each file's official URL, size and
sha256):

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
dev ids were checked against independent copies of them.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from data_prep.configs import (DATA_ENV, DEFAULT_OUTPUT_DIR, MANIFEST_ENV, DownloadListing,
                               DownloadOptions)
from official_bert.commands import cli_flags, registry
from official_bert import settings
from official_bert.errors import UserError

FLAGS = flags.FLAGS

# The configs the flags come from (tests/test_settings.py checks them).
CONFIGS = (DownloadOptions, DownloadListing)


def define_flags():
    # The environment's defaults, read when the command starts.
    options = settings.with_defaults(
        DownloadOptions, "DownloadOptions",
        output_dir=os.environ.get(DATA_ENV, DEFAULT_OUTPUT_DIR),
        manifest=os.environ.get(MANIFEST_ENV))
    cli_flags.define_flags(options, group=__name__)
    cli_flags.define_flags(DownloadListing, group=__name__)


def _options(names) -> DownloadOptions:
    """The flags' `DownloadOptions`, checked, for the datasets `names`."""
    if not names:
        from data_prep.datasets import DATASETS, GROUPS

        raise UserError("name the datasets to download, e.g. `bert download glue squad_v1.1` "
                        f"(known: {', '.join(sorted(GROUPS))}, {', '.join(DATASETS)})")
    options = cli_flags.from_flags(DownloadOptions, FLAGS)
    if options.base_url and options.source_dir:
        raise UserError("--base_url and --source_dir exclude each other")
    if options.retries < 0:
        raise UserError(f"--retries must be 0 or more, got {options.retries}")
    return options


def main(argv):
    from data_prep import datasets, download

    names = argv[1:]
    if FLAGS.list:
        remotes, _ = datasets.load_manifest(FLAGS.manifest)
        print(download.listing(remotes))
        return
    options = _options(names)
    chosen = datasets.resolve(names)
    downloader = download.Downloader(options, out=sys.stderr)
    if options.manifest:
        downloader.say(f"manifest: {options.manifest}")
    for path in downloader.run(chosen):
        print(path)


if __name__ == "__main__":
    registry.run_command("download")
