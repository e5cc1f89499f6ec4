"""Every command, as data: its name, its module, what it writes and what it does.

One list (`COMMANDS`) that `bert <command>` (`commands.cli`), google-research/
bert's script names (`run_classifier.py`, ...) and `python -m
official_bert.commands.<module>` all start from, through one function
(`run_command`), so every job gets the same boundary (`app.run`: the signal
policy, one-line errors) and the same check of its outputs and its inputs
before any work.

Each command's module has its docstring (its `--help`: what it does and an
example), `CONFIGS` (the configs its flags come from), `define_flags()` and
`main(argv)`; nothing runs when it is imported.

A `Command`'s `outputs` maps each output flag to its kind:

    file          one file (`--output_file`)
    file_prefix   a set of files, comma-separated (create-pretraining-data's
                  sharded `--output_file`)
    dir           a directory the command fills (`--output_dir` of an export)
    run_dir       a training run's `--output_dir`, owned by the run directory
                  (its lock and record), resumed by the same command
    export_dir    TF Serving's `--export_dir/<version>/`, never overwritten

`inputs` maps each input flag to how the command reads it (the input policy,
`official_bert.inputs`, checks them all before any work):

    stream        read once, as it comes (a pipe or standard input is read as it is)
    file          opened by name, perhaps more than once: a stream is spooled to a
                  temporary file first; a comma-separated list is one input a part
    file_or_dir   a file, or a directory searched for files
    dir           a directory

`phases` lists what it does that a signal may interrupt: "read" (its
inputs), "data" (generating data), "train", "eval", "predict", "export",
"write" (its outputs); and `reads_runs` the flags whose value may be a run
directory that is still training (a model read through
`run_directory.latest.read_latest`: its latest complete checkpoint, its step
named, "still training" said).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib

# The output kinds that a file this project did not write may already hold:
# the commands with one of them take --overwrite (`configs.OutputConfig`).
OVERWRITABLE = ("file", "file_prefix", "dir")
OUTPUT_KINDS = (*OVERWRITABLE, "run_dir", "export_dir")
INPUT_WAYS = ("stream", "file", "file_or_dir", "dir")
PHASES = ("read", "data", "train", "eval", "predict", "export", "write")

_PACKAGE = "official_bert.commands"


@dataclasses.dataclass(frozen=True)
class Command:
    """One command: `bert <name>`, its module under official_bert/commands/,
    its one-line summary, google-research/bert's script name for it (None: no
    such script), its output flags by kind and its phases (see the module's
    docstring)."""
    name: str
    module: str
    summary: str
    google_script: str | None = None
    outputs: dict = dataclasses.field(default_factory=dict)
    phases: tuple = ()
    inputs: dict = dataclasses.field(default_factory=dict)
    reads_runs: tuple = ()

    def __post_init__(self):
        assert set(self.outputs.values()) <= set(OUTPUT_KINDS), self
        assert set(self.inputs.values()) <= set(INPUT_WAYS), self
        assert set(self.phases) <= set(PHASES), self

    @property
    def module_name(self) -> str:
        return f"{_PACKAGE}.{self.module}"

    @property
    def takes_overwrite(self) -> bool:
        """Whether an output may be a file or directory this project did not write."""
        return any(kind in OVERWRITABLE for kind in self.outputs.values())


# The training commands' outputs and phases.
_RUN = {"output_dir": "run_dir", "export_dir": "export_dir"}
# The model files a command may be given (a checkpoint, a path prefix, is model_files').
_MODEL = {"bert_config_file": "file", "vocab_file": "file"}
# A fine-tuning command's inputs.
_TASK = {**_MODEL, "train_file": "file", "eval_file": "file", "predict_file": "file",
         "distill_text": "file"}
_PRETRAIN = {**_MODEL, "input_file": "file", "eval_input_file": "file", "distill_text": "file"}

# In pipeline order (`bert --help` lists them so).
COMMANDS = (
    Command("download", "download",
            "fetch GLUE, SQuAD, SWAG, WNUT-17, XNLI (checksums, resume, mirrors)",
            # A cache of datasets, locked while in use, each one never replaced (download.py):
            # not one output the policy could replace whole.
            outputs={"output_dir": "run_dir"}, phases=("read", "write")),
    Command("prepare-corpus", "prepare_corpus",
            "raw documents → one sentence per line, blank line between documents",
            outputs={"output_file": "file"}, phases=("read", "data", "write"),
            inputs={"input": "file_or_dir"}),
    Command("build-vocab", "build_vocab", "learn a WordPiece vocabulary (Google's layout)",
            outputs={"output_file": "file"}, phases=("read", "data", "write"),
            inputs={"input_file": "file"}),
    Command("extend-vocab", "extend_vocab",
            "add a corpus's frequent words to a checkpoint's vocabulary (new embeddings: the "
            "mean of their old pieces')",
            outputs={"output_dir": "dir"}, phases=("read", "data", "write"),
            inputs={**_MODEL, "input_file": "file"},
            reads_runs=("init_checkpoint",)),
    Command("create-pretraining-data", "create_pretraining_data",
            "masked-LM + next-sentence TFRecords", google_script="create_pretraining_data.py",
            outputs={"output_file": "file_prefix"}, phases=("read", "data", "write"),
            inputs={"input_file": "file", "vocab_file": "file"}),
    Command("pretrain", "pretrain", "pre-train BERT (masked LM + next sentence)",
            google_script="run_pretraining.py", outputs=_RUN,
            phases=("read", "train", "eval", "export"), inputs=_PRETRAIN,
            reads_runs=("init_checkpoint",)),
    Command("distill", "distill", "a smaller BERT that learns a teacher on a corpus (general "
            "distillation)", outputs=_RUN, phases=("read", "train", "eval", "export"),
            inputs=_PRETRAIN,
            reads_runs=("init_checkpoint",)),
    Command("classify", "classify", "fine-tune / evaluate / predict GLUE or your own CSV/TSV",
            google_script="run_classifier.py", outputs=_RUN,
            phases=("read", "train", "eval", "predict", "export"),
            inputs={**_TASK, "data_dir": "dir"},
            reads_runs=("init_checkpoint", "teacher")),
    Command("squad", "squad", "question answering, SQuAD v1.1 and v2.0",
            google_script="run_squad.py", outputs=_RUN,
            phases=("read", "train", "predict", "export"),
            inputs={name: way for name, way in _TASK.items() if name != "eval_file"},
            reads_runs=("init_checkpoint",)),
    Command("squad-split", "squad_split", "split a SQuAD file into train and dev by article",
            outputs={"train_output": "file", "dev_output": "file"}, phases=("read", "write"),
            inputs={"input_file": "file"}),
    Command("swag", "swag", "multiple choice (SWAG layout)", google_script="run_swag.py",
            outputs=_RUN, phases=("read", "train", "eval", "predict", "export"), inputs=_TASK,
            reads_runs=("init_checkpoint",)),
    Command("ner", "ner", "token tagging (CoNLL files), fine-tuned or feature-based",
            google_script="run_ner.py", outputs=_RUN,
            phases=("read", "train", "eval", "predict", "export"), inputs=_TASK,
            reads_runs=("init_checkpoint",)),
    Command("glue-submission", "glue_submission",
            "the GLUE leaderboard's zip from a directory of predicted runs",
            outputs={"output_file": "file"}, phases=("read", "write"),
            inputs={"glue_dir": "dir", "runs_dir": "dir"}),
    Command("predict", "predict", "labels for raw text lines from an export or a trained run",
            phases=("read", "predict"),  # writes to stdout only
            # Read as it comes: lines typed at a terminal are answered as they are typed.
            inputs={"input_file": "stream"},
            reads_runs=("model",)),
    Command("extract-features", "extract_features", "per-layer token vectors or sentence vectors",
            google_script="extract_features.py", outputs={"output_file": "file"},
            phases=("read", "predict", "write"), inputs={**_MODEL, "input_file": "file"},
            reads_runs=("init_checkpoint",)),
    Command("embed", "embed",
            "sentence embeddings of a text file (.npy / .jsonl) and a SavedModel that embeds",
            outputs={"output_file": "file", "export_dir": "export_dir"},
            phases=("read", "predict", "write", "export"),
            inputs={**_MODEL, "input_file": "file"},
            reads_runs=("init_checkpoint",)),
    Command("export-encoder", "export_encoder",
            "TF Hub's preprocessor + encoder pair (and TF Serving, TFLite, ONNX) from a checkpoint",
            # --output_dir holds SavedModels (preprocessor/, encoder/), each never overwritten
            # (serving/hub.py), as --export_dir's versions: not one directory replaced whole.
            outputs={"output_dir": "export_dir", "export_dir": "export_dir"},
            phases=("read", "export"), inputs=_MODEL,
            reads_runs=("init_checkpoint",)),
    Command("compare", "compare",
            "models side by side on your labelled file: task metric, latency, throughput, size",
            outputs={"json_output": "file", "plot_output": "file"},
            phases=("read", "predict", "write"), inputs={"models": "file_or_dir", "data_file": "file"}),
    Command("export-ids-only", "export_ids_only",
            "a copy of an export with only serve_ids, for servers without the tensorflow-text "
            "ops", outputs={"export_dir": "export_dir"}, phases=("read", "export")),
    Command("export-google", "export_google",
            "google-research/bert's TF1 files (bert_model.ckpt, bert_config.json, vocab.txt) "
            "from a checkpoint", outputs={"output_dir": "dir"}, phases=("read", "write"),
            inputs=_MODEL, reads_runs=("init_checkpoint",)),
    # Its --output_dir is resumed stage by stage (--restart starts over), as a run's is.
    Command("quickstart", "quickstart", "the end-to-end demo on bundled data",
            google_script="quickstart.py", outputs={"output_dir": "run_dir"},
            phases=("read", "data", "train", "eval", "export")),
)

BY_NAME = {command.name: command for command in COMMANDS}


def command(name: str) -> Command:
    """The command `bert <name>` (KeyError for an unknown one)."""
    return BY_NAME[name]


def define_flags(cmd: Command):
    """Imports `cmd`'s module and defines its flags (again after a test deleted
    them: defining is idempotent); returns the module."""
    from official_bert.commands import cli_flags
    from official_bert.configs import OutputConfig

    module = importlib.import_module(cmd.module_name)
    module.define_flags()
    if cmd.takes_overwrite:
        cli_flags.define_flags(OutputConfig, group=cmd.module_name)
    return module


def configs_of(cmd: Command) -> tuple:
    """The configs `cmd`'s flags come from: its module's `CONFIGS`, and
    `configs.OutputConfig` (--overwrite) when it takes it."""
    module = importlib.import_module(cmd.module_name)
    if not cmd.takes_overwrite:
        return tuple(module.CONFIGS)
    from official_bert.configs import OutputConfig

    return (*module.CONFIGS, OutputConfig)


def check_outputs(cmd: Command) -> None:
    """The outputs `cmd` declares, checked before any work by the output policy
    (`official_bert.outputs.check_command_outputs`)."""
    from absl import flags

    from official_bert import outputs

    outputs.check_command_outputs(cmd, flags.FLAGS)


def prepared_inputs(cmd: Command):
    """The inputs `cmd` declares, checked and their streams spooled for the job
    by the input policy (`official_bert.inputs.prepared`): a context."""
    from absl import flags

    from official_bert import inputs

    return inputs.prepared(cmd, flags.FLAGS)


def job(cmd: Command, module):
    """`module.main`, with `cmd`'s outputs checked first (the flags are parsed by then)."""
    from absl import flags

    from official_bert.commands import app

    @functools.wraps(module.main)  # (its __module__ gives `--help` the command's docstring)
    def main(argv):
        from official_bert import resources

        resources.check(cmd)  # the limits of the process (the resource policy)
        check_outputs(cmd)
        app.name_outputs({f"--{flag}": getattr(flags.FLAGS, flag, None) for flag in cmd.outputs})
        with prepared_inputs(cmd):
            return module.main(argv)
    return main


def run_command(name: str, argv=None) -> None:
    """Runs the command `name` on `argv` (default: sys.argv; argv[0] is the
    program's name) through the boundary (`app.run`): the one way a job starts."""
    from official_bert.commands import app

    cmd = command(name)
    app.run(job(cmd, define_flags(cmd)), argv)
