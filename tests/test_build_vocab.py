"""Tests of data_prep/build_vocab.py: Google's layout, exact size, cased/uncased,
coverage of the corpus, errors."""

from __future__ import annotations

import collections
import pathlib
import sys

import pytest

from data_prep import build_vocab as bv
from data_prep import prepare_corpus
from official_bert.errors import UserError
from official_bert.text import tokenization
from support import processes

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data_prep" / "sample_corpus" / "1861-Lincoln.txt"


def test_reserved_tokens_follow_googles_layout():
    reserved = bv.reserved_tokens(994)
    assert len(reserved) == 999
    assert reserved[0] == "[PAD]" and reserved[1] == "[unused0]" and reserved[99] == "[unused98]"
    assert reserved[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert reserved[104] == "[unused99]" and reserved[998] == "[unused993]"
    small = bv.reserved_tokens(5)
    assert small == ["[PAD]"] + [f"[unused{i}]" for i in range(5)] + [
        "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "lincoln.txt"
    prepare_corpus.prepare_corpus([str(SAMPLE)], str(path))
    return path


@pytest.mark.parametrize("lower", [True, False])
def test_build_vocab(tmp_path, corpus, lower):
    out = tmp_path / "vocab.txt"
    summary = bv.build_vocab([str(corpus)], str(out), vocab_size=700, do_lower_case=lower,
                             num_unused=99, lower_thresh=2)
    vocab = out.read_text(encoding="utf-8").split("\n")
    assert vocab[-1] == "" and len(vocab) - 1 == 700 == summary["vocab_size"]
    vocab = vocab[:-1]
    assert len(set(vocab)) == 700
    assert summary["ids"] == {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
    assert summary["learned_tokens"] > 300
    assert any(t.startswith("##") and len(t) > 3 for t in vocab)  # learned suffixes
    has_upper = any(any(c.isupper() for c in t) for t in vocab if not t.startswith("["))
    assert has_upper == (not lower)
    # every character of the corpus is covered: no [UNK] when tokenizing it
    tokenizer = tokenization.FullTokenizer(str(out), do_lower_case=lower)
    counts = collections.Counter(tokenizer.tokenize(corpus.read_text(encoding="utf-8")))
    assert counts["[UNK]"] == 0
    # a learned vocabulary compresses: fewer pieces than characters by far
    assert sum(counts.values()) < 0.4 * len(corpus.read_text(encoding="utf-8"))


def test_padding_when_the_corpus_is_small(tmp_path):
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("a b c abc abc\n", encoding="utf-8")
    out = tmp_path / "vocab.txt"
    summary = bv.build_vocab([str(tiny)], str(out), vocab_size=200, num_unused=10, lower_thresh=1)
    vocab = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(vocab) == 200 and vocab[11:15] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    padding = summary["padding_unused_tokens"]
    assert padding > 150
    assert vocab[-padding:] == [f"[unused{10 + i}]" for i in range(padding)]
    bv.check_vocab(vocab)


def test_a_small_corpus_says_how_many_tokens_it_learned_and_what_to_do(tmp_path, corpus):
    """Issue 34: 12 articles and --vocab_size=8000 gave 5,172 [unusedN] in silence. The
    warning is one line with the numbers and the fixes; the summary counts the real tokens;
    the --vocab_size it suggests learns without padding beyond --slack_ratio."""
    def build(vocab_size):
        return processes.run(
            [sys.executable, "-m", "official_bert.commands.cli", "build-vocab", f"--input_file={corpus}",
             f"--output_file={tmp_path / 'vocab.txt'}", f"--vocab_size={vocab_size}",
             "--num_unused=99"], cwd=REPO, capture_output=True, text=True)

    result = build(3000)
    assert result.returncode == 0, result.stderr[-2000:]
    vocab = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    unused = sum(token.startswith("[unused") for token in vocab)
    learned = len(vocab) - unused - 5  # [PAD] [UNK] [CLS] [SEP] [MASK]
    assert 0 < learned < 3000 * 0.95 - 104
    summary = [line for line in result.stderr.splitlines() if line.startswith("wrote ")]
    assert summary == [f"wrote {tmp_path / 'vocab.txt'}: 3000 tokens: {learned} learned from "
                       f"the corpus (characters and word pieces), 104 reserved ([PAD], [UNK], "
                       f"[CLS], [SEP], [MASK], 99 [unusedN]), {unused - 99} more [unusedN] as "
                       f"padding; from {summary[0].split('; from ')[1].split(';')[0]}; ids "
                       "{'[PAD]': 0, '[UNK]': 100, '[CLS]': 101, '[SEP]': 102, '[MASK]': 103}"]
    warnings = [line for line in result.stderr.splitlines() if "the corpus yields only" in line]
    assert len(warnings) == 1
    assert warnings[0].endswith(
        f"the corpus yields only {learned} tokens (characters and word pieces seen at least "
        f"--lower_thresh=10 times) for --vocab_size=3000: {unused - 99} [unusedN] pad the rest "
        f"({unused} [unusedN] in all, {(unused - 99) / 3000:.0%} of the file); use "
        f"--vocab_size={learned + 104} or less, or more text, or keep a public checkpoint's "
        "vocabulary and add this corpus's words to it with `bert extend-vocab`")
    # The suggested size: no warning, and at most --slack_ratio of it padding.
    result = build(learned + 104)
    assert result.returncode == 0 and "the corpus yields only" not in result.stderr
    vocab = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert sum(token.startswith("[unused") for token in vocab) - 99 <= 0.05 * len(vocab)


def test_errors(tmp_path, corpus):
    with pytest.raises(ValueError, match="leaves no room"):
        bv.build_vocab([str(corpus)], str(tmp_path / "v.txt"), vocab_size=999)
    with pytest.raises(UserError, match="--input_file: no file matches"):
        bv.build_vocab([str(tmp_path / "none*.txt")], str(tmp_path / "v.txt"))
    with pytest.raises(ValueError, match=r"lacks special token\(s\) \[MASK\]"):
        bv.check_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
    with pytest.raises(ValueError, match="repeats"):
        bv.check_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"])
    with pytest.raises(UserError, match="output directory"):
        bv.write_vocab(["a"], str(tmp_path / "no" / "v.txt"))


def test_cli_error(tmp_path):
    result = processes.run(
        [sys.executable, "-m", "official_bert.commands.build_vocab",
         f"--input_file={tmp_path}/x*.txt", f"--output_file={tmp_path}/v.txt"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: --input_file: no file")
