"""One tiny export per task, made with `official_bert.serving`, and what each should answer.

`export_all(root)` exports a random tiny model per task (classification, regression,
SQuAD v1.1 and v2.0, multiple choice, NER, the plain encoder and the pre-training
model) under `root` and returns {case: dict(dir=..., text=..., ids=..., params=...,
expected=...)}: the raw text a client sends, the ids the Python preprocessing makes
of it, and what the Keras model gives for them. `tests/test_serving.py` checks every
export against it; `tools/serving_examples.py` prints the guide's request and
response of each. The weights are random: only names, types and shapes mean anything.
"""

import numpy as np

SQUAD_WORDS = ("the man went to store and bought a gallon of milk john smith leader was "
               "japanese electronics industry is largest in world who what when born cafe "
               "one two three four five six seven eight nine ten").split()
EXTRA_WORDS = ("very good bad movie film ! he she it walk ##ed ##ing park new york paris sat "
               "down city woman un ##believ ##able great fun dull").split()
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "(", ")", "-", ".", ",", "'", "s", "?",
          "##s", "18", "##95", "1943", "ca", "##fe"] + SQUAD_WORDS + EXTRA_WORDS)
LABELS = ["contradiction", "entailment", "neutral"]  # MNLI's, as the guide's example says
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SEQ = 16

TEXT_A = ["The man walked in the Café!", "UNBELIEVABLE movie???",
          "she walks , he walking very very very very very very very very far",
          "Zebras\tjump", ""]
TEXT_B = ["a woman is in the park.", "it was very good", "he walked .", "bad", "the man"]
LONG = ("The man went to the store and bought a gallon of milk. John Smith (1895-1943) was "
        "the leader.  Café  John's  japanese\telectronics industry is the largest in the world. ")
CONTEXTS = [LONG, "Cafe\u0301 leader was John Smith's man, one two three.",
            "Who went to the store? The man\u00a0went,  one  two.", ""]
QUESTIONS = ["who bought milk?", "who was the leader?", "who went to the store?", "who?"]
SQUAD = dict(max_seq_length=32, doc_stride=8, max_query_length=6, n_best_size=10,
             max_answer_length=10)
MC_CONTEXT = ["The man walks to the city.", "She went to New York."]
MC_START = ["He", ""]
MC_ENDINGS = [["sat down.", "went to paris.", "is on the man."],
              ["he sat down.", "she sat down.", "the city."]]
NER_TEXT = ["John Smith went to New York", "the man walks in Paris", "she sat down .", ""]
ENCODER_TEXT = ["a very good movie !", "the film was awful", ""]
MLM_A = ["the man went to the [MASK] .", "[MASK] [MASK] was the leader", "no masks here"]
MLM_B = ["he bought [MASK] .", "", "the city"]
NER_MAX_BATCH = 4  # the NER export's limit, to test the refusal of a larger batch


def _config():
    from official_bert.modeling.configs import BertConfig

    return BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)


def random_encoder(seed):
    """A built BertEncoder of `_config()`, its random weights drawn from `seed`."""
    import keras

    from official_bert.modeling.encoder import BertEncoder, dummy_inputs

    keras.utils.set_random_seed(seed)
    encoder = BertEncoder.from_bert_config(_config())
    encoder(dummy_inputs())
    return encoder


def scale_head(dense, seed, scale=1.0):
    """Larger head weights than the initializer's, so outputs differ visibly."""
    kernel = dense.kernel
    kernel.assign(np.random.default_rng(seed).normal(0, scale, kernel.shape).astype("float32"))


def pack(tokenizer, texts_a, texts_b=None, seq=SEQ):
    """The ids of `texts_a` (paired with `texts_b`), packed to `seq` tokens as the export does."""
    from official_bert.text import tokenization

    rows = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
    for i, a in enumerate(texts_a):
        b = tokenizer.tokenize(texts_b[i]) if texts_b is not None else None
        tokens, mask, segments = tokenization.pack_tokens(tokenizer.tokenize(a), b, seq)
        rows["input_word_ids"].append(tokenizer.convert_tokens_to_ids(tokens))
        rows["input_mask"].append(mask)
        rows["input_type_ids"].append(segments)
    return {k: np.asarray(v, np.int32) for k, v in rows.items()}


