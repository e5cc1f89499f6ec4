"""CoNLL reading (4-column CoNLL-2003 and 2-column WNUT-17), alignment, windows, writing."""

import os

import pytest

from data_prep import conll
from official_bert.text import tokenization

VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a man walk ##s ##ing to new york john smith "
         "paris went in . , he she").split()

CONLL2003 = """-DOCSTART- -X- O O

John NNP I-NP I-PER
Smith NNP I-NP I-PER
went VBD I-VP O
to TO I-PP O
New NNP I-NP I-LOC
York NNP I-NP B-LOC
. . O O

-DOCSTART- -X- O O

Paris NNP I-NP I-LOC
"""

WNUT = "John\tB-person\nwalks\tO\n \nin\tO\nParis\tB-location\nParis\tI-location\n"


@pytest.fixture
def tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_read_conll2003_iob1(tmp_path):
    data = conll.read_conll(write(tmp_path, "eng.train", CONLL2003))
    assert data.num_columns == 4 and data.scheme == "iob1"
    assert [s.words for s in data.sentences] == [
        ["John", "Smith", "went", "to", "New", "York", "."], ["Paris"]]
    # Converted to BIO inside; York (B-LOC after I-LOC) is a second entity.
    assert data.sentences[0].tags == ["B-PER", "I-PER", "O", "O", "B-LOC", "B-LOC", "O"]
    assert data.sentences[1].tags == ["B-LOC"]
    assert data.sentences[0].line_numbers[0] == 3
    assert conll.label_list_from(data.sentences) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def test_read_wnut_bio_with_whitespace_separator_lines(tmp_path):
    data = conll.read_conll(write(tmp_path, "wnut.conll", WNUT))
    assert data.num_columns == 2 and data.scheme == "bio"
    assert [s.words for s in data.sentences] == [["John", "walks"], ["in", "Paris", "Paris"]]
    assert data.sentences[1].tags == ["O", "B-location", "I-location"]


def test_words_only_file(tmp_path):
    data = conll.read_conll(write(tmp_path, "raw.txt", "John\nwent\n\nParis\n"))
    assert not data.has_tags and data.sentences[1].tags is None


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = write(tmp_path, "bad.conll", "John NNP I-NP I-PER\nSmith NNP I-PER\n")
    with pytest.raises(conll.ConllFormatError, match=r"bad.conll line 2 has 3 columns .*, expected 4"):
        conll.read_conll(path)
    path = write(tmp_path, "badtag.conll", "John\tX-PER\n")
    with pytest.raises(conll.ConllFormatError, match=r"badtag.conll line 1 has the tag 'X-PER'"):
        conll.read_conll(path)
    with pytest.raises(conll.ConllFormatError, match="missing.conll does not exist"):
        conll.read_conll(str(tmp_path / "missing.conll"))


def test_unknown_tag_at_prediction(tmp_path):
    data = conll.read_conll(write(tmp_path, "dev.conll", "John\tB-person\nIBM\tB-corp\n"))
    with pytest.raises(conll.ConllFormatError, match=r"dev.conll line 2 has the tag 'B-corp'"):
        conll.check_tags(data, ["O", "B-person", "I-person"])


def test_first_subtoken_alignment_and_inverse(tokenizer):
    words = ["John", "walks", "walking", "\x07", "Paris"]
    tokens, word_index, is_first = conll.tokenize_words(words, tokenizer)
    assert tokens == ["john", "walk", "##s", "walk", "##ing", "[UNK]", "paris"]
    assert word_index == [0, 1, 1, 2, 2, 3, 4]
    assert is_first == [True, True, False, True, False, True, True]
    label_map = {"O": 0, "B-PER": 1, "B-LOC": 2}
    tags = ["B-PER", "O", "O", "O", "B-LOC"]
    (window,) = conll.sentence_windows(0, words, tags, tokenizer, label_map, 12)
    assert window.tokens == ["[CLS]"] + tokens + ["[SEP]"]
    assert window.label_ids == [-1, 1, 0, -1, 0, -1, 0, 2, -1] + [-1] * 3
    assert window.word_index == [-1, 0, 1, -1, 2, -1, 3, 4, -1] + [-1] * 3
    assert window.input_mask == [1] * 9 + [0] * 3
    # Inverse: per-position predictions → one label per word, from its first sub-token.
    predicted = [[9, 1, 0, 7, 0, 7, 0, 2, 9, 9, 9, 9]]
    assert conll.word_predictions([window], predicted, 1, [5]) == [[1, 0, 0, 0, 2]]


