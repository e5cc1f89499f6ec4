"""bert export-encoder: the TF-Hub-style encoder and preprocessor, and a serving export."""

from ..argv import export_encoder, without
from ..case import Case, at
from ..setups import GEN, hf_checkpoint, mkdir, text, truncate

COMMAND = "export-encoder"

OUT = ["gen/hub/encoder", "gen/hub/preprocessor", "gen/export"]
EXPORT_DIR = f"--export_dir={at('gen', 'export')}"
FLAGS = (  # the case's name, and its flags: one bad one, with --export_dir where it matters
    ("--max_seq_length=2", ["--max_seq_length=2", EXPORT_DIR]),
    ("--max_seq_length=4096", ["--max_seq_length=4096", EXPORT_DIR]),
    ("--max_batch_size=0", ["--max_batch_size=0", EXPORT_DIR]),
    ("--edge_formats=xml", ["--edge_formats=xml", EXPORT_DIR]),
    ("--quantize", ["--quantize"]),
    ("--export_version=0", ["--export_version=0", EXPORT_DIR]),
    ("--serving_dtype=float16", ["--serving_dtype=float16", EXPORT_DIR]),
    ("--serving_dtype=bfloat16 without --export_dir", ["--serving_dtype=bfloat16"]),
)


def _named(flag: str) -> list:
    """The flag's name, with and without its dashes (absl's line or ours)."""
    name = flag.split("=")[0]
    return [name, name.lstrip("-")]


CASES = [
    Case("good input (--export_dir, --serving_dtype=bfloat16)",
         export_encoder(EXPORT_DIR, "--serving_dtype=bfloat16"), setup=GEN, control=True),
    Case("--init_checkpoint missing", export_encoder(ckpt="nope"), setup=GEN, names=["nope"],
         outputs=OUT),
    Case("no --output_dir", without(export_encoder(), "--output_dir"), setup=GEN,
         names=["--output_dir"], outputs=OUT),
    Case("--output_dir already holds encoder/", export_encoder(),
         setup=text("gen/hub/encoder/keep.txt", "mine"), names=["encoder"]),
    Case("--output_dir is the checkpoint", export_encoder(output_dir=at("ckpt")), names=["ckpt"]),
    Case("--export_dir is --output_dir", export_encoder(f"--export_dir={at('gen', 'hub')}"),
         setup=GEN, names=["--export_dir"], outputs=OUT),
    *[Case(name, export_encoder(*flags), setup=GEN, names=_named(flags[0]), outputs=OUT)
      for name, flags in FLAGS],
    Case("--init_checkpoint: truncated .index", export_encoder(),
         setup=(truncate("ckpt/ckpt-1.index"), GEN), names=["ckpt-1.index"], outputs=OUT),
    Case("--init_checkpoint: truncated model.safetensors", export_encoder(ckpt="hf"),
         setup=(hf_checkpoint, truncate("hf/model.safetensors"), GEN),
         names=["model.safetensors"], outputs=OUT),
    Case("stray positional argument", export_encoder("extra"), setup=GEN, names=["extra"],
         outputs=OUT),
    # Issue 36: every output checked before any work.
    Case("--output_dir on a location that refuses writes",
         export_encoder(output_dir="/sys/bert_hub"), names=["--output_dir /sys/bert_hub"]),
    Case("--export_version taken (before preprocessor/ and encoder/)",
         export_encoder(f"--export_dir={at('exp')}", "--export_version=1"),
         setup=(GEN, mkdir("exp/1")), names=["exp/1 exists"], outputs=OUT),
]
