"""Named-entity recognition (token classification) with BERT: fine-tuning or feature-based.

The script beside google-research/bert's. The command itself is
`official_bert/commands/ner.py` (also `bert ner`): its flags, an example and what it
writes are in `python run_ner.py --help`.
"""

if __name__ == "__main__":
    from official_bert.commands import registry

    registry.run_command("ner")