def test_long_sentence_windows_cover_every_word_once(tokenizer):
    words = ["walks", "the", "man", "walking", "to", "new", "york"] * 5  # 49 sub-tokens
    tags = ["O"] * len(words)
    windows = conll.sentence_windows(0, words, tags, tokenizer, {"O": 0}, 10, stride=4)
    assert len(windows) > 1
    assert all(len(w.input_ids) == 10 for w in windows)
    owned = sorted(i for w in windows for i in w.word_index if i >= 0)
    assert owned == list(range(len(words)))  # each word exactly once, none dropped
    for w in windows:  # a label exactly where a word is owned
        assert [l >= 0 for l in w.label_ids] == [i >= 0 for i in w.word_index]
    predicted = [[i for i in w.word_index] for w in windows]
    assert conll.word_predictions(windows, predicted, 1, [len(words)]) == [list(range(len(words)))]
    # Ownership prefers the window with the most context on both sides.
    assert conll.owner_windows(10, [0, 4], 6) == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert conll.window_starts(5, 8, 4) == [0]
    assert conll.window_starts(20, 8, 4) == [0, 4, 8, 12]
    with pytest.raises(ValueError):
        conll.window_starts(20, 8, 9)


def test_write_predictions_beside_gold_in_file_scheme(tmp_path):
    data = conll.read_conll(write(tmp_path, "eng.testa", CONLL2003))
    predicted = [["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "O"], ["B-LOC"]]
    out = str(tmp_path / "pred.conll")
    conll.write_predictions(out, data, predicted)
    lines = open(out).read().split("\n")
    assert lines[0] == "John NNP I-NP I-PER I-PER"
    assert lines[5] == "York NNP I-NP B-LOC I-LOC"  # back in IOB1, beside the gold
    assert lines[7] == "" and lines[8] == "Paris NNP I-NP I-LOC I-LOC"


def test_shared_data_parses(shared_data):
    ner = shared_data / "ner"
    if not (ner / "wnut17" / "emerging.dev.conll").exists():
        pytest.skip("WNUT-17 is not in ../shared/data")
    data = conll.read_conll(str(ner / "wnut17" / "emerging.dev.conll"))
    assert len(data.sentences) == 1009 and data.scheme == "bio"
    testa = ner / "conll2003" / "eng.testa"
    if testa.exists():
        data = conll.read_conll(str(testa))
        assert len(data.sentences) == 3250 and data.scheme == "iob1"


def test_token_classifier_and_feature_tagger_shapes():
    import keras
    import numpy as np
    import tensorflow as tf
    from support import tiny_config
    from official_bert.modeling.encoder import BertEncoder
    from official_bert.modeling.heads import BertTokenClassifier, FeatureTagger

    keras.utils.set_random_seed(0)
    encoder = BertEncoder.from_bert_config(tiny_config())
    model = BertTokenClassifier(encoder, num_labels=5)
    ids = np.ones((2, 7), "int32")
    inputs = {"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids}
    logits = model(inputs)
    assert logits.shape == (2, 7, 5) and logits.dtype == tf.float32
    expected = model.token_classifier(encoder(inputs)["sequence_output"])
    np.testing.assert_allclose(logits.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    tagger = FeatureTagger(5, kind="bilstm", units=3, num_layers=2)
    out = tagger({"features": tf.zeros([2, 4, 8]), "word_mask": tf.constant([[1, 1, 0, 0]] * 2)})
    assert out.shape == (2, 4, 5)
    assert tagger.hidden[0].forward_layer.units == 3 and len(tagger.hidden) == 2
