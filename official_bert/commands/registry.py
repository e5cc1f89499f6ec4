"""Every command, as data: its name, its module, what it writes and what it does.

One list (`COMMANDS`) that `bert <command>` (`commands.cli`), google-research/
bert's script names (`run_classifier.py`, ...) and `python -m
official_bert.commands.<module>` all start from, through one function
(`run_command`), so every job gets the same boundary (`app.run`: the signal
policy, one-line errors) and the same check of its outputs and its inputs
before any work.

Each command's module has its docstring (its `--help`: what it does and an
example), `CONFIGS` (the configs its flags come from), `define_flags()` and
`main(argv)`; nothing runs when it is imported. Two kinds of command are
made from data instead, their module holding the docstring alone, or with
its flags:

  - a task family's (`task`: its row, `tasks.families.TaskSpec`): its
    flags, inputs, phases and its main (`task_main`: flags → configs →
    `tasks.runner.run_task`) all come from the row. The built-in families'
    commands are listed here in pipeline order; a family registered outside
    the library (`families.register`, loaded with $OFFICIAL_BERT_TASKS) joins
    at the end, with its `bert` command, flags and flag reference;
  - a job's (`job`: "module:function" of a library call that takes the
    command's config and returns what it wrote, {what: path}, which the main
    prints a line each).

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
import json

from official_bert.tasks import families

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
    task: families.TaskSpec | None = None
    job: str | None = None
    reads_runs: tuple = ()

    def __post_init__(self):
        assert set(self.outputs.values()) <= set(OUTPUT_KINDS), self
        assert set(self.inputs.values()) <= set(INPUT_WAYS), self
        assert set(self.phases) <= set(PHASES), self

    @property
    def module_name(self) -> str:
        """The module whose docstring is `--help` (a task family's, its row's)."""
        return self.task.module if self.task else f"{_PACKAGE}.{self.module}"

    @property
    def takes_overwrite(self) -> bool:
        """Whether an output may be a file or directory this project did not write."""
        return any(kind in OVERWRITABLE for kind in self.outputs.values())


# The training commands' outputs.
_RUN = {"output_dir": "run_dir", "export_dir": "export_dir"}
# The model files a command may be given (a checkpoint, a path prefix, is model_files').
_MODEL = {"bert_config_file": "file", "vocab_file": "file"}


def task_command(spec: families.TaskSpec) -> Command:
    """A task family's command, from its row: it reads the model files, its
    --<mode>_file flags (or its row's inputs) and --distill_text; trains,
    evaluates and predicts as its modes say, and exports."""
    names = {f.name for f in dataclasses.fields(spec.config)}
    inputs = {**_MODEL, **{f"{mode}_file": "file" for mode in spec.modes
                           if f"{mode}_file" in names}}
    if spec.reads_distill_text:
        inputs["distill_text"] = "file"
    phases = ("read", "train", *[m for m in ("eval", "predict") if m in spec.modes], "export")
    reads_runs = ("init_checkpoint", "teacher") if spec.distils else ("init_checkpoint",)
    return Command(spec.command, spec.module.removeprefix(f"{_PACKAGE}."), spec.summary,
                   spec.google_script, _RUN, phases, {**inputs, **spec.inputs}, task=spec,
                   reads_runs=reads_runs)


# In pipeline order (`bert --help` lists them so).
_BUILT_IN = (
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
    task_command(families.PRETRAINING),
    task_command(families.DISTILLATION),
    task_command(families.CLASSIFICATION),
    task_command(families.SQUAD),
    Command("squad-split", "squad_split", "split a SQuAD file into train and dev by article",
            outputs={"train_output": "file", "dev_output": "file"}, phases=("read", "write"),
            inputs={"input_file": "file"}),
    task_command(families.MULTIPLE_CHOICE),
    task_command(families.NER),
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
            inputs={**_MODEL, "input_file": "file"}, reads_runs=("init_checkpoint",),
            job="official_bert.tasks.embeddings:run"),
    Command("export-encoder", "export_encoder",
            "TF Hub's preprocessor + encoder pair (and TF Serving, TFLite, ONNX) from a checkpoint",
            # --output_dir holds SavedModels (preprocessor/, encoder/), each never overwritten
            # (serving/hub.py), as --export_dir's versions: not one directory replaced whole.
            outputs={"output_dir": "export_dir", "export_dir": "export_dir"},
            phases=("read", "export"), inputs=_MODEL,
            reads_runs=("init_checkpoint",),
            job="official_bert.serving.encoder:export_checkpoint"),
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

def commands() -> tuple:
    """Every command: the built-in ones, then those of the task families
    registered outside the library ($OFFICIAL_BERT_TASKS loaded first)."""
    families.load_declared()
    listed = {cmd.name for cmd in _BUILT_IN}
    return _BUILT_IN + tuple(task_command(spec) for spec in families.FAMILIES.values()
                             if spec.command and spec.command not in listed)


def __getattr__(name: str):
    # `COMMANDS` and `BY_NAME`, read when asked: a family registered since is in them.
    if name == "COMMANDS":
        return commands()
    if name == "BY_NAME":
        return {cmd.name: cmd for cmd in commands()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def command(name: str) -> Command:
    """The command `bert <name>` (KeyError for an unknown one)."""
    return {cmd.name: cmd for cmd in commands()}[name]


def define_flags(cmd: Command):
    """Imports `cmd`'s module and defines its flags (again after a test deleted
    them: defining is idempotent); returns the module."""
    from official_bert.commands import cli_flags
    from official_bert.configs import OutputConfig

    module = importlib.import_module(cmd.module_name)
    spec = cmd.task
    if spec is None:
        module.define_flags()
    else:  # a task family's, from its row
        cli_flags.define_flags(spec.config, group=cmd.module_name)
        cli_flags.define_run_flags(spec.run_config, modes=spec.modes, counts=spec.counts,
                                   distillation=spec.distils is not None,
                                   distill_text=spec.reads_distill_text, group=cmd.module_name)
    if cmd.takes_overwrite:
        cli_flags.define_flags(OutputConfig, group=cmd.module_name)
    return module


def configs_of(cmd: Command) -> tuple:
    """The configs `cmd`'s flags come from: its module's `CONFIGS` (a task
    family's: its two configs and google's TPU flags), and
    `configs.OutputConfig` (--overwrite) when it takes it."""
    from official_bert.configs import GoogleTpuFlags, OutputConfig

    if cmd.task is not None:
        configs = (cmd.task.config, cmd.task.run_config, GoogleTpuFlags)
    else:
        configs = tuple(importlib.import_module(cmd.module_name).CONFIGS)
    return (*configs, OutputConfig) if cmd.takes_overwrite else configs


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
    """The command's main (its module's, or made from its row: `task_main`,
    `job_main`), with `cmd`'s outputs checked first (the flags are parsed by
    then)."""
    command_main = (task_main(cmd) if cmd.task else job_main(cmd) if cmd.job else module.main)

    @functools.wraps(command_main)  # (its __module__ gives `--help` the command's docstring)
    def main(argv):
        from official_bert import resources

        resources.check(cmd)  # the limits of the process (the resource policy)
        check_outputs(cmd)  # into the job's output plan, which `app.run` put in force
        with prepared_inputs(cmd):
            return command_main(argv)
    return main


def task_main(cmd: Command):
    """The one main of every task family's command: flags → the family's
    configs → `tasks.runner.run_task` of its task (or of its variant's: NER's
    --feature_based); a row that says so prints the scores the run returns."""
    spec = cmd.task

    def main(argv):
        from absl import flags

        from official_bert.commands import app, cli_flags

        app.refuse_arguments(argv)
        # (the run loads TensorFlow: imported once the flags are parsed, so that defining
        # them, and `--help`, stays fast)
        from official_bert.tasks import runner

        config = cli_flags.from_flags(spec.config, flags.FLAGS)
        family = spec.for_config(config)
        scores = runner.run_task(family.task_class(), config,
                                 cli_flags.run_config(flags.FLAGS, spec.run_config))
        if scores and spec.prints_scores:
            print(json.dumps(scores), flush=True)

    main.__module__ = cmd.module_name
    return main


def job_main(cmd: Command):
    """The main of a command whose job is one library call (`cmd.job`) on its
    config: prints what it wrote, a line each (what, tab, path)."""

    def main(argv):
        from absl import flags

        from official_bert.commands import app, cli_flags

        app.refuse_arguments(argv)
        module, _, name = cmd.job.partition(":")
        config_class = configs_of(cmd)[0]
        written = getattr(importlib.import_module(module), name)(
            cli_flags.from_flags(config_class, flags.FLAGS))
        for what, path in written.items():
            print(f"{what}\t{path}", flush=True)

    main.__module__ = cmd.module_name
    return main


def run_command(name: str, argv=None) -> None:
    """Runs the command `name` on `argv` (default: sys.argv; argv[0] is the
    program's name) through the boundary (`app.run`): the one way a job starts."""
    from official_bert.commands import app

    cmd = command(name)
    app.run(job(cmd, define_flags(cmd)), argv)
