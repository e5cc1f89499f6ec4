"""run_pretraining.py: TFRecords and text corpora, configs, checkpoints to resume, flags."""

from ..argv import pretrain, pretrain_text
from ..case import Case, at
from ..setups import (binary, config, config_file, corrupt, not_utf8_corpus, records,
                      rerun_resumes, resumes_after_delete, text, trained_run, truncate,
                      vocab_without)

COMMAND = "pretrain"

OUT = ["run/checkpoint"]
DAMAGED_RECORDS = (("truncated TFRecord", truncate, False), ("corrupt TFRecord", corrupt, False),
                   ("truncated GZIP TFRecord", truncate, True),
                   ("corrupt GZIP TFRecord", corrupt, True))
CONFIGS = (("config without num_hidden_layers", dict(num_hidden_layers=None)),
           ("config with hidden_size % heads != 0", dict(hidden_size=18)),
           ("config with vocab_size 0", dict(vocab_size=0)),
           ("config with hidden_act 'nope'", dict(hidden_act="nope")),
           ("config with a string for a number", dict(hidden_size="16")))
FLAGS = ("--train_batch_size=0", "--num_train_steps=0", "--learning_rate=0", "--learning_rate=nan",
         "--max_seq_length=0", "--save_checkpoints_steps=0", "--num_gpus=2",
         "--num_warmup_steps=-1", "--gradient_accumulation_steps=3", "--max_seq_length=1000",
         "--masked_lm_prob=1.5", "--dtype=float64")
NGRAMS = ("--max_ngram_size=0", "--max_ngram_size=-2", "--max_ngram_size=1000000")
CKPT_4_DATA = "run/ckpt-4.data-00000-of-00001"
# trained_run's run (4 steps) resumed for 2 steps more: a change of its settings, allowed.
RESUME = pretrain("--allow_changed_settings", steps=6)

