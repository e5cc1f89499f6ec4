"""run_squad's SQuAD v1.1 recipe with Hugging Face transformers doing the training.

The windows (google-research/bert's `doc_stride` windows and max-context
rule), the post-processing and the official metric are run_squad's
(`data_prep.squad`, `official_bert.metrics.squad`); the model and optimizer are
transformers' `BertForQuestionAnswering` and torch's `AdamW` with BERT's
recipe (weight decay 0.01 except biases and LayerNorm, epsilon 1e-6, 10%
warm-up then linear decay, clipping 1.0, dropout 0.1, a shuffle each epoch,
steps = windows / batch rounded up). A gap between this and run_squad on the
same data is a difference of implementation, not of data or scoring (and of
the random draws: `--save_replay` hands this run's window order and head to
`squad_replay.py`, which trains run_squad's model on them; `--load_replay` trains
this one on run_squad's draws from `run_squad_draws.py`). Needs
torch and transformers; from the repository root:

    /tmp/hf/bin/python tools/parity/hf_squad_finetune.py \
        --model_dir=$MINILM \
        --train_file=../shared/data/squad_v1.1/train-v1.1-first12articles.json \
        --predict_file=../shared/data/squad_v1.1/squad_v1.1-shared.json --seed=42

(`tools/parity/README.md` says how to make /tmp/hf.)
"""

import numpy as np
import torch
from transformers import BertForQuestionAnswering

import common
from data_prep import squad, squad_postprocessing


def main():
    parser = common.recipe_parser(__doc__.splitlines()[0], "squad")
    parser.add_argument("--save_replay", default=None,
                        help="Write this run's window order and initial head here (.npz) for "
                             "tools/parity/squad_replay.py.")
    parser.add_argument("--load_replay", default=None,
                        help="Train in this .npz's window order from its initial head instead "
                             "of this run's own draws (e.g. run_squad's, from "
                             "tools/parity/run_squad_draws.py).")
    args = parser.parse_args()
    common.seed_torch(args.seed)
    rng = np.random.RandomState(args.seed)
    tokenizer = common.project_tokenizer(args.model_dir)

    train = common.squad_training_arrays(args, tokenizer)
    model = BertForQuestionAnswering.from_pretrained(args.model_dir)
    num_windows = len(train["input_word_ids"])
    steps_per_epoch, total = common.epoch_steps(num_windows, args.train_batch_size,
                                                args.num_train_epochs)
    optimizer, schedule = common.bert_adamw(model, args.learning_rate, total, int(0.1 * total))
    print(f"{num_windows} training windows, {total} steps", flush=True)

    orders = [rng.permutation(num_windows) for _ in range(args.num_train_epochs)]
    if args.load_replay:
        replay = np.load(args.load_replay)
        order = replay["order"][:total * args.train_batch_size]
        if order.max() >= num_windows:
            raise SystemExit(f"error: {args.load_replay} orders windows these settings lack")
        orders = [order[e * steps_per_epoch * args.train_batch_size:
                        (e + 1) * steps_per_epoch * args.train_batch_size]
                  for e in range(args.num_train_epochs)]
        with torch.no_grad():
            model.qa_outputs.weight.copy_(torch.from_numpy(replay["kernel"].T))
            model.qa_outputs.bias.copy_(torch.from_numpy(replay["bias"]))
    if args.save_replay:
        np.savez(args.save_replay, order=np.concatenate(orders),
                 kernel=model.qa_outputs.weight.detach().numpy().T,
                 bias=model.qa_outputs.bias.detach().numpy())
    common.train(model, optimizer, schedule,
                 (common.feature_batch(train, indices, labels="span")
                  for indices in common.index_batches(orders, args.train_batch_size,
                                                      steps_per_epoch)), total)

    examples = squad.read_squad_examples(args.predict_file, is_training=False)
    features = squad.convert_examples_to_features(examples, tokenizer, is_training=False,
                                                  **common.squad_window_flags(args))
    arrays = squad.features_to_arrays(features, is_training=False)
    # Longest windows first, each batch cut to its longest (feature_batch's trim).
    order = np.argsort(-arrays["input_mask"].sum(axis=1), kind="stable")
    results = {}
    model.eval()
    with torch.no_grad():
        for i in range(0, len(order), args.predict_batch_size):
            indices = order[i:i + args.predict_batch_size]
            out = model(**common.feature_batch(arrays, indices, trim=True))
            pad = ((0, 0), (0, args.max_seq_length - out.start_logits.shape[1]))
            starts = np.pad(out.start_logits.numpy(), pad)
            ends = np.pad(out.end_logits.numpy(), pad)
            for j, index in enumerate(indices):
                results[int(arrays["unique_ids"][index])] = (starts[j], ends[j])
    predictions = squad_postprocessing.postprocess_predictions(examples, features, results)
    common.print_squad_scores(args.predict_file, {q: p.text for q, p in predictions.items()})


if __name__ == "__main__":
    main()
