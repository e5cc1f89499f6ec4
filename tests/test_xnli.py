"""XNLI as google-research/bert's XnliProcessor reads it (data_prep/glue.py `xnli_task`),
on a tiny layout of the real files: multinli/multinli.train.<lang>.tsv (header skipped;
premise, hypothesis, label; "contradictory" is "contradiction") and xnli.dev.tsv /
xnli.test.tsv (19 columns; only the rows of the language; texts in columns 7 and 8,
the label in column 2). `tests/test_google_commands.py` runs google's XNLI command."""

import pytest

from data_prep import glue
from official_bert.errors import BadFileError

DEV_HEADER = ("language\tgold_label\tsentence1_binary_parse\tsentence2_binary_parse\t"
              "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tpromptID\tpairID\tgenre\t"
              "label1\tlabel2\tlabel3\tlabel4\tlabel5\tsentence1_tokenized\tsentence2_tokenized\t"
              "match")


def dev_row(language, label, a, b):
    return "\t".join([language, label, "", "", "", "", a, b, "1", "1a", "fiction", label,
                      "", "", "", "", a, b, "True"])


@pytest.fixture()
def xnli_dir(tmp_path):
    (tmp_path / "multinli").mkdir()
    for language in ("zh", "de"):
        (tmp_path / "multinli" / f"multinli.train.{language}.tsv").write_text(
            "premise\thypo\tlabel\n"
            f"{language} 他说 \"好\"\t好\tcontradictory\n"
            f"{language} 猫\t动物\tentailment\n"
            f"{language} 狗\t跑\tneutral\n", encoding="utf-8")
    rows = [dev_row("en", "neutral", "a man", "a person"),
            dev_row("zh", "entailment", "一个人", "有人"),
            dev_row("de", "contradiction", "ein Mann", "niemand"),
            dev_row("zh", "contradiction", "下雨", "晴天")]
    for name in ("xnli.dev.tsv", "xnli.test.tsv"):
        (tmp_path / name).write_text("\n".join([DEV_HEADER] + rows) + "\n", encoding="utf-8")
    return tmp_path


def test_xnli_reads_as_googles_processor(xnli_dir):
    task = glue.get_task("XNLI")  # google's --task_name=XNLI: Chinese
    assert task.labels == ("contradiction", "entailment", "neutral")
    assert task.train_file == "multinli/multinli.train.zh.tsv"
    assert task.is_pair and task.metric_kind == "multiclass"
    train = glue.read_split(task, str(xnli_dir / task.train_file), "train")
    assert [(e.text_a, e.text_b, e.label) for e in train] == [
        ('zh 他说 "好"', "好", "contradiction"), ("zh 猫", "动物", "entailment"),
        ("zh 狗", "跑", "neutral")]
    dev = glue.read_split(task, str(xnli_dir / task.dev_files[0][1]), "dev")
    assert [(e.text_a, e.text_b, e.label, e.line) for e in dev] == [
        ("一个人", "有人", "entailment", 3), ("下雨", "晴天", "contradiction", 5)]
    assert [e.guid for e in dev] == ["dev-0", "dev-1"]
    test = glue.read_split(task, str(xnli_dir / task.test_files[0][1]), "test")
    assert [(e.text_a, e.label) for e in test] == [("一个人", None), ("下雨", None)]


def test_other_languages_by_name(xnli_dir):
    task = glue.get_task("xnli-de")
    assert task.name == "xnli-de" and task.train_file == "multinli/multinli.train.de.tsv"
    dev = glue.read_split(task, str(xnli_dir / "xnli.dev.tsv"), "dev")
    assert [(e.text_a, e.label) for e in dev] == [("ein Mann", "contradiction")]
    assert "xnli" in glue.known_task_names()
    with pytest.raises(ValueError, match="xnli-xx"):  # a UserError
        glue.get_task("xnli-xx")


def test_errors_name_the_file(xnli_dir):
    task = glue.get_task("xnli-fr")
    with pytest.raises(BadFileError, match=r"xnli.dev.tsv holds no example whose column 1 is "
                                           r"'fr'"):
        glue.read_split(task, str(xnli_dir / "xnli.dev.tsv"), "dev")
    bad = xnli_dir / "multinli" / "multinli.train.zh.tsv"
    bad.write_text("premise\thypo\tlabel\na\tb\tcontradictory\nc\td\tmaybe\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3.*'maybe'"):
        glue.read_split(glue.get_task("xnli"), str(bad), "train")
