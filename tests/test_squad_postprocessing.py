"""SQuAD post-processing: n-best, legal spans, text recovery, v2.0 null score,
and the in-graph answer search of the export against the Python one."""

import numpy as np
import pytest

from data_prep import squad, squad_postprocessing
from official_bert.text import tokenization

WORDS = ("the man went to store and bought a gallon of milk john smith leader was "
         "japanese electronics industry is largest in world who what when born cafe "
         "one two three four five six seven eight nine ten steve").split()
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "(", ")", "-", ".", ",", "'", "s",
          "##s", "18", "##95", "1943", "ca", "##fe"] + WORDS)


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return tokenization.FullTokenizer(vocab_file, do_lower_case=True)


def example_for(question, context, qid="q"):
    doc_tokens, _, spans = squad.split_doc_tokens(context)
    return squad.SquadExample(qid, question, context, doc_tokens, spans)


def test_get_final_text():
    assert squad_postprocessing.get_final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert squad_postprocessing.get_final_text("1895", "(1895-1943).", True) == "1895"
    # Accents are stripped by the uncased tokenizer but kept in the answer.
    assert squad_postprocessing.get_final_text("cafe", "Café", True) == "Café"
    assert squad_postprocessing.get_final_text("eleve", "L'élève", True) == "élève"
    # A decomposed accent changes the length: the heuristic gives up (whole text).
    assert squad_postprocessing.get_final_text("cafe", "Cafe\u0301!", True) == "Cafe\u0301!"
    # Not found: the whole text.
    assert squad_postprocessing.get_final_text("zebra", "Steve Smith's", True) == "Steve Smith's"
    # Cased: the casing must match.
    assert squad_postprocessing.get_final_text("Smith", "Steve Smith's", False) == "Smith"
    assert squad_postprocessing.get_final_text("smith", "Steve Smith's", False) == "Steve Smith's"


def _logits(length, high):
    """Logits of -5 everywhere but `high` {position: value}."""
    logits = np.full(length, -5.0, np.float32)
    for position, value in high.items():
        logits[position] = value
    return logits


def test_nbest_legal_spans_and_odd_white_space(tokenizer):
    context = "John  Smith's\tcafé\u00a0leader  (1895-1943) was the leader ."
    example = example_for("who", context)
    (feature,) = squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length=40, doc_stride=16, max_query_length=4,
        is_training=False)
    tokens = feature.tokens
    # [CLS] who [SEP] john smith ' s cafe leader ( 18 ##95 - 1943 ) was the leader . [SEP]
    assert tokens[3:10] == ["john", "smith", "'", "s", "cafe", "leader", "("]
    i_john, i_smith, i_18, i_95 = 3, 4, tokens.index("18"), tokens.index("##95")
    # The best raw pair (1, 1) is in the question, and smith→john (9) ends before
    # it starts: both illegal. Left: smith→smith 10, john→smith 9, john→john 8.
    start = _logits(40, {1: 9.0, i_smith: 6.0, i_john: 5.0})
    end = _logits(40, {1: 9.0, i_john: 3.0, i_smith: 4.0})
    preds = squad_postprocessing.postprocess_predictions(
        [example], [feature], {feature.unique_id: (start, end)}, n_best_size=5,
        max_answer_length=30, do_lower_case=True)
    p = preds["q"]
    assert p.text == "Smith"
    # Python's text joins words with one space (google's orig_text).
    assert [e["text"] for e in p.nbest][:3] == ["Smith", "John Smith", "John"]
    assert [e["start_logit"] + e["end_logit"] for e in p.nbest][:3] == [10.0, 9.0, 8.0]
    assert context[p.start_char:p.end_char] == "Smith"
    assert sum(e["probability"] for e in p.nbest) == pytest.approx(1.0)
    # Too long for max_answer_length=1: only single-token spans survive.
    preds = squad_postprocessing.postprocess_predictions(
        [example], [feature], {feature.unique_id: (start, end)}, n_best_size=5,
        max_answer_length=1, do_lower_case=True)
    assert all(e["text"] != "John Smith" for e in preds["q"].nbest)
    # Text recovery inside a word ("1895" of "(1895-1943)"), accents and the NBSP.
    start = _logits(40, {i_18: 8.0})
    end = _logits(40, {i_95: 8.0})
    p = squad_postprocessing.postprocess_predictions([example], [feature], {feature.unique_id: (start, end)},
                                      do_lower_case=True)["q"]
    assert p.text == "1895" and context[p.start_char:p.end_char] == "1895"
    i_cafe = tokens.index("cafe")
    start, end = _logits(40, {i_cafe: 8.0}), _logits(40, {i_cafe: 8.0})
    p = squad_postprocessing.postprocess_predictions([example], [feature], {feature.unique_id: (start, end)},
                                      do_lower_case=True)["q"]
    # "café\u00a0leader" is one doc token (only space, tab, CR, LF and U+202F
    # separate them); the tokenizer turns the no-break space into a split, the
    # lengths differ, and get_final_text gives up: the whole word, as google's.
    assert p.text == "café\u00a0leader" and context[p.start_char:p.end_char] == p.text


