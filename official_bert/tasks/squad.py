"""Span labeling: SQuAD v1.1 and v2.0 (google-research/bert's run_squad.py).

The model is `modeling.heads.BertSpanLabeler` (a dense layer H → 2 on each
final token vector: the start and end logits). The loss is the mean of the
start and end cross-entropies, each a mean over the global batch's windows;
the softmax runs over every position, padding included, as google-research/bert
and Hugging Face train it (prediction never picks padding).

Contexts longer than the window are cut into `doc_stride` windows
(`data_prep.squad`); a window without the answer is trained to point at [CLS].
Steps count windows, rounded up (the reference implementation's arithmetic;
google counts questions).

Files in --output_dir: `predictions.json`, `nbest_predictions.json`,
`null_odds.json` (v2.0) and, when the predict file has answers,
`eval_results.json` (the official metric; v2.0 also HasAns/NoAns and the best
threshold).
"""

from __future__ import annotations

import json

import numpy as np
import tensorflow as tf
from absl import logging

from data_prep import squad, squad_postprocessing
from official_bert import io
from official_bert.errors import UserError
from official_bert.metrics import squad as squad_metrics
from official_bert.modeling.encoder import ENCODER_INPUTS, BertEncoder, dummy_inputs
from official_bert.modeling.heads import BertSpanLabeler
from official_bert.serving import squad as serving
from official_bert.tasks import base, families, teacher
from official_bert.configs import RunConfig, SquadConfig
from official_bert.training import distillation, input_pipeline


