"""data_prep/glue.py: every GLUE layout and the custom CSV/TSV/JSON-lines reader on tiny files,
the errors for bad files, label mapping, feature conversion (ids as FullTokenizer), the
TFRecord feature cache, and the real GLUE files of ../shared when present."""

import json

import numpy as np
import pytest

from data_prep import glue, glue_features
from official_bert.text import tokenization

VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a man woman dog walk ##s ##ed is in park city "
         "good bad movie very . , ! ? he she it was").split()


@pytest.fixture()
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return str(path)


def write(path, lines, bom=False):
    path.write_text(("\ufeff" if bom else "") + "\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


# One tiny file per GLUE layout: (task, train/dev lines, expected (a, b, label) of row 1,
# test lines, expected text_a of test row 1).
LAYOUTS = [
    ("cola", ["gj04\t1\t\tThe dog walked .", "gj04\t0\t*\tDog the walked ."],
     ("The dog walked .", None, "1"), ["index\tsentence", "0\tThe dog ."], "The dog ."),
    ("sst-2", ["sentence\tlabel", "a very good movie \t1", "bad \t0"],
     ("a very good movie ", None, "1"), ["index\tsentence", "0\tgood movie"], "good movie"),
    ("mrpc", ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
              '1\t11\t12\tHe said "good" .\t"It was good .'],
     ('He said "good" .', '"It was good .', "1"),
     ["index\t#1 ID\t#2 ID\t#1 String\t#2 String", "0\t1\t2\tHe walks .\tShe walks ."],
     "He walks ."),
    ("sts-b", ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
               "0\tmain\tMSRvid\t2012\t0001\tnone\tnone\tA man walks .\tThe man walks .\t4.750"],
     ("A man walks .", "The man walks .", 4.75),
     ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2",
      "0\tmain\tMSRvid\t2012\t0001\tnone\tnone\tA dog .\tThe dog ."], "A dog ."),
    ("qqp", ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
             "7\t1\t2\tIs it good ?\tIs it bad ?\t0"],
     ("Is it good ?", "Is it bad ?", "0"),
     ["id\tquestion1\tquestion2", "0\tIs he ?\tIs she ?"], "Is he ?"),
    ("mnli", ["index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
              "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tgold_label",
              "0\t1\t1n\tfiction\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tThe man walks .\tA man is "
              "in the park .\tneutral\tneutral\tneutral"],
     ("The man walks .", "A man is in the park .", "neutral"),
     ["index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
      "sentence1_parse\tsentence2_parse\tsentence1\tsentence2",
      "0\t1\t1n\tfiction\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tShe walks .\tShe is ."], "She walks ."),
    ("qnli", ["index\tquestion\tsentence\tlabel", "0\tWho walks ?\tThe man walks .\tentailment"],
     ("Who walks ?", "The man walks .", "entailment"),
     ["index\tquestion\tsentence", "0\tWho ?\tHe ."], "Who ?"),
    ("rte", ["index\tsentence1\tsentence2\tlabel", "0\tThe dog walked .\tIt was bad .\tnot_entailment"],
     ("The dog walked .", "It was bad .", "not_entailment"),
     ["index\tsentence1\tsentence2", "0\tA .\tB ."], "A ."),
    ("wnli", ["index\tsentence1\tsentence2\tlabel", "0\tThe dog walked . It was good .\tThe dog was good .\t1"],
     ("The dog walked . It was good .", "The dog was good .", "1"),
     ["index\tsentence1\tsentence2", "0\tA .\tB ."], "A ."),
]


@pytest.mark.parametrize("task_name,lines,expected,test_lines,test_a", LAYOUTS,
                         ids=[layout[0] for layout in LAYOUTS])
def test_each_glue_layout(tmp_path, task_name, lines, expected, test_lines, test_a):
    task = glue.get_task(task_name)
    path = write(tmp_path / "train.tsv", lines, bom=task_name == "mrpc")
    examples = glue.read_split(task, path, "train")
    first = examples[0]
    assert (first.text_a, first.text_b, first.label) == expected
    assert first.line == (1 if task_name == "cola" else 2)
    assert task.is_pair == (expected[1] is not None)
    assert task.is_regression == (task_name == "sts-b")
    tests = glue.read_split(task, write(tmp_path / "test.tsv", test_lines), "test")
    assert tests[0].text_a == test_a and tests[0].label is None


