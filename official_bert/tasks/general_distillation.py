"""General distillation (`bert distill`): a student learns a teacher on a corpus.

The inputs, the masking and the run are pre-training's (`tasks.pretraining`):
the same TFRecords or text (`--input_format`), `--max_train_minutes`, resumes,
evaluation and export; the student's masked-LM and next-sentence heads learn
their labels as in pre-training. Beside them, the student learns from the
teacher (`--teacher`: any BERT checkpoint this project reads, with the
student's vocabulary and casing), on every training batch:

  - the teacher's masked-LM distribution on the masked positions, at
    temperature T (`training.distillation.soft_targets`; DistilBERT), mixed
    with the labels' loss as alpha * labels + (1 - alpha) * soft targets, when
    the teacher has a masked-LM head. A sentence encoder (all-MiniLM-L6-v2,
    bge-small) ships none: the masked LM then learns from its labels alone,
    and the log says so;
  - its last layer: the hidden states (1 - cosine) when the widths match
    (DistilBERT), else the self-attention relations of the queries, keys and
    values (MiniLMv2), which leave the student free to be narrower.

The student is --init_checkpoint with --student_layers (the teacher's layers
it keeps, DistilBERT's initialisation) or a --bert_config_file of any size
(fresh). The output directory is an ordinary pre-training run: an
--init_checkpoint for fine-tuning (and for task distillation, --teacher).
Evaluation reports pre-training's metrics (the student alone).
"""

from __future__ import annotations

import tensorflow as tf

from official_bert.errors import UserError
from official_bert.modeling.encoder import ENCODER_INPUTS
from official_bert.tasks import families, teacher
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import distillation


class GeneralDistillationTask(PretrainingTask):
    """Pre-training's task, whose training loss adds the teacher's.

    loss = alpha * masked LM (labels) + (1 - alpha) * T² KL(teacher ‖ student)
           [+ next sentence (labels)] + representation loss

    with alpha = 1 (labels only) for a teacher without a masked-LM head, and
    each term summed over the global batch's masked positions or real tokens
    and divided by their global count (as pre-training's loss). The teacher's
    outputs on each batch (`teacher.Teacher.representations`) come in the
    features (`teacher.OUTPUTS`, from `teacher.Distillation`).
    """

    spec = families.DISTILLATION

    @classmethod
    def check_flags(cls, config, run_config):
        super().check_flags(config, run_config)
        if run_config.do_train and not run_config.teacher:
            raise UserError("--teacher is required with --do_train: the checkpoint the "
                            "student learns from (e.g. --teacher=$MINILM "
                            "--init_checkpoint=$MINILM --student_layers=0,2,4)")

    def loss_normalizers(self, features):
        return {**super().loss_normalizers(features),
                "tokens": tf.reduce_sum(tf.cast(features["input_mask"], tf.float32))}

    def loss_and_metrics(self, model, features, normalizers, training):
        ours = features.get(teacher.OUTPUTS)
        if not training or ours is None:  # evaluation: the student alone
            return super().loss_and_metrics(model, features, normalizers, training)
        inputs = {k: features[k] for k in ENCODER_INPUTS}
        student = model.encoder(inputs, training=True)
        outputs = model.heads_on(student, features["masked_lm_positions"])
        losses, metrics = self.losses(outputs, features, normalizers)
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        mask = tf.cast(features["input_mask"], tf.float32)
        masked_lm = losses["masked_lm"]
        if "masked_lm_logits" in ours:
            soft = distillation.soft_targets(ours["masked_lm_logits"], outputs["masked_lm_logits"],
                                             self.run_config.distill_temperature)
            soft_sum = tf.reduce_sum(soft * weights)
            metrics["distill_masked_lm_loss"] = (soft_sum, tf.reduce_sum(weights))
            masked_lm = distillation.task_loss(
                masked_lm, soft_sum / tf.maximum(normalizers["masked_lm_weights"], 1e-5),
                self.run_config.distill_alpha)

        per_token = _representation_loss(model, student, ours, mask)
        representation_sum = tf.reduce_sum(per_token * mask)
        metrics["distill_representation_loss"] = (representation_sum, tf.reduce_sum(mask))
        representation = representation_sum / tf.maximum(normalizers["tokens"], 1.0)
        return masked_lm + losses["next_sentence"] + representation, metrics


def _representation_loss(model, student, ours, mask):
    """Per token: 1 - cosine of the last hidden states (same width), or the
    last layer's self-attention relation divergence (MiniLMv2)."""
    if "sequence_output" in ours:
        return distillation.hidden_state_distances(ours["sequence_output"],
                                                   student["sequence_output"])
    return distillation.relation_divergences(
        ours["relations"], teacher.last_layer_qkv(model.encoder, student), mask)
