"""run_classifier.py (bert classify): GLUE's TSV files, the model files, flags."""

from tools.kit import fault_kit as kit

from ..argv import classify
from ..case import Case, at
from ..setups import (add_bom, binary, config, evaluated_steps, hf_checkpoint,
                      killed_run_leftovers, killed_while_evaluating, leftovers_removed, mkdir,
                      records_change, remember, remove, rerun_with, same_as_without_bom, symlink,
                      text, trained_classifier, truncate, unchanged, vocab_without)

COMMAND = "classify"

OUT = ["out/eval_results.txt", "out/checkpoint"]
EVAL = ("--do_train", "--do_eval")
PREDICT = ("--do_train", "--do_predict")
SST_TRAIN = "".join(f"{s}\t{y}\n" for s, y in kit.SST_TRAIN)
FLAGS = ("--train_batch_size=0", "--num_train_epochs=0", "--num_train_epochs=-1", "--num_gpus=2",
         "--max_seq_length=1", "--max_seq_length=0", "--max_seq_length=100000",
         "--learning_rate=-1", "--warmup_proportion=2", "--task_name=sst-3",
         "--distribution_strategy=nope", "--export_version=0")
WINDOWS = ("--long_document=windows", "--doc_stride=4", "--max_windows=4")
# 8 examples, batch 4: steps 1 and 2, saved and evaluated at step 2.
EVAL_WHILE_TRAINING = classify("--do_eval", "--eval_every_steps=2", "--save_checkpoints_steps=2")
CUSTOM = ("--task_name=custom", "--text_a_column=sentence", "--labels=0,1")

