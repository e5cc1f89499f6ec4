"""Extracts per-token (or pooled sentence) vectors from a BERT checkpoint.

google-research/bert's script name, which its commands run. The command itself is
`official_bert/commands/extract_features.py` (also `bert extract-features`): its flags,
an example and what it writes are in `python extract_features.py --help`.
"""

if __name__ == "__main__":
    from official_bert.commands import registry

    registry.run_command("extract-features")
