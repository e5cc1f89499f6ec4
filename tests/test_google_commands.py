"""google-research/bert's README commands run unchanged here.

`GOOGLE_COMMANDS` are google-research/bert's own shell blocks, copied verbatim
from its README.md (and multilingual.md for XNLI) at commit eedf571:
create_pretraining_data, run_pretraining, run_classifier for MRPC (train, then
predict with the fine-tuned run) and XNLI, run_squad for SQuAD v1.1 (GPU and
TPU) and v2.0 (TPU, then again with a null-score threshold), and
extract_features. docs/google_bert.md ("Coming from google-research/bert") shows each
of them as is (tested), and each runs here, in order, on stand-in files:

* `$BERT_BASE_DIR` / `$BERT_LARGE_DIR`: a tiny Google-format TF1 checkpoint
  (`bert_model.ckpt`, `bert_config.json`, `vocab.txt`; L=4, H=16);
  `$GLUE_DIR/MRPC`, `$SQUAD_DIR`, `$XNLI_DIR`: tiny files in the layouts of
  `bert download` (MRPC split as GLUE's script splits it);
  `$TRAINED_CLASSIFIER` is the MRPC run's latest checkpoint, `$THRESH` -1.0.
* As in tests/test_docs.py: lines that export those variables are dropped,
  and each `python <script>` gets the tiny-mode flags of `test_docs.TINY`
  appended (absl keeps the last value), plus `--use_tpu=False` for the TPU
  commands (no TPU here). The only rewrite of the text itself: `/tmp/` and
  `gs://some_bucket/` become a private directory of the test, so that parallel
  runs (and a user's own /tmp) are never touched.
"""

import json
import os
import pathlib
import re
import subprocess

import numpy as np
import pytest

from support import REPO_ROOT, processes
from test_docs import TINY

