"""Pre-training: masked LM + next sentence (google-research/bert's run_pretraining.py).

The model is `modeling.heads.BertPretrainer`. Input: TFRecords of
`data_prep/create_pretraining_data.py` or of google-research/bert's generator
(static masks), or unmasked files (`--dynamic_masking` at generation) masked at
read time, fresh every epoch (`training.input_pipeline`). Every input file is
checked (features, kinds, lengths) before the model is built. Or text, made
into instances on the fly by the generator's code: a sentence-per-line corpus
(`--input_format=text`), or a fine-tuning set's own file (`--input_format=conll`
or `table`, `data_prep.task_text`: masked LM only), for task-adaptive
pre-training.

Continued pre-training (`--init_checkpoint`) starts from any BERT checkpoint:
the heads it lacks (all-MiniLM-L6-v2 and other sentence encoders ship none)
start fresh, the masked LM's output still tied to the word embeddings, and
the log says which head came from where.

Honest progress: `masked_lm_unigram_baseline`, beside `masked_lm_accuracy` in
every progress line and in the eval results, is the accuracy on the same
positions of always predicting one token: the most frequent of the training
data's first `BASELINE_SAMPLE` masked tokens (`PretrainingTask.prepare`).

Files in --output_dir: checkpoints, `train/` and `eval/` summaries,
`eval_results.txt` (global_step, loss, masked_lm_accuracy, masked_lm_loss,
masked_lm_unigram_baseline, next_sentence_accuracy, next_sentence_loss), and
`bert_config.json` + `vocab.txt` (+ `tokenizer_config.json` with the data's
casing), so the directory is itself an `--init_checkpoint` for fine-tuning and
a second phase.
"""

from __future__ import annotations

import collections
import json
import os
import uuid

import tensorflow as tf
from absl import logging

from data_prep import pretraining_corpus, task_text
from data_prep.configs import PretrainingDataConfig
from official_bert import checkpoints, file_sets, io
from official_bert.errors import BadFileError, UserError
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.heads import PRETRAINING_INPUTS, BertPretrainer
from official_bert.run_directory import TOKENIZER_CONFIG
from official_bert.serving import pretraining as serving
from official_bert.tasks import base, families
from official_bert.configs import PretrainingConfig, RunConfig
from official_bert.text import tokenization
from official_bert.training import input_pipeline

# Masked positions of the training data read for the unigram baseline: enough to
# find the most frequent token (its share known to about ±0.3 points), read in seconds.
BASELINE_SAMPLE = 20_000
MLM_HEAD_FRESH = ("Masked-LM head: output tied to the word embeddings; transform and bias "
                  "initialized fresh (the checkpoint has no masked-LM head)")
MLM_HEAD_RESTORED = ("Masked-LM head: transform and bias restored from the checkpoint; output "
                     "tied to the word embeddings")


