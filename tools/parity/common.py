"""What the parity scripts share: the recipe's flags, BERT's AdamW in torch, the
project's feature arrays as torch tensors, the training loop with its progress
lines, and the scoring.

The `hf_*.py` scripts run in a separate environment with torch and
transformers (README.md here says how to make it); `squad_replay.py` and
`run_squad_draws.py` run in the project's, which has neither. So torch is
imported when present and transformers only inside the function that needs it.
The official_bert side builds run_squad's own task (`official_bert.tasks`), so
its windows, draws and trainer are run_squad's. Importing this module puts the repository on `sys.path`: the scripts run from
anywhere with no PYTHONPATH.
"""

import argparse
import json
import math
import os
import sys
import time
from official_bert.configs import RunConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from data_prep import squad  # noqa: E402
from official_bert.metrics import ner as ner_metrics  # noqa: E402
from official_bert.metrics import squad as squad_metrics  # noqa: E402
from official_bert.text import tokenization  # noqa: E402

try:
    import torch
except ImportError:  # the official_bert side: squad_replay.py, run_squad_draws.py
    torch = None

# run_ner.py's and run_squad.py's acceptance recipes.
RECIPES = {
    "ner": dict(max_seq_length=128, train_batch_size=32, num_train_epochs=3),
    "squad": dict(max_seq_length=384, train_batch_size=16, num_train_epochs=1),
}


# === Flags ===


def recipe_parser(description, task, without=()):
    """A parser with the flags the `task` ("ner" or "squad") scripts share:
    model, data files, window sizes, batch sizes, learning rate, epochs and
    seed, with the recipe's defaults; the flags named in `without` left out."""
    defaults = RECIPES[task]
    parser = argparse.ArgumentParser(description=description)

    def add(name, **kwargs):
        if name not in without:
            parser.add_argument("--" + name, **kwargs)

    add("model_dir", required=True)
    add("train_file", required=True)
    if task == "ner":
        add("eval_file", action="append", required=True,
            help="CoNLL file(s) with gold tags (repeat the flag for several)")
    else:
        add("predict_file", required=True)
    add("max_seq_length", type=int, default=defaults["max_seq_length"])
    if task == "squad":
        add("doc_stride", type=int, default=128)
        add("max_query_length", type=int, default=64)
        add("max_train_examples", type=int, default=None,
            help="Use only the first N training questions (as run_squad.py's flag).")
    add("train_batch_size", type=int, default=defaults["train_batch_size"])
    if task == "squad":
        add("predict_batch_size", type=int, default=32)
    add("learning_rate", type=float, default=5e-5)
    add("num_train_epochs", type=int, default=defaults["num_train_epochs"])
    add("seed", type=int, default=42)
    return parser


# === The project's data ===


def project_tokenizer(model_dir):
    """run_ner's and run_squad's WordPiece tokenizer over `model_dir`/vocab.txt
    (uncased, as MiniLM; the official_bert side reads the casing from the
    checkpoint, as run_squad does)."""
    return tokenization.FullTokenizer(os.path.join(model_dir, "vocab.txt"), do_lower_case=True)


def squad_window_flags(args):
    """The window flags of `squad.convert_examples_to_features`."""
    return dict(max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
                max_query_length=args.max_query_length)


def squad_training_arrays(args, tokenizer):
    """run_squad.py's training feature arrays (google's `doc_stride` windows)
    of the first `--max_train_examples` questions of `--train_file`."""
    examples = squad.read_squad_examples(args.train_file, is_training=True)
    return squad.features_to_arrays(squad.convert_examples_to_features(
        examples[:args.max_train_examples], tokenizer, is_training=True,
        **squad_window_flags(args)), is_training=True)


def official_bert_squad_task(args, **run_fields):
    """run_squad.py's `SpanLabelingTask` for these flags (and `run_fields` of
    its `RunConfig`), as `tasks.runner.run_task` leaves it before training: model files
    resolved, training questions read. For the official_bert side."""
    from official_bert import model_files
    from official_bert.tasks.squad import SpanLabelingTask, SquadConfig

    run = RunConfig(do_train=True, init_checkpoint=args.model_dir,
                         max_seq_length=args.max_seq_length,
                         train_batch_size=args.train_batch_size,
                         max_train_examples=args.max_train_examples, seed=args.seed,
                         **run_fields)
    task = SpanLabelingTask(SquadConfig(train_file=args.train_file, doc_stride=args.doc_stride,
                                        max_query_length=args.max_query_length), run,
                            model_files=model_files.resolve_model_files(run))
    task.read_inputs()
    return task


