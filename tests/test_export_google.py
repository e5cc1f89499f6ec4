"""`bert export-google`: google-research/bert's TF1 checkpoint from any checkpoint.

The expected variable names are written here from google-research/bert's own
source (modeling.py's variable scopes and run_pretraining.py's heads), not from
this project's name mapping, and compared with what
`tf.compat.v1.train.list_variables` finds in the written file; the files are
then loaded the way google's scripts load them (`init_from_checkpoint` with
`get_assignment_map_from_checkpoint`'s name → name map) and read back here.
Fine-tuned runs bring their heads under the names google's run_classifier.py
and run_squad.py create, and google's classifier computation on the written
file gives the run's own probabilities.
"""

from __future__ import annotations

import json
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import save_file

from support import REPO_ROOT, processes
from official_bert import checkpoints
from official_bert.commands.export_google import ExportGoogleConfig
from official_bert.errors import UserError
from official_bert.google_export import export
from official_bert.modeling.configs import BertConfig
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from test_run_classifier import trained  # noqa: F401  (a fixture: a fine-tuned classifier run)

V, H, L, A, I, P, T = 64, 16, 2, 4, 32, 32, 2  # vocab, hidden, layers, heads, intermediate, positions, types


def google_variables(num_layers, vocab=V, hidden=H, intermediate=I, positions=P, types=T):
    """name → shape of the variables google-research/bert creates, from its source.

    modeling.py: `BertModel.__init__` opens scope "bert" (`default_name="bert"`),
    then "embeddings" (`embedding_lookup`: `word_embeddings` [vocab, hidden];
    `embedding_postprocessor`: `token_type_embeddings` [type_vocab, width],
    `position_embeddings` [max_position, width], `layer_norm` → LayerNorm/beta,
    gamma), "encoder" (`transformer_model`: scope "layer_%d", in it "attention"
    → "self" → `tf.layers.dense` named query/key/value, and "output" → dense +
    LayerNorm; "intermediate" → dense [hidden, intermediate]; "output" → dense
    [intermediate, hidden] + LayerNorm), and "pooler" → dense [hidden, hidden].
    run_pretraining.py: `get_masked_lm_output` opens "cls/predictions" →
    "transform" (dense + LayerNorm) and `output_bias` [vocab];
    `get_next_sentence_output` opens "cls/seq_relationship": `output_weights`
    [2, hidden], `output_bias` [2].
    """
    names = {
        "bert/embeddings/word_embeddings": [vocab, hidden],
        "bert/embeddings/token_type_embeddings": [types, hidden],
        "bert/embeddings/position_embeddings": [positions, hidden],
        "bert/embeddings/LayerNorm/beta": [hidden],
        "bert/embeddings/LayerNorm/gamma": [hidden],
        "bert/pooler/dense/kernel": [hidden, hidden],
        "bert/pooler/dense/bias": [hidden],
    }
    for i in range(num_layers):
        layer = f"bert/encoder/layer_{i}"
        for dense in ("query", "key", "value"):
            names[f"{layer}/attention/self/{dense}/kernel"] = [hidden, hidden]
            names[f"{layer}/attention/self/{dense}/bias"] = [hidden]
        names[f"{layer}/attention/output/dense/kernel"] = [hidden, hidden]
        names[f"{layer}/attention/output/dense/bias"] = [hidden]
        names[f"{layer}/attention/output/LayerNorm/beta"] = [hidden]
        names[f"{layer}/attention/output/LayerNorm/gamma"] = [hidden]
        names[f"{layer}/intermediate/dense/kernel"] = [hidden, intermediate]
        names[f"{layer}/intermediate/dense/bias"] = [intermediate]
        names[f"{layer}/output/dense/kernel"] = [intermediate, hidden]
        names[f"{layer}/output/dense/bias"] = [hidden]
        names[f"{layer}/output/LayerNorm/beta"] = [hidden]
        names[f"{layer}/output/LayerNorm/gamma"] = [hidden]
    return names