class PretrainingTask(base.Task):
    """Pre-trains a `BertPretrainer`: masked LM + next sentence.

    loss = Σ w · xent(masked LM) / Σ w  +  Σ xent(next sentence) / N, with w
    the `masked_lm_weights` (0 on padding predictions) and both sums over the
    whole global batch (the `Trainer` all-reduces the normalizers), as
    google-research/bert's per-batch loss.

    Metrics (numerator, denominator sums): `masked_lm_accuracy` and
    `masked_lm_loss` (weighted by `masked_lm_weights`), `next_sentence_accuracy`
    and `next_sentence_loss` (per example).

    Args:
        config: a `PretrainingConfig`.
        run_config: the `RunConfig` (steps given by --num_train_steps).
        bert_config: for using the model and loss alone (tests, benchmarks).

    Example:
    >>> from official_bert.modeling.configs import BertConfig
    >>> task = PretrainingTask(bert_config=BertConfig(vocab_size=100, hidden_size=32,
    ...     num_hidden_layers=1, num_attention_heads=4, intermediate_size=64))
    >>> type(task.build_model()).__name__
    'BertPretrainer'
    """

    spec = families.PRETRAINING

    def __init__(self, config: PretrainingConfig | None = None,
                 run_config: RunConfig | None = None, *, model_files=None, run_directory=None,
                 bert_config=None):
        super().__init__(config, run_config, model_files=model_files,
                         run_directory=run_directory, bert_config=bert_config)
        config = self.config
        self.train_files, self.eval_files = _input_files(config)
        self.text_columns = task_text.text_columns(config.text_column, config.input_format)
        # The generator's summary beside the first input that has one (or None).
        self.summary = _summary_beside(self.train_files)
        # False for data without sentence pairs (--packing=full_sentences, a
        # fine-tuning file's text): the masked LM alone is trained and evaluated.
        self.next_sentence = self.task_text is None and _has_sentence_pairs(
            self.train_files, self.eval_files)
        # The unigram baseline's token (`prepare`); None: no baseline metric.
        self.unigram_token = None
        self.unigram_share = None
        # What the input pipelines read, by flag: the files given, or for a
        # fine-tuning file (conll, table) its text as a corpus (`read_inputs`).
        self.corpus_files = {}

    # --- the model and its loss (the Trainer's protocol) ------------------------

    def build_model(self, bert_config=None):
        encoder = BertEncoder.from_bert_config(bert_config or self.bert_config,
                                               dtype=self.run_config.dtype_policy)
        model = BertPretrainer(encoder)
        model._ensure_built()
        return model

    def initialize(self, model, checkpoint):
        """The encoder and, when the checkpoint has them, the pre-training heads
        (Google `cls/*`, Hugging Face `BertForPreTraining`, a previous run); a
        line says where each head comes from."""
        checkpoints.assign_encoder_weights(model.encoder, checkpoint.weights)
        report = model.load_head_weights(checkpoint)
        heads = report.heads
        logging.info("Initialized the encoder%s from %s (%s checkpoint)",
                     " and the " + " and ".join(heads) + " head(s)" if heads else "",
                     checkpoint.path, checkpoint.kind)
        logging.info("%s", MLM_HEAD_RESTORED if "masked_lm" in heads else MLM_HEAD_FRESH)
        logging.info("Next-sentence head: %s", (
            "not used (the data has no sentence pairs: masked LM only)" if not self.next_sentence
            else "restored from the checkpoint" if "next_sentence" in heads
            else "initialized fresh (the checkpoint has none)"))
        return report

    def loss_normalizers(self, features):
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        return {"masked_lm_weights": tf.reduce_sum(weights),
                "examples": tf.cast(tf.shape(weights)[0], tf.float32)}

    def loss_and_metrics(self, model, features, normalizers, training):
        outputs = model({k: features[k] for k in PRETRAINING_INPUTS}, training=training)
        losses, metrics = self.losses(outputs, features, normalizers)
        return losses["masked_lm"] + losses["next_sentence"], metrics

    def losses(self, outputs, features, normalizers):
        """({"masked_lm": loss, "next_sentence": loss}, metrics) of the model's
        `outputs` (general distillation mixes the teacher's into the first)."""
        mlm_logits = outputs["masked_lm_logits"]
        labels = tf.cast(features["masked_lm_ids"], tf.int32)
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        mlm_xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, mlm_logits)
        mlm_sum = tf.reduce_sum(mlm_xent * weights)
        mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32),
                                       labels), tf.float32)

        local_weights = tf.reduce_sum(weights)
        metrics = {
            "masked_lm_accuracy": (tf.reduce_sum(mlm_correct * weights), local_weights),
            "masked_lm_loss": (mlm_sum, local_weights),
        }
        if self.unigram_token is not None:  # always predicting that token, on the same positions
            baseline = tf.cast(tf.equal(labels, self.unigram_token), tf.float32)
            metrics["masked_lm_unigram_baseline"] = (tf.reduce_sum(baseline * weights),
                                                     local_weights)
        losses = {"masked_lm": mlm_sum / tf.maximum(normalizers["masked_lm_weights"], 1e-5)}
        if not self.next_sentence:
            # A zero term keeps the head's gradients defined (zero), so the
            # optimizer and the checkpoints see the same variables either way.
            losses["next_sentence"] = 0.0 * tf.reduce_sum(outputs["next_sentence_logits"])
            return losses, metrics

        nsp_logits = outputs["next_sentence_logits"]
        nsp_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
        nsp_xent = tf.nn.sparse_softmax_cross_entropy_with_logits(nsp_labels, nsp_logits)
        nsp_sum = tf.reduce_sum(nsp_xent)
        nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32),
                                       nsp_labels), tf.float32)

        losses["next_sentence"] = nsp_sum / tf.maximum(normalizers["examples"], 1.0)
        local_examples = tf.cast(tf.size(nsp_labels), tf.float32)
        metrics["next_sentence_accuracy"] = (tf.reduce_sum(nsp_correct), local_examples)
        metrics["next_sentence_loss"] = (nsp_sum, local_examples)
        return losses, metrics

    # --- inputs ---------------------------------------------------------------------

    @classmethod
    def check_flags(cls, config, run):
        if run.do_predict:
            raise UserError("run_pretraining has no --do_predict")
        if run.quantize:
            # (the masked LM's signature gathers the [MASK] positions with ragged ops,
            # which TFLite's builtin ops lack)
            raise UserError("--quantize: the pre-training export (fill in [MASK]s) has no int8 "
                            "TFLite form; fine-tune a task and export that with --quantize, or "
                            "bert export-encoder --edge_formats=tflite --quantize for the encoder")
        if not config.input_file and (run.do_train or not config.eval_input_file):
            raise UserError("--input_file is required (to only evaluate, --do_eval with "
                            "--eval_input_file is enough)")
        for name in ("max_predictions_per_seq", "max_eval_steps"):
            if getattr(config, name) <= 0:
                raise UserError(f"--{name} must be positive, got {getattr(config, name)}")
        if config.max_predictions_per_seq > run.max_seq_length:
            raise UserError(f"--max_predictions_per_seq={config.max_predictions_per_seq} is more "
                            f"than --max_seq_length={run.max_seq_length}")
        if run.do_train and not 0 <= (run.num_warmup_steps or 0) <= run.num_train_steps:
            raise UserError(f"--num_warmup_steps={run.num_warmup_steps} must be between 0 and "
                            f"--num_train_steps={run.num_train_steps}")
        if not 0 < config.masked_lm_prob < 1:
            raise UserError(f"--masked_lm_prob must be in (0, 1), got {config.masked_lm_prob}")
        if not 0 <= config.length_bucket_width <= run.max_seq_length:
            raise UserError(f"--length_bucket_width must be between 0 (off) and "
                            f"--max_seq_length={run.max_seq_length}, got "
                            f"{config.length_bucket_width}")
        if config.length_bucket_width and run.distribution_strategy == "tpu":
            raise UserError("--length_bucket_width needs batches of varying length, which a "
                            "TPU cannot take: leave it at 0 on TPU")
        if config.input_format not in ("tfrecord", "text", *task_text.TASK_FORMATS):
            raise UserError(f"--input_format={config.input_format} is unknown: use tfrecord "
                            "(create_pretraining_data's files), text (the corpus itself), "
                            "conll or table (a fine-tuning file's text)")
        if config.max_ngram_size < 1:
            raise UserError(f"--max_ngram_size must be at least 1, got {config.max_ngram_size}")
        if config.max_ngram_size > config.max_predictions_per_seq:  # as the generator's check
            raise UserError(f"--max_ngram_size={config.max_ngram_size} is more than "
                            f"--max_predictions_per_seq={config.max_predictions_per_seq}: a span "
                            "of n words or pieces masks at least n tokens, so a longer span "
                            "never fits")
        if not 0 <= config.short_seq_prob <= 1:
            raise UserError(f"--short_seq_prob must be in [0, 1], got {config.short_seq_prob}")
        _check_text_flags(config, run)
        train_files, eval_files = _input_files(config)
        if config.input_format == "tfrecord":  # a corpus is one or more text files, not a set
            warnings = [file_sets.unlisted_set_warning(train_files, "input_file")]
            if config.eval_input_file:
                warnings.append(file_sets.unlisted_set_warning(eval_files, "eval_input_file"))
            for warning in filter(None, warnings):
                logging.warning("%s", warning)
        if run.do_eval and not config.eval_input_file:
            logging.warning("--do_eval without --eval_input_file evaluates on the training "
                            "data, which overstates what the model learned: pass held-out "
                            "data as --eval_input_file")
        if config.input_format not in task_text.TASK_FORMATS and not _has_sentence_pairs(
                train_files, eval_files):
            logging.warning("The input was made with --packing=full_sentences (no next-sentence "
                            "pairs): training the masked LM only, no next-sentence loss or "
                            "metrics")

    @property
    def text(self) -> bool:
        """Whether the instances are made from text on the fly (--input_format
        text, conll or table)."""
        return self.config.input_format != "tfrecord"

    @property
    def task_text(self) -> str | None:
        """"conll" or "table" for a fine-tuning file's text, else None."""
        fmt = self.config.input_format
        return fmt if fmt in task_text.TASK_FORMATS else None

    def text_config(self):
        """The generator's config for --input_format=text (the run's lengths,
        casing and seed; the data flags of create_pretraining_data)."""
        config, run = self.config, self.run_config
        return PretrainingDataConfig(
            max_seq_length=run.max_seq_length,
            max_predictions_per_seq=config.max_predictions_per_seq,
            masked_lm_prob=config.masked_lm_prob, short_seq_prob=config.short_seq_prob,
            dupe_factor=1, do_lower_case=bool(self.model_files.do_lower_case),
            do_whole_word_mask=config.do_whole_word_mask, max_ngram_size=config.max_ngram_size,
            random_seed=12345 if run.seed is None else run.seed,
            # A fine-tuning file's sentences have no document structure to pair.
            packing="full_sentences" if self.task_text else "sentence_pairs")

    @classmethod
    def run_files(cls, config, run_config) -> base.RunFiles:
        """The corpus and, as the vocabulary when --vocab_file and the checkpoint
        give none, the one the generator's summary names."""
        train_files, eval_files = _input_files(config)
        vocab = (_summary_beside(train_files) or {}).get("vocab_file")
        return base.RunFiles(
            inputs=tuple([("input_file", path) for path in train_files]
                         + [("eval_input_file", path) for path in eval_files]),
            training=tuple(train_files), vocab=vocab if vocab and io.exists(str(vocab)) else None)

    def read_inputs(self):
        self._check_inputs()
        return base.InputRecord(record=self._record_files())

    def _check_inputs(self):
        """Reads the first record of every file (names, kinds, lengths), or
        checks (or writes) the text it makes instances of."""
        if self.model_files.vocab_file is None:
            logging.warning("No vocabulary (--vocab_file): the output directory gets no "
                            "vocab.txt, and dynamic masking assumes Google's layout "
                            "([MASK]=103)")
        elif tokenization.MASK_TOKEN not in self.model_files.vocab:
            raise BadFileError(self.model_files.vocab_file, "lacks [MASK], which masking needs")
        self.corpus_files = {"input_file": self.train_files, "eval_input_file": self.eval_files}
        if self.text:
            self._read_text_inputs()
            return
        checks = [("input_file", self._dataset_fn(self.train_files, 1, True))] \
            if self.run_config.do_train else []
        if self.run_config.do_eval:
            checks.append(("eval_input_file" if self.config.eval_input_file else "input_file",
                           self._dataset_fn(self.eval_files, 1, False)))
        for flag, dataset_fn in checks:
            try:
                dataset_fn()  # reads the first record of every file: names, kinds, lengths
            except tf.errors.OpError as e:
                # TensorFlow's message names no file: find the one that is damaged.
                raise self.find_bad_input() or UserError(
                    f"--{flag}: {input_pipeline.tf_error_text(e)}") from None
        static = "masked_lm_ids" in input_pipeline.inspect_file(self.train_files[0])[1]
        logging.info("%d train file(s), %d eval file(s); masking: %s", len(self.train_files),
                     len(self.eval_files),
                     "static (from the files)" if static and not self.config.dynamic_masking
                     else "dynamic (at read time)")

    def _read_text_inputs(self):
        """Checks a corpus (--input_format=text) before it is read on the fly, or
        writes a fine-tuning file's text (conll, table) as one, in this
        process's memory (`ram://`: it goes with the process)."""
        config = self.config
        if self.model_files.vocab_file is None:
            raise UserError(f"--input_format={config.input_format} needs --vocab_file (to "
                            "tokenize the text)")
        flags = ["input_file"] + (["eval_input_file"] if config.eval_input_file else [])
        if self.task_text is None:
            for flag in flags:
                pretraining_corpus.check_text_corpus(self.corpus_files[flag],
                                                     self.model_files.vocab_file, flag)
            logging.info("%d train file(s), %d eval file(s) of text; instances made on the "
                         "fly (masking, next sentence: create_pretraining_data's)",
                         len(self.train_files), len(self.eval_files))
            return
        scratch = f"ram://official_bert/task_text/{uuid.uuid4().hex}"
        for flag in flags:
            corpus = f"{scratch}/{flag}.txt"
            counts = task_text.write_corpus(self.corpus_files[flag], self.task_text,
                                            self.text_columns, corpus)
            self.corpus_files[flag] = [corpus]
            what = (f"{counts['documents']} sentences" if self.task_text == "conll" else
                    f"{counts['documents']} rows ({counts['sentences']} texts)")
            logging.info("--%s: %s from %s", flag, what,
                         getattr(config, flag) or config.eval_input_file)
        if not config.eval_input_file:
            self.corpus_files["eval_input_file"] = self.corpus_files["input_file"]
        logging.info("--input_format=%s: each sentence or row is a document, packed as full "
                     "sentences with a [SEP] between documents; masked LM only (no sentence "
                     "pairs to predict)", self.task_text)

    def find_bad_input(self):
        """The first input file with a truncated or corrupt record (a
        `BadFileError`), or None: the `Trainer` asks when reading fails."""
        if self.text:
            return None  # text is checked whole before training (check_text_corpus)
        files = list(dict.fromkeys([*self.train_files, *self.eval_files]))
        return input_pipeline.find_bad_file(files)

    def find_lost_input(self) -> str | None:
        """The first input file that is no longer there or no longer readable
        (deleted, moved, its permissions changed while training), or None: the
        `Trainer` asks when reading fails."""
        for path in dict.fromkeys([*self.train_files, *self.eval_files]):
            if not io.exists(path) or (io.is_local(path) and not os.access(
                    io.local_path(path), os.R_OK)):
                return path
        return None

    def _record_files(self) -> dict:
        casing = ((self.summary or {}).get("config") or {}).get("do_lower_case")
        if self.text:
            casing = bool(self.model_files.do_lower_case)
        if not isinstance(casing, bool):
            return {}
        # The casing the data was tokenized with, for the fine-tuning scripts.
        return {TOKENIZER_CONFIG: json.dumps(
            {"do_lower_case": casing, "tokenizer_class": "BertTokenizer"}, indent=2) + "\n"}

    # --- data, evaluation -----------------------------------------------------------

    def _dataset_fn(self, files, batch_size, training, drop_remainder=True):
        config, run = self.config, self.run_config

        def dataset_fn(context=None):
            return input_pipeline.pretraining_dataset(
                files, run.max_seq_length, config.max_predictions_per_seq, batch_size,
                is_training=training, dynamic_masking=True if config.dynamic_masking else None,
                vocab_file=self.model_files.vocab_file,
                vocab_size=self.model_files.config.vocab_size,
                masked_lm_prob=config.masked_lm_prob, input_context=context, seed=run.seed,
                drop_remainder=drop_remainder,
                length_bucket_width=config.length_bucket_width if training else 0,
                bucket_batches=run.gradient_accumulation_steps,
                whole_word_masking=True if config.do_whole_word_mask else None,
                max_ngram_size=config.max_ngram_size,
                text_config=self.text_config() if self.text else None)

        return dataset_fn

    def train_dataset(self):
        run = self.run_config
        micro_batch = run.train_batch_size // run.gradient_accumulation_steps
        return base.TrainingSet(
            dataset_fn=self._dataset_fn(self.corpus_files["input_file"], micro_batch, True))

    def prepare(self):
        """Finds the unigram baseline's token: the most frequent among the
        first `BASELINE_SAMPLE` masked positions of the training data (read in
        file order, as evaluation reads; the same on every worker and resume)."""
        counts = collections.Counter()
        dataset_fn = self._dataset_fn(self.corpus_files["input_file"], 64, False,
                                      drop_remainder=False)
        try:
            for batch in dataset_fn():
                labels = batch["masked_lm_ids"].numpy()[batch["masked_lm_weights"].numpy() > 0]
                counts.update(labels.tolist())
                if sum(counts.values()) >= BASELINE_SAMPLE:
                    break
        except tf.errors.OpError as e:  # its message names no file: find the damaged one
            raise self.find_bad_input() or UserError(
                f"--input_file: {input_pipeline.tf_error_text(e)}") from None
        if not counts:
            return
        self.unigram_token, count = counts.most_common(1)[0]
        self.unigram_share = count / sum(counts.values())
        vocab = self.model_files.vocab if self.model_files.vocab_file else []
        token = vocab[self.unigram_token] if self.unigram_token < len(vocab) else None
        logging.info("Masked-LM unigram baseline: always predicting %s, the most frequent of "
                     "the training data's first %d masked tokens (%.1f%% of them); "
                     "masked_lm_unigram_baseline is that guess's accuracy on the positions "
                     "masked_lm_accuracy is measured on", repr(token) if token else
                     f"token id {self.unigram_token}", sum(counts.values()),
                     100 * self.unigram_share)

    def evaluate(self, trainer) -> dict:
        replicas = trainer.strategy.num_replicas_in_sync
        if self.run_config.eval_batch_size % replicas:
            raise UserError(f"--eval_batch_size={self.run_config.eval_batch_size} is not "
                            f"divisible by the {replicas} replica(s)")
        results = trainer.evaluate(
            self._dataset_fn(self.corpus_files["eval_input_file"],
                             self.run_config.eval_batch_size, False,
                             drop_remainder=replicas > 1), steps=self.config.max_eval_steps)
        results.pop("global_step", None)
        return results

    def export(self, model, export_dir, version):
        """The masked LM and next-sentence head as a TF Serving SavedModel
        (`serving.pretraining`: fill in the `[MASK]`s of raw text)."""
        if not self.model_files.vocab_file:
            raise UserError("--export_dir needs the vocabulary the model was trained with: "
                            "pass --vocab_file")
        return serving.export_pretraining_model(
            model, self.model_files.vocab_file, self.model_files.do_lower_case,
            self.run_config.max_seq_length, export_dir, version=version,
            int8=self.run_config.quantize)


