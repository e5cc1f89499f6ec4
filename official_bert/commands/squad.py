"""Fine-tunes BERT on SQuAD v1.1 / v2.0 and predicts answers (google-research/bert's run_squad.py).

Flags and defaults are google's; any checkpoint kind loads (Hugging Face
directory, Google TF1 checkpoint, official_bert run), with a SQuAD head in it
(`cls/squad/*`, HF `qa_outputs`) restored too. What it writes:
`official_bert/tasks/squad.py` (predictions.json, nbest_predictions.json,
null_odds.json for v2.0, eval_results.json when the predict file has answers).

Example (v1.1):
  python run_squad.py --do_train --do_predict \\
    --init_checkpoint=path/to/all-MiniLM-L6-v2 \\
    --train_file=train-v1.1.json --predict_file=dev-v1.1.json \\
    --train_batch_size=16 --learning_rate=5e-5 --num_train_epochs=1 \\
    --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad
"""

from __future__ import annotations

from absl import flags

from official_bert import app, cli_flags

# tasks.squad loads TensorFlow: `main` imports it once the flags are parsed, so
# that defining the flags (and `--help`) stays fast.

FLAGS = flags.FLAGS

flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions, e.g. dev-v1.1.json.")
flags.DEFINE_integer("doc_stride", 128, "Stride between context windows, in tokens.")
flags.DEFINE_integer("max_query_length", 64, "Question tokens kept.")
flags.DEFINE_integer("n_best_size", 20, "Candidates per question in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in WordPiece tokens.")
flags.DEFINE_bool("verbose_logging", False, "Log get_final_text alignment failures.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: questions may have no answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "v2.0: predict no answer when null score - best non-null score > this.")
flags.DEFINE_bool("tune_threshold", False,
                  "v2.0: apply the best_f1_thresh found on --predict_file (needs answers).")
flags.DEFINE_integer("max_predict_examples", None, "Predict only the first N questions.")
cli_flags.define_run_flags(max_seq_length=384, modes=("train", "predict"), train_batch_size=32,
                           predict_batch_size=8)


# The main/entry pair every task command ends with (deliberately the same): flags → config →
# the library.
def main(argv):
    app.refuse_arguments(argv)
    from official_bert.tasks import base, squad

    config = cli_flags.from_flags(squad.SquadConfig, FLAGS)
    base.run(squad.SpanLabelingTask(config, cli_flags.run_config(FLAGS)))


def entry(argv=None):
    """Console entry point (`bert squad`)."""
    app.run(main, argv)


if __name__ == "__main__":
    entry()
