"""`bert embed`: sentence embeddings to .npy / .jsonl, and the embedding SavedModel.

The real check: all-MiniLM-L6-v2's mean-pooled, L2-normalized embeddings,
from the command's .npy and from the SavedModel on raw text, against
sentence-transformers' recipe computed with transformers and torch
(`tests/reference/minilm_sentence_embeddings.json`, written by
`tools/parity/minilm_sentence_embeddings.py`), to 1e-5.
"""

from __future__ import annotations

import json
import pathlib
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from support import REPO_ROOT, processes, tiny_config
from official_bert import checkpoints
from official_bert.errors import BadFileError, UserError
from official_bert.modeling.encoder import BertEncoder, dummy_inputs
from official_bert.modeling.pooling import sentence_embedding
from official_bert.tasks import embeddings
from official_bert.tasks.embeddings import EmbedConfig

REFERENCE = pathlib.Path(__file__).parent / "reference" / "minilm_sentence_embeddings.json"
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "quickly", "home"]


def _write_texts(path, texts):
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return path


@pytest.mark.slow  # 10 s or more here
def test_minilm_matches_sentence_transformers(minilm_dir, tmp_path):
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    expected = np.asarray(reference["embeddings"], np.float32)
    texts = _write_texts(tmp_path / "texts.txt", reference["texts"])
    written = embeddings.run(EmbedConfig(
        input_file=str(texts), output_file=str(tmp_path / "vectors.npy"),
        export_dir=str(tmp_path / "export"), export_version=1, init_checkpoint=str(minilm_dir),
        max_seq_length=reference["max_seq_length"], batch_size=4))
    vectors = np.load(tmp_path / "vectors.npy")
    assert vectors.dtype == np.float32 and vectors.shape == (len(reference["texts"]), 384)
    assert np.abs(vectors - expected).max() <= 1e-5
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)

    import tensorflow_text  # noqa: F401  (the tokenizer's ops, as a server has them)

    loaded = tf.saved_model.load(written["serving"])
    served = loaded.signatures["serving_default"](text=tf.constant(reference["texts"]))
    assert np.abs(served["embedding"].numpy() - expected).max() <= 1e-5
    assert served["num_tokens"].numpy().tolist() == reference["num_tokens"]  # 256: cut as theirs
    metadata = loaded.metadata()
    assert metadata["pooling"].numpy() == b"mean" and bool(metadata["normalize"].numpy())


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny checkpoint of this project's format with a word vocabulary."""
    root = tmp_path_factory.mktemp("tiny_embed")
    keras.utils.set_random_seed(11)
    encoder = BertEncoder.from_bert_config(tiny_config())
    encoder(dummy_inputs())
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    vocab += [f"unused{i}" for i in range(64 - len(vocab))]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    checkpoints.save_checkpoint(encoder, str(root / "model"), str(root / "vocab.txt"))
    return root / "model", encoder


def _texts(n, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(0, 20))) for _ in range(n)]


