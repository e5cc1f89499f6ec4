"""Fine-tunes BERT on SQuAD v1.1 / v2.0 and predicts answers.

google-research/bert's script name, which its commands run. The command itself is
`official_bert/commands/squad.py` (also `bert squad`): its flags, an example and what it
writes are in `python run_squad.py --help`.
"""

if __name__ == "__main__":
    from official_bert.commands import registry

    registry.run_command("squad")
