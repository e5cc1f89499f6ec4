"""Every shell command in README.md and docs/*.md runs, so the docs cannot rot.

Each ```bash block of the docs is a test case. It runs with bash from the
repository root, with three variables the docs use provided by the test:

    MINILM  the real all-MiniLM-L6-v2 directory (skip when not installed)
    RUNS    a temporary directory for every output, one per document: the
            blocks of a document run in order and share it (a later block
            may read what an earlier one wrote, as a reader would)
    DATA    $RUNS/data, where the documents' `bert download` puts the datasets

(lines of the block that assign one of them are dropped). `bert download`
fetches from a local HTTP server (`download_mirror.MirrorServer`, started
once) that serves every file of the command's table in its official layout,
made from ../shared/data where it holds the dataset and synthetic otherwise;
$BERT_DOWNLOAD_MANIFEST, the override the command reads, points its names,
URLs and hashes there. So the documented command is the plain one, and the
commands after it read what it unpacked, as a reader's would. So that a block
finishes in seconds, `python <script>` and `bert <command>` get *tiny-mode*
flags appended (absl: the last value of a flag wins): few examples, short
sequences, few steps — the commands themselves, their flags and the files
they read and write are exactly the documented ones.

Blocks that only install (`pip install ...`) or start servers (`docker`,
`curl`) are checked for syntax only (`bash -n`); a block preceded by
`<!-- docs-test: skip (reason) -->` is skipped with that reason. Blocks
that train are marked slow by their duration: the fast run executes the
blocks tagged `<!-- docs-test: fast -->`, `pytest -m slow` all of them.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from support import REPO_ROOT, SHARED, minilm_model_dir, processes
from support.download_mirror import UNPINNED, MirrorServer, mirror_files, write_manifest

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
PROVIDED = ("MINILM", "DATA", "RUNS")

# Flags appended per script to make a documented command small. Only flags the
# script defines; absl keeps the last value given.
TINY = {
    "run_classifier.py": "--max_train_examples=24 --max_seq_length=32 --num_train_epochs=1 "
                         "--train_batch_size=8 --max_eval_examples=24 --max_predict_examples=24 "
                         "--log_steps=1",
    "run_squad.py": "--max_train_examples=6 --max_predict_examples=6 --max_seq_length=128 "
                    "--doc_stride=64 --num_train_epochs=1 --train_batch_size=4 --log_steps=1",
    "run_ner.py": "--max_train_examples=24 --max_seq_length=32 --num_train_epochs=1 "
                  "--train_batch_size=8 --log_steps=1",
    "run_swag.py": "--max_train_examples=8 --max_seq_length=32 --num_train_epochs=1 "
                   "--train_batch_size=4 --log_steps=1",
    "run_pretraining.py": "--num_train_steps=4 --num_warmup_steps=1 --save_checkpoints_steps=2 "
                          "--log_steps=1 --max_eval_steps=2 --train_batch_size=8",
    "create_pretraining_data.py": "--dupe_factor=1",
    "quickstart.py": "--fast",
    "compare.py": "--rounds=1 --b1_calls=2 --file_rows=16",
    "serving_speed.py": "--num_layers=2 --hidden_size=64 --num_heads=2 --rounds=1 --b1_calls=2 "
                        "--batch_size=4 --engines=tf_fp32,tf_bf16_amp,tflite_int8",
}
BERT_COMMANDS = {
    "classify": "run_classifier.py", "squad": "run_squad.py", "ner": "run_ner.py",
    "swag": "run_swag.py", "pretrain": "run_pretraining.py", "distill": "run_pretraining.py",
    "create-pretraining-data": "create_pretraining_data.py", "quickstart": "quickstart.py",
    "compare": "compare.py",
}

_BLOCK = re.compile(r"(?:<!--\s*docs-test:\s*(?P<tag>[^>]*?)\s*-->\s*\n)?```bash\n(?P<body>.*?)```",
                    re.S)


def _blocks():
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for i, match in enumerate(_BLOCK.finditer(text)):
            line = text.count("\n", 0, match.start("body"))
            yield pytest.param(path, match.group("body"), (match.group("tag") or "").strip(),
                               id=f"{path.name}:{line}")


@pytest.fixture(scope="module")
def download_manifest(tmp_path_factory):
    """A local stand-in for the datasets' servers; the manifest that points there."""
    files = mirror_files(SHARED / "data")
    with MirrorServer(files) as server:
        yield write_manifest(tmp_path_factory.mktemp("mirror") / "manifest.json", files,
                             server.base_url, unpinned=UNPINNED)


def _preamble(tmp_path: pathlib.Path, minilm) -> str:
    cases = "\n".join(f'    {script}) echo "{flags}" ;;' for script, flags in TINY.items())
    bert_cases = "\n".join(f'    {cmd}) echo "{script}" ;;' for cmd, script in BERT_COMMANDS.items())
    return f"""set -euo pipefail
export MINILM={minilm or ''}
export RUNS={tmp_path}
export DATA={tmp_path}/data
tiny_flags() {{
  case "$(basename "$1")" in
{cases}
    *) echo "" ;;
  esac
}}
bert_script() {{
  case "$1" in
{bert_cases}
    *) echo "" ;;
  esac
}}
python() {{
  if [ "${{1:-}}" = "-m" ]; then command python "$@" $(tiny_flags "$2");
  elif [ -n "${{1:-}}" ] && [ "${{1#-}}" = "$1" ]; then command python "$@" $(tiny_flags "$1");
  else command python "$@"; fi
}}
bert() {{
  local script; script=$(bert_script "${{1:-}}")
  if [ -n "$script" ]; then command bert "$@" $(tiny_flags "$script"); else command bert "$@"; fi
}}
"""