def test_sentence_embedding_known_answer():
    hidden = tf.constant([[[1.0, 2.0], [3.0, 6.0], [100.0, 100.0]],
                          [[5.0, 0.0], [9.0, 9.0], [9.0, 9.0]],
                          [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]])
    mask = tf.constant([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    mean = sentence_embedding(hidden, mask, "mean", normalize=False).numpy()
    np.testing.assert_allclose(mean, [[2.0, 4.0], [5.0, 0.0], [0.0, 0.0]])
    unit = sentence_embedding(hidden, mask, "mean").numpy()
    np.testing.assert_allclose(unit, [[1 / 5 ** 0.5, 2 / 5 ** 0.5], [1.0, 0.0], [0.0, 0.0]],
                               rtol=1e-6)
    np.testing.assert_allclose(sentence_embedding(hidden, mask, "cls", False).numpy(),
                               [[1.0, 2.0], [5.0, 0.0], [1.0, 1.0]])


def test_streaming_order_and_formats(tiny_model, tmp_path, monkeypatch):
    """Sorted, chunked batches give each text the vector it has alone, in input order;
    .jsonl holds the same numbers; chunks bound the memory."""
    model_dir, encoder = tiny_model
    texts = _texts(37)
    _write_texts(tmp_path / "in.txt", texts)
    monkeypatch.setattr(embeddings, "CHUNK_BATCHES", 2)
    chunk_sizes = []
    original = embeddings.embed_texts

    def recording(encoder, tokenizer, chunk, *args, **kwargs):
        chunk_sizes.append(len(chunk))
        return original(encoder, tokenizer, chunk, *args, **kwargs)

    monkeypatch.setattr(embeddings, "embed_texts", recording)
    for name in ("out.npy", "out.jsonl"):
        embeddings.run(EmbedConfig(input_file=str(tmp_path / "in.txt"),
                                   output_file=str(tmp_path / name),
                                   init_checkpoint=str(model_dir), max_seq_length=16,
                                   batch_size=3, pooling="cls", normalize=False))
    assert chunk_sizes == [6] * 6 + [1] + [6] * 6 + [1]
    vectors = np.load(tmp_path / "out.npy")
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["index"] for r in rows] == list(range(37))
    np.testing.assert_allclose([r["embedding"] for r in rows], vectors, rtol=1e-7, atol=1e-7)
    # Each text alone, padded to max_seq_length: the [CLS] vector of the encoder.
    from official_bert.text.tokenization import FullTokenizer

    tokenizer = FullTokenizer(str(model_dir / "vocab.txt"), do_lower_case=True)
    for i in (0, 5, 36):
        ids, mask, types = tokenizer.encode(texts[i], max_seq_length=16)
        alone = encoder({"input_word_ids": np.array([ids], "int32"),
                         "input_mask": np.array([mask], "int32"),
                         "input_type_ids": np.array([types], "int32")}, training=False)
        np.testing.assert_allclose(vectors[i], np.asarray(alone["sequence_output"])[0, 0],
                                   atol=1e-5)


def test_refusals_leave_nothing(tiny_model, tmp_path):
    model_dir, _ = tiny_model
    good = _write_texts(tmp_path / "in.txt", ["the cat", "a dog"])
    (tmp_path / "taken.npy").write_bytes(b"someone's")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"the cat\na dog\nsat \xff on\n")

    def run(**kwargs):
        values = dict(input_file=str(good), output_file=str(tmp_path / "out.npy"),
                      init_checkpoint=str(model_dir), max_seq_length=16)
        values.update(kwargs)
        return embeddings.run(EmbedConfig(**values))

    with pytest.raises(UserError, match=r"--output_file .*taken.npy exists .*--overwrite"):
        run(output_file=str(tmp_path / "taken.npy"))
    assert (tmp_path / "taken.npy").read_bytes() == b"someone's"
    with pytest.raises(UserError, match=r"end it with \.npy or \.jsonl"):
        run(output_file=str(tmp_path / "out.csv"))
    with pytest.raises(UserError, match="own.jsonl exists"):  # its own input
        own = _write_texts(tmp_path / "own.jsonl", ["a text in a file named .jsonl"])
        run(output_file=str(own), input_file=str(own))
    with pytest.raises(UserError, match="--export_dir is --init_checkpoint"):
        run(output_file=None, input_file=None, export_dir=str(model_dir))
    with pytest.raises(BadFileError, match=r"bad.txt line 3 is not UTF-8"):
        run(input_file=str(bad))
    with pytest.raises(BadFileError, match="is empty"):
        run(input_file=str(_write_texts(tmp_path / "empty.txt", [])))
    with pytest.raises(UserError, match="--pooling='max'"):
        run(pooling="max")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.txt", "empty.txt", "in.txt", "own.jsonl", "taken.npy"]


