"""Why task distillation lost 15.9 F1 on WNUT-17 at 1,000 sentences
(docs/make_it_small.md, the small-data table): its teachers, fine-tuned for 93
steps, found few entities (2 of 5 seeds none: F1 0.0), so on an entity token
the teacher says `O` with confidence. The task's loss (0.5 labels + 0.5 T^2 KL
at T = 2, `training.distillation`) then has its minimum at a student that says
`O` too: the soft targets' half weighs T^2 = 4 times the labels' half. With a
teacher that learned the entity, the same loss keeps the gold tag. So the
students lost entities because their teacher had none to give, not because
distillation hurts a tagger; the full-size CoNLL-2003 rows
(benchmarks/small_model_outcome.py) distil from a teacher that learned its task."""

import numpy as np
import pytest

TAGS = ["O", "B-person", "I-person"]


def minimized_student(teacher_logits, gold: int, alpha=0.5, temperature=2.0, steps=400):
    """The student logits of one token that minimize the task's mixed loss,
    by gradient descent from zero (every tag alike)."""
    import tensorflow as tf

    from official_bert.training import distillation

    student = tf.Variable(tf.zeros([1, len(TAGS)]))
    teacher = tf.constant([teacher_logits], tf.float32)
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.5)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            labels_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=[gold], logits=student))
            soft = distillation.soft_target_loss(teacher, student, temperature)
            loss = distillation.task_loss(labels_loss, soft, alpha)
        optimizer.apply_gradients([(tape.gradient(loss, student), student)])
    return student.numpy()[0]


@pytest.mark.parametrize("teacher_logits,learned", [
    ([4.0, 0.0, 0.0], "O"),          # the teacher missed the entity: the student says O
    ([0.0, 4.0, 0.0], "B-person"),   # the teacher learned it: the student keeps it
])
def test_a_teacher_that_misses_an_entity_takes_it_from_the_student(teacher_logits, learned):
    student = minimized_student(teacher_logits, gold=TAGS.index("B-person"))
    assert TAGS[int(np.argmax(student))] == learned


def test_the_labels_alone_keep_the_entity():
    student = minimized_student([4.0, 0.0, 0.0], gold=TAGS.index("B-person"), alpha=1.0)
    assert TAGS[int(np.argmax(student))] == "B-person"
