"""--student_layers: a student made of a subset of the teacher's layers
(`checkpoints.layer_subset`, DistilBERT's initialisation), read by every
command that loads a model (`model_files.resolve_model_files`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from official_bert import checkpoints, model_files
from official_bert.checkpoints import layer_subset
from official_bert.configs import ModelFilesConfig
from official_bert.errors import UserError
from official_bert.modeling import layers as bert_layers
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from support import tiny_config

TEACHER_LAYERS = 4


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A 4-layer teacher with random weights, written as a Hugging Face directory."""
    import keras

    keras.utils.set_random_seed(7)
    encoder = BertEncoder.from_bert_config(tiny_config(num_hidden_layers=TEACHER_LAYERS))
    encoder(dummy_inputs())
    directory = tmp_path_factory.mktemp("teacher")
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + [f"w{i}" for i in range(59)]) + "\n")
    checkpoints.export_huggingface(encoder, str(directory / "hf"), str(vocab), True)
    return encoder, str(directory / "hf")


def inputs():
    ids = np.array([[2, 7, 9, 11, 3, 0], [2, 5, 3, 8, 12, 3]], np.int32)
    return {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "input_type_ids": np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]], np.int32)}


def teacher_through(encoder, chosen, features):
    """The teacher's embeddings, then its layers `chosen` in order, then its pooler."""
    x = encoder.embeddings(features["input_word_ids"], features["input_type_ids"])
    bias = bert_layers.attention_bias_from_mask(features["input_mask"])
    for layer in chosen:
        x = encoder.transformer_layers[layer](x, bias)
    return np.asarray(x), np.asarray(encoder.pooler(x[:, 0, :]))


def student_of(path, layers):
    files = model_files.resolve_model_files(ModelFilesConfig(
        init_checkpoint=path, student_layers=[str(layer) for layer in layers],
        max_seq_length=16))
    student = BertEncoder.from_bert_config(files.config)
    student(dummy_inputs())
    checkpoints.assign_encoder_weights(student, files.checkpoint.weights)
    return files, student


@pytest.mark.parametrize("layers", [[0, 2], [1, 3], [3], [0, 1, 2, 3]])
def test_a_student_is_bit_exact_to_the_teachers_chosen_layers(teacher, layers):
    encoder, path = teacher
    files, student = student_of(path, layers)
    assert files.config.num_hidden_layers == len(layers)
    assert dataclasses.replace(files.config, num_hidden_layers=TEACHER_LAYERS) == encoder.config
    features = inputs()
    out = student(features, training=False)
    sequence, pooled = teacher_through(encoder, layers, features)
    np.testing.assert_array_equal(np.asarray(out["sequence_output"]), sequence)
    np.testing.assert_array_equal(np.asarray(out["pooled_output"]), pooled)


def test_only_the_layer_numbers_change(teacher):
    _, path = teacher
    full = checkpoints.read_checkpoint(path)
    student = layer_subset.keep_layers(full, [1, 3])
    assert set(student.weights) == {n for n in full.weights
                                    if not n.startswith(("bert/encoder/layer_2/",
                                                         "bert/encoder/layer_3/"))}
    np.testing.assert_array_equal(student.weights["bert/encoder/layer_1/output/dense/kernel"],
                                  full.weights["bert/encoder/layer_3/output/dense/kernel"])
    assert student.weights["bert/embeddings/word_embeddings"] is \
        full.weights["bert/embeddings/word_embeddings"]


@pytest.mark.parametrize("layers, message", [
    (["4"], "--student_layers: layer 4 is out of range: the teacher has 4 layers, numbered "
            "0 to 3"),
    (["-1"], "--student_layers: layer -1 is out of range"),
    (["0", "2", "0"], "--student_layers: layer 0 is named twice"),
    (["two"], "--student_layers: 'two' is not a layer number"),
])
def test_bad_layers_are_one_line_naming_the_flag(teacher, layers, message):
    with pytest.raises(UserError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        model_files.resolve_model_files(ModelFilesConfig(init_checkpoint=teacher[1],
                                                         student_layers=layers,
                                                         max_seq_length=16))


def test_student_layers_need_a_teacher(tmp_path):
    config = tmp_path / "bert_config.json"
    config.write_text(tiny_config().to_json_string())
    with pytest.raises(UserError, match="give the teacher as --init_checkpoint"):
        model_files.resolve_model_files(ModelFilesConfig(
            bert_config_file=str(config), student_layers=["0"], max_seq_length=16),
            vocab_required=False)


def test_an_empty_student_layers_is_refused_not_every_layer(teacher, tmp_path):
    """`--student_layers=` parses to no layer: a mistake, not the flag left out."""
    message = r"^--student_layers is empty: name the teacher's layers to keep"
    with pytest.raises(UserError, match=message):
        model_files.resolve_model_files(ModelFilesConfig(init_checkpoint=teacher[1],
                                                         student_layers=[], max_seq_length=16))
    # Also where a resume's own checkpoint would ignore the flag.
    with pytest.raises(UserError, match=message):
        model_files.resolve_model_files(ModelFilesConfig(init_checkpoint=teacher[1],
                                                         student_layers=[], max_seq_length=16),
                                        run_dir=teacher[1])
    # The layers kept are what the files say (the run record's identity names them).
    assert student_of(teacher[1], [2, 0])[0].student_layers == [2, 0]
    whole = model_files.resolve_model_files(ModelFilesConfig(init_checkpoint=teacher[1],
                                                             max_seq_length=16))
    assert whole.student_layers is None