# (name, google's block), verbatim; in the order they depend on each other.
GOOGLE_COMMANDS = [
    ('create_pretraining_data', r"""python create_pretraining_data.py \
  --input_file=./sample_text.txt \
  --output_file=/tmp/tf_examples.tfrecord \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --do_lower_case=True \
  --max_seq_length=128 \
  --max_predictions_per_seq=20 \
  --masked_lm_prob=0.15 \
  --random_seed=12345 \
  --dupe_factor=5
"""),
    ('run_pretraining', r"""python run_pretraining.py \
  --input_file=/tmp/tf_examples.tfrecord \
  --output_dir=/tmp/pretraining_output \
  --do_train=True \
  --do_eval=True \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
  --train_batch_size=32 \
  --max_seq_length=128 \
  --max_predictions_per_seq=20 \
  --num_train_steps=20 \
  --num_warmup_steps=10 \
  --learning_rate=2e-5
"""),
    ('classifier_mrpc', r"""export BERT_BASE_DIR=/path/to/bert/uncased_L-12_H-768_A-12
export GLUE_DIR=/path/to/glue

python run_classifier.py \
  --task_name=MRPC \
  --do_train=true \
  --do_eval=true \
  --data_dir=$GLUE_DIR/MRPC \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
  --max_seq_length=128 \
  --train_batch_size=32 \
  --learning_rate=2e-5 \
  --num_train_epochs=3.0 \
  --output_dir=/tmp/mrpc_output/
"""),
    ('classifier_mrpc_predict', r"""export BERT_BASE_DIR=/path/to/bert/uncased_L-12_H-768_A-12
export GLUE_DIR=/path/to/glue
export TRAINED_CLASSIFIER=/path/to/fine/tuned/classifier

python run_classifier.py \
  --task_name=MRPC \
  --do_predict=true \
  --data_dir=$GLUE_DIR/MRPC \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$TRAINED_CLASSIFIER \
  --max_seq_length=128 \
  --output_dir=/tmp/mrpc_output/
"""),
    ('classifier_xnli', r"""export BERT_BASE_DIR=/path/to/bert/chinese_L-12_H-768_A-12 # or multilingual_L-12_H-768_A-12
export XNLI_DIR=/path/to/xnli

python run_classifier.py \
  --task_name=XNLI \
  --do_train=true \
  --do_eval=true \
  --data_dir=$XNLI_DIR \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
  --max_seq_length=128 \
  --train_batch_size=32 \
  --learning_rate=5e-5 \
  --num_train_epochs=2.0 \
  --output_dir=/tmp/xnli_output/
"""),
    ('squad_v1.1', r"""python run_squad.py \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
  --do_train=True \
  --train_file=$SQUAD_DIR/train-v1.1.json \
  --do_predict=True \
  --predict_file=$SQUAD_DIR/dev-v1.1.json \
  --train_batch_size=12 \
  --learning_rate=3e-5 \
  --num_train_epochs=2.0 \
  --max_seq_length=384 \
  --doc_stride=128 \
  --output_dir=/tmp/squad_base/
"""),
    ('squad_v1.1_large_tpu', r"""python run_squad.py \
  --vocab_file=$BERT_LARGE_DIR/vocab.txt \
  --bert_config_file=$BERT_LARGE_DIR/bert_config.json \
  --init_checkpoint=$BERT_LARGE_DIR/bert_model.ckpt \
  --do_train=True \
  --train_file=$SQUAD_DIR/train-v1.1.json \
  --do_predict=True \
  --predict_file=$SQUAD_DIR/dev-v1.1.json \
  --train_batch_size=24 \
  --learning_rate=3e-5 \
  --num_train_epochs=2.0 \
  --max_seq_length=384 \
  --doc_stride=128 \
  --output_dir=gs://some_bucket/squad_large/ \
  --use_tpu=True \
  --tpu_name=$TPU_NAME
"""),
    ('squad_v2.0_tpu', r"""python run_squad.py \
  --vocab_file=$BERT_LARGE_DIR/vocab.txt \
  --bert_config_file=$BERT_LARGE_DIR/bert_config.json \
  --init_checkpoint=$BERT_LARGE_DIR/bert_model.ckpt \
  --do_train=True \
  --train_file=$SQUAD_DIR/train-v2.0.json \
  --do_predict=True \
  --predict_file=$SQUAD_DIR/dev-v2.0.json \
  --train_batch_size=24 \
  --learning_rate=3e-5 \
  --num_train_epochs=2.0 \
  --max_seq_length=384 \
  --doc_stride=128 \
  --output_dir=gs://some_bucket/squad_large/ \
  --use_tpu=True \
  --tpu_name=$TPU_NAME \
  --version_2_with_negative=True
"""),
    ('squad_v2.0_threshold', r"""python run_squad.py \
  --vocab_file=$BERT_LARGE_DIR/vocab.txt \
  --bert_config_file=$BERT_LARGE_DIR/bert_config.json \
  --init_checkpoint=$BERT_LARGE_DIR/bert_model.ckpt \
  --do_train=False \
  --train_file=$SQUAD_DIR/train-v2.0.json \
  --do_predict=True \
  --predict_file=$SQUAD_DIR/dev-v2.0.json \
  --train_batch_size=24 \
  --learning_rate=3e-5 \
  --num_train_epochs=2.0 \
  --max_seq_length=384 \
  --doc_stride=128 \
  --output_dir=gs://some_bucket/squad_large/ \
  --use_tpu=True \
  --tpu_name=$TPU_NAME \
  --version_2_with_negative=True \
  --null_score_diff_threshold=$THRESH
"""),
    ('extract_features', r"""# Sentence A and Sentence B are separated by the ||| delimiter for sentence
# pair tasks like question answering and entailment.
# For single sentence inputs, put one sentence per line and DON'T use the
# delimiter.
echo 'Who was Jim Henson ? ||| Jim Henson was a puppeteer' > /tmp/input.txt

python extract_features.py \
  --input_file=/tmp/input.txt \
  --output_file=/tmp/output.jsonl \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
  --layers=-1,-2,-3,-4 \
  --max_seq_length=128 \
  --batch_size=8
"""),
]
# google's SQuAD evaluation commands (v2.0's is prose there, wrapped over two lines). Shown
# in docs/google_bert.md but not run: they need SQuAD's official evaluate scripts, which
# `bert download` fetches (md5-checked) but the test data does not hold (the download
# mirror serves a stand-in).
GOOGLE_EVALUATE_COMMANDS = [
    "python $SQUAD_DIR/evaluate-v1.1.py $SQUAD_DIR/dev-v1.1.json ./squad/predictions.json\n",
    "python $SQUAD_DIR/evaluate-v2.0.py $SQUAD_DIR/dev-v2.0.json ./squad/predictions.json "
    "--na-prob-file ./squad/null_odds.json\n",
]
PROVIDED = ("BERT_BASE_DIR", "BERT_LARGE_DIR", "GLUE_DIR", "SQUAD_DIR", "XNLI_DIR",
            "TRAINED_CLASSIFIER", "TPU_NAME", "THRESH")
