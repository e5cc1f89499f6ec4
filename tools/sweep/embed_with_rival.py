"""`bert embed`, with a rival: as it computes its first vectors, another process
(played here) writes its --output_file. The sweep's case of two writers of one
new file: run as `python -m tools.sweep.embed_with_rival <bert embed's flags>`."""

import sys

from official_bert.commands import registry
from official_bert.tasks import embeddings

RIVAL = b"the rival's output\n"


def main():
    output = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--output_file="))
    original = embeddings.embed_texts

    def embed_texts(*args, **kwargs):
        with open(output, "xb") as f:  # the rival publishes first
            f.write(RIVAL)
        embeddings.embed_texts = original
        return original(*args, **kwargs)

    embeddings.embed_texts = embed_texts
    registry.run_command("embed", sys.argv)


if __name__ == "__main__":
    main()
