"""`bert`: one command for every job, `bert <command> [flags]`.

Each command is one of the scripts (`run_*.py`, `data_prep/*.py`, ...) with the
same flags; `bert <command> --help` shows them grouped, with an example.

    bert prepare-corpus --input=my_docs/ --output_file=corpus.txt
    bert classify --task_name=sst-2 --data_dir=glue/SST-2 --init_checkpoint=ckpt/ \\
        --do_train --do_eval --output_dir=runs/sst2
"""

from __future__ import annotations

import importlib
import sys

# command → (module with `entry(argv)`, one-line description). In pipeline order.
COMMANDS = {
    "prepare-corpus": ("data_prep.prepare_corpus",
                       "raw documents → one sentence per line, blank line between documents"),
    "build-vocab": ("data_prep.build_vocab", "learn a WordPiece vocabulary (Google's layout)"),
    "create-pretraining-data": ("data_prep.create_pretraining_data",
                                "masked-LM + next-sentence TFRecords"),
    "pretrain": ("run_pretraining", "pre-train BERT (masked LM + next sentence)"),
    "classify": ("run_classifier", "fine-tune / evaluate / predict GLUE or your own CSV/TSV"),
    "squad": ("run_squad", "question answering, SQuAD v1.1 and v2.0"),
    "swag": ("run_swag", "multiple choice (SWAG layout)"),
    "ner": ("run_ner", "token tagging (CoNLL files), fine-tuned or feature-based"),
    "predict": ("predict", "labels for raw text lines from an export or a trained run"),
    "extract-features": ("extract_features", "per-layer token vectors or sentence vectors"),
    "quickstart": ("quickstart", "the end-to-end demo on bundled data"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [__doc__.strip(), "", "commands:"]
    lines += [f"  {name:<{width}}  {description}" for name, (_, description) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(usage())
        return 0
    command = argv[1]
    if command not in COMMANDS:
        print(f"error: unknown command {command!r}; known: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    module.entry([f"bert {command}"] + argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