# google's SQuAD commands on TPU share gs://some_bucket/squad_large/ as alternatives; here
# v1.1 gets its own bucket, and v2.0's second command reads the first one's run.
GS_GROUP = {"squad_v2.0_tpu": "squad_v2.0", "squad_v2.0_threshold": "squad_v2.0"}
# (classifier_mrpc: 25-29 s here, slow for CI time; extract_features and
# create_pretraining_data stay in the default run.)
SLOW = {"run_pretraining", "classifier_mrpc", "classifier_mrpc_predict", "classifier_xnli",
        "squad_v1.1",
        "squad_v1.1_large_tpu", "squad_v2.0_tpu", "squad_v2.0_threshold"}


def _google_page() -> str:
    text = (REPO_ROOT / "docs" / "google_bert.md").read_text(encoding="utf-8")
    assert text.startswith("# Coming from google-research/bert\n"), (
        "docs/google_bert.md is not the 'Coming from google-research/bert' page")
    return text


def test_docs_show_googles_commands_verbatim():
    section = _google_page()
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    for name, command in GOOGLE_COMMANDS:
        assert command in blocks, (
            f"docs/google_bert.md does not show google's {name} command verbatim")
    for command in GOOGLE_EVALUATE_COMMANDS:
        assert command in blocks, f"docs/google_bert.md does not show google's {command.split()[1]}"


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """The directories google's commands name, with tiny files."""
    import tensorflow as tf

    from support import download_mirror
    from data_prep import datasets
    from official_bert import checkpoints
    from official_bert.modeling.configs import BertConfig
    from official_bert.modeling.encoder import BertEncoder, dummy_inputs

    root = tmp_path_factory.mktemp("google")
    model = root / "models" / "uncased_L-4_H-16_A-2"
    model.mkdir(parents=True)
    text = (REPO_ROOT / "sample_text.txt").read_text(encoding="utf-8").lower()
    text += " ".join(download_mirror.SENTENCES) + " who was jim henson ? puppeteer"
    words = sorted(set(re.findall(r"[a-z]+|[^\sa-z]", text)))
    vocab = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
             + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"])
    (model / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    google_config = {  # as google's released bert_config.json files are written
        "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "hidden_size": 16, "initializer_range": 0.02, "intermediate_size": 32,
        "max_position_embeddings": 512, "num_attention_heads": 2, "num_hidden_layers": 4,
        "type_vocab_size": 2, "vocab_size": len(vocab)}
    (model / "bert_config.json").write_text(json.dumps(google_config, indent=2))
    config = BertConfig.from_json_file(str(model / "bert_config.json"))
    encoder = BertEncoder.from_bert_config(config)
    encoder(dummy_inputs())
    weights = checkpoints.get_encoder_weights(encoder)
    names = sorted(weights)
    tf.raw_ops.SaveV2(prefix=str(model / "bert_model.ckpt"), tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(np.asarray(weights[n])) for n in names])

    mrpc = root / "glue" / "MRPC"
    mrpc.mkdir(parents=True)
    sources = download_mirror._mrpc_synthetic()
    for name, content in sources.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content, encoding="utf-8")
    datasets._format_mrpc(*(str(root / n) for n in sources), str(mrpc))

    squad = root / "squad"
    squad.mkdir()
    for version, v2 in (("v1.1", False), ("v2.0", True)):
        for split, articles in (("train", 3), ("dev", 2)):
            (squad / f"{split}-{version}.json").write_text(download_mirror._squad(v2, articles))

    xnli = root / "xnli"
    for archive in download_mirror._xnli().values():
        for member, content in archive.items():
            relative = member.split("/", 1)[1]
            (xnli / relative).parent.mkdir(parents=True, exist_ok=True)
            (xnli / relative).write_text(content, encoding="utf-8")

    (root / "tmp").mkdir()
    return {"BERT_BASE_DIR": model, "BERT_LARGE_DIR": model, "GLUE_DIR": root / "glue",
            "SQUAD_DIR": squad, "XNLI_DIR": xnli, "TRAINED_CLASSIFIER": None,
            "TPU_NAME": "no-tpu-here", "THRESH": "-1.0", "root": root}


