"""Task distillation (--teacher): the student learns a fine-tuned teacher's
outputs beside the labels.

Known answers: the loss of a batch is alpha · (cross-entropy on the labels) +
(1 − alpha) · T² · KL(teacher_T ‖ student_T), computed here by hand from the
same logits (squared differences for regression); a run records the teacher's
checkpoint and a resume with another teacher is refused, even with
--allow_changed_settings; a teacher that does not fit (another vocabulary, no
trained head, by its run's record another task, other labels or regression)
and --teacher without training are one line each; a teacher's labels in
another order are mapped to the student's.
"""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest
import tensorflow as tf

from test_run_identity import run_settings, world  # noqa: F401 - the fixture
from official_bert.configs import (ClassificationConfig, MultipleChoiceConfig, NerConfig,
                                   RunConfig, SquadConfig, SquadRunConfig, SwagRunConfig)
from official_bert.errors import RunDirectoryError, UserError
from official_bert.modeling.configs import BertConfig
from official_bert.modeling.encoder import dummy_inputs
from official_bert.tasks import teacher as teacher_module
from official_bert.tasks.classification import ClassificationTask
from official_bert.tasks.multiple_choice import MultipleChoiceTask
from official_bert.tasks.ner import FeatureBasedNerTask, NerTask
from official_bert.tasks.runner import run_task
from official_bert.tasks.squad import SpanLabelingTask

TINY = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=32, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)


def _softmax(x, t):
    z = np.exp((x - x.max(-1, keepdims=True)) / t)
    return z / z.sum(-1, keepdims=True)


@pytest.mark.parametrize("alpha, temperature", [(0.5, 2.0), (0.0, 1.0), (0.3, 4.0)])
def test_the_loss_mixes_labels_and_soft_targets_as_written(alpha, temperature):
    task = ClassificationTask(num_classes=3, bert_config=TINY, run_config=RunConfig(
        distill_alpha=alpha, distill_temperature=temperature))
    model = task.build_model()
    features = dict(dummy_inputs(batch_size=4, seq_length=6))
    features["label"] = tf.constant([0, 2, 1, 1])
    teacher_logits = np.array([[2.0, 0.1, -1.0], [0.0, 0.0, 3.0], [1.0, 1.5, 0.2],
                               [-2.0, 4.0, 0.0]], np.float32)
    features[teacher_module.OUTPUTS] = tf.constant(teacher_logits)
    loss, _ = task.loss_and_metrics(model, features, {"examples": tf.constant(4.0)},
                                    training=False)
    logits = model(features, training=False).numpy().astype(np.float64)
    labels = features["label"].numpy()
    cross_entropy = -np.log(_softmax(logits, 1.0)[np.arange(4), labels])
    p = _softmax(teacher_logits.astype(np.float64), temperature)
    kl = (p * (np.log(p) - np.log(_softmax(logits, temperature)))).sum(-1)
    expected = np.mean(alpha * cross_entropy + (1 - alpha) * temperature ** 2 * kl)
    assert float(loss) == pytest.approx(expected, rel=1e-5)


def test_regression_learns_the_teachers_score():
    task = ClassificationTask(num_classes=1, bert_config=TINY,
                              run_config=RunConfig(distill_alpha=0.25))
    model = task.build_model()
    features = dict(dummy_inputs(batch_size=3, seq_length=5))
    features["label"] = tf.constant([1.0, 4.0, 2.5])
    features[teacher_module.OUTPUTS] = tf.constant([[0.5], [3.0], [2.0]])
    loss, _ = task.loss_and_metrics(model, features, {"examples": tf.constant(3.0)},
                                    training=False)
    score = model(features, training=False).numpy()[:, 0].astype(np.float64)
    expected = np.mean(0.25 * (score - [1.0, 4.0, 2.5]) ** 2
                       + 0.75 * (score - [0.5, 3.0, 2.0]) ** 2)
    assert float(loss) == pytest.approx(expected, rel=1e-5)


# The run-identity tests' tiny world and run settings (a module fixture of this module too).
_settings = run_settings


def classify(world, out, **settings):
    config = ClassificationConfig(task_name="sst-2", data_dir=str(world.path("glue")))
    return run_task(ClassificationTask, config, RunConfig(**_settings(world, out, **settings)))