def google_pretraining_heads(vocab=V, hidden=H):
    """run_pretraining.py's head variables (see `google_variables`)."""
    return {
        "cls/predictions/transform/dense/kernel": [hidden, hidden],
        "cls/predictions/transform/dense/bias": [hidden],
        "cls/predictions/transform/LayerNorm/beta": [hidden],
        "cls/predictions/transform/LayerNorm/gamma": [hidden],
        "cls/predictions/output_bias": [vocab],
        "cls/seq_relationship/output_weights": [2, hidden],
        "cls/seq_relationship/output_bias": [2],
    }


def _write_vocab(path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"tok{i}" for i in range(V - 5)]
    path.write_text("\n".join(tokens) + "\n")


def _hf_pretraining_dir(directory, seed=0):
    """A Hugging Face `BertForPreTraining` directory (HF's names and [out, in]
    layout, exact GELU as HF's "gelu"), random weights."""
    rng = np.random.default_rng(seed)
    shapes = {
        "bert.embeddings.word_embeddings.weight": (V, H),
        "bert.embeddings.position_embeddings.weight": (P, H),
        "bert.embeddings.token_type_embeddings.weight": (T, H),
        "bert.embeddings.LayerNorm.weight": (H,), "bert.embeddings.LayerNorm.bias": (H,),
        "bert.pooler.dense.weight": (H, H), "bert.pooler.dense.bias": (H,),
        "cls.predictions.transform.dense.weight": (H, H),
        "cls.predictions.transform.dense.bias": (H,),
        "cls.predictions.transform.LayerNorm.weight": (H,),
        "cls.predictions.transform.LayerNorm.bias": (H,),
        "cls.predictions.bias": (V,),
        "cls.seq_relationship.weight": (2, H), "cls.seq_relationship.bias": (2,),
    }
    for i in range(L):
        p = f"bert.encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):
            shapes[p + name + ".weight"], shapes[p + name + ".bias"] = (H, H), (H,)
        shapes[p + "intermediate.dense.weight"], shapes[p + "intermediate.dense.bias"] = (I, H), (I,)
        shapes[p + "output.dense.weight"], shapes[p + "output.dense.bias"] = (H, I), (H,)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + name + ".weight"], shapes[p + name + ".bias"] = (H,), (H,)
    tensors = {n: rng.normal(0, 0.3, s).astype("float32") for n, s in shapes.items()}
    directory.mkdir()
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps({
        "model_type": "bert", "architectures": ["BertForPreTraining"], "vocab_size": V,
        "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": A,
        "intermediate_size": I, "max_position_embeddings": P, "type_vocab_size": T,
        "hidden_act": "gelu"}))
    _write_vocab(directory / "vocab.txt")
    return directory


def _inputs(seed=1, batch=3, length=12):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), "int32")
    mask[1, 7:] = 0
    return {"input_word_ids": rng.integers(1, V, (batch, length)).astype("int32"),
            "input_mask": mask, "input_type_ids": (np.arange(length) >= 5).astype("int32")
            * np.ones((batch, 1), "int32")}


def _outputs(encoder, inputs):
    out = encoder(inputs, training=False)
    return {k: np.asarray(out[k]) for k in ("sequence_output", "pooled_output")}


