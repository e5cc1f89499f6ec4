"""run_ner's recipe with Hugging Face transformers doing the training: a reference run.

The windows (first sub-token labelled, BIO), the evaluation (exact-span entity
F1) and the recipe (AdamW, weight decay 0.01 except biases and LayerNorm,
epsilon 1e-6, 10% warm-up then linear decay, clipping 1.0, dropout 0.1,
batches padded to their longest window, a fresh shuffle each epoch, the last
partial batch kept as transformers' Trainer does) are run_ner's; the model and
the optimizer are transformers' `BertForTokenClassification` and torch's
`AdamW`. A gap between this and run_ner on the same data is then a difference
of implementation, not of data or scoring. Needs torch and transformers (not
the project's dependencies); from the repository root:

    /tmp/hf/bin/python tools/parity/hf_ner_finetune.py \
        --model_dir=$MINILM --train_file=../shared/data/ner/wnut17/wnut17train.conll \
        --eval_file=../shared/data/ner/wnut17/emerging.dev.conll --num_train_epochs=3 --seed=42

(`tools/parity/README.md` says how to make /tmp/hf.)
"""

import numpy as np
import torch
from transformers import BertForTokenClassification

import common
from data_prep import conll


def main():
    args = common.recipe_parser(__doc__.splitlines()[0], "ner").parse_args()
    common.seed_torch(args.seed)
    rng = np.random.RandomState(args.seed)

    train = conll.read_conll(args.train_file)
    labels = conll.label_list_from(train.sentences)
    tokenizer = common.project_tokenizer(args.model_dir)
    train_arrays = conll.windows_to_arrays(
        conll.convert_sentences(train.sentences, tokenizer, labels, args.max_seq_length))
    model = BertForTokenClassification.from_pretrained(args.model_dir, num_labels=len(labels))
    num_windows = len(train_arrays["input_word_ids"])
    steps_per_epoch, total = common.epoch_steps(num_windows, args.train_batch_size,
                                                args.num_train_epochs)
    optimizer, schedule = common.bert_adamw(model, args.learning_rate, total, int(0.1 * total))
    orders = (rng.permutation(num_windows) for _ in range(args.num_train_epochs))
    common.train(model, optimizer, schedule,
                 (common.feature_batch(train_arrays, indices, labels="ner", trim=True)
                  for indices in common.index_batches(orders, args.train_batch_size,
                                                      steps_per_epoch)), total)

    model.eval()
    for path in args.eval_file:
        data = conll.read_conll(path)
        windows = conll.convert_sentences(data.sentences, tokenizer, labels, args.max_seq_length)
        arrays = conll.windows_to_arrays(windows)
        predicted = np.zeros_like(arrays["label_ids"])
        with torch.no_grad():
            for i in range(0, len(windows), 64):
                indices = np.arange(i, min(i + 64, len(windows)))
                ids = model(**common.feature_batch(arrays, indices, trim=True)).logits.argmax(-1)
                predicted[indices, :ids.shape[1]] = ids.numpy()
        per_word = conll.word_predictions(windows, predicted, len(data.sentences),
                                          [len(s.words) for s in data.sentences])
        common.print_ner_scores(path, [s.tags for s in data.sentences],
                                [[labels[i] for i in sentence] for sentence in per_word])


if __name__ == "__main__":
    main()
