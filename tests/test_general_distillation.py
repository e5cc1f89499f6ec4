"""General distillation (`bert distill`): a student learns a teacher on a corpus.

Known answers: the training loss of a batch is pre-training's with the masked
LM's share mixed with the teacher's soft targets (alpha · labels + (1 − alpha)
· T² · KL), plus the last layer's 1 − cosine (same width) or MiniLMv2's
self-attention relations (other widths), each computed here by hand or by the
tested loss functions from the same model outputs; a teacher without a
masked-LM head teaches its representations alone; a run records its teacher
and refuses another on resume, and other --student_layers; the student is an
ordinary checkpoint.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import tensorflow as tf

from support import fault_kit as kit
from official_bert import checkpoints
from official_bert.configs import PretrainingConfig, PretrainRunConfig
from official_bert.errors import RunDirectoryError, UserError
from official_bert.modeling.configs import BertConfig
from official_bert.modeling.encoder import ENCODER_INPUTS, BertEncoder
from official_bert.modeling.heads import BertPretrainer
from official_bert.tasks.general_distillation import GeneralDistillationTask
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.tasks.runner import run_task
from official_bert.tasks.teacher import Distillation, Teacher, relation_heads_between
from official_bert.training import distillation


def _config(hidden=16, heads=2, layers=1):
    return BertConfig(vocab_size=30, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=2 * hidden,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _model(config, seed):
    tf.keras.utils.set_random_seed(seed)
    model = BertPretrainer(BertEncoder.from_bert_config(config))
    model._ensure_built()
    return model


def _features():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 30, size=(3, 7)).astype(np.int32)
    mask = np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 4 + [0] * 3], np.int32)
    return {"input_word_ids": tf.constant(ids * mask), "input_mask": tf.constant(mask),
            "input_type_ids": tf.constant(np.zeros_like(ids)),
            "masked_lm_positions": tf.constant([[1, 3], [2, 0], [1, 2]], tf.int32),
            "masked_lm_ids": tf.constant([[7, 9], [11, 0], [8, 6]], tf.int32),
            "masked_lm_weights": tf.constant([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]]),
            "next_sentence_labels": tf.constant([[0], [1], [0]], tf.int32)}


def _task(student_config, teacher_model, has_head, **settings):
    """The run's `Distillation` of a student of `student_config` and a teacher."""
    task = GeneralDistillationTask(run_config=PretrainRunConfig(**settings),
                                   bert_config=student_config)
    heads = relation_heads_between(teacher_model.encoder.config, student_config)
    return Distillation(task, Teacher("teacher", teacher_model, has_head, relation_heads=heads))


def _softmax(x, t=1.0):
    z = np.exp((x - x.max(-1, keepdims=True)) / t)
    return z / z.sum(-1, keepdims=True)


def _normalizers(task, features):
    return {k: tf.constant(float(v)) for k, v in task.loss_normalizers(features).items()}