def _has_sentence_pairs(train_files, eval_files) -> bool:
    """Whether the data has next-sentence pairs: False when the sets' manifests
    say `packing: full_sentences` (one stream of sentences, a constant label),
    which turns next-sentence prediction off with one line. Sets of both
    kinds together are refused."""
    packings = {}
    for path in dict.fromkeys([*train_files, *eval_files]):
        summary = _summary_of(path)
        if summary is not None:  # the first file of a set (the others have no sidecar)
            packings[path] = (summary.get("config") or {}).get("packing") or "sentence_pairs"
    if len(set(packings.values())) > 1:
        pairs = next(p for p, k in packings.items() if k != "full_sentences")
        packed = next(p for p, k in packings.items() if k == "full_sentences")
        raise UserError(f"{packed} was made with --packing=full_sentences (no next-sentence "
                        f"pairs) but {pairs} with sentence pairs: train on one kind (give "
                        "--input_file and --eval_input_file of one kind)")
    return "full_sentences" not in packings.values()


def _check_text_flags(config, run) -> None:
    """The flags of text input (--input_format text, conll or table)."""
    task_text.text_columns(config.text_column, config.input_format)  # (its own checks)
    text = config.input_format != "tfrecord"
    if text and config.dynamic_masking:
        raise UserError(f"--dynamic_masking is for TFRecords: with --input_format="
                        f"{config.input_format} every pass is masked afresh already; leave "
                        "it out")
    if text and run.distribution_strategy == "tpu":
        raise UserError(f"--input_format={config.input_format} makes the instances in "
                        "Python, which a TPU's input pipeline cannot call: make TFRecords "
                        "with create_pretraining_data and pass those")


def _input_files(config) -> tuple:
    """(training files, evaluation files), each --input_file / --eval_input_file
    expanded (a pattern, a set, a list). Evaluation alone reads only
    --eval_input_file; the training files' place is its."""
    train = (file_sets.expand_paths(config.input_file, "input_file") if config.input_file else
             file_sets.expand_paths(config.eval_input_file, "eval_input_file")
             if config.eval_input_file else [])
    evaluation = (file_sets.expand_paths(config.eval_input_file, "eval_input_file")
                  if config.eval_input_file and config.input_file else train)
    return train, evaluation


def _summary_beside(files):
    """The generator's summary of the first input that has a readable one."""
    for path in files:
        summary = _summary_of(path)
        if summary is not None:
            return summary
    return None


def _summary_of(path):
    """The generator's summary beside `path` (`file_sets.sidecar_path`, or an older
    version's `<file>.summary.json`), or None (none, or unreadable)."""
    for sidecar in (file_sets.sidecar_path(path), file_sets.legacy_sidecar_path(path)):
        if io.exists(sidecar):
            try:
                return json.loads(io.read_text(sidecar))
            except (OSError, ValueError):
                return None
    return None