class SpanLabelingTask(base.Task):
    """Fine-tunes a `BertSpanLabeler` on SQuAD, predicts answers, exports.

    Features: the encoder's inputs plus `start_positions`, `end_positions`
    (int32; 0 = [CLS] for windows without the answer).

    Args:
        config: a `SquadConfig`.
        run_config: the `RunConfig`.
        bert_config: for using the model and loss alone (tests, tools).
    """

    spec = families.SQUAD

    def __init__(self, config: SquadConfig | None = None, run_config: RunConfig | None = None,
                 *, model_files=None, run_directory=None, bert_config=None):
        super().__init__(config, run_config, model_files=model_files,
                         run_directory=run_directory, bert_config=bert_config)
        self.train_examples = self.predict_examples = None
        self.eval_results = None
        self._train_windows = None  # the training windows' arrays, made once

    # --- the model and its loss (the Trainer's protocol) ------------------------

    def build_model(self, bert_config=None):
        encoder = BertEncoder.from_bert_config(bert_config or self.bert_config,
                                               dtype=self.run_config.dtype_policy)
        # The span head never reads the pooled output, so the pooler gets no
        # gradient (google's optimizer skips such variables): not trainable here.
        encoder.pooler.trainable = False
        # The span head is drawn as transformers draws it for the same --seed
        # (`initializers.TorchNormal`): one epoch of SQuAD is decided by that
        # draw more than by the order or the implementation (docs/fine_tune.md,
        # "SQuAD: seeds"), so seed s here is seed s of the reference. The other
        # tasks keep Keras' draw of the same N(0, 0.02).
        model = BertSpanLabeler(encoder, seed=self.run_config.seed)
        model(dummy_inputs())
        return model

    def loss_normalizers(self, features):
        return {"examples": tf.shape(features["input_word_ids"])[0]}

    def loss_and_metrics(self, model, features, normalizers, training):
        inputs = {k: features[k] for k in ENCODER_INPUTS}
        logits = model(inputs, training=training)
        per_example, metrics = 0.0, {}
        for name in ("start", "end"):
            labels = features[f"{name}_positions"]
            per_example += tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=logits[f"{name}_logits"])
            correct = tf.cast(tf.equal(tf.argmax(logits[f"{name}_logits"], -1,
                                                 output_type=tf.int32), labels), tf.float32)
            metrics[f"{name}_accuracy"] = (tf.reduce_sum(correct),
                                           tf.cast(tf.size(correct), tf.float32))
        per_example = teacher.mixed_loss(self, per_example, logits, features)
        # total_loss = (start_loss + end_loss) / 2.0, each a mean over examples.
        loss = tf.reduce_sum(per_example) / 2.0 / tf.cast(normalizers["examples"], tf.float32)
        return loss, metrics

    def teacher_loss(self, teacher_logits, logits, features):
        """Per example: the soft-target losses of the start and of the end
        distributions over the window's positions, summed (as its labels' are)."""
        return sum(distillation.position_soft_targets(
            teacher_logits[key], logits[key], self.run_config.distill_temperature,
            features["input_mask"]) for key in ("start_logits", "end_logits"))

    # --- inputs ---------------------------------------------------------------------

    @classmethod
    def check_flags(cls, config, run):
        if run.do_eval:
            raise UserError("run_squad has no --do_eval: --do_predict on a file with answers "
                            "writes eval_results.json")
        super().check_flags(config, run)  # --train_file / --predict_file with their modes
        if run.max_seq_length <= config.max_query_length + 3:
            raise UserError(f"--max_seq_length ({run.max_seq_length}) must be greater than "
                            f"--max_query_length ({config.max_query_length}) + 3")
        if config.tune_threshold and not config.version_2_with_negative:
            raise UserError("--tune_threshold needs --version_2_with_negative")
        for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            if getattr(config, name) <= 0:
                raise UserError(f"--{name} must be positive, got {getattr(config, name)}")
        if config.max_predict_examples is not None and config.max_predict_examples <= 0:
            raise UserError(f"--max_predict_examples must be positive, got "
                            f"{config.max_predict_examples}")

    def read_inputs(self):
        config, run = self.config, self.run_config
        self.read_stats = squad.ReadStats()
        if run.do_train:
            self.train_examples = squad.read_squad_examples(
                config.train_file, is_training=True,
                version_2_with_negative=config.version_2_with_negative, stats=self.read_stats)
            if run.max_train_examples:
                self.train_examples = self.train_examples[:run.max_train_examples]
        if run.do_predict:
            self.predict_examples = squad.read_squad_examples(
                config.predict_file, is_training=False,
                version_2_with_negative=config.version_2_with_negative)
            if config.max_predict_examples:
                self.predict_examples = self.predict_examples[:config.max_predict_examples]
        return base.InputRecord()

    def _windows(self, examples, is_training, stats=None):
        features = squad.convert_examples_to_features(
            examples, self.model_files.tokenizer(), is_training=is_training, stats=stats,
            max_seq_length=self.run_config.max_seq_length, doc_stride=self.config.doc_stride,
            max_query_length=self.config.max_query_length)
        return features, squad.features_to_arrays(features, is_training=is_training)

    # --- training -------------------------------------------------------------------

    def _train_arrays(self):
        if self._train_windows is None:
            stats = squad.FeatureStats()
            features, arrays = self._windows(self.train_examples, True, stats)
            logging.info("***** Running training *****")
            logging.info("  Num orig examples = %d (skipped: %d answer mismatches, %d empty "
                         "contexts)", len(self.train_examples), self.read_stats.answer_mismatch,
                         self.read_stats.empty_context)
            logging.info("  Num split examples = %d (%d windows without the answer → [CLS])",
                         len(features), stats.windows_without_answer)
            self._train_windows = {k: v for k, v in arrays.items() if k != "unique_ids"}
        return self._train_windows

    def train_dataset(self):
        # Steps count windows, rounded up (`spec.round_steps_up`), as the reference
        # implementation counts them; each epoch sees every window once.
        return base.TrainingSet(self._train_arrays())

    # --- prediction (and the official metric) -----------------------------------------

    def evaluate(self, trainer) -> dict | None:
        """The official metric of --predict_file's predictions (during training,
        with --eval_every_steps), as `eval_*` keys; no file is written."""
        _, _, results = self._answers(trainer)
        if results is None:
            raise UserError(f"--predict_file {self.config.predict_file} has no answers to "
                            "evaluate with --eval_every_steps")
        return {f"eval_{k}": v for k, v in results.items()}

    def predict(self, trainer) -> dict | None:
        config = self.config
        predictions, answers, self.eval_results = self._answers(trainer)
        squad_postprocessing.write_prediction_files(
            predictions, self.run_directory.file("predictions.json"),
            self.run_directory.file("nbest_predictions.json"),
            self.run_directory.file("null_odds.json") if config.version_2_with_negative else None,
            answers)
        if self.eval_results is not None:
            io.atomic_write(self.run_directory.file("eval_results.json"),
                            json.dumps(self.eval_results, indent=2) + "\n")
            logging.info("eval results: %s", json.dumps(self.eval_results))
        return self.eval_results

    def _answers(self, trainer):
        """(predictions, answers to write, official scores or None) of --predict_file."""
        config, run = self.config, self.run_config
        examples = self.predict_examples
        features, arrays = self._windows(examples, False)
        logging.info("***** Running predictions *****")
        logging.info("  Num orig examples = %d", len(examples))
        logging.info("  Num split examples = %d", len(features))
        multiple = run.padding_multiple()
        if multiple:
            # Windows sorted by length, longest first, so each batch is cut near
            # its own length (in file order nearly every batch holds a
            # full-length window); answers are matched by unique_id.
            lengths = arrays["input_mask"].sum(axis=1)
            order = np.argsort(-lengths, kind="stable")
            arrays = {k: v[order] for k, v in arrays.items()}
            batches = np.split(lengths[order], range(run.predict_batch_size, len(lengths),
                                                     run.predict_batch_size))
            kept = sum(input_pipeline.bucketed_length(b.max(), multiple, run.max_seq_length)
                       * len(b) for b in batches)
            logging.info("  Dynamic padding: %.1f%% of the %d-token positions computed",
                         100.0 * kept / (len(lengths) * run.max_seq_length), run.max_seq_length)
        dataset = input_pipeline.numpy_dataset(arrays, run.predict_batch_size, training=False,
                                               seed=run.seed, trim_padding_multiple=multiple)
        seq_length = run.max_seq_length

        def output_fn(model, batch):
            outputs = model({k: batch[k] for k in ENCODER_INPUTS}, training=False)
            # Back to full length, so batches concatenate (the post-processing
            # reads only each window's tokens, never its padding).
            cut = seq_length - tf.shape(batch["input_mask"])[1]
            logits = {k: tf.pad(v, [[0, 0], [0, cut]]) for k, v in outputs.items()}
            return {"unique_ids": batch["unique_ids"], **logits}

        raw = trainer.predict(dataset, output_fn, total=len(arrays["unique_ids"]),
                              unit="windows")
        results = {int(u): (s, e) for u, s, e in zip(
            raw["unique_ids"], raw["start_logits"], raw["end_logits"])}
        predictions = squad_postprocessing.postprocess_predictions(
            examples, features, results, n_best_size=config.n_best_size,
            max_answer_length=config.max_answer_length,
            do_lower_case=self.model_files.do_lower_case,
            version_2_with_negative=config.version_2_with_negative,
            null_score_diff_threshold=config.null_score_diff_threshold,
            verbose_logging=config.verbose_logging)
        answers = {q: p.text for q, p in predictions.items()}
        dataset_json = squad.load_squad_json(config.predict_file)
        scores = None
        if squad_metrics.has_gold_answers(dataset_json):
            scores, answers = self._score(dataset_json, predictions, answers)
        return predictions, answers, scores

    def _score(self, dataset, predictions, answers):
        """The official metric on `answers`; returns (results, answers to write)."""
        config = self.config
        if config.max_predict_examples:
            # Only part of the file was predicted: score those questions only
            # (questions skipped for an empty context still count, as 0).
            ids = set(answers)
            dataset = [{"paragraphs": [{"qas": [qa for qa in p["qas"] if qa["id"] in ids]}
                                       for p in a["paragraphs"]]} for a in dataset]
        if not config.version_2_with_negative:
            return squad_metrics.evaluate_v1(dataset, answers), answers
        null_odds = {q: p.score_diff for q, p in predictions.items()}
        best_non_null = {q: p.best_text for q, p in predictions.items()}
        # Official numbers on the answers as decided with --null_score_diff_threshold;
        # the threshold search uses every question's best non-null answer, so it is
        # exact for any threshold (the official script assumes predictions.json is).
        results = squad_metrics.evaluate_v2(dataset, answers, null_odds,
                                            best_thresh_preds=best_non_null)
        results["null_score_diff_threshold"] = config.null_score_diff_threshold
        if config.tune_threshold:
            threshold = squad_metrics.tuned_threshold(dataset, best_non_null, null_odds)
            answers = squad_postprocessing.apply_threshold(predictions, threshold)
            tuned = squad_metrics.evaluate_v2(dataset, answers, None)
            results["tuned_threshold"] = threshold
            for key in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"):
                if key in tuned:
                    results[f"tuned_{key}"] = tuned[key]
        return results, answers

    # --- export -----------------------------------------------------------------------

    def evaluation_arrays(self):
        if not self.predict_examples:
            return None
        return self._windows(self.predict_examples, False)[1]

    def export(self, model, export_dir, version):
        config = self.config
        threshold = config.null_score_diff_threshold
        if config.tune_threshold and self.eval_results:
            threshold = self.eval_results.get("tuned_threshold", threshold)
        return serving.export_squad_model(
            model, self.model_files.vocab, export_dir, lower_case=self.model_files.do_lower_case,
            max_seq_length=self.run_config.max_seq_length, doc_stride=config.doc_stride,
            max_query_length=config.max_query_length, n_best_size=config.n_best_size,
            max_answer_length=config.max_answer_length,
            version_2_with_negative=config.version_2_with_negative,
            null_score_diff_threshold=threshold, version=version,
            int8=self.run_config.quantize)