def feature_batch(arrays, indices, labels=None, trim=False):
    """transformers' inputs from the project's feature arrays at `indices`.

    `labels`: None; "ner" adds `labels` from `label_ids` (its -1, the
    positions without a label, become torch's ignored -100); "span" adds
    `start_positions` and `end_positions`. `trim` cuts the sequences to the
    batch's longest window.
    """
    length = int(arrays["input_mask"][indices].sum(1).max()) if trim else None

    def tensor(key):
        value = arrays[key][indices]
        return torch.tensor(value[:, :length] if value.ndim == 2 else value, dtype=torch.long)

    batch = dict(input_ids=tensor("input_word_ids"), attention_mask=tensor("input_mask"),
                 token_type_ids=tensor("input_type_ids"))
    if labels == "ner":
        label_ids = tensor("label_ids")
        batch["labels"] = label_ids.masked_fill(label_ids < 0, -100)
    elif labels == "span":
        batch["start_positions"] = tensor("start_positions")
        batch["end_positions"] = tensor("end_positions")
    return batch


# === Training ===


def seed_torch(seed):
    """Seeds torch, and lets it use every core this process may run on
    (`taskset` narrows them)."""
    torch.manual_seed(seed)
    torch.set_num_threads(len(os.sched_getaffinity(0)))


def bert_adamw(model, learning_rate, num_steps, warmup_steps):
    """(optimizer, schedule): torch's AdamW with BERT's recipe, as
    transformers' Trainer runs it: weight decay 0.01 except biases and
    LayerNorm weights, epsilon 1e-6, linear warm-up over `warmup_steps` then
    linear decay to 0 at `num_steps`."""
    from transformers import get_linear_schedule_with_warmup

    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=learning_rate, eps=1e-6)
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup_steps, num_steps)


def epoch_steps(num_windows, batch_size, epochs):
    """(steps per epoch, total steps): each epoch's last partial batch kept,
    as transformers' Trainer does."""
    per_epoch = math.ceil(num_windows / batch_size)
    return per_epoch, per_epoch * epochs


def index_batches(orders, batch_size, steps_per_epoch):
    """Each epoch's window order (an iterable of them, drawn as it is
    reached) cut into `steps_per_epoch` batches of indices."""
    for order in orders:
        for b in range(steps_per_epoch):
            yield order[b * batch_size:(b + 1) * batch_size]


def train(model, optimizer, schedule, batches, total, log_steps=50):
    """One update per batch (model keyword arguments, labels included):
    backward, global-norm clipping at 1.0, AdamW, schedule.

    Prints the mean loss of every `log_steps` steps and of the last ones, and
    the time taken (nothing when `log_steps` is None). Returns each step's loss.
    """
    start, losses = time.time(), []
    model.train()
    for batch in batches:
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        step = len(losses)
        if log_steps and (step % log_steps == 0 or step == total):
            window = losses[-(step % log_steps or log_steps):]
            print(f"step {step}/{total}: loss {sum(window) / len(window):.4f}, "
                  f"{time.time() - start:.0f} s", flush=True)
    if log_steps:
        print(f"training took {time.time() - start:.0f} s", flush=True)
    return losses


# === Scoring ===


def print_ner_scores(path, gold_tags, predicted_tags):
    """Exact-span entity F1, precision and recall of `path`'s predictions, as
    one line: the path, then JSON."""
    scores = ner_metrics.flat_results(ner_metrics.entity_scores(gold_tags, predicted_tags))
    print(path, json.dumps({k: round(v, 4) for k, v in scores.items()
                            if k in ("entity_f1", "precision", "recall")}), flush=True)


def print_squad_scores(predict_file, predictions):
    """The official SQuAD v1.1 scores of {question id: answer text}, printed as
    the last line, in JSON (`squad_seeds.py` reads it)."""
    scores = squad_metrics.evaluate_v1(squad.load_squad_json(predict_file), predictions)
    print(json.dumps(scores), flush=True)