CASES = [
    Case("good input", pretrain(), control=True),
    Case("glob matches nothing", pretrain(inputs=at("no-*.tfrecord")), names=["--input_file"],
         outputs=OUT),
    *[Case(label, pretrain(inputs=at("bad.tfrecord"), steps=40),
           setup=(records("bad.tfrecord", compress), damage("bad.tfrecord", 0.55)),
           names=["bad.tfrecord"], outputs=OUT)
      for label, damage, compress in DAMAGED_RECORDS],
    Case("--input_file is a directory", pretrain(inputs=at("glue")), names=["glue"],
         outputs=OUT),
    Case("--eval_input_file does not exist (--do_eval)",
         pretrain("--do_eval", f"--eval_input_file={at('nope.tfrecord')}"),
         names=["nope.tfrecord"], outputs=OUT),
    Case("a flag's value as a separate word (--do_train true)", pretrain("true"), names=["true"],
         outputs=OUT),
    Case("text file as TFRecord", pretrain(inputs=at("corpus.txt")), names=["corpus.txt"],
         outputs=OUT),
    Case("empty TFRecord file", pretrain(inputs=at("e.tfrecord")), setup=text("e.tfrecord", ""),
         names=["e.tfrecord"], outputs=OUT),
    Case("--max_seq_length unlike the files", pretrain("--max_seq_length=64"),
         names=["pretrain.tfrecord"], outputs=OUT),
    Case("--max_predictions_per_seq unlike the files", pretrain("--max_predictions_per_seq=7"),
         names=["pretrain.tfrecord"], outputs=OUT),
    *[Case(label, pretrain(), setup=config(**changes), names=["bert_config.json"], outputs=OUT)
      for label, changes in CONFIGS],
    Case("config that is not JSON", pretrain(), setup=text("bert_config.json", "{vocab_size: 3"),
         names=["bert_config.json"], outputs=OUT),
    Case("config that is a JSON list", pretrain(), setup=text("bert_config.json", "[1, 2]"),
         names=["bert_config.json"], outputs=OUT),
    Case("vocab without [MASK]", pretrain(), setup=vocab_without("[MASK]"), names=["vocab.txt"],
         outputs=OUT),
    *[Case(flag, pretrain(flag), names=[flag.split("=")[0]], outputs=OUT) for flag in FLAGS],
    Case("truncated checkpoint .index (resume)", RESUME,
         setup=(trained_run, truncate("run/ckpt-4.index")), names=["ckpt-4.index"],
         after=resumes_after_delete),
    Case("truncated checkpoint .data (resume)", RESUME,
         setup=(trained_run, truncate(CKPT_4_DATA)), names=["ckpt-4.data"],
         after=resumes_after_delete),
    Case("corrupt checkpoint .data (resume)", RESUME,
         setup=(trained_run, corrupt(CKPT_4_DATA, 0.3, 64)), names=["ckpt-4"],
         after=resumes_after_delete),
    Case("corrupt `checkpoint` state file", RESUME,
         setup=(trained_run, text("run/checkpoint", "}{x")), names=["checkpoint"]),
    Case("disk full while saving a checkpoint (resume)", RESUME, setup=trained_run,
         file_size_limit=40_000, names=["run"], after=rerun_resumes),
    Case("--init_checkpoint does not exist", pretrain(ckpt="nope"), names=["nope"], outputs=OUT),
    Case("--init_checkpoint with a truncated .data", pretrain(ckpt="ckpt"),
         setup=truncate("ckpt/ckpt-1.data-00000-of-00001"), names=["ckpt-1.data"], outputs=OUT),
    Case("--init_checkpoint of another config",
         pretrain(f"--bert_config_file={at('other.json')}", ckpt="ckpt"),
         setup=config_file("other.json", hidden_size=32), names=["ckpt"], outputs=OUT),
    Case("--output_dir is a file", pretrain(out="corpus.txt"), names=["corpus.txt"]),
    Case("--output_dir is the input", pretrain(out="pretrain.tfrecord"),
         names=["pretrain.tfrecord"]),
    Case("--input_format=text (control)", pretrain_text(), control=True),
    Case("--input_format=text: binary corpus", pretrain_text(inputs="bin.txt"),
         setup=binary("bin.txt"), names=["bin.txt"], outputs=OUT),
    Case("--input_format=text: a TFRecord as the corpus", pretrain_text(inputs="pretrain.tfrecord"),
         names=["pretrain.tfrecord"], outputs=OUT),
    Case("--input_format=text: a line that is not UTF-8", pretrain_text(inputs="bad.txt"),
         setup=not_utf8_corpus("bad.txt"), names=["bad.txt line"], outputs=OUT),
    Case("--input_format=text: one document", pretrain_text(inputs="one.txt"),
         setup=text("one.txt", "w1 w2 .\nw3 w4 .\n"), names=["one.txt"], outputs=OUT),
    Case("--input_format=text: empty corpus", pretrain_text(inputs="e.txt"),
         setup=text("e.txt", "\n\n"), names=["e.txt"], outputs=OUT),
    Case("--input_format=text with --dynamic_masking", pretrain_text("--dynamic_masking"),
         names=["--dynamic_masking"], outputs=OUT),
    Case("--input_format=csv", pretrain("--input_format=csv"), names=["input_format"],
         outputs=OUT),
    Case("--max_ngram_size=3 --dynamic_masking (control)",
         pretrain("--dynamic_masking", "--max_ngram_size=3"), control=True),
    *[Case(f"{flag} --dynamic_masking", pretrain("--dynamic_masking", flag),
           names=["--max_ngram_size"], outputs=OUT)
      for flag in NGRAMS],
    Case("--max_ngram_size=1000000 --input_format=text", pretrain_text("--max_ngram_size=1000000"),
         names=["--max_ngram_size"], outputs=OUT),
    Case("--max_ngram_size=3 on statically masked files", pretrain("--max_ngram_size=3"),
         names=["--max_ngram_size"], outputs=OUT),
    *[Case(f"{flag} (control)", pretrain(flag), control=True)
      for flag in ("--length_bucket_width=16", "--length_bucket_width=0")],
    Case("--length_bucket_width=7 (does not divide --max_seq_length; control)",
         pretrain("--length_bucket_width=7"), control=True),
    *[Case(flag, pretrain(flag), names=["--length_bucket_width"], outputs=OUT)
      for flag in ("--length_bucket_width=-16", "--length_bucket_width=64")],
    Case("--serving_dtype=float16", pretrain("--serving_dtype=float16"), names=["serving_dtype"],
         outputs=OUT),
    Case("--serving_dtype=bfloat16 without --export_dir", pretrain("--serving_dtype=bfloat16"),
         names=["--serving_dtype"], outputs=OUT),
]