def export_all(root, int8=False):
    """Exports one tiny model per task (with `int8`, each version also holds its
    int8 model.tflite); returns {case: dict(dir=..., text=..., ids=...,
    expected=...)} with what the Keras model and the Python preprocessing give."""
    import tensorflow as tf

    from data_prep import conll, squad, squad_postprocessing, swag
    from official_bert.modeling import heads
    from official_bert.serving import (classification, encoder as encoder_serving,
                                       multiple_choice, ner, pretraining)
    from official_bert.serving import squad as squad_serving
    from official_bert.text import tokenization

    vocab_file = root / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
    cases = {}

    # Classification (a pair task, three labels).
    model = heads.BertClassifier(random_encoder(1), len(LABELS))
    ids = pack(tokenizer, TEXT_A, TEXT_B)
    model(ids)
    scale_head(model.classifier, 1)
    model.classifier.bias.assign(-model(ids, training=False).numpy().mean(axis=0))
    probabilities = tf.nn.softmax(model(ids, training=False)).numpy()
    cases["classification"] = dict(
        dir=classification.export_classifier(model, str(vocab_file), True, SEQ, LABELS, True,
                                             str(root / "classification"), int8=int8),
        text={"text_a": TEXT_A, "text_b": TEXT_B}, ids=ids, params=model.count_params(),
        expected={"probabilities": probabilities,
                  "label": [LABELS[i] for i in probabilities.argmax(axis=1)]})

    # Regression (one output, no labels; a single-sentence task: text_a only).
    model = heads.BertClassifier(random_encoder(8), 1)
    single_ids = pack(tokenizer, TEXT_A)
    model(single_ids)
    scale_head(model.classifier, 8, 3.0)
    cases["regression"] = dict(
        dir=classification.export_classifier(model, str(vocab_file), True, SEQ, None, False,
                                             str(root / "regression"), int8=int8),
        text={"text_a": TEXT_A}, ids=single_ids, params=model.count_params(),
        expected={"score": model(single_ids, training=False).numpy()[:, 0]})

    # SQuAD v1.1 and v2.0: one span labeler; the v2.0 threshold splits the questions.
    model = heads.BertSpanLabeler(random_encoder(2))
    model({k: v[:1] for k, v in ids.items()})
    scale_head(model.span_labeler, 2)
    examples = []
    for i, (question, context) in enumerate(zip(QUESTIONS, CONTEXTS)):
        doc_tokens, _, spans = squad.split_doc_tokens(context)
        examples.append(squad.SquadExample(str(i), question, context, doc_tokens, spans))
    features = squad.convert_examples_to_features(
        examples, tokenizer, SQUAD["max_seq_length"], SQUAD["doc_stride"],
        SQUAD["max_query_length"], False)
    arrays = squad.features_to_arrays(features, False)
    window_ids = {k: arrays[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    logits = {k: v.numpy() for k, v in model(window_ids, training=False).items()}
    results = {int(u): (s, e) for u, s, e in zip(arrays["unique_ids"], logits["start_logits"],
                                                  logits["end_logits"])}
    v1 = squad_postprocessing.postprocess_predictions(
        examples, features, results, n_best_size=SQUAD["n_best_size"],
        max_answer_length=SQUAD["max_answer_length"])
    diffs = sorted(p.score_diff for p in squad_postprocessing.postprocess_predictions(
        examples, features, results, n_best_size=SQUAD["n_best_size"],
        max_answer_length=SQUAD["max_answer_length"], version_2_with_negative=True).values())
    threshold = float((diffs[0] + diffs[1]) / 2)  # the lowest answers, the others do not
    v2 = squad_postprocessing.postprocess_predictions(
        examples, features, results, n_best_size=SQUAD["n_best_size"],
        max_answer_length=SQUAD["max_answer_length"], version_2_with_negative=True,
        null_score_diff_threshold=threshold)
    answered = [i for i, c in enumerate(CONTEXTS) if c]  # Python skips an empty context
    for version_2, predictions in ((False, v1), (True, v2)):
        name = "squad_v2" if version_2 else "squad_v1"
        cases[name] = dict(
            dir=squad_serving.export_squad_model(
                model, VOCAB, str(root / name), version_2_with_negative=version_2,
                null_score_diff_threshold=threshold, int8=int8, **SQUAD),
            text={"question": QUESTIONS, "context": CONTEXTS}, ids=window_ids,
            params=model.count_params(),
            expected={"predictions": {i: predictions[str(i)] for i in answered},
                      "start_logits": logits["start_logits"],
                      "end_logits": logits["end_logits"], "threshold": threshold})

    # Multiple choice (3 endings).
    model = heads.BertMultipleChoice(random_encoder(3))
    examples = [swag.SwagExample(str(i), c, s, e, None)
                for i, (c, s, e) in enumerate(zip(MC_CONTEXT, MC_START, MC_ENDINGS))]
    mc = swag.convert_examples(examples, tokenizer, SEQ)
    mc_ids = {k: mc[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    model(mc_ids)
    scale_head(model.choice_scorer, 3, 3.0)
    mc_logits = model(mc_ids, training=False).numpy()
    cases["multiple_choice"] = dict(
        dir=multiple_choice.export_multiple_choice(model, str(vocab_file), True, SEQ,
                                                   str(root / "multiple_choice"), int8=int8),
        text={"context": MC_CONTEXT, "start": MC_START, "endings": MC_ENDINGS}, ids=mc_ids,
        params=model.count_params(),
        expected={"logits": mc_logits, "probabilities": tf.nn.softmax(mc_logits).numpy()})

    # NER (every sentence fits one window; the export's limit is NER_MAX_BATCH).
    model = heads.BertTokenClassifier(random_encoder(4), len(TAGS))
    sentences = [conll.Sentence(text.split(), None, [], []) for text in NER_TEXT]
    windows = conll.convert_sentences(sentences, tokenizer, TAGS, SEQ)
    ner_ids = {k: v for k, v in conll.windows_to_arrays(windows).items() if k != "label_ids"}
    model(ner_ids)
    scale_head(model.token_classifier, 4, 3.0)
    tag_ids = model(ner_ids, training=False).numpy().argmax(axis=-1)
    words = conll.word_predictions(windows, tag_ids, len(sentences),
                                   [len(s.words) for s in sentences])
    cases["ner"] = dict(
        dir=ner.export_token_classifier(model, str(vocab_file), True, SEQ, TAGS,
                                        str(root / "ner"), max_batch_size=NER_MAX_BATCH,
                                        int8=int8),
        text={"text": NER_TEXT}, ids=ner_ids, params=model.count_params(),
        expected={"tags": [[TAGS[t] for t in w] for w in words],
                  "token_tags": [[TAGS[t] for t in row] for row in tag_ids]})

    # The plain encoder.
    encoder = random_encoder(5)
    enc_ids = pack(tokenizer, ENCODER_TEXT)
    out = encoder(enc_ids, training=False)
    cases["encoder"] = dict(
        dir=encoder_serving.export_encoder(encoder, str(vocab_file), True, SEQ,
                                           str(root / "encoder")),
        text={"text": ENCODER_TEXT}, ids=enc_ids, params=encoder.count_params(),
        expected={"pooled_output": out["pooled_output"].numpy(),
                  "sequence_output": out["sequence_output"].numpy(), "ids": enc_ids})

    # The pre-training model: [MASK]s in raw text, "" for one segment.
    model = heads.BertPretrainer(random_encoder(6))
    model._ensure_built()
    scale_head(model.next_sentence, 6, 3.0)
    mask_id = VOCAB.index("[MASK]")

    def with_masks(text):
        pieces = text.split("[MASK]")
        tokens = tokenizer.tokenize(pieces[0])
        for piece in pieces[1:]:
            tokens += ["[MASK]"] + tokenizer.tokenize(piece)
        return tokens

    rows = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
    for a, b in zip(MLM_A, MLM_B):
        packed = tokenization.pack_tokens(with_masks(a), with_masks(b) if b else None, SEQ)
        rows["input_word_ids"].append(tokenizer.convert_tokens_to_ids(packed[0]))
        rows["input_mask"].append(packed[1])
        rows["input_type_ids"].append(packed[2])
    mlm_ids = {k: np.asarray(v, np.int32) for k, v in rows.items()}
    positions = [list(np.flatnonzero(row == mask_id)) for row in mlm_ids["input_word_ids"]]
    width = max(len(p) for p in positions)
    padded = np.asarray([p + [0] * (width - len(p)) for p in positions], np.int32)
    heads_out = model({**mlm_ids, "masked_lm_positions": padded}, training=False)
    mlm_probabilities = tf.nn.softmax(heads_out["masked_lm_logits"]).numpy()
    cases["pretraining"] = dict(
        dir=pretraining.export_pretraining_model(model, str(vocab_file), True, SEQ,
                                                 str(root / "pretraining")),
        text={"text_a": MLM_A, "text_b": MLM_B}, ids=mlm_ids, params=model.count_params(),
        expected={"positions": positions, "probabilities": mlm_probabilities,
                  "next_sentence": tf.nn.softmax(heads_out["next_sentence_logits"]).numpy()})
    return cases