@pytest.mark.parametrize("alpha, temperature", [(0.5, 2.0), (0.0, 1.0)])
def test_same_width_loss_is_pretraining_mixed_with_soft_targets_plus_cosine(alpha,
                                                                          temperature):
    student_config, teacher_config = _config(layers=1), _config(layers=2)
    teacher = _model(teacher_config, 1)
    task = _task(student_config, teacher, True, distill_alpha=alpha,
                 distill_temperature=temperature)
    student = task.build_model()  # (the teacher is rebuilt beside it, its weights copied)
    features = _features()
    loss, metrics = task.loss_and_metrics(student, features, _normalizers(task, features),
                                          training=True)

    inputs = {k: features[k] for k in ENCODER_INPUTS}
    s_out, t_out = student.encoder(inputs), teacher.encoder(inputs)
    s_logits = student(features)["masked_lm_logits"].numpy().astype(np.float64)
    t_logits = teacher(features)["masked_lm_logits"].numpy().astype(np.float64)
    nsp = student(features)["next_sentence_logits"].numpy().astype(np.float64)
    weights = features["masked_lm_weights"].numpy()
    labels = features["masked_lm_ids"].numpy()
    rows = np.arange(3)[:, None], np.arange(2)[None, :]
    hard = -(np.log(_softmax(s_logits))[rows[0], rows[1], labels] * weights).sum() / weights.sum()
    p = _softmax(t_logits, temperature)
    kl = temperature ** 2 * (p * (np.log(p) - np.log(_softmax(s_logits, temperature)))).sum(-1)
    soft = (kl * weights).sum() / weights.sum()
    nsp_labels = features["next_sentence_labels"].numpy()[:, 0]
    next_sentence = -np.log(_softmax(nsp))[np.arange(3), nsp_labels].mean()
    s_seq, t_seq = s_out["sequence_output"].numpy(), t_out["sequence_output"].numpy()
    cosine = (s_seq * t_seq).sum(-1) / np.linalg.norm(s_seq, axis=-1) / np.linalg.norm(t_seq,
                                                                                      axis=-1)
    mask = features["input_mask"].numpy()
    representation = ((1 - cosine) * mask).sum() / mask.sum()
    expected = alpha * hard + (1 - alpha) * soft + next_sentence + representation
    assert float(loss) == pytest.approx(expected, rel=1e-4)
    assert set(metrics) >= {"distill_masked_lm_loss", "distill_representation_loss"}


def test_a_narrower_student_learns_the_last_layers_self_attention_relations():
    student_config, teacher_config = _config(hidden=8, heads=2), _config(hidden=16, heads=4)
    teacher = _model(teacher_config, 1)
    task = _task(student_config, teacher, False)  # no masked-LM head: labels alone
    student = task.build_model()
    features = _features()
    normalizers = _normalizers(task, features)
    loss, _ = task.loss_and_metrics(student, features, normalizers, training=True)
    pretraining, _ = PretrainingTask.loss_and_metrics(task.task, student, features,
                                                      normalizers, training=True)

    # The last (only) layer's queries, keys and values, from the embeddings, split into
    # the teacher's 4 heads (both widths divide by 4).
    def qkv(model):
        x = model.encoder({k: features[k] for k in ENCODER_INPUTS})["embedding_output"]
        attention = model.encoder.transformer_layers[-1].attention
        return attention.query(x), attention.key(x), attention.value(x)

    assert task.teacher.relation_heads == 4
    relations = distillation.attention_relation_loss(qkv(teacher), qkv(student), 4,
                                                     features["input_mask"])
    assert float(relations) > 0
    assert float(loss) == pytest.approx(float(pretraining) + float(relations), rel=1e-5)


def test_a_teacher_identical_to_the_student_teaches_nothing_more_than_the_labels():
    config = _config(layers=2)
    teacher = _model(config, 3)
    task = _task(config, teacher, True, distill_alpha=0.0)
    student = task.build_model()
    student.set_weights(teacher.get_weights())
    features = _features()
    normalizers = _normalizers(task, features)
    loss, metrics = task.loss_and_metrics(student, features, normalizers, training=True)
    pretraining, _ = PretrainingTask.loss_and_metrics(task.task, student, features,
                                                      normalizers, training=True)
    masked_lm = metrics["masked_lm_loss"][0] / metrics["masked_lm_loss"][1]
    # alpha 0: the masked LM's share is the soft targets (0 here), next sentence as it was.
    assert float(loss) == pytest.approx(float(pretraining) - float(masked_lm), abs=1e-5)


def test_relation_heads_split_both_widths():
    assert distillation.relation_heads(384, 12, 384, 12) == 12
    assert distillation.relation_heads(768, 12, 256, 4) == 4
    assert distillation.relation_heads(384, 12, 256, 4) == 4
    assert distillation.relation_heads(30, 5, 12, 4) == 6