@pytest.fixture(scope="module")
def teacher_run(world, tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher") / "run"
    classify(world, out, do_train=True)
    return out


def test_a_student_trains_from_a_teacher_and_the_record_names_it(world, teacher_run, tmp_path,
                                                                 caplog):
    with caplog.at_level(logging.INFO, logger="absl"):
        results = classify(world, tmp_path / "student", do_train=True, do_eval=True,
                           teacher=str(teacher_run))
    assert results["global_step"] == 4
    assert f"Teacher: {teacher_run / 'ckpt-4'} (2 layers" in caplog.text
    record = json.loads((tmp_path / "student" / "run.json").read_text())
    assert record["settings"]["teacher"] == str(teacher_run / "ckpt-4")
    assert record["settings"]["distill_alpha"] == 0.5


@pytest.mark.slow  # two short runs
def test_distillation_moves_the_students_outputs_toward_the_teachers(world, teacher_run,
                                                                      tmp_path):
    """The same student (seed, data, steps) trained on the teacher's outputs alone ends
    nearer the teacher (KL on the test rows) than trained on the labels alone."""
    from official_bert.serving.classification import ClassifierPredictor

    texts = [line.split("\t")[1] for line in
             (world.path("glue", "test.tsv")).read_text().splitlines()[1:]]
    teacher = ClassifierPredictor(str(teacher_run)).predict(texts)["probabilities"]

    def student(alpha):
        out = tmp_path / f"alpha{alpha}"
        classify(world, out, do_train=True, do_predict=True, teacher=str(teacher_run),
                 distill_alpha=alpha, num_train_epochs=4, seed=7)
        return np.loadtxt(out / "test_results.tsv", delimiter="\t")

    def kl(p, q):
        return float(np.sum(p * (np.log(p) - np.log(q)), axis=1).mean())

    assert kl(teacher, student(0.0)) < kl(teacher, student(1.0))


@pytest.mark.slow  # about 15 s here
def test_a_distilled_student_exports_and_serves_what_it_predicts(world, teacher_run, tmp_path):
    """A student (one of the teacher's two layers, distilled) is an ordinary model: its
    TF Serving export, in bfloat16 too, answers as its own predictions say."""
    import tensorflow_text  # noqa: F401  (the export's text ops)

    out, export = tmp_path / "student", tmp_path / "export"
    student = dict(init_checkpoint=str(teacher_run), student_layers=["1"])
    classify(world, out, do_train=True, do_predict=True, teacher=str(teacher_run),
             export_dir=str(export), export_version=1, **student)
    classify(world, out, export_dir=str(export), export_version=2, serving_dtype="bfloat16",
             **student)
    texts = [line.split("\t")[1] for line in
             (world.path("glue", "test.tsv")).read_text().splitlines()[1:]]
    expected = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    for version, tolerance in (("1", 1e-5), ("2", 3e-2)):
        loaded = tf.saved_model.load(str(export / version))
        served = loaded.signatures["serving_default"](text_a=tf.constant(texts))
        np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=tolerance)
    reader = tf.train.load_checkpoint(str(export / "1" / "variables" / "variables"))
    # One feed-forward kernel [H, 2H] per Transformer layer: the student's one, not two.
    kernels = [s for s in reader.get_variable_to_shape_map().values() if s == [16, 32]]
    assert len(kernels) == 1


@pytest.mark.slow  # (minutes of CI: its runs; `pytest -m slow`)
def test_a_resume_with_another_teacher_is_refused_even_allowed(world, teacher_run, tmp_path):
    student = tmp_path / "student"
    classify(world, student, do_train=True, num_train_epochs=1, teacher=str(teacher_run))
    for other in (dict(teacher=None), dict(teacher=str(teacher_run / "ckpt-2"))):
        with pytest.raises(RunDirectoryError, match="a run learns from one teacher") as refused:
            classify(world, student, do_train=True, allow_changed_settings=True, **other)
        assert "\n" not in str(refused.value)


