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
from absl import logging

from official_bert.errors import UserError
from official_bert.modeling.encoder import ENCODER_INPUTS, BertEncoder
from official_bert.modeling.heads import BertPretrainer
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import distillation


class GeneralDistillationTask(PretrainingTask):
    """Pre-training's task, whose training loss adds the teacher's.

    loss = alpha * masked LM (labels) + (1 - alpha) * T² KL(teacher ‖ student)
           [+ next sentence (labels)] + representation loss

    with alpha = 1 (labels only) for a teacher without a masked-LM head, and
    each term summed over the global batch's masked positions or real tokens
    and divided by their global count (as pre-training's loss).
    """

    family = "distillation"
    distils = "representations"

    @classmethod
    def check_flags(cls, config, run_config):
        super().check_flags(config, run_config)
        if run_config.do_train and not run_config.teacher:
            raise UserError("--teacher is required with --do_train: the checkpoint the "
                            "student learns from (e.g. --teacher=$MINILM "
                            "--init_checkpoint=$MINILM --student_layers=0,2,4)")

    def build_model(self):
        student = super().build_model()
        if self.teacher is not None:
            # The teacher again, in the strategy's scope (every replica reads it) and the
            # run's precision, in place of the one `Teacher.load` built: held once.
            teacher = BertPretrainer(BertEncoder.from_bert_config(
                self.teacher.model.encoder.config, dtype=self.run_config.dtype_policy))
            teacher._ensure_built()
            teacher.set_weights(self.teacher.model.get_weights())
            teacher.trainable = False
            self.teacher.model = teacher
        return student

    def prepare(self):
        super().prepare()
        if self.teacher is not None:
            logging.info("%s", self.describe())

    def describe(self) -> str:
        """What the student learns from the teacher: one line for the log."""
        teacher, student = self.teacher.model.encoder.config, self.bert_config
        run = self.run_config
        masked_lm = (f"its masked-LM distribution at temperature {run.distill_temperature} "
                     f"(labels' share {run.distill_alpha})" if self.teacher.has_head else
                     "not its masked-LM distribution (it has no masked-LM head, as sentence "
                     "encoders ship none: the masked LM learns from its labels alone)")
        if self._same_width():
            representation = "its last layer's hidden states (cosine)"
        else:
            representation = (f"its last layer's self-attention relations (MiniLMv2, "
                              f"{self._relation_heads()} relation heads)")
        return (f"General distillation: the student (L={student.num_hidden_layers}, "
                f"H={student.hidden_size}) learns from the teacher (L="
                f"{teacher.num_hidden_layers}, H={teacher.hidden_size}) {representation}; "
                f"{masked_lm}")

    def _same_width(self) -> bool:
        return self.teacher.model.encoder.config.hidden_size == self.bert_config.hidden_size

    def _relation_heads(self) -> int:
        teacher, student = self.teacher.model.encoder.config, self.bert_config
        return distillation.relation_heads(teacher.hidden_size, teacher.num_attention_heads,
                                           student.hidden_size, student.num_attention_heads)

    # --- the loss -----------------------------------------------------------------

    def loss_normalizers(self, features):
        return {**super().loss_normalizers(features),
                "tokens": tf.reduce_sum(tf.cast(features["input_mask"], tf.float32))}

    def loss_and_metrics(self, model, features, normalizers, training):
        if not training or self.teacher is None:  # evaluation: the student alone
            return super().loss_and_metrics(model, features, normalizers, training)
        inputs = {k: features[k] for k in ENCODER_INPUTS}
        positions = features["masked_lm_positions"]
        student = model.encoder(inputs, training=True)
        teacher = self.teacher.model.encoder(inputs, training=False)
        outputs = model.heads_on(student, positions)
        losses, metrics = self.losses(outputs, features, normalizers)

        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        mask = tf.cast(features["input_mask"], tf.float32)
        run = self.run_config
        masked_lm = losses["masked_lm"]
        if self.teacher.has_head:
            teacher_logits = tf.stop_gradient(
                self.teacher.model.heads_on(teacher, positions)["masked_lm_logits"])
            soft = distillation.soft_targets(teacher_logits, outputs["masked_lm_logits"],
                                             run.distill_temperature)
            soft_sum = tf.reduce_sum(soft * weights)
            metrics["distill_masked_lm_loss"] = (soft_sum, tf.reduce_sum(weights))
            masked_lm = distillation.task_loss(
                masked_lm, soft_sum / tf.maximum(normalizers["masked_lm_weights"], 1e-5),
                run.distill_alpha)

        per_token = self._representation_loss(model, student, teacher, mask)
        representation_sum = tf.reduce_sum(per_token * mask)
        metrics["distill_representation_loss"] = (representation_sum, tf.reduce_sum(mask))
        representation = representation_sum / tf.maximum(normalizers["tokens"], 1.0)
        return masked_lm + losses["next_sentence"] + representation, metrics

    def _representation_loss(self, model, student, teacher, mask):
        """Per token: 1 - cosine of the last hidden states (same width), or the
        last layer's self-attention relation divergence (MiniLMv2)."""
        if self._same_width():
            return distillation.hidden_state_distances(
                tf.stop_gradient(teacher["sequence_output"]), student["sequence_output"])
        teacher_qkv = [tf.stop_gradient(v) for v in _last_layer_qkv(self.teacher.model.encoder,
                                                                    teacher)]
        student_qkv = _last_layer_qkv(model.encoder, student)
        return distillation.attention_relation_divergences(
            teacher_qkv, student_qkv, self._relation_heads(), mask)


def _last_layer_qkv(encoder, outputs) -> tuple:
    """The queries, keys and values [batch, tokens, H] of the encoder's last
    self-attention, from its input (the previous block's output)."""
    blocks = outputs["encoder_outputs"]
    inputs = blocks[-2] if len(blocks) > 1 else outputs["embedding_output"]
    attention = encoder.transformer_layers[-1].attention
    return attention.query(inputs), attention.key(inputs), attention.value(inputs)