# --- the command's run flow on the fault kit's world ----------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return kit.World(tmp_path_factory.mktemp("world")).build(pretraining_data=False)


def _run(world, out, task_class=GeneralDistillationTask, **settings):
    config = PretrainingConfig(input_file=str(world.path("corpus.txt")), input_format="text",
                               max_predictions_per_seq=3)
    values = dict(output_dir=str(out), init_checkpoint=str(world.ckpt), max_seq_length=16,
                  train_batch_size=4, learning_rate=1e-3, num_train_steps=2,
                  num_warmup_steps=0, save_checkpoints_steps=2, log_steps=1, do_train=True)
    values.update(settings)
    return run_task(task_class, config, PretrainRunConfig(**values))


@pytest.fixture(scope="module")
def teacher_run(world, tmp_path_factory):
    """A pre-training run of the world's model: a teacher with a masked-LM head."""
    out = tmp_path_factory.mktemp("teacher") / "run"
    _run(world, out, PretrainingTask)
    return out


@pytest.mark.slow  # about 40 s here, with its teacher's run
def test_a_run_distils_a_student_that_is_an_ordinary_checkpoint(world, teacher_run, tmp_path,
                                                                  caplog):
    out = tmp_path / "student"
    with caplog.at_level(logging.INFO, logger="absl"):
        _run(world, out, teacher=str(teacher_run), init_checkpoint=str(teacher_run),
             student_layers=["1"])
    assert "learns from the teacher (L=2, H=16) its last layer's hidden states (cosine); " \
           "its masked-LM distribution at temperature 2.0" in caplog.text
    record = json.loads((out / "run.json").read_text())
    assert record["identity"]["task"] == "distillation"
    assert record["settings"]["teacher"] == str(teacher_run / "ckpt-2")
    student = checkpoints.read_checkpoint(str(out))
    assert student.config.num_hidden_layers == 1
    # It restores into pre-training's model, heads included (an --init_checkpoint of any
    # command; the next teacher of a task).
    report = PretrainingTask(bert_config=student.config).build_model().load_head_weights(student)
    assert report.heads == ["masked_lm", "next_sentence"]

    with pytest.raises(RunDirectoryError, match="was trained with --teacher=.*a run learns "
                                                "from one teacher"):
        _run(world, out, teacher=str(world.ckpt), init_checkpoint=str(teacher_run),
             student_layers=["1"], num_train_steps=4, allow_changed_settings=True)
    # Other layers of the teacher: a student of the same config, but another model.
    assert record["identity"]["student_layers"] == [1]
    with pytest.raises(RunDirectoryError, match=r"--student_layers was \[1\], now \[0\]"):
        _run(world, out, teacher=str(teacher_run), init_checkpoint=str(teacher_run),
             student_layers=["0"], num_train_steps=4, allow_changed_settings=True)


@pytest.mark.slow
def test_a_teacher_without_a_masked_lm_head_teaches_its_representations(world, tmp_path,
                                                                       caplog):
    with caplog.at_level(logging.INFO, logger="absl"):
        _run(world, tmp_path / "student", teacher=str(world.ckpt), student_layers=["0"])
    assert "without a masked-LM head" in caplog.text
    assert "not its masked-LM distribution (it has no masked-LM head" in caplog.text


def test_training_needs_a_teacher(world, tmp_path):
    with pytest.raises(UserError, match="--teacher is required with --do_train"):
        _run(world, tmp_path / "student")


def test_a_teacher_of_another_vocabulary_is_refused(world, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for path in world.ckpt.iterdir():
        (other / path.name).write_bytes(path.read_bytes())
    vocab = (other / "vocab.txt").read_text().splitlines()
    (other / "vocab.txt").write_text("\n".join(vocab[:-1] + ["zzz"]) + "\n")
    with pytest.raises(UserError, match="has another vocabulary than the student's"):
        _run(world, tmp_path / "student", teacher=str(other))
