"""SQuAD preprocessing: reading, windows, max context, span improvement, bad input."""

import json

import pytest

from data_prep import squad
from official_bert.text import tokenization

WORDS = ("the man went to store and bought a gallon of milk john smith leader was "
         "japanese electronics industry is largest in world who what when born cafe "
         "one two three four five six seven eight nine ten eleven twelve").split()
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "(", ")", "-", ".", ",", "'", "s",
          "##s", "18", "##95", "1943"] + WORDS)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)


def make_example(question, context, answer=None, answer_start=None, qid="q", impossible=False):
    doc_tokens, char_to_word, spans = squad.split_doc_tokens(context)
    start = end = None
    if impossible:
        start = end = -1
        answer = ""
    elif answer is not None:
        if answer_start is None:
            answer_start = context.index(answer)
        start = char_to_word[answer_start]
        end = char_to_word[answer_start + len(answer) - 1]
    return squad.SquadExample(qid, question, context, doc_tokens, spans, answer, start, end,
                              impossible)


def write_json(path, data):
    path.write_text(json.dumps({"version": "1.1", "data": data}), encoding="utf-8")
    return str(path)


def test_doc_spans_and_max_context_google_example():
    # Doc: the man went to the store and bought a gallon of milk; windows of 5
    # tokens every 3 → "bought" (token 7) is best in span C (starts at 6).
    spans = squad.doc_spans_for(12, 5, 3)
    assert spans == [squad.DocSpan(0, 5), squad.DocSpan(3, 5), squad.DocSpan(6, 5),
                     squad.DocSpan(9, 3)]
    assert not squad.check_is_max_context(spans, 1, 7)
    assert squad.check_is_max_context(spans, 2, 7)
    # A tie in min(left, right) goes to the longer window, then the first one.
    assert squad.check_is_max_context(spans, 0, 1)


def test_context_longer_than_three_windows(tokenizer):
    context = " ".join(WORDS[-12:] * 2)  # 24 words, one piece each
    example = make_example("who", context)
    features = squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length=12, doc_stride=3, max_query_length=4,
        is_training=False)
    # 12 - 1 (query) - 3 = 8 tokens a window, stride 3: starts 0, 3, ..., 18 + 8 ≥ 24.
    assert [f.doc_span_index for f in features] == list(range(7))
    assert len(features) > 3
    starts = [min(f.token_to_orig_map.values()) for f in features]
    assert starts == [0, 3, 6, 9, 12, 15, 18]
    # Every context token is the max-context token of exactly one window.
    owners = {}
    for f in features:
        for position, is_max in f.token_is_max_context.items():
            if is_max:
                word = f.token_to_orig_map[position]
                assert word not in owners
                owners[word] = f.doc_span_index
    assert sorted(owners) == list(range(24))
    # Hand-checked: word 7 sits in windows 0 (left 7, right 0), 1 (left 4,
    # right 3) and 2 (left 1, right 6): window 1 has the most context. Word 22
    # is in windows 5 (left 7, right 0) and 6 (left 4, right 1, shorter): 6.
    assert owners[7] == 1
    assert owners[22] == 6
    for f in features:
        assert f.tokens[0] == "[CLS]" and f.tokens[2] == "[SEP]" and f.tokens[-1] == "[SEP]"
        assert len(f.input_ids) == 12 and sum(f.input_mask) == len(f.tokens)
        assert f.segment_ids[:3] == [0, 0, 0] and set(f.segment_ids[3:len(f.tokens)]) == {1}


def test_answer_straddling_two_windows(tokenizer):
    context = "one two three four five six seven eight nine ten"
    example = make_example("who", context, answer="five six seven", qid="s")
    features = squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length=9, doc_stride=3, max_query_length=4,
        is_training=True)
    # 5 tokens a window: [one..five], [four..eight], [seven..ten].
    assert len(features) == 3
    first, middle, last = features
    # Windows that cut the answer are labelled [CLS] (0, 0).
    assert (first.start_position, first.end_position) == (0, 0)
    assert (last.start_position, last.end_position) == (0, 0)
    assert middle.tokens[middle.start_position:middle.end_position + 1] == ["five", "six", "seven"]


def test_improve_answer_span(tokenizer):
    context = "The leader was John Smith (1895-1943)."
    example = make_example("when born", context, answer="1895", qid="y")
    # The white-space word is "(1895-1943)."; the tightened span is the pieces of 1895.
    (feature,) = squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length=40, doc_stride=10, max_query_length=8,
        is_training=True)
    assert feature.tokens[feature.start_position:feature.end_position + 1] == ["18", "##95"]
    # "Japan" inside "Japanese": no better match, the whole word stays.
    example = make_example("who", "the japanese industry", answer="japan", qid="j")
    (feature,) = squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length=20, doc_stride=10, max_query_length=4,
        is_training=True)
    assert feature.tokens[feature.start_position:feature.end_position + 1] == ["japanese"]
    doc = ["(", "18", "##95", "-", "1943", ")", "."]
    assert squad.improve_answer_span(doc, 0, 6, tokenizer, "1895") == (1, 2)
    assert squad.improve_answer_span(doc, 0, 6, tokenizer, "zebra") == (0, 6)