def test_start_must_be_in_its_max_context_window(tokenizer):
    context = " ".join(WORDS[27:37])  # one .. ten, one piece each
    example = example_for("who", context)
    features = squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length=9, doc_stride=3, max_query_length=4,
        is_training=False)
    assert len(features) == 3  # [one..five] [four..eight] [seven..ten]
    first, second, third = features
    # "five" (word 4) is in windows 0 (left 4, right 0) and 1 (left 1, right 3):
    # its max-context window is 1, so a high start on it in window 0 is ignored.
    five_in_first = [k for k, v in first.token_to_orig_map.items() if v == 4][0]
    assert not first.token_is_max_context[five_in_first]
    results = {f.unique_id: (_logits(9, {}), _logits(9, {})) for f in features}
    results[first.unique_id] = (_logits(9, {five_in_first: 9.0}), _logits(9, {five_in_first: 9.0}))
    six_in_second = [k for k, v in second.token_to_orig_map.items() if v == 5][0]
    results[second.unique_id] = (_logits(9, {six_in_second: 3.0}),
                                 _logits(9, {six_in_second: 3.0}))
    p = squad_postprocessing.postprocess_predictions([example], features, results)["q"]
    assert p.text == "six" and p.best_score == pytest.approx(6.0)


def test_v2_null_score_is_the_minimum_over_windows_and_threshold(tokenizer):
    context = " ".join(WORDS[27:37])
    example = example_for("who", context)
    features = squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length=9, doc_stride=3, max_query_length=4,
        is_training=False)
    one = [k for k, v in features[0].token_to_orig_map.items() if v == 0][0]
    results = {
        features[0].unique_id: (_logits(9, {0: 3.0, one: 2.0}), _logits(9, {0: 3.0, one: 2.0})),
        features[1].unique_id: (_logits(9, {0: 1.5}), _logits(9, {0: 1.0})),
        features[2].unique_id: (_logits(9, {0: 4.0}), _logits(9, {0: 4.0})),
    }
    # Null score = min(6, 2.5, 8) = 2.5; best non-null "one" = 4; diff = -1.5.
    p = squad_postprocessing.postprocess_predictions([example], features, results,
                                      version_2_with_negative=True)["q"]
    assert p.null_score == pytest.approx(2.5)
    assert p.score_diff == pytest.approx(-1.5)
    assert p.text == "one"
    assert "" in [e["text"] for e in p.nbest]
    # null - best = -1.5 > -2.0: no answer.
    p = squad_postprocessing.postprocess_predictions([example], features, results,
                                      version_2_with_negative=True,
                                      null_score_diff_threshold=-2.0)["q"]
    assert p.text == "" and p.best_text == "one"
    assert squad_postprocessing.apply_threshold({"q": p}, -1.0) == {"q": "one"}
    assert squad_postprocessing.apply_threshold({"q": p}, -1.5) == {"q": "one"}  # not strictly greater
    assert squad_postprocessing.apply_threshold({"q": p}, -1.6) == {"q": ""}


def test_in_graph_answer_search_matches_python(vocab_file, tokenizer):
    """The export's TensorFlow search gives Python's answer, offsets and score."""
    import keras
    import tensorflow as tf

    from official_bert.serving import squad as export_squad
    from official_bert.modeling.configs import BertConfig
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs
    from official_bert.modeling.heads import BertSpanLabeler

    contexts = [
        "The man went to the store and bought a gallon of milk. John Smith (1895-1943) "
        "was the leader.  Café  John's  japanese\telectronics industry is the largest "
        "in the world " * 2,
        "Short context.",
        "Cafe\u0301 leader was John Smith's man, L'élève\u00a0one two",
        "",
    ]
    questions = ["Who bought milk?", "what?", "who was the leader", "who?"]
    S, stride, q, n_best, max_len = 32, 8, 6, 10, 12
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=64)
    examples = [example_for(qq, c, str(i)) for i, (qq, c) in enumerate(zip(questions, contexts))]
    features = squad.convert_examples_to_features(examples, tokenizer, S, stride, q, False)
    arrays = squad.features_to_arrays(features, False)
    compared = 0
    for seed in range(3):
        keras.utils.set_random_seed(seed)
        model = BertSpanLabeler(BertEncoder.from_bert_config(config))
        model(dummy_inputs())
        for v2 in (False, True):
            module = export_squad.SquadServingModule(
                model, vocab_file, max_seq_length=S, doc_stride=stride, max_query_length=q,
                n_best_size=n_best, max_answer_length=max_len, version_2_with_negative=v2)
            out = {k: v.numpy() for k, v in
                   module.answer(tf.constant(questions), tf.constant(contexts)).items()}
            logits = model({k: arrays[k] for k in
                            ("input_word_ids", "input_mask", "input_type_ids")})
            results = {int(u): (s, e) for u, s, e in zip(
                arrays["unique_ids"], logits["start_logits"].numpy(),
                logits["end_logits"].numpy())}
            preds = squad_postprocessing.postprocess_predictions(
                examples, features, results, n_best_size=n_best, max_answer_length=max_len,
                version_2_with_negative=v2)
            for i, c in enumerate(contexts):
                if not c:  # the Python reader skips empty contexts; the export answers ""
                    assert out["answer"][i] == b"" and out["start_char"][i] == -1
                    continue
                p = preds[str(i)]
                got = out["answer"][i].decode()
                if p.start_char < 0:  # no legal span: google's nonce "empty"
                    assert got == "" and out["start_char"][i] == -1
                    continue
                assert (out["start_char"][i], out["end_char"][i]) == (p.start_char, p.end_char)
                assert out["score"][i] == pytest.approx(p.best_score, abs=1e-4)
                # The export cuts the context; Python joins words with one space.
                if v2:
                    got = out["best_answer"][i].decode()
                    assert out["score_diff"][i] == pytest.approx(p.score_diff, abs=1e-4)
                    assert bool(out["is_impossible"][i]) == (p.text == "")
                assert got == c[p.start_char:p.end_char]
                assert " ".join(squad.split_doc_tokens(got)[0]) == p.best_text
                compared += 1
    assert compared >= 12