def _strip_provided(body: str) -> str:
    keep = []
    for line in body.splitlines():
        if re.match(rf"\s*(export\s+)?({'|'.join(PROVIDED)})=", line):
            continue
        keep.append(line)
    return "\n".join(keep) + "\n"


_RUNS: dict = {}


def _runs_dir(path, tmp_path_factory):
    if path not in _RUNS:
        _RUNS[path] = tmp_path_factory.mktemp(path.stem)
    return _RUNS[path]


@pytest.mark.slow
@pytest.mark.parametrize("path,body,tag", list(_blocks()))
def test_documented_commands_run(path, body, tag, tmp_path_factory, download_manifest):
    _run_block(path, body, tag, _runs_dir(path, tmp_path_factory), download_manifest)


@pytest.mark.parametrize("path,body,tag",
                         [p for p in _blocks() if p.values[2] == "fast"])
def test_fast_documented_commands_run(path, body, tag, tmp_path_factory, download_manifest):
    _run_block(path, body, tag, tmp_path_factory.mktemp("fast"), download_manifest)


def _run_block(path, body, tag, tmp_path, download_manifest):
    if tag.startswith("skip"):
        pytest.skip(tag)
    if re.search(r"^\s*(pip install|docker|curl)\b", body, re.M):
        result = subprocess.run(["bash", "-n"], input=body, text=True, capture_output=True)
        assert result.returncode == 0, result.stderr
        return
    minilm = minilm_model_dir()
    if "$MINILM" in body and minilm is None:
        pytest.skip("the real checkpoint is not installed")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", BERT_DOWNLOAD_MANIFEST=download_manifest)
    script = _preamble(tmp_path, minilm) + _strip_provided(body)
    result = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, env=env, text=True,
                            capture_output=True, timeout=1500)
    assert result.returncode == 0, (
        f"{path.name} block failed (exit {result.returncode}):\n{body}\n"
        f"--- stdout (tail) ---\n{result.stdout[-3000:]}\n--- stderr (tail) ---\n"
        f"{result.stderr[-3000:]}")


def test_flag_reference_is_current():
    """docs/flags.md is what `bert flags-reference` generates from the flag definitions."""
    result = processes.run([sys.executable, "-m", "official_bert.commands.cli", "flags-reference"],
                           cwd=REPO_ROOT, text=True, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr
    current = (REPO_ROOT / "docs" / "flags.md").read_text(encoding="utf-8")
    assert current == result.stdout, (
        "docs/flags.md is out of date: python -m official_bert.commands.cli flags-reference > docs/flags.md")


@pytest.mark.slow
def test_guide_reviews_example_shows_what_it_predicts(tmp_path):
    """docs/fine_tune.md's own-data example, run exactly as written (no tiny-mode flags),
    labels the unseen reviews as the page shows."""
    minilm = minilm_model_dir()
    if minilm is None:
        pytest.skip("the real checkpoint is not installed")
    page = (REPO_ROOT / "docs" / "fine_tune.md").read_text(encoding="utf-8")
    [body] = [m.group("body") for m in _BLOCK.finditer(page)
              if "--export_dir=$RUNS/reviews_export" in m.group("body")]  # not long_reviews_export
    script = f"set -euo pipefail\nexport MINILM={minilm} RUNS={tmp_path}\n" + _strip_provided(body)
    result = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, text=True, capture_output=True,
                            timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    labels = [line.split("\t")[0] for line in result.stdout.strip().splitlines()[1:]]
    assert labels == ["positive", "negative", "positive", "negative"], result.stdout


def test_guide_python_snippets_run(tmp_path):
    """docs/adapt.md's "In Python: checkpoints and the tokenizer" ```python blocks run as
    written, in a directory where "path/to/checkpoint" is the real all-MiniLM-L6-v2 and
    "vocab.txt" its vocabulary."""
    import shutil

    minilm = minilm_model_dir()
    if minilm is None:
        pytest.skip("the real checkpoint is not installed")
    (tmp_path / "path" / "to").mkdir(parents=True)
    (tmp_path / "path" / "to" / "checkpoint").symlink_to(minilm)
    shutil.copy(pathlib.Path(minilm) / "vocab.txt", tmp_path / "vocab.txt")
    page = (REPO_ROOT / "docs" / "adapt.md").read_text(encoding="utf-8")
    section = re.search(r"^### In Python: checkpoints and the tokenizer\n(.*?)(?=^##+ )",
                        page, re.S | re.M)
    assert section, "docs/adapt.md has no '### In Python: checkpoints and the tokenizer'"
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S)
    assert blocks
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    for block in blocks:
        result = processes.run([sys.executable, "-c", block], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{block}\n{result.stderr[-3000:]}"


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)


def _anchors(path: pathlib.Path) -> set:
    """The anchors GitHub makes of a Markdown file's headings."""
    seen: dict = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", _FENCE.sub("", path.read_text(encoding="utf-8")),
                              re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_links_resolve():
    """Every relative link of README.md and docs/*.md names a file that exists and, for a
    Markdown file, one of its headings: the pages link into each other by anchor."""
    broken = []
    for doc in DOCS:
        for target in _LINK.findall(_FENCE.sub("", doc.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue
            name, _, anchor = target.partition("#")
            path = (doc.parent / name).resolve() if name else doc
            if not path.exists():
                broken.append(f"{doc.name}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{doc.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