CASES = [
    Case("good input", classify(), control=True),
    Case("--data_dir does not exist", classify(data="nope"), names=["nope"], outputs=OUT),
    Case("--data_dir is a file", classify(data="corpus.txt"), names=["corpus.txt"], outputs=OUT),
    Case("train.tsv is a directory", classify(),
         setup=(remove("glue/train.tsv"), mkdir("glue/train.tsv")), names=["train.tsv"],
         outputs=OUT),
    Case("binary dev.tsv (--do_eval)", classify(modes=EVAL), setup=binary("glue/dev.tsv"),
         names=["dev.tsv"], outputs=OUT),
    Case("test.tsv not UTF-8 (--do_predict)", classify(modes=PREDICT),
         setup=text("glue/test.tsv", b"index\tsentence\n0\tgood\n1\tb\xe9d\n"),
         names=["test.tsv line 3"], outputs=OUT),
    Case("a BOM and CRLF line ends", classify(),
         setup=text("glue/train.tsv", ("\ufeffsentence\tlabel\r\n" + SST_TRAIN.replace(
             "\n", "\r\n")).encode("utf-8")), control=True),
    Case("a config with keys BERT does not use", classify(),
         setup=config(architectures=["BertModel"], model_type="bert"), control=True),
    Case("stray positional argument", classify("extra"), names=["extra"], outputs=OUT),
    Case("train.tsv missing", classify(), setup=remove("glue/train.tsv"), names=["train.tsv"],
         outputs=OUT),
    Case("train.tsv not UTF-8 (line 4)", classify(), setup=text("glue/train.tsv", (
        "sentence\tlabel\nthe movie\t1\nbad\t0\ncaf\xe9\t1\n").encode("latin-1")),
         names=["train.tsv line 4"], outputs=OUT),
    Case("binary train.tsv", classify(), setup=binary("glue/train.tsv"), names=["train.tsv"],
         outputs=OUT),
    Case("empty train.tsv", classify(), setup=text("glue/train.tsv", ""), names=["train.tsv"],
         outputs=OUT),
    Case("train.tsv with a CSV header", classify(),
         setup=text("glue/train.tsv", "sentence,label\ngood,1\n"), names=["train.tsv"],
         outputs=OUT),
    Case("a row without its label column", classify(),
         setup=text("glue/train.tsv", "sentence\tlabel\ngood\t1\nbad\n"),
         names=["train.tsv line 3"], outputs=OUT),
    Case("unknown label", classify(),
         setup=text("glue/train.tsv", "sentence\tlabel\ngood\t1\nbad\tnegative\n"),
         names=["train.tsv line 3"], outputs=OUT),
    Case("dev.tsv unknown label (--do_eval)", classify(modes=EVAL),
         setup=text("glue/dev.tsv", "sentence\tlabel\ngood\t1\nbad\t2\n"),
         names=["dev.tsv line 3"], outputs=OUT),
    Case("test.tsv missing (--do_predict)", classify(modes=PREDICT),
         setup=remove("glue/test.tsv"), names=["test.tsv"], outputs=OUT),
    Case("one 1 MB line", classify(), setup=text("glue/train.tsv", (
        "sentence\tlabel\n" + "good " * 200_000 + "\t1\nbad\t0\n" + SST_TRAIN)), control=True),
    Case("vocab larger than the config's vocab_size", classify(), setup=text(
        "ckpt/vocab.txt", "\n".join(kit.VOCAB + [f"extra{i}" for i in range(5)]) + "\n"),
         names=["vocab.txt"], outputs=OUT),
    Case("vocab without [CLS]/[SEP]", classify(), setup=vocab_without("[CLS]", "[SEP]"),
         names=["vocab.txt"], outputs=OUT),
    Case("binary vocab", classify(), setup=binary("ckpt/vocab.txt"), names=["vocab.txt"],
         outputs=OUT),
    Case("config without num_hidden_layers", classify(), setup=config(num_hidden_layers=None),
         names=["bert_config.json"], outputs=OUT),
    Case("--init_checkpoint: truncated .index", classify(), setup=truncate("ckpt/ckpt-1.index"),
         names=["ckpt-1.index"], outputs=OUT),
    Case("--init_checkpoint: truncated .data", classify(),
         setup=truncate("ckpt/ckpt-1.data-00000-of-00001"), names=["ckpt-1.data"], outputs=OUT),
    Case("--init_checkpoint: .data deleted", classify(),
         setup=remove("ckpt/ckpt-1.data-00000-of-00001"), names=["ckpt"], outputs=OUT),
    Case("--init_checkpoint: truncated model.safetensors", classify(ckpt="hf"),
         setup=(hf_checkpoint, truncate("hf/model.safetensors")), names=["model.safetensors"],
         outputs=OUT),
    Case("--init_checkpoint: empty directory", classify(ckpt="empty"), setup=mkdir("empty"),
         names=["empty"], outputs=OUT),
    *[Case(flag, classify(flag), names=[flag.split("=")[0]], outputs=OUT) for flag in FLAGS],
    Case("nothing to do (no --do_*)", classify(modes=()), names=["--do_train"], outputs=OUT),
    Case("--export_dir is --output_dir", classify(f"--export_dir={at('out')}"),
         names=["--export_dir"], outputs=OUT),
    Case("--output_dir is --data_dir", classify(out="glue"), names=["glue"]),
    Case("evaluate a run directory without a trained head", classify(modes=("--do_eval",)),
         names=["--do_train"], outputs=OUT),
    Case("--long_document=windows (control)", classify(*WINDOWS), control=True),
    Case("--long_document=sliding", classify("--long_document=sliding"),
         names=["long_document"], outputs=OUT),
    *[Case(f"--long_document=windows {flag}", classify(*WINDOWS, flag),
           names=[flag.split("=")[0]], outputs=OUT)
      for flag in ("--doc_stride=0", "--max_windows=0")],
    Case("--serving_dtype=float16",
         classify("--serving_dtype=float16", f"--export_dir={at('gen', 'export')}"),
         names=["serving_dtype"], outputs=OUT),
    Case("--serving_dtype=bfloat16 without --export_dir", classify("--serving_dtype=bfloat16"),
         names=["--serving_dtype"], outputs=OUT),
    # Issue 36: a vocabulary lists each token once; a byte-order mark is not content.
    Case("vocab with a token listed twice", classify(),
         setup=text("ckpt/vocab.txt", "\n".join(kit.VOCAB[:-1] + ["movie"]) + "\n"),
         names=["vocab.txt has the token 'movie' twice"], outputs=OUT),
    Case("--vocab_file with a token listed twice", classify(f"--vocab_file={at('dup.txt')}"),
         setup=text("dup.txt", "\n".join(kit.VOCAB[:-1] + ["[PAD]"]) + "\n"),
         names=[f"dup.txt has the token '[PAD]' twice, on lines 1 and {len(kit.VOCAB)}"],
         outputs=OUT),
    Case("vocab with a BOM: the BOM-less results", classify(modes=EVAL),
         setup=add_bom("ckpt/vocab.txt"), control=True,
         after=same_as_without_bom("ckpt/vocab.txt", outputs=["out/eval_results.txt"],
                                   fresh=["out"])),
    # Issue 36: a run directory knows what it is; outputs are checked before any work.
    Case("--output_dir is --init_checkpoint's directory", classify(out="ckpt"),
         setup=remember("ckpt"), names=["ckpt"], after=unchanged("ckpt")),
    Case("--output_dir: a link to --init_checkpoint's directory", classify(out="link"),
         setup=(symlink("link", "ckpt"), remember("ckpt")), names=["link"],
         after=unchanged("ckpt")),
    Case("resume with another --max_seq_length", classify("--max_seq_length=24"),
         setup=(trained_classifier, remember("out")), names=["--max_seq_length was 16, now 24"],
         after=unchanged("out")),
    Case("resume as another task (custom, same labels)", classify(*CUSTOM),
         setup=(trained_classifier, remember("out")),
         names=["--task_name was sst-2, now custom"], after=unchanged("out")),
    Case("resume with another --learning_rate", classify("--learning_rate=1e-3"),
         setup=trained_classifier, names=["--allow_changed_settings"],
         after=rerun_with("--allow_changed_settings")),
    # (With an epoch more to train: a session that trains nothing records nothing.)
    Case("resume with another --learning_rate, allowed", classify(
        "--learning_rate=1e-3", "--num_train_epochs=2", "--allow_changed_settings"),
         setup=trained_classifier,
         control=True, after=records_change("out", "learning_rate")),
    Case("a run killed while it evaluated: the resume evaluates that step", EVAL_WHILE_TRAINING,
         setup=killed_while_evaluating(EVAL_WHILE_TRAINING), control=True,
         after=evaluated_steps("out", [2])),
    Case("leftovers of a killed run (ckpt-N_temp, a temporary)", classify(modes=EVAL),
         setup=(trained_classifier, killed_run_leftovers("out")), control=True,
         after=leftovers_removed("out")),
    Case("--output_dir on a location that refuses writes", classify("--output_dir=/sys/bert_run"),
         names=["--output_dir /sys/bert_run"]),
    Case("--export_dir on a location that refuses writes",
         classify("--export_dir=/sys/bert_export"), names=["--export_dir /sys/bert_export"],
         outputs=OUT),
    Case("--export_version taken (before training)",
         classify(f"--export_dir={at('exp')}", "--export_version=1"), setup=mkdir("exp/1"),
         names=["exp/1 exists"], outputs=OUT),
    Case("train.tsv and dev.tsv with a BOM: the BOM-less results", classify(modes=EVAL),
         setup=(add_bom("glue/train.tsv"), add_bom("glue/dev.tsv")), control=True,
         after=same_as_without_bom("glue/train.tsv", "glue/dev.tsv",
                                   outputs=["out/eval_results.txt"], fresh=["out"])),
]