def test_names_shapes_and_googles_load(tmp_path):
    source = _hf_pretraining_dir(tmp_path / "hf")
    prefix = export(ExportGoogleConfig(init_checkpoint=str(source),
                                       output_dir=str(tmp_path / "google"),
                                       exact_gelu_as="gelu_exact")).prefix
    assert prefix == str(tmp_path / "google" / "bert_model.ckpt")
    assert sorted(p.name for p in (tmp_path / "google").iterdir()) == [
        ".official_bert.outputs.json", "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "vocab.txt"]
    # Every variable name and shape is google's, nothing more (no slots, no step).
    found = dict(tf.compat.v1.train.list_variables(prefix))
    assert found == {**google_variables(L), **google_pretraining_heads()}
    reader = tf.compat.v1.train.load_checkpoint(prefix)
    assert all(reader.get_variable_to_dtype_map()[n] == tf.float32 for n in found)
    # The values: google's layout is HF's transposed for every dense kernel.
    from safetensors.numpy import load_file

    hf = load_file(str(source / "model.safetensors"))
    np.testing.assert_array_equal(reader.get_tensor("bert/encoder/layer_1/intermediate/dense/kernel"),
                                  hf["bert.encoder.layer.1.intermediate.dense.weight"].T)
    np.testing.assert_array_equal(reader.get_tensor("cls/seq_relationship/output_weights"),
                                  hf["cls.seq_relationship.weight"])
    np.testing.assert_array_equal(reader.get_tensor("cls/predictions/output_bias"),
                                  hf["cls.predictions.bias"])
    # google's scripts: variables of google's names in a TF1 graph, then
    # tf.train.init_from_checkpoint(init_checkpoint, {name: name}).
    with tf.Graph().as_default():
        variables = {n: tf.compat.v1.get_variable(n, shape=s, dtype=tf.float32)
                     for n, s in found.items()}
        tf.compat.v1.train.init_from_checkpoint(prefix, {n: n for n in found})
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            loaded = session.run(variables)
    for name in found:
        np.testing.assert_array_equal(loaded[name], reader.get_tensor(name), err_msg=name)
    config = json.loads((tmp_path / "google" / "bert_config.json").read_text())
    assert config["hidden_act"] == "gelu_exact"
    assert {k: config[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                                   "num_attention_heads", "intermediate_size",
                                   "max_position_embeddings", "type_vocab_size")} == {
        "vocab_size": V, "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": A,
        "intermediate_size": I, "max_position_embeddings": P, "type_vocab_size": T}


@pytest.mark.parametrize("kind", ["huggingface", "official_bert"])
def test_round_trip_is_bit_exact(tmp_path, kind):
    """ours → google's files → ours: every weight (heads too) and the outputs."""
    if kind == "huggingface":
        source, exact_gelu_as = _hf_pretraining_dir(tmp_path / "hf"), "gelu_exact"
    else:  # a tanh-GELU encoder in this project's own checkpoint format
        keras.utils.set_random_seed(5)
        config = BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L,
                            num_attention_heads=A, intermediate_size=I,
                            max_position_embeddings=P, hidden_act="gelu_tanh")
        encoder = BertEncoder.from_bert_config(config)
        encoder(dummy_inputs())
        _write_vocab(tmp_path / "vocab.txt")
        checkpoints.save_checkpoint(encoder, str(tmp_path / "own"), str(tmp_path / "vocab.txt"))
        source, exact_gelu_as = tmp_path / "own", "refuse"
    before = checkpoints.read_checkpoint(str(source))
    prefix = export(ExportGoogleConfig(init_checkpoint=str(source),
                                       output_dir=str(tmp_path / "google"),
                                       exact_gelu_as=exact_gelu_as)).prefix
    after = checkpoints.read_checkpoint(prefix)
    assert after.kind == checkpoints.GOOGLE_TF1
    assert after.config == before.config
    assert sorted(after.weights) == sorted(before.weights)
    for name, value in before.weights.items():
        assert after.weights[name].dtype == np.float32
        np.testing.assert_array_equal(after.weights[name], value, err_msg=name)
    assert (tmp_path / "google" / "vocab.txt").read_bytes() == open(before.vocab_file, "rb").read()
    original, _ = checkpoints.load_encoder(str(source))
    reloaded, _ = checkpoints.load_encoder(prefix)
    inputs = _inputs()
    for key, value in _outputs(original, inputs).items():
        np.testing.assert_array_equal(_outputs(reloaded, inputs)[key], value, err_msg=key)
    if kind == "official_bert":  # google's "gelu" is what a tanh-GELU model is written as
        assert json.loads((tmp_path / "google" / "bert_config.json").read_text())[
            "hidden_act"] == "gelu"


