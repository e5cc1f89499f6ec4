"""Multiple choice with BERT (SWAG): one score per choice, softmax over the choices.

The script beside google-research/bert's. The command itself is
`official_bert/commands/swag.py` (also `bert swag`): its flags, an example and what it
writes are in `python run_swag.py --help`.
"""

if __name__ == "__main__":
    from official_bert.commands import registry

    registry.run_command("swag")
