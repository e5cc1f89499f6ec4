"""Each command's argv on the tiny world: a good run, unless a keyword or an extra flag
says otherwise. Paths are `at()`'s, in the case's copy of the world; a keyword that
names a file takes such a path (`inputs=at("nope.txt")`), one that names a directory
of the world (`data="nope"`, `ckpt=`, `out=`, `runs=`) its name there."""

from __future__ import annotations

from .case import at

TINY = ["--max_seq_length=16"]


def without(argv: list, prefix: str) -> list:
    """`argv` without the arguments that start with `prefix` (a flag left out)."""
    return [a for a in argv if not a.startswith(prefix)]


def classify(*extra, data="glue", out="out", ckpt="ckpt", modes=("--do_train",)):
    return ["run_classifier.py", "--task_name=sst-2", f"--data_dir={at(data)}",
            f"--init_checkpoint={at(ckpt)}", *modes, *TINY, "--train_batch_size=4",
            "--eval_batch_size=4", "--predict_batch_size=4", "--num_train_epochs=1",
            "--log_steps=1", f"--output_dir={at(out)}", *extra]


def pretrain(*extra, inputs=None, out="run", steps=2, ckpt=None):
    model = ([f"--init_checkpoint={at(ckpt)}"] if ckpt else
             [f"--bert_config_file={at('bert_config.json')}", f"--vocab_file={at('vocab.txt')}"])
    return ["run_pretraining.py", f"--input_file={inputs or at('pretrain.tfrecord')}", *model,
            "--do_train", f"--num_train_steps={steps}", "--num_warmup_steps=0",
            "--save_checkpoints_steps=2", "--train_batch_size=4", "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--log_steps=2", f"--output_dir={at(out)}", *extra]


def distill(*extra, inputs="corpus.txt", out="run", teacher="ckpt", steps=2):
    """bert distill: the world's checkpoint's first layer learns both of its layers
    on the world's corpus (text)."""
    return ["bert distill", "--input_format=text", f"--input_file={at(inputs)}",
            f"--teacher={at(teacher)}", f"--init_checkpoint={at('ckpt')}",
            "--student_layers=0", "--do_train", f"--num_train_steps={steps}",
            "--num_warmup_steps=0", "--save_checkpoints_steps=2", "--train_batch_size=4",
            "--max_seq_length=32", "--max_predictions_per_seq=5", "--log_steps=2",
            f"--output_dir={at(out)}", *extra]


def pretrain_text(*extra, inputs="corpus.txt"):
    """run_pretraining.py --input_format=text on the world's `inputs` (a name there)."""
    return pretrain("--input_format=text", *extra, inputs=at(inputs))


def squad(*extra, train=None, predict=None):
    files = []
    if train is not False:
        files += ["--do_train", f"--train_file={train or at('squad', 'train.json')}"]
    if predict:
        files += ["--do_predict", f"--predict_file={predict}"]
    return ["run_squad.py", f"--init_checkpoint={at('ckpt')}", *files, "--max_seq_length=32",
            "--doc_stride=8", "--max_query_length=8", "--train_batch_size=2",
            "--num_train_epochs=1", f"--output_dir={at('out')}", *extra]


def swag(*extra, train=None):
    return ["run_swag.py", f"--init_checkpoint={at('ckpt')}", "--do_train",
            f"--train_file={train or at('swag', 'train.csv')}", *TINY, "--train_batch_size=2",
            "--num_train_epochs=1", f"--output_dir={at('out')}", *extra]


def ner(*extra, train=None):
    return ["run_ner.py", f"--init_checkpoint={at('ckpt')}", "--do_train",
            f"--train_file={train or at('conll', 'train.txt')}", *TINY, "--train_batch_size=2",
            "--num_train_epochs=1", f"--output_dir={at('out')}", *extra]