def test_a_resume_with_other_student_layers_is_refused_as_another_model(world, teacher_run,
                                                                          tmp_path):
    """0 and 1 of a 2-layer teacher make students of one config: the record's identity
    names the layers, so the change is another model, refused even allowed."""
    student = tmp_path / "student"
    classify(world, student, do_train=True, num_train_epochs=1, student_layers=["1"])
    record = json.loads((student / "run.json").read_text())
    assert record["identity"]["student_layers"] == [1]
    with pytest.raises(RunDirectoryError, match=r"would change: --student_layers was \[1\], "
                                                r"now \[0\]\. A run with other values is "
                                                "another run") as refused:
        classify(world, student, do_train=True, allow_changed_settings=True,
                 student_layers=["0"])
    assert "\n" not in str(refused.value)
    # The run's own checkpoint (no --init_checkpoint) is the student already: it resumes.
    classify(world, student, do_eval=True, init_checkpoint=None)


def test_a_teacher_that_does_not_fit_is_one_line(world, teacher_run, tmp_path):
    # The pre-trained encoder alone: no trained head.
    with pytest.raises(UserError, match="a teacher is a run fine-tuned on this task"):
        classify(world, tmp_path / "a", do_train=True, teacher=str(world.ckpt))
    # Another vocabulary.
    other = tmp_path / "other_vocab"
    shutil.copytree(teacher_run, other)
    vocab = other / "vocab.txt"
    vocab.write_text(vocab.read_text().replace("movie", "film2"))
    with pytest.raises(UserError, match="has another vocabulary than the student's"):
        classify(world, tmp_path / "b", do_train=True, teacher=str(other))
    with pytest.raises(UserError, match="--teacher is what a run learns from while it trains"):
        classify(world, teacher_run, do_eval=True, teacher=str(teacher_run))
    with pytest.raises(UserError, match="--distill_temperature must be positive"):
        classify(world, tmp_path / "c", do_train=True, teacher=str(teacher_run),
                 distill_temperature=0.0)
    # A run directory that never trained: its model files, no checkpoint.
    never = tmp_path / "never"
    never.mkdir()
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copy(teacher_run / name, never / name)
    with pytest.raises(UserError, match=f"--teacher: {never} holds no checkpoint"):
        classify(world, tmp_path / "d", do_train=True, teacher=str(never))


def _load_teacher(world, path, tmp_path, config=None):
    """`Teacher.load` for a student of the world's SST-2 files (steps 2 and 3 of the run flow)."""
    from official_bert import model_files

    config = config or ClassificationConfig(task_name="sst-2", data_dir=str(world.path("glue")))
    run = RunConfig(**_settings(world, tmp_path / "student", do_train=True, teacher=str(path)))
    from official_bert.run_directory import RunDirectory

    files = model_files.resolve_model_files(run, run_dir=run.output_dir)
    task = ClassificationTask(config, run, model_files=files,
                              run_directory=RunDirectory(run.output_dir))
    return teacher_module.Teacher.load(str(path), task, task.read_inputs().identity)


def test_a_teacher_is_checked_by_what_its_run_says(world, teacher_run, tmp_path, caplog):
    """Issue 56: the head's shape alone passed a teacher with the labels in another order
    (inverted soft labels) and a token tagger of as many tags. Its record tells."""
    teacher = shutil.copytree(teacher_run, tmp_path / "teacher")

    def says(**identity):
        record = json.loads((teacher / "run.json").read_text())
        record["identity"].update(identity)
        (teacher / "run.json").write_text(json.dumps(record))

    assert _load_teacher(world, teacher, tmp_path).label_order is None  # the same labels
    says(labels=["1", "0"])
    with caplog.at_level(logging.INFO, logger="absl"):
        assert _load_teacher(world, teacher, tmp_path).label_order == [1, 0]
    assert "Teacher: its labels are 1,0, the student's 0,1: its outputs are reordered" \
        in caplog.text
    refusals = [
        (dict(labels=["0", "2"]), r"was trained with the labels 0,2, the student has 0,1: its "
                                  r"outputs are scores of other labels"),
        (dict(task="ner", task_name=None, labels=["O", "B-ANI"]),
         r"is a ner run, not a classification one: its outputs mean another task's"),
        (dict(task="classification", labels=None, regression=True),
         r"is a regression and the student a classifier"),
    ]
    for identity, message in refusals:
        says(**identity)
        with pytest.raises(UserError, match=f"^--teacher {teacher} " + message) as refused:
            _load_teacher(world, teacher, tmp_path)
        assert "\n" not in str(refused.value)
    # A run made before records: its classifier_config.json says the same.
    (teacher / "run.json").unlink()
    saved = json.loads((teacher / "classifier_config.json").read_text())
    (teacher / "classifier_config.json").write_text(json.dumps({**saved, "labels": ["1", "0"]}))
    assert _load_teacher(world, teacher / "ckpt-4", tmp_path).label_order == [1, 0]