def test_minilm_round_trip(minilm_dir, tmp_path):
    """The real all-MiniLM-L6-v2: 101 variables of google's names, bit-exact back."""
    prefix = export(ExportGoogleConfig(init_checkpoint=str(minilm_dir),
                                       output_dir=str(tmp_path / "google"),
                                       exact_gelu_as="gelu_exact")).prefix
    assert dict(tf.compat.v1.train.list_variables(prefix)) == google_variables(
        6, vocab=30522, hidden=384, intermediate=1536, positions=512)
    original, before = checkpoints.load_encoder(str(minilm_dir))
    reloaded, after = checkpoints.load_encoder(prefix)
    assert after.config == before.config and after.config.hidden_act == "gelu"
    assert sorted(after.weights) == sorted(before.weights)
    for name, value in before.weights.items():
        np.testing.assert_array_equal(after.weights[name], value, err_msg=name)
    inputs = {"input_word_ids": np.array([[101, 7592, 2088, 1029, 102, 0]], "int32"),
              "input_mask": np.array([[1, 1, 1, 1, 1, 0]], "int32"),
              "input_type_ids": np.zeros((1, 6), "int32")}
    for key, value in _outputs(original, inputs).items():
        np.testing.assert_array_equal(_outputs(reloaded, inputs)[key], value, err_msg=key)


def test_exact_gelu_refused_or_written_as_asked(tmp_path):
    source = _hf_pretraining_dir(tmp_path / "hf")
    with pytest.raises(UserError, match="exact \\(erf\\) GELU.*--exact_gelu_as=tanh"):
        export(ExportGoogleConfig(init_checkpoint=str(source), output_dir=str(tmp_path / "g")))
    assert not (tmp_path / "g").exists()
    prefix = export(ExportGoogleConfig(init_checkpoint=str(source),
                                       output_dir=str(tmp_path / "g"),
                                       exact_gelu_as="tanh")).prefix
    assert json.loads((tmp_path / "g" / "bert_config.json").read_text())["hidden_act"] == "gelu"
    # Read back as google's code reads it: the tanh GELU, the same weights.
    assert checkpoints.read_checkpoint(prefix).config.hidden_act == "gelu_tanh"


def test_command_line(tmp_path):
    """`bert export-google`: one error line for bad input, nothing left; then the export."""
    source = _hf_pretraining_dir(tmp_path / "hf")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")

    def bert(*args):
        return processes.run([sys.executable, "-m", "official_bert.commands.cli", "export-google",
                               *args], capture_output=True, text=True, cwd=REPO_ROOT)

    refused = bert(f"--init_checkpoint={source}", f"--output_dir={tmp_path / 'busy'}")
    assert refused.returncode == 1, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not empty" in errors[0], refused.stderr
    assert "Traceback" not in refused.stderr
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["keep.txt"]
    done = bert(f"--init_checkpoint={source}", f"--output_dir={tmp_path / 'out'}",
                "--exact_gelu_as=tanh")
    assert done.returncode == 0, done.stderr
    said = (done.stdout + done.stderr).count("sequence_output moves by up to")
    assert said == 1 and "sequence_output moves by up to" in done.stderr, done.stderr
    assert f"checkpoint\t{tmp_path / 'out' / 'bert_model.ckpt'}" in done.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left
    # Two exports into one new directory at once: one output, one line (issue 44).
    racers = [processes.start([sys.executable, "-m", "official_bert.commands.cli",
                               "export-google", f"--init_checkpoint={source}",
                               f"--output_dir={tmp_path / 'race'}", "--exact_gelu_as=tanh"],
                              cwd=REPO_ROOT) for _ in range(2)]
    ended = sorted((racer.wait(300), racer.communicate()[1]) for racer in racers)
    assert [code for code, _ in ended] == [0, 1], ended
    lost = ended[1][1].decode() if isinstance(ended[1][1], bytes) else ended[1][1]
    assert "Traceback" not in lost and len(
        [line for line in lost.splitlines() if line.startswith("error:")]) == 1, lost
    assert (tmp_path / "race" / "bert_model.ckpt.index").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    # Its own earlier export is replaced by a rerun, as google's scripts are re-run.
    again = bert(f"--init_checkpoint={source}", f"--output_dir={tmp_path / 'out'}",
                 "--exact_gelu_as=tanh")
    assert again.returncode == 0, again.stderr


