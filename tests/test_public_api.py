"""The package's public surface: `import official_bert as ob` and its few names."""

import importlib
import subprocess
import sys

import numpy as np
import pytest

import official_bert as ob
from official_bert import _PUBLIC


@pytest.mark.parametrize("name", sorted(_PUBLIC))
def test_each_public_name_is_the_defining_modules_object(name):
    assert getattr(ob, name) is getattr(importlib.import_module(_PUBLIC[name]), name)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'BertModel'"):
        ob.BertModel  # noqa: B018


def test_importing_the_package_does_not_load_tensorflow():
    code = "import sys, official_bert; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_the_docstring_recipe_on_a_real_checkpoint(minilm_dir):
    """The module docstring's three lines, on all-MiniLM-L6-v2."""
    encoder, checkpoint = ob.load_encoder(minilm_dir)
    tokenizer = ob.FullTokenizer(checkpoint.vocab_file, do_lower_case=True)
    classifier = ob.BertClassifier(encoder, num_classes=2)
    ids = tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize("hello world"), "[SEP]"])
    assert ids == [101, 7592, 2088, 102]  # bert-base-uncased's ids, which MiniLM shares
    inputs = {"input_word_ids": np.array([ids], np.int32),
              "input_mask": np.ones((1, 4), np.int32),
              "input_type_ids": np.zeros((1, 4), np.int32)}
    assert classifier(inputs).shape == (1, 2)
    assert encoder.count_params() == 22_713_216