def test_task_names_and_aliases():
    assert glue.get_task("SST-2").name == "sst-2"
    assert glue.get_task("sst2").name == "sst-2"
    assert glue.get_task("stsb").name == "sts-b"
    assert glue.get_task("mnli").dev_files[1] == ("mismatched", "dev_mismatched.tsv")
    with pytest.raises(ValueError) as error:
        glue.get_task("sst-3")
    message = str(error.value)
    assert "'sst-3' is unknown" in message
    for name in ("cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "qnli", "rte", "wnli", "custom"):
        assert name in message


def test_metric_kinds():
    kinds = {name: task.metric_kind for name, task in glue.GLUE_TASKS.items()}
    assert kinds["cola"] == "matthews" and kinds["sts-b"] == "regression"
    assert kinds["mrpc"] == kinds["qqp"] == kinds["sst-2"] == "binary"
    assert kinds["mnli"] == "multiclass"


# === Errors ===


def test_short_row_names_file_line_and_column(tmp_path):
    path = write(tmp_path / "dev.tsv", ["index\tsentence1\tsentence2\tlabel",
                                        "0\tA .\tB .\tentailment", "1\tA .\tB ."])
    with pytest.raises(glue.GlueFormatError) as error:
        glue.read_split(glue.get_task("rte"), path, "dev")
    message = str(error.value)
    assert "dev.tsv line 3" in message and "'label'" in message and "3 columns" in message


def test_header_without_the_column(tmp_path):
    path = write(tmp_path / "train.tsv", ["index\tsentence\tlabel", "0\tA .\t1"])
    with pytest.raises(glue.GlueFormatError, match=r"train.tsv line 1 has a header without "
                                                   r"text_a column 'sentence1'"):
        glue.read_split(glue.get_task("rte"), path, "train")


def test_unknown_label(tmp_path):
    path = write(tmp_path / "train.tsv", ["sentence\tlabel", "good\t1", "bad\tpositive"])
    with pytest.raises(glue.GlueFormatError) as error:
        glue.read_split(glue.get_task("sst-2"), path, "train")
    assert "train.tsv line 3 has the unknown label 'positive'; the labels are 0, 1" in str(error.value)


def test_score_that_is_not_a_number(tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    path = write(tmp_path / "dev.tsv", [header, "0\tg\tf\ty\t0\tn\tn\tA .\tB .\thigh"])
    with pytest.raises(glue.GlueFormatError, match="dev.tsv line 2 has the score 'high', not a number"):
        glue.read_split(glue.get_task("sts-b"), path, "dev")


def test_empty_split(tmp_path):
    path = write(tmp_path / "dev.tsv", ["sentence\tlabel", ""])
    with pytest.raises(glue.GlueFormatError, match="dev.tsv holds no examples"):
        glue.read_split(glue.get_task("sst-2"), path, "dev")


def test_missing_file(tmp_path):
    with pytest.raises(glue.GlueFormatError, match="nothere.tsv does not exist"):
        glue.read_split(glue.get_task("sst-2"), str(tmp_path / "nothere.tsv"), "dev")


# === Your own files ===


def test_custom_csv_with_quotes_and_labels_from_training_data(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text('id,review,stars\n1,"Good, very good!",5\n2,bad,1\n3,"a ""fine"" movie",10\n')
    task = glue.custom_task("review", label_column="stars")
    examples = glue.read_split(task, str(path), "train")
    assert [e.text_a for e in examples] == ["Good, very good!", "bad", 'a "fine" movie']
    labels = glue.labels_from_examples(examples)
    assert labels == ["1", "5", "10"]  # numeric order, not "1" < "10" < "5"
    task = task.with_labels(labels)
    assert task.metric_kind == "multiclass" and not task.is_pair
    assert glue_features.label_ids(examples, task.labels).tolist() == [1, 0, 2]
    assert glue.find_data_file(str(tmp_path), "train") == str(path)


def test_custom_jsonl_pair_and_given_labels(tmp_path):
    path = tmp_path / "dev.jsonl"
    rows = [{"q": "Who walks?", "a": "The man.", "y": "yes"},
            {"q": "Is it?", "a": "No.", "y": "no"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    task = glue.custom_task("q", "a", "y", labels=["no", "yes"])
    assert task.metric_kind == "binary" and task.is_pair
    examples = glue.read_split(task, str(path), "dev")
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ("Who walks?", "The man.", "yes"), ("Is it?", "No.", "no")]
    assert glue_features.label_ids(examples, task.labels).tolist() == [1, 0]
    path.write_text(json.dumps({"q": "x", "a": "y", "y": "maybe"}) + "\n")
    with pytest.raises(glue.GlueFormatError, match="dev.jsonl line 1 has the unknown label 'maybe'"):
        glue.read_split(task, str(path), "dev")
    path.write_text(json.dumps({"q": "x", "y": "no"}) + "\n")
    with pytest.raises(glue.GlueFormatError, match="dev.jsonl line 1 has no text_b field 'a'"):
        glue.read_split(task, str(path), "dev")


def test_custom_regression_and_single_label(tmp_path):
    path = write(tmp_path / "train.tsv", ["text\tscore", "good\t0.5", "bad\t-1"])
    task = glue.custom_task("text", label_column="score", regression=True)
    examples = glue.read_split(task, path, "train")
    assert [e.label for e in examples] == [0.5, -1.0]
    assert glue_features.label_ids(examples, None).dtype == np.float32
    with pytest.raises(ValueError, match="1 distinct label"):
        glue.labels_from_examples([glue.InputExample("a", "x", label="pos")])
    with pytest.raises(ValueError, match="exclude each other"):
        glue.custom_task("text", labels=["a", "b"], regression=True)


# === Features ===


def test_features_equal_full_tokenizer_packing(vocab_file):
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    examples = [glue.InputExample("0", "The man walked in the park.", "She was good!", "1"),
                glue.InputExample("1", "A very very very very very bad movie", "It.", "0"),
                glue.InputExample("2", "Dogs?", None, "0")]
    arrays = glue_features.convert_examples(examples, tokenizer, 10, ["0", "1"])
    assert arrays["input_word_ids"].shape == (3, 10) and arrays["input_word_ids"].dtype == np.int32
    for i, e in enumerate(examples):
        b = tokenizer.tokenize(e.text_b) if e.text_b is not None else None
        tokens, mask, segments = tokenization.pack_tokens(tokenizer.tokenize(e.text_a), b, 10)
        assert arrays["input_word_ids"][i].tolist() == tokenizer.convert_tokens_to_ids(tokens)
        assert arrays["input_mask"][i].tolist() == mask
        assert arrays["input_type_ids"][i].tolist() == segments
    # Longest first: the 7-token A is cut to 5, the 2-token B kept ([CLS] 5 [SEP] 2 [SEP]).
    assert arrays["input_type_ids"][1].tolist() == [0] * 7 + [1] * 3
    assert arrays["label"].tolist() == [1, 0, 0]
    assert arrays["example_index"].tolist() == [0, 1, 2]


def test_feature_cache_round_trip_and_invalidation(tmp_path, vocab_file, monkeypatch):
    from data_prep import fast_tokenization

    tokenizer = fast_tokenization.CachedTokenizer(vocab_file, do_lower_case=True)
    examples = [glue.InputExample(str(i), f"the man walk{'s' if i % 2 else 'ed'} in the park",
                                  "he was good" if i % 3 else "", str(i % 2)) for i in range(7)]
    cache = str(tmp_path / "features")
    first = glue_features.cached_features(examples, tokenizer, vocab_file, True, 12, ["0", "1"], cache, "train")
    files = sorted((tmp_path / "features").iterdir())
    assert len(files) == 1 and files[0].name.startswith("train-")
    assert files[0].name.endswith(".tf_record")

    calls = []
    real = glue_features.convert_examples
    monkeypatch.setattr(glue_features, "convert_examples", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = glue_features.cached_features(examples, tokenizer, vocab_file, True, 12, ["0", "1"], cache, "train")
    assert calls == []  # read back, not converted
    for key in first:
        np.testing.assert_array_equal(again[key], first[key])
        assert again[key].dtype == first[key].dtype

    # Another max_seq_length, other labels or other text: another file.
    glue_features.cached_features(examples, tokenizer, vocab_file, True, 16, ["0", "1"], cache, "train")
    glue_features.cached_features(examples, tokenizer, vocab_file, True, 12, ["1", "0"], cache, "train")
    changed = [glue.InputExample("0", "a dog", None, "0")] + examples[1:]
    glue_features.cached_features(changed, tokenizer, vocab_file, True, 12, ["0", "1"], cache, "train")
    assert len(calls) == 3 and len(list((tmp_path / "features").iterdir())) == 4

    # Regression scores survive the round trip as float32.
    scored = [glue.InputExample(e.guid, e.text_a, e.text_b, float(i) / 4) for i, e in enumerate(examples)]
    glue_features.cached_features(scored, tokenizer, vocab_file, True, 12, None, cache, "dev")
    back = glue_features.cached_features(scored, tokenizer, vocab_file, True, 12, None, cache, "dev")
    assert back["label"].dtype == np.float32
    np.testing.assert_allclose(back["label"], [i / 4 for i in range(7)])


# === The real GLUE files (../shared) ===


REAL_COUNTS = {  # (dir, task, split, file): rows
    ("CoLA", "cola", "train", "train.tsv"): 8551, ("CoLA", "cola", "dev", "dev.tsv"): 1043,
    ("SST-2", "sst-2", "train", "train.tsv"): 67349, ("SST-2", "sst-2", "dev", "dev.tsv"): 872,
    ("MRPC", "mrpc", "train", "train.tsv"): 3668, ("MRPC", "mrpc", "dev", "dev.tsv"): 408,
    ("MRPC", "mrpc", "test", "test.tsv"): 1725,
    ("STS-B", "sts-b", "train", "train.tsv"): 5749, ("STS-B", "sts-b", "dev", "dev.tsv"): 1500,
    ("QNLI", "qnli", "dev", "dev.tsv"): 5463,
    ("RTE", "rte", "train", "train.tsv"): 2490, ("RTE", "rte", "dev", "dev.tsv"): 277,
    ("WNLI", "wnli", "train", "train.tsv"): 635, ("WNLI", "wnli", "dev", "dev.tsv"): 71,
}


def test_real_glue_files(shared_data):
    for (directory, name, split, filename), rows in REAL_COUNTS.items():
        path = shared_data / "glue" / directory / filename
        if not path.exists():
            continue
        task = glue.get_task(name)
        examples = glue.read_split(task, str(path), split)
        assert len(examples) == rows, path
        if split != "test" and not task.is_regression:
            assert {e.label for e in examples} == set(task.labels), path
        if task.is_pair:
            assert all(e.text_b is not None for e in examples)


# === Raw lines for predict.py ===


def test_read_text_lines():
    lines = ["a charming journey\n", "\n", "bleak\r\n"]
    assert glue.read_text_lines(lines, False, "in") == [("a charming journey", None), ("bleak", None)]
    assert glue.read_text_lines(["Who?\tMe.\n"], True, "in") == [("Who?", "Me.")]
    with pytest.raises(ValueError, match=r"in line 2 has 2 tab-separated fields; this model is "
                                         r"single-sentence \(it takes text_a only, no text_b\)"):
        glue.read_text_lines(["one\n", "two\tthree\n"], False, "in")
    with pytest.raises(ValueError, match="in line 1 has 1 tab-separated field.*pair task"):
        glue.read_text_lines(["no tab\n"], True, "in")
    with pytest.raises(ValueError, match="holds no text"):
        glue.read_text_lines(["\n", "  \n"], False, "in")
