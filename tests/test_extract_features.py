import json
import os
import sys

import numpy as np
import pytest

from support import REPO_ROOT, processes

SCRIPT = str(REPO_ROOT / "extract_features.py")


def _run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return processes.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                         env=env, timeout=600)


def _detokenize(pieces):
    return " ".join(pieces).replace(" ##", "")


def _input_line(example):
    if example["text_b"] is None:
        return example["text_a"].strip()
    tokens = example["tokens"]
    if len(tokens) < 64:
        return f"{example['text_a'].strip()} ||| {example['text_b'].strip()}"
    # Truncated pair: the reference (Hugging Face's fast tokenizer) pops from
    # A when both segments are equally long, google-research/bert (and this
    # project) from B. Feed the reference's truncated segments as text.
    sep = tokens.index("[SEP]")
    return f"{_detokenize(tokens[1:sep])} ||| {_detokenize(tokens[sep + 1:-1])}"


@pytest.mark.slow  # 7 s or more here
def test_matches_reference_through_the_script(minilm_dir, parity_fixture, tmp_path):
    examples = parity_fixture["examples"]
    lines = [_input_line(e) for e in examples]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    proc = _run(f"--input_file={tmp_path / 'in.txt'}", f"--output_file={out}",
                f"--init_checkpoint={minilm_dir}", "--layers=-1,-6", "--max_seq_length=64",
                "--batch_size=5")
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["linex_index"] for r in records] == list(range(len(examples)))
    worst = 0.0
    for record, example in zip(records, examples):
        assert [f["token"] for f in record["features"]] == example["tokens"]
        assert [f["layers"][0]["index"] for f in record["features"]] == [-1] * len(example["tokens"])
        got = np.array([f["layers"][0]["values"] for f in record["features"]])
        worst = max(worst, np.abs(got - np.array(example["last_hidden_state"])).max())
    assert worst <= 1e-4, worst


def test_pooling_and_layers(minilm_dir, minilm_encoder, tmp_path):
    (tmp_path / "in.txt").write_text("A short sentence.\nQuestion? ||| Answer.\n")
    out = tmp_path / "out.jsonl"
    proc = _run(f"--input_file={tmp_path / 'in.txt'}", f"--output_file={out}",
                f"--init_checkpoint={minilm_dir}", "--layers=-1", "--pooling=mean")
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["pooling"] == "mean" and len(records[0]["layers"][0]["values"]) == 384
    # Known answer: the mean of the encoder's token vectors for the same ids.
    from official_bert.text import tokenization
    tokenizer = tokenization.FullTokenizer(str(minilm_dir / "vocab.txt"), True)
    ids, mask, types = tokenizer.encode("Question?", "Answer.", 16)
    out_vecs = minilm_encoder({"input_word_ids": np.array([ids]), "input_mask": np.array([mask]),
                               "input_type_ids": np.array([types])}, training=False)
    expected = np.asarray(out_vecs["sequence_output"])[0, :sum(mask)].mean(axis=0)
    np.testing.assert_allclose(records[1]["layers"][0]["values"], expected, atol=2e-6)


def test_bad_inputs_are_one_line_errors(minilm_dir, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nsecond \xff\xfe line\n")
    out = tmp_path / "out.jsonl"
    proc = _run(f"--input_file={bad}", f"--output_file={out}", f"--init_checkpoint={minilm_dir}")
    assert proc.returncode == 1
    assert "error: " in proc.stderr and "line 2 is not UTF-8" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()

    proc = _run(f"--input_file={bad}", f"--output_file={out}", f"--init_checkpoint={tmp_path / 'nope'}")
    assert proc.returncode == 1 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr

    proc = _run(f"--input_file={bad}", f"--output_file={out}", f"--init_checkpoint={minilm_dir}",
                f"--vocab_file={tmp_path / 'missing-vocab.txt'}")
    assert proc.returncode == 1 and "missing-vocab.txt" in proc.stderr and "Traceback" not in proc.stderr

    proc = _run(f"--input_file={bad}", f"--output_file={out}", f"--init_checkpoint={minilm_dir}",
                "--layers=-7")
    assert proc.returncode == 1 and "out of range" in proc.stderr