def test_cloud_path_output(tmp_path):
    """gs:// goes through tf.io.gfile; TensorFlow's ram:// file system stands in for it."""
    source = _hf_pretraining_dir(tmp_path / "hf")
    output = f"ram://export_google/{tmp_path.name}/out"
    prefix = export(ExportGoogleConfig(init_checkpoint=str(source), output_dir=output,
                                       exact_gelu_as="gelu_exact")).prefix
    assert sorted(tf.io.gfile.listdir(output)) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "vocab.txt"]
    before, after = checkpoints.read_checkpoint(str(source)), checkpoints.read_checkpoint(prefix)
    for name, value in before.weights.items():
        np.testing.assert_array_equal(after.weights[name], value, err_msg=name)


# === Fine-tuned heads: run_classifier.py's and run_squad.py's names ===


def _exported_run(run_dir, output_dir):
    """`bert export-google` of a run directory; (prefix, name → shape, the reader)."""
    prefix = export(ExportGoogleConfig(init_checkpoint=str(run_dir), output_dir=str(output_dir),
                                       exact_gelu_as="gelu_exact")).prefix
    return (prefix, dict(tf.compat.v1.train.list_variables(prefix)),
            tf.compat.v1.train.load_checkpoint(prefix))


def _same_weights_back(run_dir, prefix):
    before, after = checkpoints.read_checkpoint(str(run_dir)), checkpoints.read_checkpoint(prefix)
    assert after.kind == checkpoints.GOOGLE_TF1 and sorted(after.weights) == sorted(before.weights)
    for name, value in before.weights.items():
        np.testing.assert_array_equal(after.weights[name], value, err_msg=name)


def test_a_fine_tuned_classifier_exports_run_classifiers_head(trained, tmp_path):  # noqa: F811
    """google's run_classifier.py `create_model`: `output_weights` [num_labels, H],
    `output_bias` [num_labels], logits = pooled_output · output_weightsᵀ + output_bias.
    Computed that way from the written file, the probabilities are the run's own
    test_results.tsv."""
    from official_bert.text import tokenization
    from test_run_classifier import DEV, VOCAB

    prefix, found, reader = _exported_run(trained["out"], tmp_path / "google")
    assert found == {**google_variables(2, vocab=len(VOCAB)), "output_weights": [2, H],
                     "output_bias": [2]}
    _same_weights_back(trained["out"], prefix)
    encoder, _ = checkpoints.load_encoder(prefix)
    tokenizer = tokenization.FullTokenizer(str(tmp_path / "google" / "vocab.txt"))
    packed = [tokenization.pack_tokens(tokenizer.tokenize(text), None, 16) for text in DEV]
    pooled = encoder({"input_word_ids": np.array([tokenizer.convert_tokens_to_ids(tokens)
                                                  for tokens, _, _ in packed], "int32"),
                      "input_mask": np.array([mask for _, mask, _ in packed], "int32"),
                      "input_type_ids": np.array([types for _, _, types in packed], "int32")},
                     training=False)["pooled_output"].numpy()
    logits = pooled @ reader.get_tensor("output_weights").T + reader.get_tensor("output_bias")
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probabilities,
                               np.loadtxt(trained["out"] / "test_results.tsv", delimiter="\t"),
                               atol=1e-5)


@pytest.mark.slow  # its fixture, a SQuAD run, takes 25 s here
def test_a_fine_tuned_squad_run_exports_run_squads_head(squad_run, tmp_path):
    """google's run_squad.py `create_model`: `cls/squad/output_weights` [2, H] and
    `cls/squad/output_bias` [2] beside the encoder, read back bit-exactly."""
    from test_run_squad import VOCAB

    prefix, found, _ = _exported_run(squad_run["out"], tmp_path / "google")
    assert found == {**google_variables(1, vocab=len(VOCAB), positions=64),
                     "cls/squad/output_weights": [2, H], "cls/squad/output_bias": [2]}
    _same_weights_back(squad_run["out"], prefix)
