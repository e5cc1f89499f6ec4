"""One run's window order with another run's initial span head, for `squad_replay.py`.

The draws files of the two directions (`run_squad_draws.py`: run_squad's
`tf.data` order and Keras head; `hf_squad_finetune.py --save_replay`:
transformers' numpy order and torch head) each hold an `order` and a head
(`kernel`, `bias`). Crossing them separates the two draws: which of them
decides a run's score. run_squad's order is its stream of `steps x batch`
windows; its first `num_windows` (one epoch, a permutation of the windows)
are kept, as the replay trains epochs of exactly the windows. From the
repository root:

    python tools/parity/run_squad_draws.py --model_dir=$MINILM --train_file=$TRAIN \\
        --seed=42 --output=/tmp/ours42.npz
    /tmp/hf/bin/python tools/parity/hf_squad_finetune.py --model_dir=$MINILM \\
        --train_file=$TRAIN --predict_file=$DEV --seed=42 --save_replay=/tmp/hf42.npz
        # (the file is written before training starts: stop it there if only the draws matter)
    python tools/parity/mix_draws.py --order=/tmp/ours42.npz --head=/tmp/hf42.npz \\
        --output=/tmp/ours_order_hf_head42.npz
    python tools/parity/squad_replay.py --model_dir=$MINILM --train_file=$TRAIN \\
        --predict_file=$DEV --replay=/tmp/ours_order_hf_head42.npz --seed=42 \\
        --output_dir=/tmp/mixed42

Measured (the acceptance recipe, seed 42): run_squad's order with transformers'
head EM 27.18 / F1 38.31 (training loss 3.15 at steps 151-200); the same order
with run_squad's own head 15.44 / 22.55 (3.62); transformers' order with its
head 26.60 / 37.69 (3.07).
"""

import argparse

import numpy as np


def mix(order_file: str, head_file: str) -> dict:
    """{"order", "kernel", "bias"}: `order_file`'s order cut to the length of
    `head_file`'s (one epoch of its windows), `head_file`'s head."""
    order, head = np.load(order_file), np.load(head_file)
    num_windows = len(head["order"])
    first = order["order"][:num_windows]
    if len(first) < num_windows or sorted(first.tolist()) != list(range(num_windows)):
        raise SystemExit(f"error: the first {num_windows} windows of {order_file} are not a "
                         f"permutation of the {num_windows} windows of {head_file}: make both "
                         "from the same files and window flags")
    return {"order": first, "kernel": head["kernel"], "bias": head["bias"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--order", required=True, help="draws file whose window order is kept")
    parser.add_argument("--head", required=True, help="draws file whose span head is kept")
    parser.add_argument("--output", required=True, help=".npz for squad_replay.py --replay")
    args = parser.parse_args()
    mixed = mix(args.order, args.head)
    np.savez(args.output, **mixed)
    print(f"{len(mixed['order'])} windows in {args.order}'s order, {args.head}'s head: "
          f"wrote {args.output}")


if __name__ == "__main__":
    main()
