"""A local stand-in for the dataset servers `bert download` fetches from.

`MirrorServer` is Python's `http.server` in a thread, serving bytes by path
with HTTP Range support, and faults on demand: `cut[name] = [n, ...]` closes
the connection after n bytes of the body for the next requests of `name`
(Content-Length announces the whole rest), `corrupt` serves flipped bytes,
`ignore_range` answers 200 with the whole file; `requests` logs
(path, Range header) of every request.

`mirror_files(shared)` makes a small file for every name of
`data_prep.datasets.REMOTES`, in the official layout: from `../shared/data`
where it holds the dataset (GLUE, SQuAD's subsets, WNUT-17, HellaSwag laid
out as SWAG), synthetic otherwise; `write_manifest` points names, URLs and
hashes at a server (the override `bert download --manifest` and
`$BERT_DOWNLOAD_MANIFEST` read).
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import pathlib
import threading
import zipfile


class MirrorServer:
    def __init__(self, files: dict):
        self.files = dict(files)
        self.cut: dict = {}
        self.corrupt: set = set()
        self.ignore_range = False
        self.requests: list = []
        self.missing: set = set()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.lstrip("/")
                server.requests.append((name, self.headers.get("Range")))
                data = server.files.get(name)
                if data is None or name in server.missing:
                    self.send_error(404, "Not Found")
                    return
                if name in server.corrupt:
                    data = bytes(b ^ 0x5A for b in data[:64]) + data[64:]
                start, status = 0, 200
                wanted = self.headers.get("Range")
                if wanted and not server.ignore_range:
                    start = int(wanted.split("=")[1].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                body = data[start:]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                if status == 206:
                    self.send_header("Content-Range",
                                     f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                cuts = server.cut.get(name)
                if cuts:
                    limit = cuts.pop(0)
                    self.wfile.write(body[:limit])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def range_requests(self, name: str) -> list:
        return [r for n, r in self.requests if n == name and r]


def write_manifest(path, files: dict, base_url: str | None = None, unpinned=()) -> str:
    """A `--manifest` for `files` (name → bytes): their sha256 and size; the
    names in `unpinned` get sha256 null (and their md5), as the evaluation
    scripts have in the real table."""
    entries = {}
    for name, data in files.items():
        entry = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "md5": None}
        if name in unpinned:
            entry.update(sha256=None, size=None, md5=hashlib.md5(data).hexdigest())
        entries[name] = entry
    manifest = {"files": entries}
    if base_url:
        manifest["base_url"] = base_url
    pathlib.Path(path).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return str(path)


def write_tree(directory, files: dict) -> pathlib.Path:
    """The files as a `--source_dir` (`<dir>/<name>`)."""
    directory = pathlib.Path(directory)
    for name, data in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return directory


# === Content ===


def _zip(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in members.items():
            z.writestr(name, text)
    return buffer.getvalue()


def _tsv(header, rows) -> str:
    lines = (["\t".join(header)] if header else []) + ["\t".join(map(str, r)) for r in rows]
    return "\n".join(lines) + "\n"


SENTENCES = ["the dog walks in the park .", "a man is in the city .", "she was very good .",
             "it is a bad movie .", "he walked the dog .", "the woman is in the park ."]


def _pairs(n):
    return [(SENTENCES[i % 6], SENTENCES[(i + 1) % 6]) for i in range(n)]


def _glue_synthetic() -> dict:
    p = _pairs(24)
    nli = ["entailment", "not_entailment"]
    mnli_header = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                   "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                   "sentence2", "label1", "gold_label"]
    mnli = [(i, i, f"{i}e", "fiction", "", "", "", "", a, b, "neutral",
             ("contradiction", "entailment", "neutral")[i % 3]) for i, (a, b) in enumerate(p)]
    mnli_test = [r[:10] for r in mnli]
    sts_header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
                  "sentence1", "sentence2"]
    sts = [(i, "main-news", "f", "2012", i, "s", "s", a, b, f"{i % 6}.0")
           for i, (a, b) in enumerate(p)]
    pair_test = _tsv(["index", "sentence1", "sentence2"], [(i, a, b) for i, (a, b) in
                                                           enumerate(p)])
    return {
        "glue/CoLA.zip": {"CoLA/train.tsv": _tsv(None, [("gj04", i % 2, "", s) for i, (s, _) in
                                                        enumerate(p)]),
                          "CoLA/dev.tsv": _tsv(None, [("gj04", i % 2, "", s) for i, (s, _) in
                                                      enumerate(p)]),
                          "CoLA/test.tsv": _tsv(["index", "sentence"], list(enumerate(SENTENCES)))},
        "glue/SST-2.zip": {f"SST-2/{split}.tsv": _tsv(["sentence", "label"],
                                                      [(s, i % 2) for i, (s, _) in enumerate(p)])
                           for split in ("train", "dev")} | {
            "SST-2/test.tsv": _tsv(["index", "sentence"], list(enumerate(SENTENCES)))},
        "glue/QQP-clean.zip": {f"QQP/{split}.tsv": _tsv(
            ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
            [(i, 2 * i, 2 * i + 1, a, b, i % 2) for i, (a, b) in enumerate(p)])
            for split in ("train", "dev")} | {
            "QQP/test.tsv": _tsv(["id", "question1", "question2"],
                                 [(i, a, b) for i, (a, b) in enumerate(p)])},
        "glue/STS-B.zip": {f"STS-B/{split}.tsv": _tsv(sts_header + ["score"], sts)
                           for split in ("train", "dev")} | {
            "STS-B/test.tsv": _tsv(sts_header, [r[:9] for r in sts])},
        "glue/MNLI.zip": {f"MNLI/{split}.tsv": _tsv(mnli_header, mnli)
                          for split in ("train", "dev_matched", "dev_mismatched")} | {
            f"MNLI/{split}.tsv": _tsv(mnli_header[:10], mnli_test)
            for split in ("test_matched", "test_mismatched")},
        "glue/QNLIv2.zip": {f"QNLI/{split}.tsv": _tsv(["index", "question", "sentence", "label"],
                                                      [(i, a, b, nli[i % 2])
                                                       for i, (a, b) in enumerate(p)])
                            for split in ("train", "dev")} | {
            "QNLI/test.tsv": _tsv(["index", "question", "sentence"],
                                  [(i, a, b) for i, (a, b) in enumerate(p)])},
        "glue/RTE.zip": {f"RTE/{split}.tsv": _tsv(["index", "sentence1", "sentence2", "label"],
                                                  [(i, a, b, nli[i % 2])
                                                   for i, (a, b) in enumerate(p)])
                         for split in ("train", "dev")} | {"RTE/test.tsv": pair_test},
        "glue/WNLI.zip": {f"WNLI/{split}.tsv": _tsv(["index", "sentence1", "sentence2", "label"],
                                                    [(i, a, b, i % 2)
                                                     for i, (a, b) in enumerate(p)])
                          for split in ("train", "dev")} | {"WNLI/test.tsv": pair_test},
    }


def _mrpc_synthetic() -> dict:
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    rows = [(i % 2, 1000 + 2 * i, 1001 + 2 * i, a, b) for i, (a, b) in enumerate(_pairs(30))]
    lines = ["\t".join(map(str, r)) + "\n" for r in rows]
    dev = "".join(f"{r[1]}\t{r[2]}\n" for r in rows[::5])
    return {"glue/msr_paraphrase_train.txt": header + "".join(lines),
            "glue/msr_paraphrase_test.txt": header + "".join(lines[:12]),
            "glue/mrpc_dev_ids.tsv": dev}


def _squad(version_2: bool, articles: int = 2) -> str:
    data = []
    for a in range(articles):
        paragraphs = []
        for p in range(2):
            context = (f"Article {a} paragraph {p}: the dog walks in the park every morning . "
                       f"The city of Paris is the capital of France . She was born in 19{a}{p} .")
            qas = [
                {"id": f"q{a}{p}0", "question": "Where does the dog walk?",
                 "answers": [{"text": "in the park",
                              "answer_start": context.index("in the park")}]},
                {"id": f"q{a}{p}1", "question": "What is the capital of France?",
                 "answers": [{"text": "Paris", "answer_start": context.index("Paris")}]},
                {"id": f"q{a}{p}2", "question": "When was she born?",
                 "answers": [{"text": f"19{a}{p}", "answer_start": context.index(f"19{a}{p}")}]},
            ]
            if version_2:
                for q in qas:
                    q["is_impossible"] = False
                qas.append({"id": f"q{a}{p}3", "question": "What is the capital of Spain?",
                            "answers": [], "is_impossible": True})
            paragraphs.append({"context": context, "qas": qas})
        data.append({"title": f"Article_{a}", "paragraphs": paragraphs})
    return json.dumps({"version": "v2.0" if version_2 else "1.1", "data": data})


EVALUATE = '''"""Stand-in for SQuAD's official evaluation script (tests only)."""
import json
import sys