def test_the_teachers_outputs_are_reordered_to_the_students_labels():
    def model(features, training):  # three "labels": the first three ids, as scores
        return tf.cast(features["input_word_ids"][:, :3], tf.float32)

    ids = np.array([[1, 2, 3, 9], [4, 5, 6, 9]], np.int32)
    arrays = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
              "input_type_ids": np.zeros_like(ids)}
    teacher = teacher_module.Teacher("t", model, label_order=[2, 0, 1])
    assert teacher.logits(arrays, 2).tolist() == [[3, 1, 2], [6, 4, 5]]
    assert teacher_module.Teacher("t", model).logits(arrays, 2).tolist() == [[1, 2, 3],
                                                                            [4, 5, 6]]


def test_the_feature_based_tagger_says_it_does_not_distil(world, teacher_run, tmp_path):
    config = NerConfig(train_file=str(world.path("conll", "train.txt")), layers="-1,-2")
    run = RunConfig(**_settings(world, tmp_path / "ner", do_train=True, teacher=str(teacher_run)))
    with pytest.raises(UserError, match="feature-based ner task does not learn from a teacher"):
        run_task(FeatureBasedNerTask, config, run)


@pytest.mark.slow  # two trainings (teacher, student)
def test_squad_learns_the_teachers_start_and_end_distributions(world, tmp_path):
    def squad(out, **settings):
        config = SquadConfig(train_file=str(world.path("squad", "train.json")),
                             max_query_length=8)
        return run_task(SpanLabelingTask, config, SquadRunConfig(**_settings(
            world, out, do_train=True, max_seq_length=32, **settings)))

    squad(tmp_path / "teacher")
    squad(tmp_path / "student", teacher=str(tmp_path / "teacher"), distill_temperature=1.0)
    record = json.loads((tmp_path / "student" / "run.json").read_text())
    assert record["settings"]["teacher"].startswith(str(tmp_path / "teacher" / "ckpt-"))
    assert record["settings"]["distill_temperature"] == 1.0


def test_the_tagger_loss_mixes_each_labelled_token(monkeypatch):
    """NER: per labelled token, alpha · cross-entropy + (1 − alpha) · T² · KL; the
    teacher's outputs travel at their full length, and are cut to the batch's
    tokens (cut to its longest sequence by --dynamic_padding) by the loss."""
    task = NerTask(NerConfig(labels=["O", "B-X", "I-X"]), bert_config=TINY,
                   run_config=RunConfig(distill_alpha=0.4, distill_temperature=3.0))
    model = task.build_model()
    features = dict(dummy_inputs(batch_size=2, seq_length=5))
    labels = np.array([[-1, 0, 1, -1, 2], [-1, 2, -1, -1, -1]], np.int32)
    features["label_ids"] = tf.constant(labels)
    rng = np.random.default_rng(0)
    teacher_logits = rng.normal(size=(2, 5, 3)).astype(np.float32)
    padding = rng.normal(size=(2, 3, 3)).astype(np.float32)  # positions the batch's cut left out
    features[teacher_module.OUTPUTS] = tf.constant(np.concatenate([teacher_logits, padding], 1))
    loss, _ = task.loss_and_metrics(model, features, task.loss_normalizers(features),
                                    training=False)
    logits = model(features, training=False).numpy().astype(np.float64)
    valid = labels >= 0
    safe = np.where(valid, labels, 0)
    cross_entropy = -np.log(np.take_along_axis(_softmax(logits, 1.0), safe[..., None], -1))[..., 0]
    p = _softmax(teacher_logits.astype(np.float64), 3.0)
    kl = (p * (np.log(p) - np.log(_softmax(logits, 3.0)))).sum(-1)
    per_token = 0.4 * cross_entropy + 0.6 * 9.0 * kl
    assert float(loss) == pytest.approx(per_token[valid].sum() / valid.sum(), rel=1e-5)