def _script(name: str, command: str, env: dict) -> str:
    root = env["root"]
    if name == "classifier_mrpc_predict":
        # The fine-tuned classifier: the MRPC run's latest checkpoint (google's would be
        # /tmp/mrpc_output/model.ckpt-<step>; here /tmp/mrpc_output/ckpt-<step>).
        run = root / "tmp" / "mrpc_output"
        latest = re.search(r'model_checkpoint_path: "(.*?)"', (run / "checkpoint").read_text())
        env = dict(env, TRAINED_CLASSIFIER=run / latest.group(1))
    lines = [line for line in command.splitlines()
             if not re.match(rf"\s*export\s+({'|'.join(PROVIDED)})=", line)]
    body = "\n".join(lines) + "\n"
    bucket = f"{root}/gs-{GS_GROUP.get(name, name)}/some_bucket/"
    body = body.replace("/tmp/", f"{root}/tmp/").replace("gs://some_bucket/", bucket)
    extra = " --use_tpu=False" if "--use_tpu=True" in command else ""
    cases = "\n".join(f'    {script}) echo "{flags}{extra}" ;;' for script, flags in TINY.items())
    exports = "\n".join(f"export {k}={v}" for k, v in env.items() if k in PROVIDED)
    return f"""set -euo pipefail
{exports}
tiny_flags() {{
  case "$(basename "$1")" in
{cases}
    *) echo "{extra}" ;;
  esac
}}
python() {{ command python "$@" $(tiny_flags "$1"); }}
{body}"""


# A command that reads another's output runs that one first when it has not run
# (`pytest -m slow` runs the slow ones alone).
NEEDS = {"run_pretraining": "create_pretraining_data",
         "classifier_mrpc_predict": "classifier_mrpc",
         "squad_v2.0_threshold": "squad_v2.0_tpu"}


def _expected_output(name: str, root: pathlib.Path) -> pathlib.Path:
    tmp = root / "tmp"
    return {
        "create_pretraining_data": tmp / "tf_examples.tfrecord",
        "run_pretraining": tmp / "pretraining_output/eval_results.txt",
        "classifier_mrpc": tmp / "mrpc_output/eval_results.txt",
        "classifier_mrpc_predict": tmp / "mrpc_output/test_results.tsv",
        "classifier_xnli": tmp / "xnli_output/eval_results.txt",
        "squad_v1.1": tmp / "squad_base/predictions.json",
        "squad_v1.1_large_tpu": root / "gs-squad_v1.1_large_tpu/some_bucket/squad_large/"
                                       "predictions.json",
        "squad_v2.0_tpu": root / "gs-squad_v2.0/some_bucket/squad_large/null_odds.json",
        "squad_v2.0_threshold": root / "gs-squad_v2.0/some_bucket/squad_large/predictions.json",
        "extract_features": tmp / "output.jsonl",
    }[name]


def _run(name: str, stand_ins: dict) -> pathlib.Path:
    if name in NEEDS and not _expected_output(NEEDS[name], stand_ins["root"]).exists():
        _run(NEEDS[name], stand_ins)
    command = dict(GOOGLE_COMMANDS)[name]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(["bash", "-c", _script(name, command, stand_ins)], cwd=REPO_ROOT,
                            env=env, text=True, capture_output=True, timeout=900)
    assert result.returncode == 0, (
        f"google's {name} command failed (exit {result.returncode}):\n{command}\n"
        f"--- stdout ---\n{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-4000:]}")
    expected = _expected_output(name, stand_ins["root"])
    assert expected.exists(), f"{name}: {expected} was not written"
    return expected


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [], id=n)
    for n, _ in GOOGLE_COMMANDS])
def test_googles_command_runs_unchanged(name, stand_ins):
    expected = _run(name, stand_ins)
    if expected.name == "eval_results.txt":
        keys = {line.split("=")[0].strip() for line in expected.read_text().splitlines()}
        wanted = {"global_step", "loss"} | ({"eval_accuracy", "eval_loss"}
                                            if "classifier" in name else set())
        assert wanted <= keys, f"{expected} lacks google's keys {wanted - keys}"


# google-research/bert's flags of each script that have no counterpart of the same
# name here beyond what its README commands use: all must parse (absl would stop at an
# unknown flag before anything runs).
GOOGLE_ONLY_FLAGS = {
    "run_classifier": ["--use_tpu=False", "--tpu_name=my-tpu", "--tpu_zone=us-central1-b",
                       "--gcp_project=my-project", "--master=grpc://10.0.0.2:8470",
                       "--num_tpu_cores=8", "--iterations_per_loop=1000"],
    "run_squad": ["--use_tpu=False", "--tpu_name=my-tpu", "--tpu_zone=us-central1-b",
                  "--gcp_project=my-project", "--master=grpc://10.0.0.2:8470",
                  "--num_tpu_cores=8", "--iterations_per_loop=1000"],
    "run_pretraining": ["--use_tpu=False", "--tpu_name=my-tpu", "--tpu_zone=us-central1-b",
                        "--gcp_project=my-project", "--master=grpc://10.0.0.2:8470",
                        "--num_tpu_cores=8", "--iterations_per_loop=1000"],
    "extract_features": ["--use_tpu=False", "--master=grpc://10.0.0.2:8470", "--num_tpu_cores=8",
                         "--use_one_hot_embeddings=False"],
}