if __name__ == "__main__":
    dataset, predictions = (json.load(open(p)) for p in sys.argv[1:3])
    print(json.dumps({"exact_match": 0.0, "f1": 0.0, "predictions": len(predictions)}))
'''


def _swag(rows: int, labelled: bool = True) -> str:
    out = io.StringIO()
    import csv

    writer = csv.writer(out, lineterminator="\n")
    header = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
              "ending0", "ending1", "ending2", "ending3"] + (["label"] if labelled else [])
    writer.writerow(header)
    for i in range(rows):
        a, b = SENTENCES[i % 6], SENTENCES[(i + 2) % 6]
        row = [i, f"clip{i}", i, f"{a} then", a, "then", "gold", b, a, "the dog .", "a man ."]
        writer.writerow(row + ([i % 4] if labelled else []))
    return out.getvalue()


def _conll(sentences: int) -> str:
    words = [("the", "O"), ("Paris", "B-location"), ("dog", "O"), ("Google", "B-corporation"),
             ("walks", "O"), ("John", "B-person"), ("Smith", "I-person"), (".", "O")]
    lines = []
    for i in range(sentences):
        for k in range(5):
            lines.append("%s\t%s" % words[(i + k) % len(words)])
        lines.append("")
    return "\n".join(lines) + "\n"


def _xnli() -> dict:
    header = ["language", "gold_label", "sentence1_binary_parse", "sentence2_binary_parse",
              "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "promptID",
              "pairID", "genre", "label1", "label2", "label3", "label4", "label5",
              "sentence1_tokenized", "sentence2_tokenized", "match"]
    labels = ("contradiction", "entailment", "neutral")
    rows = []
    for language in ("en", "zh", "de"):
        for i, (a, b) in enumerate(_pairs(12)):
            rows.append([language, labels[i % 3], "", "", "", "", f"{language}: {a}", b, i, i,
                         "fiction", labels[i % 3], "", "", "", "", a, b, "True"])
    dev = _tsv(header, rows)
    train = {f"XNLI-MT-1.0/multinli/multinli.train.{language}.tsv": _tsv(
        ["premise", "hypo", "label"],
        [(f"{language}: {a}", b, ("contradictory", "entailment", "neutral")[i % 3])
         for i, (a, b) in enumerate(_pairs(24))]) for language in ("en", "zh", "de")}
    return {"xnli/XNLI-1.0.zip": {"XNLI-1.0/xnli.dev.tsv": dev, "XNLI-1.0/xnli.test.tsv": dev,
                                  "XNLI-1.0/README.txt": "stand-in\n"},
            "xnli/XNLI-MT-1.0.zip": train | {"XNLI-MT-1.0/README.txt": "stand-in\n"}}


def mirror_files(shared: pathlib.Path | None = None) -> dict:
    """name → bytes for every file of `data_prep.datasets.REMOTES`."""
    shared = pathlib.Path(shared) if shared and pathlib.Path(shared).exists() else None

    def real(relative, default):
        if shared is not None and (shared / relative).exists():
            return (shared / relative).read_text(encoding="utf-8")
        return default

    zips = _glue_synthetic() | _xnli()
    if shared is not None:
        for archive, task in (("CoLA.zip", "CoLA"), ("SST-2.zip", "SST-2"), ("STS-B.zip", "STS-B"),
                              ("RTE.zip", "RTE"), ("WNLI.zip", "WNLI"), ("QNLIv2.zip", "QNLI")):
            for split in ("train", "dev"):
                path = shared / "glue" / task / f"{split}.tsv"
                if path.exists():
                    zips[f"glue/{archive}"][f"{task}/{split}.tsv"] = path.read_text(
                        encoding="utf-8")
    files = {name: _zip(members) for name, members in zips.items()}
    mrpc = _mrpc_synthetic()
    for name, relative in (("glue/msr_paraphrase_train.txt", "MRPC/original/msr_paraphrase_train.txt"),
                           ("glue/msr_paraphrase_test.txt", "MRPC/original/msr_paraphrase_test.txt"),
                           ("glue/mrpc_dev_ids.tsv", "MRPC/dev_ids.tsv")):
        files[name] = real(f"glue/{relative}", mrpc[name]).encode("utf-8")
    files["glue/AX.tsv"] = _tsv(["index", "sentence1", "sentence2"],
                                [(i, a, b) for i, (a, b) in enumerate(_pairs(6))]).encode()
    squad_v2_train = _squad(True, 3)
    if shared is not None and (shared / "squad_v2.0/squad_v2.0-shared.json").exists():
        v2 = json.loads((shared / "squad_v2.0/squad_v2.0-shared.json").read_text("utf-8"))
        squad_v2_train = json.dumps({"version": "v2.0", "data": v2["data"][:4]})
    texts = {
        "squad/train-v1.1.json": real("squad_v1.1/train-v1.1-first12articles.json",
                                      _squad(False, 3)),
        "squad/dev-v1.1.json": real("squad_v1.1/squad_v1.1-shared.json", _squad(False, 2)),
        "squad/evaluate-v1.1.py": EVALUATE,
        "squad/train-v2.0.json": squad_v2_train,
        "squad/dev-v2.0.json": real("squad_v2.0/squad_v2.0-shared.json", _squad(True, 2)),
        "squad/evaluate-v2.0.py": EVALUATE,
        "swag/train.csv": real("multiple_choice/hellaswag_as_swag-train.csv", _swag(24)),
        "swag/val.csv": real("multiple_choice/hellaswag_as_swag-dev.csv", _swag(12)),
        "swag/test.csv": _swag(12, labelled=False),
        "wnut17/wnut17train.conll": real("ner/wnut17/wnut17train.conll", _conll(30)),
        "wnut17/emerging.dev.conll": real("ner/wnut17/emerging.dev.conll", _conll(12)),
        "wnut17/emerging.test.annotated": _conll(12),  # the real test set is held back
    }
    files.update({name: text.encode("utf-8") for name, text in texts.items()})
    from data_prep.datasets import REMOTES

    assert set(files) == set(REMOTES), set(REMOTES) ^ set(files)
    return files


UNPINNED = ("squad/evaluate-v1.1.py", "squad/evaluate-v2.0.py")  # as in the real table
