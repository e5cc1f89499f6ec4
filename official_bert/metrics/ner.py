"""Entity-level precision / recall / F1 as conlleval and seqeval compute them.

An entity (a *chunk*) is a maximal run of tags of one type, started and ended
by conlleval's rules (`B-X` always starts one; `I-X` starts one after `O` or a
tag of another type; `E-`/`S-` of IOBES are understood too). A predicted
entity counts as correct only when a gold entity has exactly the same start,
end and type: a partial overlap is one false positive *and* one false
negative. Scores are micro-averaged over all entities, and given per type.

Tag schemes: CoNLL-2003 is IOB1 (`I-X` everywhere, `B-X` only between two
adjacent entities of the same type); WNUT-17 is BIO (every entity starts with
`B-X`). The project's internal scheme is BIO; `to_bio` maps either to it (it is
the identity on well-formed BIO, and turns a stray `I-X` into `B-X` exactly as
conlleval would read it), `bio_to_iob1` maps back.

Example:
>>> gold = [["B-PER", "I-PER", "O", "B-LOC"]]
>>> pred = [["B-PER", "O", "O", "B-LOC"]]
>>> scores = entity_scores(gold, pred)
>>> round(scores["f1"], 4), scores["per_type"]["PER"]["f1"]
(0.5, 0.0)
"""

from __future__ import annotations

import collections
from typing import Iterable, List, Sequence, Tuple

OUTSIDE = "O"
IOB1, BIO = "iob1", "bio"


def split_tag(tag: str) -> Tuple[str, str]:
    """'B-PER' → ('B', 'PER'); 'O' → ('O', ''). A bare type counts as 'I-'."""
    if tag == OUTSIDE or tag == "":
        return OUTSIDE, ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES":
        return tag[0], tag[2:]
    return "I", tag


def _end_of_chunk(prev_prefix, prefix, prev_type, type_):
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix == "O":
        return False
    if prefix in ("B", "S", "O"):
        return True
    return prev_type != type_


def _start_of_chunk(prev_prefix, prefix, prev_type, type_):
    if prefix in ("B", "S"):
        return True
    if prefix == "O":
        return False
    if prev_prefix in ("E", "S", "O"):
        return True
    return prev_type != type_


def get_entities(tags: Sequence[str]) -> List[Tuple[str, int, int]]:
    """(type, first index, last index) of every chunk, in order (conlleval rules).

    >>> get_entities(["I-LOC", "I-LOC", "B-LOC", "O", "I-PER"])
    [('LOC', 0, 1), ('LOC', 2, 2), ('PER', 4, 4)]
    """
    entities = []
    prev_prefix, prev_type, start = OUTSIDE, "", None
    for i, tag in enumerate(list(tags) + [OUTSIDE]):
        prefix, type_ = split_tag(tag)
        if start is not None and _end_of_chunk(prev_prefix, prefix, prev_type, type_):
            entities.append((prev_type, start, i - 1))
            start = None
        if _start_of_chunk(prev_prefix, prefix, prev_type, type_):
            start = i
        prev_prefix, prev_type = prefix, type_
    return entities


def to_bio(tags: Sequence[str]) -> List[str]:
    """IOB1 (or BIO, or loose BIO) → BIO, chunk for chunk.

    >>> to_bio(["I-PER", "I-PER", "B-PER", "O", "I-LOC"])
    ['B-PER', 'I-PER', 'B-PER', 'O', 'B-LOC']
    """
    out = [OUTSIDE] * len(tags)
    for type_, start, end in get_entities(tags):
        out[start] = f"B-{type_}"
        for i in range(start + 1, end + 1):
            out[i] = f"I-{type_}"
    return out


iob1_to_bio = to_bio