@pytest.mark.slow  # two trainings (teacher, student)
def test_ner_trains_from_a_teacher(world, tmp_path):
    def ner(out, **settings):
        config = NerConfig(train_file=str(world.path("conll", "train.txt")))
        return run_task(NerTask, config, RunConfig(**_settings(world, out, do_train=True,
                                                              **settings)))

    ner(tmp_path / "teacher")
    ner(tmp_path / "student", teacher=str(tmp_path / "teacher"), dynamic_padding=True)
    record = json.loads((tmp_path / "student" / "run.json").read_text())
    assert record["settings"]["teacher"].startswith(str(tmp_path / "teacher" / "ckpt-"))


@pytest.mark.slow  # two trainings (teacher, student)
def test_multiple_choice_learns_the_teachers_distribution_over_choices(world, tmp_path, caplog):
    def swag(out, **settings):
        config = MultipleChoiceConfig(train_file=str(world.path("swag", "train.csv")))
        return run_task(MultipleChoiceTask, config, SwagRunConfig(**_settings(
            world, out, do_train=True, **settings)))

    swag(tmp_path / "teacher")
    with caplog.at_level(logging.INFO, logger="absl"):
        swag(tmp_path / "student", teacher=str(tmp_path / "teacher"), distill_alpha=0.0)
    assert "its head restored" in caplog.text
    record = json.loads((tmp_path / "student" / "run.json").read_text())
    assert record["settings"]["teacher"].startswith(str(tmp_path / "teacher" / "ckpt-"))
    assert record["settings"]["distill_alpha"] == 0.0


# --- --distill_text: unlabelled text the teacher labels ------------------------------


def test_unlabelled_rows_learn_the_teacher_alone():
    """Rows of --distill_text (labelled = 0) take T² · KL alone; the others the mixed
    loss; the accuracy counts the labelled rows only."""
    task = ClassificationTask(num_classes=3, bert_config=TINY, run_config=RunConfig(
        distill_alpha=0.3, distill_temperature=2.0))
    model = task.build_model()
    features = dict(dummy_inputs(batch_size=4, seq_length=6))
    features["label"] = tf.constant([0, 2, 0, 0])  # (rows 1 and 3: placeholders)
    teacher_logits = np.array([[2.0, 0.1, -1.0], [0.0, 0.0, 3.0], [1.0, 1.5, 0.2],
                               [-2.0, 4.0, 0.0]], np.float32)
    features[teacher_module.OUTPUTS] = tf.constant(teacher_logits)
    features[teacher_module.LABELLED] = tf.constant([1.0, 0.0, 1.0, 0.0])
    loss, metrics = task.loss_and_metrics(model, features, {"examples": tf.constant(4.0)},
                                          training=False)
    logits = model(features, training=False).numpy().astype(np.float64)
    cross_entropy = -np.log(_softmax(logits, 1.0)[np.arange(4), [0, 2, 0, 0]])
    p = _softmax(teacher_logits.astype(np.float64), 2.0)
    soft = 4.0 * (p * (np.log(p) - np.log(_softmax(logits, 2.0)))).sum(-1)
    labelled = np.array([1, 0, 1, 0], bool)
    expected = np.where(labelled, 0.3 * cross_entropy + 0.7 * soft, soft).mean()
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    correct, count = (float(v) for v in metrics["accuracy"])
    assert count == 2.0
    assert correct == float(np.sum(logits.argmax(-1)[labelled] == [0, 0]))