def test_impossible_questions_target_cls(tokenizer):
    example = make_example("who", " ".join(WORDS[:20]), impossible=True)
    features = squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length=12, doc_stride=4, max_query_length=4,
        is_training=True)
    assert len(features) > 1
    assert all((f.start_position, f.end_position) == (0, 0) for f in features)


def test_read_examples_counts_mismatches_and_empty_contexts(tmp_path):
    context = "John Smith (1895-1943) was the leader."
    path = write_json(tmp_path / "t.json", [{"paragraphs": [
        {"context": context, "qas": [
            {"id": "ok", "question": "who?", "answers": [{"text": "John Smith", "answer_start": 0}]},
            {"id": "wrong", "question": "who?", "answers": [{"text": "zebra", "answer_start": 5}]},
            {"id": "far", "question": "who?", "answers": [{"text": "leader", "answer_start": 500}]},
        ]},
        {"context": " \n\t ", "qas": [{"id": "e", "question": "?", "answers": []}]},
    ]}])
    stats = squad.ReadStats()
    examples = squad.read_squad_examples(path, is_training=True, stats=stats)
    assert [e.qas_id for e in examples] == ["ok"]
    assert (stats.questions, stats.answer_mismatch, stats.empty_context) == (4, 2, 1)
    assert examples[0].doc_tokens[:2] == ["John", "Smith"]
    assert examples[0].word_spans[2] == (11, 22)
    # At prediction time answers are not checked; the empty context is still skipped.
    examples = squad.read_squad_examples(path, is_training=False)
    assert [e.qas_id for e in examples] == ["ok", "wrong", "far"]


@pytest.mark.parametrize("data, where", [
    ({"data": [{"paragraphs": [{"context": "a", "qas": [{"id": "x", "question": "q",
      "answers": [{"text": "a", "answer_start": "0"}]}]}]}]},
     "a string at data[0].paragraphs[0].qas[0].answers[0].answer_start, where an integer"),
    ({"data": [{"paragraphs": [{"qas": []}]}]}, "no 'context' field in data[0].paragraphs[0]"),
    ({"data": {"paragraphs": []}}, "an object at data, where a list belongs"),
    ({"data": [{"title": "t", "paragraphs": [{"context": "a b", "qas": [
        {"id": "x", "answers": []}]}]}]}, "no 'question' field in data[0].paragraphs[0].qas[0]"),
])
def test_bad_structure_names_the_path(tmp_path, data, where):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(squad.SquadFormatError, match=where.replace("[", r"\[").replace("]", r"\]")):
        squad.read_squad_examples(str(path), is_training=True)


def test_malformed_json_and_nothing_usable(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"data": [\n  {"paragraphs": [}\n]}', encoding="utf-8")
    with pytest.raises(squad.SquadFormatError, match=r"broken.json line 2 is not valid JSON"):
        squad.read_squad_examples(str(path), is_training=False)
    with pytest.raises(squad.SquadFormatError, match="missing.json does not exist"):
        squad.read_squad_examples(str(tmp_path / "missing.json"), is_training=False)
    empty = write_json(tmp_path / "empty.json", [{"paragraphs": [
        {"context": "", "qas": [{"id": "a", "question": "q", "answers": []}]}]}])
    with pytest.raises(squad.SquadFormatError, match="no usable question"):
        squad.read_squad_examples(empty, is_training=False)
    v2 = write_json(tmp_path / "v2.json", [{"paragraphs": [{"context": "a b", "qas": [
        {"id": "a", "question": "q", "answers": [], "is_impossible": True}]}]}])
    with pytest.raises(squad.SquadFormatError, match="--version_2_with_negative"):
        squad.read_squad_examples(v2, is_training=True)
    (example,) = squad.read_squad_examples(v2, is_training=True, version_2_with_negative=True)
    assert example.is_impossible and example.start_position == -1


def test_real_squad_files(shared_data, minilm_dir):
    """The shared files read with the expected counts; answers land on their tokens."""
    train = shared_data / "squad_v1.1" / "train-v1.1-first12articles.json"
    stats = squad.ReadStats()
    examples = squad.read_squad_examples(str(train), is_training=True, stats=stats)
    assert stats.questions == 4370
    assert len(examples) + stats.answer_mismatch == 4370
    tokenizer = tokenization.FullTokenizer(str(minilm_dir / "vocab.txt"), do_lower_case=True)
    features = squad.convert_examples_to_features(
        examples[:60], tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64,
        is_training=True)
    labelled = [f for f in features if f.start_position]
    assert len(labelled) >= 55
    exact = sum(f.tokens[f.start_position:f.end_position + 1]
                == tokenizer.tokenize(examples[f.example_index].orig_answer_text)
                for f in labelled)
    assert exact >= 0.95 * len(labelled)
    dev = shared_data / "squad_v1.1" / "squad_v1.1-shared.json"
    assert len(squad.read_squad_examples(str(dev), is_training=False)) == 7793