def bio_to_iob1(tags: Sequence[str]) -> List[str]:
    """BIO → IOB1: `B-X` only where an entity directly follows one of type X.

    >>> bio_to_iob1(["B-PER", "I-PER", "B-PER", "O", "B-LOC"])
    ['I-PER', 'I-PER', 'B-PER', 'O', 'I-LOC']
    """
    out = [OUTSIDE] * len(tags)
    prev_end, prev_type = None, None
    for type_, start, end in get_entities(tags):
        for i in range(start, end + 1):
            out[i] = f"I-{type_}"
        if prev_end == start - 1 and prev_type == type_:
            out[start] = f"B-{type_}"
        prev_end, prev_type = end, type_
    return out


def detect_scheme(sentences: Iterable[Sequence[str]]) -> str:
    """'iob1' when some chunk starts with `I-` (legal only in IOB1), else 'bio'."""
    for tags in sentences:
        prev_prefix, prev_type = OUTSIDE, ""
        for tag in tags:
            prefix, type_ = split_tag(tag)
            if prefix == "I" and (prev_prefix == OUTSIDE or prev_type != type_):
                return IOB1
            prev_prefix, prev_type = prefix, type_
    return BIO


def convert_scheme(tags: Sequence[str], scheme: str) -> List[str]:
    """Internal BIO → `scheme` ('bio' or 'iob1')."""
    if scheme == IOB1:
        return bio_to_iob1(tags)
    if scheme == BIO:
        return to_bio(tags)
    raise ValueError(f"unknown tag scheme {scheme!r}; use 'bio' or 'iob1'")


def _prf(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
    """Micro P/R/F1 over exact-match entities, per type, and token accuracy.

    Both arguments are lists of per-sentence tag lists of equal lengths, in
    any scheme `get_entities` reads (compare like with like: token accuracy
    compares the tag strings after `to_bio`).

    Returns:
        {"precision", "recall", "f1", "token_accuracy", "num_gold",
         "num_predicted", "num_correct", "per_type": {type: {"precision",
         "recall", "f1", "num_gold", "num_predicted", "num_correct"}}}
        (fractions in [0, 1]).
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    counts = collections.defaultdict(lambda: [0, 0, 0])  # correct, predicted, gold
    tokens = correct_tokens = 0
    for index, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise ValueError(
                f"sentence {index}: {len(g)} gold tags but {len(p)} predicted")
        g_entities, p_entities = set(get_entities(g)), set(get_entities(p))
        for type_, _, _ in g_entities:
            counts[type_][2] += 1
        for type_, _, _ in p_entities:
            counts[type_][1] += 1
        for type_, _, _ in g_entities & p_entities:
            counts[type_][0] += 1
        tokens += len(g)
        correct_tokens += sum(a == b for a, b in zip(to_bio(g), to_bio(p)))
    total = [sum(c[i] for c in counts.values()) for i in range(3)]
    precision, recall, f1 = _prf(*total)
    per_type = {}
    for type_ in sorted(counts):
        c, pr, go = counts[type_]
        tp, tr, tf = _prf(c, pr, go)
        per_type[type_] = dict(precision=tp, recall=tr, f1=tf, num_correct=c,
                               num_predicted=pr, num_gold=go)
    return dict(precision=precision, recall=recall, f1=f1,
                token_accuracy=correct_tokens / tokens if tokens else 0.0,
                num_correct=total[0], num_predicted=total[1], num_gold=total[2],
                per_type=per_type)


def flat_results(scores: dict, prefix: str = "") -> dict:
    """`entity_scores` as eval_results.txt keys: entity_f1, precision, recall,
    token_accuracy, and `<type>_f1` / `_precision` / `_recall` per type (×100
    is left to the reader: values are fractions, as google's eval_accuracy)."""
    out = {
        f"{prefix}entity_f1": scores["f1"],
        f"{prefix}precision": scores["precision"],
        f"{prefix}recall": scores["recall"],
        f"{prefix}token_accuracy": scores["token_accuracy"],
        f"{prefix}num_gold_entities": scores["num_gold"],
        f"{prefix}num_predicted_entities": scores["num_predicted"],
    }
    for type_, s in scores["per_type"].items():
        for key in ("f1", "precision", "recall"):
            out[f"{prefix}{type_}_{key}"] = s[key]
    return out
