"""Sentence(-pair) classification and regression with BERT: GLUE and your own data.

google-research/bert's script name, which its commands run. The command itself is
`official_bert/commands/classify.py` (also `bert classify`): its flags, an example and
what it writes are in `python run_classifier.py --help`.
"""

if __name__ == "__main__":
    from official_bert.commands import registry

    registry.run_command("classify")
