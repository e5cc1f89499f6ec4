"""Tests of data_prep/prepare_corpus.py: sentence splitting, clean-up, Gutenberg
license removal, the corpus format, stats and errors."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

from data_prep import prepare_corpus as pc
from official_bert import io
from support import processes

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "data_prep" / "sample_corpus"
SHARED_TEXT = REPO.parent / "shared" / "data" / "pretrain_text"


@pytest.mark.parametrize("text, sentences", [
    ("Mr. Smith went to Washington. He met Dr. Jones at 5 p.m. Then they left.",
     ["Mr. Smith went to Washington.", "He met Dr. Jones at 5 p.m.", "Then they left."]),
    ("Harry S. Truman spoke to the U.S. Congress. G. K. Chesterton wrote it.",
     ["Harry S. Truman spoke to the U.S. Congress.", "G. K. Chesterton wrote it."]),
    ("It grew in the U.S. The rest followed.", ["It grew in the U.S.", "The rest followed."]),
    ("See No. 5 on p. 3 and Vol. 2. No. That is wrong.",
     ["See No. 5 on p. 3 and Vol. 2.", "No.", "That is wrong."]),
    ('"Why?" he asked. "Because." She left... And then?',
     ['"Why?" he asked.', '"Because."', "She left...", "And then?"]),
    ("It was--Mr. Knightley! She laughed; Mrs. Weston (and St. John) did not.",
     ["It was--Mr. Knightley!", "She laughed; Mrs. Weston (and St. John) did not."]),
    ("So do I. Then we went. The cost was $1.5 billion, i.e. more. It rose.",
     ["So do I.", "Then we went.", "The cost was $1.5 billion, i.e. more.", "It rose."]),
    ("Ünïcödé works. Ça va? «Oui.» Ende.", ["Ünïcödé works.", "Ça va?", "«Oui.» Ende."]),
    ("no terminal punctuation", ["no terminal punctuation"]),
    ("   ", []),
])
def test_split_sentences(text, sentences):
    assert pc.split_sentences(text) == sentences


def test_long_sentences_are_split_at_semicolons_then_spaces():
    sentence = "; ".join(["word " * 30] * 10)  # ~1,500 characters, no period
    pieces = pc.split_sentences(sentence, max_chars=400)
    assert all(len(p) <= 400 for p in pieces) and len(pieces) >= 4
    assert " ".join(pieces).split() == sentence.split()
    words = "x" * 50 + (" abc" * 300)
    assert all(len(p) <= 200 for p in pc.split_sentences(words, max_chars=200))


def test_clean_text():
    raw = "Caf\u0065\u0301\u00a0au\u2009lait\u200b\r\nsoft\u00adhyphen\x07\ufffd\ttab\ufeff"
    assert pc.clean_text(raw) == "Caf\u00e9 au lait\nsofthyphen tab"


def test_strip_gutenberg():
    lines = ["The Project Gutenberg EBook of X", "legal", "*** START OF THE PROJECT GUTENBERG "
             "EBOOK X ***", "Chapter 1", "Text.", "End of the Project Gutenberg EBook of X",
             "more legal"]
    assert pc.strip_gutenberg(lines) == (["Chapter 1", "Text."], True)
    old = ["header", "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*", "",
           "The Project Gutenberg Etext of Emma", "Body.", "", "End of The Project Gutenberg "
           "Etext of Emma"]
    assert pc.strip_gutenberg(old) == (["", "Body.", ""], True)
    plain = ["Just a speech.", "Nothing else."]
    assert pc.strip_gutenberg(plain) == (plain, False)


def test_paragraphs_hard_wrapped_and_one_per_line():
    wrapped = ["It was a dark", "and stormy night.", "", "  The end", "came soon."]
    assert pc.split_paragraphs(wrapped) == (
        ["It was a dark and stormy night.", "The end came soon."], True)
    long_lines = ["A" * 120 + ".", "Title", "B" * 150 + "."]
    assert pc.split_paragraphs(long_lines) == (["A" * 120 + ".", "Title", "B" * 150 + "."],
                                                False)


def test_prepare_corpus_format_stats_and_skips(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "README").write_text("Not a document.\n")
    (src / ".hidden.txt").write_text("Hidden. Skipped.\n")
    (src / "a.txt").write_text("First sentence. Second one!\nThird, wrapped\nline.\n",
                               encoding="utf-8")
    (src / "b.txt").write_bytes("Only one sentence with caf\xe9.".encode("cp1252"))
    (src / "c.txt").write_text("\n\n \n")
    (src / "d.txt").write_text(
        "*** START OF THE PROJECT GUTENBERG EBOOK D ***\nBody here. Yes.\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK D ***\nLicense.\n")
    out = tmp_path / "corpus.txt"
    stats = pc.prepare_corpus([str(src)], str(out))
    assert out.read_text(encoding="utf-8") == (
        "First sentence.\nSecond one!\nThird, wrapped line.\n\n"
        "Only one sentence with café.\n\n"
        "Body here.\nYes.\n")
    assert stats["documents"] == 3 and stats["sentences"] == 6
    assert stats["one_sentence_documents"] == [str(src / "b.txt")]
    assert stats["empty_documents_skipped"] == [str(src / "c.txt")]
    assert stats["not_documents_skipped"] == [str(src / ".hidden.txt"), str(src / "README")]
    assert stats["decoded_with_fallback_encoding"] == {str(src / "b.txt"): "cp1252"}
    assert stats["gutenberg_license_stripped"] == 1
    # The stats are a hidden sidecar: no pattern for the corpus (corpus.txt*) matches it.
    assert json.loads((tmp_path / ".corpus_txt.stats.json").read_text()) == stats
    assert sorted(os.listdir(tmp_path)) == [".corpus_txt.stats.json", io.OUTPUT_LEDGER,
                                            "corpus.txt", "src"]
    with pytest.raises(ValueError, match=r"b.txt line 1 is not UTF-8"):
        pc.prepare_corpus([str(src)], str(tmp_path / "strict.txt"),
                          pc.CorpusOptions(fallback_encoding=None))
    assert not (tmp_path / "strict.txt").exists()
    assert sorted(os.listdir(tmp_path)) == [".corpus_txt.stats.json", io.OUTPUT_LEDGER,
                                            "corpus.txt", "src"]


def test_bundled_sample_corpus():
    files, skipped = pc.expand_inputs([str(SAMPLE_CORPUS)])
    assert len(files) == 32 and [pathlib.Path(s).name for s in skipped] == ["README"]
    assert sum(os.path.getsize(f) for f in files) < 1_000_000
    doc = pc.document_sentences((SAMPLE_CORPUS / "1861-Lincoln.txt").read_bytes())
    assert doc.encoding == "utf-8" and not doc.hard_wrapped and not doc.gutenberg_stripped
    assert len(doc.sentences) > 100
    assert doc.sentences[-1].endswith("better angels of our nature.")


def test_cli(tmp_path):
    out = tmp_path / "sample.txt"
    cmd = [sys.executable, "-m", "official_bert.commands.prepare_corpus",
           f"--input={SAMPLE_CORPUS}", f"--output_file={out}"]
    result = processes.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "32 documents" in result.stderr
    text = out.read_text(encoding="utf-8")
    assert text.count("\n\n") == 31 and "\n\n\n" not in text
    assert text.endswith("sustain me!\n")  # Wilson, 1913: the last document
    bad = processes.run(cmd[:3] + [f"--input={tmp_path}/nothing"] + cmd[4:], cwd=REPO,
                        capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].startswith("error: --input ")


def test_shared_corpus(tmp_path):
    if not SHARED_TEXT.exists():
        pytest.skip(f"{SHARED_TEXT} is absent (../shared is not checked out here)")
    out = tmp_path / "corpus.txt"
    stats = pc.prepare_corpus([str(SHARED_TEXT)], str(out))
    assert stats["documents"] == 132 and stats["gutenberg_license_stripped"] == 13
    assert len(stats["not_documents_skipped"]) == 3  # the folder READMEs
    text = out.read_text(encoding="utf-8")
    for license_text in ("SMALL PRINT", "End of the Project Gutenberg", "End of Project "
                         "Gutenberg", "*** START OF", "*** END OF", "\nThe Project Gutenberg"):
        assert license_text not in text, license_text
    assert "Emma Woodhouse, handsome, clever, and rich" in text
