"""SQuAD's raw-text export answers contexts that hold no word (issue 36).

A context that is empty or only white space has no doc token: `data_prep/squad.py`
skips its questions (no answer). The export answers them with no answer as well
("", start_char = end_char = -1, score -inf) whatever the rest of the batch holds:
a batch of only such contexts used to stop with an `InvalidArgumentError` naming a
gather node (the span lookup read piece 0 of a batch without pieces). The same for
contexts whose words all vanish in the tokenizer (a no-break space, a zero-width
space). Tested through the exported SavedModel's `serving_default` signature.
"""

import math

import numpy as np
import pytest

from tools.kit.serving_exports import SQUAD, VOCAB, random_encoder, scale_head

REAL = ["The man went to the store and bought a gallon of milk.",
        "John Smith was the leader, one two three."]
# No doc token at all (google's white space: space, tab, CR, LF, U+202F) ...
BLANK = ["", " ", "\t\r\n \u202f "]
# ... or doc tokens without a WordPiece (Zs and Cf characters the tokenizer drops).
NO_PIECES = ["\u00a0", "\u200b \u200b"]
THRESHOLD = 0.0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """{"v1": signature, "v2": signature} of two tiny SQuAD exports."""
    import tensorflow as tf

    from official_bert.modeling import heads
    from official_bert.serving.squad import export_squad_model

    root = tmp_path_factory.mktemp("squad_blank")
    model = heads.BertSpanLabeler(random_encoder(2))
    model({k: np.zeros([1, 16], np.int32)
           for k in ("input_word_ids", "input_mask", "input_type_ids")})
    scale_head(model.span_labeler, 2)
    signatures = {}
    for name, version_2 in (("v1", False), ("v2", True)):
        directory = export_squad_model(model, VOCAB, str(root / name),
                                       version_2_with_negative=version_2,
                                       null_score_diff_threshold=THRESHOLD, **SQUAD)
        signatures[name] = tf.saved_model.load(directory).signatures["serving_default"]
    return signatures


def ask(signature, contexts):
    """The signature's outputs for `contexts` (one question each), as lists."""
    import tensorflow as tf

    out = signature(question=tf.constant(["who went to the store?"] * len(contexts)),
                    context=tf.constant(contexts))
    return {k: [x.decode() if isinstance(x, bytes) else x for x in v.numpy().tolist()]
            for k, v in out.items()}


def assert_no_answer(out, i, version):
    assert out["answer"][i] == ""
    assert (out["start_char"][i], out["end_char"][i]) == (-1, -1)
    assert out["score"][i] == -math.inf
    assert out["start_logit"][i] == out["end_logit"][i] == -math.inf
    if version == "v2":
        assert out["best_answer"][i] == ""
        assert math.isfinite(out["null_score"][i])
        assert out["score_diff"][i] == pytest.approx(out["null_score"][i])
        assert out["is_impossible"][i] == (out["score_diff"][i] > THRESHOLD)


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("contexts", [BLANK, BLANK[:1], NO_PIECES, BLANK + NO_PIECES],
                         ids=["blank", "one-empty", "no-pieces", "blank-and-no-pieces"])
def test_a_batch_of_contexts_without_words_has_no_answers(served, version, contexts):
    out = ask(served[version], contexts)
    for i in range(len(contexts)):
        assert_no_answer(out, i, version)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_blank_contexts_beside_real_ones(served, version):
    """Each context is answered as it would be in a batch of its own kind."""
    mixed = [BLANK[0], REAL[0], BLANK[2], NO_PIECES[0], REAL[1]]
    out = ask(served[version], mixed)
    alone_real = ask(served[version], REAL)
    alone_blank = ask(served[version], [BLANK[0], BLANK[2], NO_PIECES[0]])
    for i, j in ((1, 0), (4, 1)):
        assert out["answer"][i] == alone_real["answer"][j] != ""
        assert out["answer"][i] == mixed[i][out["start_char"][i]:out["end_char"][i]]
        assert (out["start_char"][i], out["end_char"][i]) == (
            alone_real["start_char"][j], alone_real["end_char"][j])
        assert out["score"][i] == pytest.approx(alone_real["score"][j], abs=1e-4)
    for i, j in ((0, 0), (2, 1), (3, 2)):
        assert_no_answer(out, i, version)
        if version == "v2":
            assert out["null_score"][i] == pytest.approx(alone_blank["null_score"][j],
                                                         abs=1e-4)


def test_the_python_reader_skips_what_the_export_leaves_unanswered():
    """The export's rule matches `data_prep/squad.py`: a context without doc tokens
    has no answer there either (its questions are skipped)."""
    from data_prep import squad

    for context in BLANK:
        assert squad.split_doc_tokens(context)[0] == []
    for context in REAL + NO_PIECES:
        assert squad.split_doc_tokens(context)[0]
