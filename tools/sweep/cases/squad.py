"""run_squad.py: SQuAD JSON files and flags."""

import json

from tools.kit import fault_kit as kit

from ..argv import squad
from ..case import Case, at
from ..setups import binary, remember, text, trained_classifier, unchanged
from ..shared_cases import holds_a_classifier_run

COMMAND = "squad"

OUT = ["out/predictions.json", "out/checkpoint"]
FLAGS = ("--num_train_epochs=0", "--doc_stride=0", "--max_query_length=40", "--n_best_size=0",
         "--max_answer_length=0")


def _one_question(**question) -> str:
    """A SQuAD file of one paragraph ("a b") and one question `x`: q, with `question`'s keys."""
    return json.dumps({"data": [{"paragraphs": [{"context": "a b", "qas": [
        {"id": "x", "question": "q", **question}]}]}]})


def _paragraphs(*contexts) -> str:
    """A SQuAD file of one article: a paragraph per context, one question each."""
    return json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": [{"id": f"q{i}", "question": "who sat on the mat",
                                      "answers": []}]}
        for i, context in enumerate(contexts)]}]})


CASES = [
    Case("good input", squad(), control=True),
    Case("train file missing", squad(train=at("nope.json")), names=["nope.json"], outputs=OUT),
    Case("not JSON", squad(), setup=text("squad/train.json", '{"data": ['), names=["train.json"],
         outputs=OUT),
    Case("not UTF-8", squad(), setup=text(
        "squad/train.json", json.dumps(kit.squad_json()).encode()[:-2] + b"\xff]}"),
         names=["train.json"], outputs=OUT),
    Case("binary file", squad(), setup=binary("squad/train.json"), names=["train.json"],
         outputs=OUT),
    Case("wrong structure (answers not a list)", squad(),
         setup=text("squad/train.json", _one_question(answers="a")), names=["train.json"],
         outputs=OUT),
    Case("duplicate question ids (predict)", squad(train=False, predict=at("squad", "dup.json")),
         setup=text("squad/dup.json", json.dumps(kit.squad_json(
             [("same", "where is the cat", "mat"), ("same", "who sat", "the dog")]))),
         names=["dup.json"], outputs=OUT),
    Case("every answer_start outside its context", squad(), setup=text(
        "squad/train.json", _one_question(answers=[{"text": "b", "answer_start": 40}])),
         names=["train.json"], outputs=OUT),
    Case("binary predict file", squad(train=False, predict=at("squad", "bin.json")),
         setup=binary("squad/bin.json"), names=["bin.json"], outputs=OUT),
    Case("is_impossible without --version_2_with_negative", squad(), setup=text(
        "squad/train.json", _one_question(answers=[], is_impossible=True)),
         names=["train.json"], outputs=OUT),
    Case("a 100,000-character context",
         squad("--max_seq_length=64", "--doc_stride=120", "--train_batch_size=32"),
         setup=text("squad/train.json", json.dumps(kit.squad_json(
             context=("the cat sat on the mat . " * 4200) + "the dog sat on the cat ."))),
         control=True),
    *[Case(flag, squad(flag), names=[flag.split("=")[0], "--max_seq_length"], outputs=OUT)
      for flag in FLAGS],
    # Issue 36: contexts without a word (the raw-text export answers them with no answer).
    Case("every context blank (--do_predict)", squad(predict=at("squad", "blank.json")),
         setup=text("squad/blank.json", _paragraphs("", " \t\r\n")), names=["blank.json"],
         outputs=OUT),
    Case("blank contexts beside a real one (--do_predict)",
         squad(predict=at("squad", "mixed.json")),
         setup=text("squad/mixed.json", _paragraphs("", "the cat sat on the mat .", "  ")),
         control=True),
    holds_a_classifier_run(squad()),
    Case("predict with another task's run directory", squad(train=False, predict=at(
        "squad", "dev.json")), setup=(trained_classifier, remember("out")),
         names=["holds a classification"], after=unchanged("out")),
]