def test_command_line_one_error_line(tiny_model, tmp_path):
    model_dir, _ = tiny_model
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"the cat\n\xc3\x28 broken\n")
    result = processes.run(
        [sys.executable, "-m", "official_bert.commands.cli", "embed", f"--init_checkpoint={model_dir}",
         f"--input_file={bad}", f"--output_file={tmp_path / 'out.npy'}",
         "--max_seq_length=16"],
        capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "bad.txt line 2 is not UTF-8" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


def test_standard_input_is_embedded_as_the_same_file(tiny_model, tmp_path):
    """Once refused as "changed while being read" (it is read twice: counted, then
    embedded); the input policy spools it, as extract-features' and pre-training's."""
    model_dir, _ = tiny_model
    texts = _texts(5, seed=2)
    _write_texts(tmp_path / "in.txt", texts)
    outputs = {}
    for name, stdin in (("-", "".join(t + "\n" for t in texts)), (str(tmp_path / "in.txt"), "")):
        out = tmp_path / f"out{len(outputs)}.npy"
        result = processes.run(
            [sys.executable, "-m", "official_bert.commands.cli", "embed",
             f"--init_checkpoint={model_dir}", f"--input_file={name}", f"--output_file={out}",
             "--max_seq_length=16"], input=stdin, capture_output=True, text=True, cwd=REPO_ROOT)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs[name] = np.load(out)
    assert np.array_equal(*outputs.values()) and len(outputs["-"]) == len(texts)


def test_cloud_paths(tiny_model, tmp_path):
    """gs:// goes through tf.io.gfile; TensorFlow's ram:// file system stands in for it."""
    import io as pyio

    model_dir, _ = tiny_model
    root = f"ram://embed/{tmp_path.name}"
    texts = _texts(9, seed=3)
    with tf.io.gfile.GFile(f"{root}/in.txt", "w") as f:
        f.write("".join(t + "\n" for t in texts))
    _write_texts(tmp_path / "in.txt", texts)
    for base in (root, str(tmp_path)):
        embeddings.run(EmbedConfig(input_file=f"{base}/in.txt", output_file=f"{base}/out.npy",
                                   init_checkpoint=str(model_dir), max_seq_length=16))
    with tf.io.gfile.GFile(f"{root}/out.npy", "rb") as f:
        remote = np.load(pyio.BytesIO(f.read()))
    np.testing.assert_array_equal(remote, np.load(tmp_path / "out.npy"))
    assert remote.shape == (9, 16)


@pytest.mark.slow  # (minutes of CI: its runs; `pytest -m slow`)
def test_savedmodel_in_a_tf1_session_as_tf_serving(tiny_model, tmp_path):
    """TF Serving loads a SavedModel into a TF1 session: the raw-text signature
    answers there as `bert embed` writes, and refuses a request over max_batch_size."""
    import tensorflow_text  # noqa: F401  (the tokenizer's ops, which TF Serving links)

    model_dir, _ = tiny_model
    texts = _texts(5, seed=4)
    _write_texts(tmp_path / "in.txt", texts)
    written = embeddings.run(EmbedConfig(
        input_file=str(tmp_path / "in.txt"), output_file=str(tmp_path / "out.npy"),
        export_dir=str(tmp_path / "export"), max_batch_size=4,
        init_checkpoint=str(model_dir), max_seq_length=16))
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == [
        pathlib.Path(written["serving"]).name]  # one version, no staging left
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], written["serving"])
        signature = meta.signature_def["serving_default"]
        feed = signature.inputs["text"].name
        fetch = signature.outputs["embedding"].name
        served = session.run(fetch, {feed: texts[:4]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="max_batch_size"):
            session.run(fetch, {feed: texts})
    np.testing.assert_allclose(served, np.load(tmp_path / "out.npy")[:4], atol=1e-6)


@pytest.mark.slow  # 8 s or more here
def test_serving_dtype_bfloat16_through_the_command(tiny_model, tmp_path):
    """`bert embed --serving_dtype=bfloat16` (the shared export flags): the
    export's weights are bfloat16 and its vectors those of the float32 .npy
    within bfloat16's precision; without --export_dir the flag is refused."""
    import tensorflow_text  # noqa: F401  (the export's text ops)

    model_dir, _ = tiny_model
    texts = _texts(4, seed=5)
    _write_texts(tmp_path / "in.txt", texts)
    command = [sys.executable, "-m", "official_bert.commands.cli", "embed",
               f"--init_checkpoint={model_dir}", "--max_seq_length=16",
               "--serving_dtype=bfloat16"]
    refused = processes.run(command + [f"--input_file={tmp_path / 'in.txt'}",
                                       f"--output_file={tmp_path / 'refused.npy'}"],
                            capture_output=True, text=True, cwd=REPO_ROOT)
    assert refused.returncode == 1 and "--serving_dtype" in refused.stderr.splitlines()[-1]
    result = processes.run(command + [f"--input_file={tmp_path / 'in.txt'}",
                                      f"--output_file={tmp_path / 'out.npy'}",
                                      f"--export_dir={tmp_path / 'export'}",
                                      "--export_version=1"],
                           capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = tf.saved_model.load(str(tmp_path / "export" / "1"))
    signature = loaded.signatures["serving_default"]
    kernels = [v.dtype for v in signature.variables if v.name.split(":")[0].endswith("kernel")]
    assert kernels and set(kernels) == {tf.bfloat16}
    served = signature(text=tf.constant(texts))["embedding"]
    assert served.dtype == tf.float32
    np.testing.assert_allclose(served.numpy(), np.load(tmp_path / "out.npy"), atol=3e-2)
