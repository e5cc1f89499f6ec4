"""Entity-level P/R/F1 (conlleval / seqeval semantics), token accuracy, IOB1 <-> BIO."""

import pytest

from official_bert.metrics import ner as m


def test_get_entities_bio_and_iob1():
    assert m.get_entities(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]) == [
        ("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 5)]
    # IOB1: I- opens an entity; B- only separates two adjacent entities of one type.
    assert m.get_entities(["I-ORG", "I-ORG", "B-ORG", "O", "I-PER", "I-LOC"]) == [
        ("ORG", 0, 1), ("ORG", 2, 2), ("PER", 4, 4), ("LOC", 5, 5)]
    # A type change inside a run ends one entity and opens another.
    assert m.get_entities(["B-PER", "I-LOC"]) == [("PER", 0, 0), ("LOC", 1, 1)]
    assert m.get_entities([]) == []


def test_iob1_bio_round_trip():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-MISC", "B-MISC", "I-MISC", "O"]
    bio = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-MISC", "B-MISC", "I-MISC", "O"]
    assert m.to_bio(iob1) == bio
    assert m.bio_to_iob1(bio) == iob1
    assert m.to_bio(bio) == bio  # identity on BIO
    assert m.detect_scheme([iob1]) == "iob1"
    assert m.detect_scheme([bio]) == "bio"
    assert m.convert_scheme(bio, "iob1") == iob1
    with pytest.raises(ValueError):
        m.convert_scheme(bio, "iobes")


def test_hand_computed_scores_partial_match_is_wrong():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O"],
            ["B-ORG", "I-ORG", "I-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG", "O"],     # PER right; LOC typed as ORG
            ["B-ORG", "I-ORG", "O", "B-PER"]]          # ORG partial (wrong) + spurious PER
    s = m.entity_scores(gold, pred)
    # gold 3 entities, predicted 4, correct 1
    assert (s["num_gold"], s["num_predicted"], s["num_correct"]) == (3, 4, 1)
    assert s["precision"] == pytest.approx(1 / 4)
    assert s["recall"] == pytest.approx(1 / 3)
    assert s["f1"] == pytest.approx(2 * (1 / 4) * (1 / 3) / (1 / 4 + 1 / 3))
    assert s["token_accuracy"] == pytest.approx(6 / 9)
    assert s["per_type"]["PER"] == dict(precision=0.5, recall=1.0, f1=pytest.approx(2 / 3),
                                        num_correct=1, num_predicted=2, num_gold=1)
    assert s["per_type"]["ORG"]["f1"] == 0.0 and s["per_type"]["LOC"]["recall"] == 0.0
    flat = m.flat_results(s)
    for key in ("entity_f1", "precision", "recall", "token_accuracy", "PER_f1", "LOC_recall"):
        assert key in flat


def test_perfect_and_empty():
    gold = [["B-X", "I-X", "O"]]
    assert m.entity_scores(gold, gold)["f1"] == 1.0
    s = m.entity_scores([["O", "O"]], [["O", "O"]])
    assert s["f1"] == 0.0 and s["token_accuracy"] == 1.0
    # IOB1 gold against the same entities in BIO: same chunks, same tags after to_bio.
    assert m.entity_scores([["I-X", "I-X"]], [["B-X", "I-X"]])["f1"] == 1.0
    with pytest.raises(ValueError):
        m.entity_scores([["O"]], [["O", "O"]])