# The command module each script runs (it defines the flags).
# google's script → the registered command it starts (`registry.Command.google_script`).
COMMAND_NAMES = {"run_classifier": "classify", "run_squad": "squad",
                 "run_pretraining": "pretrain", "extract_features": "extract-features"}


@pytest.mark.parametrize("script", sorted(GOOGLE_ONLY_FLAGS))
def test_every_google_flag_parses(script):
    import sys

    code = (f"import sys\nfrom official_bert.commands import registry\n"
            f"registry.define_flags(registry.command('{COMMAND_NAMES[script]}'))\n"
            f"from absl import flags\n"
            f"flags.FLAGS(['{script}'] + sys.argv[1:])\n"
            f"from official_bert.commands import cli_flags\n"
            + ("print(cli_flags.run_config(flags.FLAGS).tpu)\n" if script != "extract_features"
               else "print('parsed')\n"))
    result = processes.run([sys.executable, "-c", code, *GOOGLE_ONLY_FLAGS[script]],
                           cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    # --tpu_name wins over --master as the TPU to connect to, as in google's scripts.
    assert result.stdout.strip().splitlines()[-1] in ("my-tpu", "parsed")


def test_extract_features_says_once_which_google_flags_it_ignores(tmp_path):
    """extract_features runs the encoder on this machine: each of google's TPU
    flags given is logged once as unused, before the run (here stopped by a
    missing checkpoint)."""
    import sys

    (tmp_path / "in.txt").write_text("a sentence\n")
    result = processes.run(
        [sys.executable, "extract_features.py", *GOOGLE_ONLY_FLAGS["extract_features"],
         f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'out.jsonl'}",
         f"--init_checkpoint={tmp_path / 'missing'}"],
        cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    for name in ("use_tpu", "master", "num_tpu_cores", "use_one_hot_embeddings"):
        assert result.stderr.count(f"--{name} is not used: ") == 1, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")


@pytest.mark.slow  # 29 s; google's MRPC command on its own files runs by default
def test_googles_mrpc_command_on_a_hugging_face_directory(stand_ins, tmp_path):
    """`$BERT_BASE_DIR` set to a Hugging Face checkpoint (config.json,
    model.safetensors: the layout of the bundled all-MiniLM-L6-v2): google's
    MRPC command, unchanged, reads its config.json and weights for the absent
    bert_config.json and bert_model.ckpt, and says so once."""
    from official_bert import checkpoints

    encoder, checkpoint = checkpoints.load_encoder(str(stand_ins["BERT_BASE_DIR"] /
                                                       "bert_model.ckpt"))
    hf = tmp_path / "hf_model"
    checkpoints.export_huggingface(encoder, str(hf), vocab_file=checkpoint.vocab_file,
                                   do_lower_case=True)
    assert not (hf / "bert_config.json").exists() and (hf / "config.json").exists()
    (tmp_path / "tmp").mkdir()
    env = dict(stand_ins, BERT_BASE_DIR=hf, root=tmp_path)
    command = dict(GOOGLE_COMMANDS)["classifier_mrpc"]
    result = subprocess.run(["bash", "-c", _script("classifier_mrpc", command, env)],
                            cwd=REPO_ROOT, text=True, capture_output=True, timeout=900,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    said = [line for line in result.stderr.splitlines()
            if "holds a Hugging Face checkpoint, not google's files" in line]
    assert len(said) == 1, result.stderr[-3000:]
    assert "bert_config.json with" in said[0] and "bert_model.ckpt with" in said[0]
    assert (tmp_path / "tmp" / "mrpc_output" / "eval_results.txt").exists()


def test_googles_names_are_kept_when_the_files_exist(stand_ins, tmp_path):
    from official_bert.model_files import google_names_in_a_hugging_face_directory
    from official_bert.configs import ModelFilesConfig

    base = stand_ins["BERT_BASE_DIR"]
    given = ModelFilesConfig(init_checkpoint=str(base / "bert_model.ckpt"),
                             bert_config_file=str(base / "bert_config.json"))
    assert google_names_in_a_hugging_face_directory(given) is given
    empty = ModelFilesConfig(init_checkpoint=str(tmp_path / "bert_model.ckpt"),
                             bert_config_file=str(tmp_path / "bert_config.json"))
    assert google_names_in_a_hugging_face_directory(empty) is empty  # nothing to read instead
