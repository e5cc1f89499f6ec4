"""SWAG CSV reading, multiple-choice packing, any number of choices, BertMultipleChoice."""

import numpy as np
import pytest

from data_prep import swag
from official_bert.text import tokenization

VOCAB = "[PAD] [UNK] [CLS] [SEP] [MASK] the a man dog walks runs he sat down ate food .".split()

THREE = """video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,label
v0,0,x,The man walks.,He,gold,sat down.,ate food.,runs.,1
v1,1,x,"The dog, a man.",,gold,walks.,runs.,sat down.,2
"""


@pytest.fixture
def tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)


def write(tmp_path, text, name="data.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_read_three_choices(tmp_path):
    examples = swag.read_swag(write(tmp_path, THREE))
    assert len(examples) == 2
    assert examples[0].endings == ["sat down.", "ate food.", "runs."]
    assert examples[0].context == "The man walks." and examples[0].start == "He"
    assert examples[1].label == 2 and examples[1].start == ""


def test_packing(tmp_path, tokenizer):
    examples = swag.read_swag(write(tmp_path, THREE))
    packed = swag.pack_example(examples[0], tokenizer, 12)
    assert len(packed) == 3
    ids, mask, segments = packed[1]
    vocab = tokenizer.vocab
    expected = ["[CLS]", "the", "man", "walks", ".", "[SEP]", "he", "ate", "food", ".", "[SEP]"]
    assert ids == [vocab[t] for t in expected] + [0]
    assert mask == [1] * 11 + [0]
    assert segments == [0] * 6 + [1] * 5 + [0]
    # Empty sent2 (HellaSwag): segment B is the ending alone.
    ids, _, _ = swag.pack_example(examples[1], tokenizer, 12)[0]
    assert ids[ids.index(vocab["[SEP]"]) + 1] == vocab["walks"]
    # Truncation keeps [CLS] A [SEP] B [SEP] within max_seq_length.
    ids, mask, _ = swag.pack_example(examples[0], tokenizer, 7)[2]
    assert len(ids) == 7 and sum(mask) == 7 and ids[-1] == vocab["[SEP]"]
    arrays = swag.convert_examples(examples, tokenizer, 12)
    assert arrays["input_word_ids"].shape == (2, 3, 12)
    assert arrays["label"].tolist() == [1, 2]


def test_five_choices_and_real_sample(tmp_path, shared_data):
    header = "video-id,fold-ind,startphrase,sent1,sent2,gold-source," + ",".join(
        f"ending{k}" for k in range(5)) + ",label\n"
    examples = swag.read_swag(write(tmp_path, header + "v,0,x,a,b,gold,1,2,3,4,5,4\n"))
    assert len(examples[0].endings) == 5 and examples[0].label == 4
    sample = shared_data / "multiple_choice" / "swag-sample.csv"
    if sample.exists():
        real = swag.read_swag(str(sample))
        assert len(real) == 10 and all(len(e.endings) == 4 for e in real)


def test_bad_rows(tmp_path):
    missing = THREE.replace("sat down.,ate food.,runs.,1", "sat down.,,runs.,1")
    with pytest.raises(swag.SwagFormatError, match=r"line 2 has an empty ending1"):
        swag.read_swag(write(tmp_path, missing))
    short = THREE.replace("sat down.,ate food.,runs.,1", "sat down.,ate food.")
    with pytest.raises(swag.SwagFormatError, match=r"line 2 has 8 columns.*missing ending"):
        swag.read_swag(write(tmp_path, short))
    with pytest.raises(swag.SwagFormatError, match=r"label 3, which is not a choice"):
        swag.read_swag(write(tmp_path, THREE.replace("runs.,1", "runs.,3")))
    with pytest.raises(swag.SwagFormatError, match=r"without the sent1"):
        swag.read_swag(write(tmp_path, "a,b\n1,2\n"))
    # A prediction file may leave the label out.
    unlabelled = THREE.replace(",label", "").replace(",1\n", "\n").replace(",2\n", "\n")
    assert swag.read_swag(write(tmp_path, unlabelled), require_label=False)[0].label is None
    with pytest.raises(swag.SwagFormatError, match="no label column"):
        swag.read_swag(write(tmp_path, unlabelled))


def test_multiple_choice_model_scores_each_choice_from_pooled_output():
    import keras
    import tensorflow as tf
    from support import tiny_config
    from official_bert.modeling.encoder import BertEncoder
    from official_bert.modeling.heads import BertMultipleChoice

    keras.utils.set_random_seed(0)
    encoder = BertEncoder.from_bert_config(tiny_config())
    model = BertMultipleChoice(encoder)
    rng = np.random.default_rng(0)
    for choices in (3, 5):
        ids = rng.integers(1, 64, size=(2, choices, 8)).astype("int32")
        inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
                  "input_type_ids": np.zeros_like(ids)}
        logits = model(inputs).numpy()
        assert logits.shape == (2, choices) and logits.dtype == np.float32
        flat = {k: v.reshape(-1, 8) for k, v in inputs.items()}
        pooled = encoder(flat)["pooled_output"]
        expected = model.choice_scorer(pooled).numpy().reshape(2, choices)
        np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)
    assert model.choice_scorer.kernel.shape == (16, 1)  # one vector V