def cpd(*extra, inputs=None, output=None, vocab=None):
    """create_pretraining_data."""
    return ["-m official_bert.commands.create_pretraining_data",
            f"--input_file={inputs or at('corpus.txt')}",
            f"--output_file={output or at('gen', 'out.tfrecord')}",
            f"--vocab_file={vocab or at('vocab.txt')}", "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--dupe_factor=1", "--progress_seconds=0",
            "--num_workers=1", *extra]


def corpus(*extra, inputs=None, output=None):
    """prepare-corpus."""
    return ["-m official_bert.commands.prepare_corpus", f"--input={inputs or at('docs')}",
            f"--output_file={output or at('gen', 'corpus.txt')}", *extra]


def vocab(*extra, inputs=None, output=None):
    """build-vocab."""
    return ["-m official_bert.commands.build_vocab",
            f"--input_file={inputs or at('corpus.txt')}",
            f"--output_file={output or at('gen', 'vocab.txt')}", "--vocab_size=200",
            "--num_unused=5", *extra]


def predict(*extra, model=None, input_file=None):
    return ["bert predict", f"--model={model or at('export')}",
            *([f"--input_file={input_file}"] if input_file else []), *extra]


def features(*extra, input_file=None):
    """extract_features.py."""
    return ["extract_features.py", f"--input_file={input_file or at('predict.txt')}",
            f"--output_file={at('gen', 'features.jsonl')}", f"--init_checkpoint={at('ckpt')}",
            "--layers=-1,-2", *TINY, *extra]


def embed(*extra, input_file=None, output_file=None):
    return ["bert embed", f"--input_file={input_file or at('predict.txt')}",
            f"--output_file={output_file or at('gen', 'vectors.npy')}",
            f"--init_checkpoint={at('ckpt')}", *TINY, *extra]


def export_google(*extra, output_dir=None):
    return ["bert export-google", f"--init_checkpoint={at('ckpt')}",
            f"--output_dir={output_dir or at('gen', 'google')}", *extra]


def split(*extra, input_file=None, train=None, dev=None):
    """squad-split."""
    return ["-m official_bert.commands.squad_split",
            f"--input_file={input_file or at('squad3.json')}",
            f"--train_output={train or at('gen', 'train.json')}",
            f"--dev_output={dev or at('gen', 'dev.json')}", "--num_train_articles=2", *extra]


def export_encoder(*extra, output_dir=None, ckpt="ckpt"):
    return ["bert export-encoder", f"--init_checkpoint={at(ckpt)}",
            f"--output_dir={output_dir or at('gen', 'hub')}", *TINY, *extra]


def ids_only(*extra, source="export", output=None):
    """export-ids-only."""
    return ["bert export-ids-only", f"--saved_model={at(source)}",
            f"--export_dir={output or at('gen', 'ids')}", *extra]


def glue_submission(*extra, runs="runs", output=None, glue_dir="gluedata"):
    return ["bert glue-submission", f"--runs_dir={at(runs)}",
            f"--output_file={output or at('gen', 'submission.zip')}",
            *([f"--glue_dir={at(glue_dir)}"] if glue_dir else []), "--allow_missing", *extra]


def download(*args, source="src", manifest="manifest.json", output=None):
    return ["bert download", *args, f"--output_dir={output or at('gen', 'data')}",
            *([f"--source_dir={at(source)}"] if source else []),
            *([f"--manifest={at(manifest)}"] if manifest else [])]


def quickstart(*extra, output="gen/qs"):
    return ["bert quickstart", f"--output_dir={at(output)}", *extra]


def compare(*extra, models="export", data_file=None):
    """bert compare: the world's classifier export on glue/dev.tsv, timed briefly."""
    return ["bert compare", f"--models={at(models)}",
            f"--data_file={data_file or at('glue', 'dev.tsv')}", "--task_name=sst-2",
            "--seq_length=16", "--rounds=1", "--b1_calls=2",
            f"--json_output={at('gen', 'compare.json')}",
            f"--plot_output={at('gen', 'compare.png')}", *extra]