def test_untagged_rows_of_the_tagger_learn_the_teacher_alone():
    task = NerTask(NerConfig(labels=["O", "B-X", "I-X"]), bert_config=TINY,
                   run_config=RunConfig(distill_alpha=0.5, distill_temperature=1.0))
    model = task.build_model()
    features = dict(dummy_inputs(batch_size=2, seq_length=4))
    labels = np.array([[-1, 1, 2, -1], [-1, 0, 0, -1]], np.int32)  # row 2: placeholders
    features["label_ids"] = tf.constant(labels)
    teacher_logits = np.random.default_rng(1).normal(size=(2, 4, 3)).astype(np.float32)
    features[teacher_module.OUTPUTS] = tf.constant(teacher_logits)
    features[teacher_module.LABELLED] = tf.constant([1.0, 0.0])
    loss, metrics = task.loss_and_metrics(model, features, task.loss_normalizers(features),
                                          training=False)
    logits = model(features, training=False).numpy().astype(np.float64)
    safe = np.where(labels >= 0, labels, 0)
    cross_entropy = -np.log(np.take_along_axis(_softmax(logits, 1.0), safe[..., None], -1))[..., 0]
    p = _softmax(teacher_logits.astype(np.float64), 1.0)
    soft = (p * (np.log(p) - np.log(_softmax(logits, 1.0)))).sum(-1)
    per_token = np.where([[True], [False]], 0.5 * cross_entropy + 0.5 * soft, soft)
    valid = labels >= 0
    assert float(loss) == pytest.approx(per_token[valid].sum() / valid.sum(), rel=1e-5)
    assert float(metrics["token_accuracy"][1]) == 2.0  # the first row's two words


def _sentences_file(path, sentences):
    path.write_text("sentence\n" + "".join(s + "\n" for s in sentences))
    return str(path)


def test_distill_text_adds_its_rows_to_each_epoch_and_the_record(world, teacher_run, tmp_path,
                                                                 caplog):
    extra = _sentences_file(tmp_path / "more.tsv", [
        "a fine movie", "the worst film", "good acting", "a dull plot", "great fun",
        "bad movie", "a good one", "not good"])
    with caplog.at_level(logging.INFO, logger="absl"):
        results = classify(world, tmp_path / "student", do_train=True, do_eval=True,
                           teacher=str(teacher_run), distill_text=extra)
    # (8 training rows + 8 unlabelled) / batch 4 × 2 epochs: twice the steps of the file alone.
    assert results["global_step"] == 8
    assert "--distill_text: 8 rows the teacher labelled beside 8 training rows" in caplog.text
    record = json.loads((tmp_path / "student" / "run.json").read_text())
    assert extra in record["settings"]["training_data"]  # among the files training read


def test_distill_text_without_a_teacher_or_on_a_task_that_cannot_is_one_line(world, tmp_path):
    extra = _sentences_file(tmp_path / "more.tsv", ["a fine movie"])
    with pytest.raises(UserError, match="--distill_text is text a teacher labels for the "
                                        "student: add --teacher") as refused:
        classify(world, tmp_path / "a", do_train=True, distill_text=extra)
    assert "\n" not in str(refused.value)
    config = SquadConfig(train_file=str(world.path("squad", "train.json")), max_query_length=8)
    with pytest.raises(UserError, match="the squad task does not read unlabelled text"):
        run_task(SpanLabelingTask, config, SquadRunConfig(**_settings(
            world, tmp_path / "b", do_train=True, max_seq_length=32, teacher=str(tmp_path),
            distill_text=extra)))
    with pytest.raises(UserError, match="--distill_text: .*missing.tsv"):
        classify(world, tmp_path / "c", do_train=True, teacher=str(tmp_path),
                 distill_text=str(tmp_path / "missing.tsv"))


@pytest.mark.slow  # two trainings (teacher, student)
def test_ner_distills_on_untagged_text(world, tmp_path, caplog):
    def ner(out, **settings):
        config = NerConfig(train_file=str(world.path("conll", "train.txt")))
        return run_task(NerTask, config, RunConfig(**_settings(world, out, do_train=True,
                                                              **settings)))

    ner(tmp_path / "teacher")
    words = tmp_path / "words.txt"
    words.write_text("the\nmovie\n\ngood\nfilm\nhere\n\n")
    with caplog.at_level(logging.INFO, logger="absl"):
        ner(tmp_path / "student", teacher=str(tmp_path / "teacher"), distill_text=str(words))
    assert "--distill_text: 2 rows the teacher labelled" in caplog.text
