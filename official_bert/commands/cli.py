"""`bert`: one command for every job, `bert <command> [flags]`.

`bert <command> --help` shows a command's flags, grouped, with an example; the
top-level scripts (`python run_classifier.py`, `python run_squad.py`, ...) are
the same commands under google-research/bert's names, with the same flags. From
the repository root, after the README's set-up (`$MINILM` is the bundled
all-MiniLM-L6-v2, `$DATA` where `bert download` puts the data):

    bert prepare-corpus --input=data_prep/sample_corpus --output_file=/tmp/corpus.txt
    bert classify --task_name=qnli --data_dir=examples/qnli_small --init_checkpoint=$MINILM \\
        --do_train --do_eval --num_train_epochs=1 --max_seq_length=128 --output_dir=/tmp/qnli
    bert download glue/SST-2 --output_dir=$DATA
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

# command → (module with `entry(argv)`, one-line description). In pipeline order.
COMMANDS = {
    "download": ("official_bert.commands.download",
                 "fetch GLUE, SQuAD, SWAG, WNUT-17, XNLI (checksums, resume, mirrors)"),
    "prepare-corpus": ("official_bert.commands.prepare_corpus",
                       "raw documents → one sentence per line, blank line between documents"),
    "build-vocab": ("official_bert.commands.build_vocab",
                    "learn a WordPiece vocabulary (Google's layout)"),
    "extend-vocab": ("official_bert.commands.extend_vocab",
                     "add a corpus's frequent words to a checkpoint's vocabulary (new "
                     "embeddings: the mean of their old pieces')"),
    "create-pretraining-data": ("official_bert.commands.create_pretraining_data",
                                "masked-LM + next-sentence TFRecords"),
    "pretrain": ("official_bert.commands.pretrain",
                 "pre-train BERT (masked LM + next sentence)"),
    "classify": ("official_bert.commands.classify",
                 "fine-tune / evaluate / predict GLUE or your own CSV/TSV"),
    "squad": ("official_bert.commands.squad", "question answering, SQuAD v1.1 and v2.0"),
    "squad-split": ("official_bert.commands.squad_split",
                    "split a SQuAD file into train and dev by article"),
    "swag": ("official_bert.commands.swag", "multiple choice (SWAG layout)"),
    "ner": ("official_bert.commands.ner",
            "token tagging (CoNLL files), fine-tuned or feature-based"),
    "glue-submission": ("official_bert.commands.glue_submission",
                        "the GLUE leaderboard's zip from a directory of predicted runs"),
    "predict": ("official_bert.commands.predict", "labels for raw text lines from an export or a trained run"),
    "extract-features": ("official_bert.commands.extract_features",
                         "per-layer token vectors or sentence vectors"),
    "embed": ("official_bert.commands.embed",
              "sentence embeddings of a text file (.npy / .jsonl) and a SavedModel that embeds"),
    "export-encoder": ("official_bert.commands.export_encoder",
                       "TF Hub's preprocessor + encoder pair (and TF Serving, TFLite, ONNX) "
                       "from a checkpoint"),
    "export-ids-only": ("official_bert.commands.export_ids_only",
                        "a copy of an export with only serve_ids, for servers without the "
                        "tensorflow-text ops"),
    "export-google": ("official_bert.commands.export_google",
                      "google-research/bert's TF1 files (bert_model.ckpt, bert_config.json, "
                      "vocab.txt) from a checkpoint"),
    "quickstart": ("official_bert.commands.quickstart", "the end-to-end demo on bundled data"),
}


# Run in a fresh process per command (each command defines its flags in absl's
# global FlagValues): its flags by `--help` group, each with its name, help, type,
# default and choices. `flags_reference` and tests/test_settings.py read it.
DUMP_FLAGS = r"""
import importlib, json, sys
from absl import flags
module = importlib.import_module(sys.argv[1])
if hasattr(module, "_define_flags"):
    module._define_flags()
groups = {}
for name, group in flags.FLAGS.flags_by_module_dict().items():
    if name.startswith("absl."):
        continue
    title = module.__name__ if name in (sys.argv[1], module.__file__) else name
    groups[title] = [dict(name=f.name, help=f.help or "", type=f.flag_type(), default=f.default,
                          choices=getattr(f.parser, "enum_values", None))
                     for f in sorted(group, key=lambda f: f.name)]
print(json.dumps(groups))
"""


def command_flags(module: str) -> dict:
    """{group: [flag as a dict]} of the command `module` (`DUMP_FLAGS`)."""
    result = subprocess.run([sys.executable, "-c", DUMP_FLAGS, module], text=True,
                            capture_output=True, check=True)
    return json.loads(result.stdout)


def flags_reference() -> str:
    """Markdown: every flag of every command, from the flag definitions."""
    lines = ["# Flag reference", "",
             "Generated by `python -m official_bert.commands.cli flags-reference > docs/flags.md` from "
             "the flag definitions (a test fails when this file is out of date). "
             "`bert <command> --help` shows the same, grouped.", ""]
    for command, (module, description) in COMMANDS.items():
        lines += [f"## `bert {command}`", "", f"{description}.", ""]
        for group, group_flags in command_flags(module).items():
            lines += [f"**{group}**", "", "| flag | default | help |", "|---|---|---|"]
            for flag in group_flags:
                help_text = " ".join(flag["help"].split()).replace("|", "\\|")
                shown = "" if flag["default"] is None else f"`{flag['default']}`"
                lines.append(f"| `--{flag['name']}` | {shown} | {help_text} |")
            lines.append("")
    return "\n".join(lines)


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [__doc__.strip(), "", "commands:"]
    lines += [f"  {name:<{width}}  {description}" for name, (_, description) in COMMANDS.items()]
    lines += ["", "bert flags-reference prints every flag of every command as Markdown."]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(usage())
        return 0
    command = argv[1]
    if command == "flags-reference":
        print(flags_reference())
        return 0
    if command not in COMMANDS:
        print(f"error: unknown command {command!r}; known: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    module.entry([f"bert {command}"] + argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
