"""bert glue-submission: the runs' test predictions as GLUE's submission zip."""

from ..argv import glue_submission, without
from ..case import Case, at
from ..setups import GEN, copytree, glue_runs, text

COMMAND = "glue-submission"

OUT = ["gen/submission.zip"]
RUNS = glue_runs()
BAD_PREDICTIONS = (  # the case, SST-2.tsv's content, what the error line names
    ("a file without its header", "0\t1\n1\t0\n2\t1\n3\t0\n", "SST-2.tsv line 1"),
    ("an unknown label", "index\tprediction\n0\t1\n1\tpositive\n2\t1\n3\t0\n", "SST-2.tsv line 3"),
    ("an index twice", "index\tprediction\n0\t1\n0\t0\n2\t1\n3\t0\n", "SST-2.tsv line 3"),
    ("rows fewer than --glue_dir's test set", "index\tprediction\n0\t1\n1\t0\n", "SST-2.tsv"),
    ("indices unlike --glue_dir's test set", "index\tprediction\n0\t1\n1\t0\n9\t1\n3\t0\n",
     "SST-2.tsv line 4"),
)

CASES = [
    Case("good input (--allow_missing, --glue_dir)", glue_submission(), setup=(RUNS, GEN),
         control=True),
    Case("good input, official row counts (control)", glue_submission(glue_dir=None),
         setup=(glue_runs(rows=1821), GEN), control=True),
    Case("--runs_dir does not exist", glue_submission(runs="nope"), setup=(RUNS, GEN),
         names=["nope"], outputs=OUT),
    Case("--runs_dir holds no runs", glue_submission(runs="glue"), setup=(RUNS, GEN),
         names=["glue"], outputs=OUT),
    Case("tasks missing, without --allow_missing", without(glue_submission(), "--allow_missing"),
         setup=(RUNS, GEN), names=["--allow_missing"], outputs=OUT),
    Case("rows unlike the official test set (no --glue_dir)", glue_submission(glue_dir=None),
         setup=(RUNS, GEN), names=["SST-2.tsv"], outputs=OUT),
    *[Case(label, glue_submission(), setup=(glue_runs(text=content), GEN), names=[where],
           outputs=OUT)
      for label, content, where in BAD_PREDICTIONS],
    Case("a predictions file not UTF-8", glue_submission(),
         setup=(glue_runs(text=b"index\tprediction\n0\t1\n1\t\xff\n"), GEN), names=["SST-2.tsv"],
         outputs=OUT),
    Case("a run's classifier_config.json not JSON", glue_submission(),
         setup=(RUNS, text("runs/sst2/classifier_config.json", "{task"), GEN),
         names=["classifier_config.json"], outputs=OUT),
    Case("two runs of one task", glue_submission(),
         setup=(RUNS, copytree("runs/sst2", "runs/b"), GEN), names=["--runs_dir"], outputs=OUT),
    Case("--glue_dir is not a directory", glue_submission(glue_dir="corpus.txt"),
         setup=(RUNS, GEN), names=["corpus.txt"], outputs=OUT),
    Case("--output_file exists (someone's file)", glue_submission(output=at("taken.zip")),
         setup=(RUNS, text("taken.zip", "someone's")), names=["taken.zip"]),
    Case("--output_file inside --runs_dir is the predictions file",
         glue_submission(output=at("runs", "sst2", "SST-2.tsv")), setup=RUNS,
         names=["SST-2.tsv"]),
    Case("stray positional argument", glue_submission("extra"), setup=(RUNS, GEN),
         names=["extra"], outputs=OUT),
]
