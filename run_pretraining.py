"""Pre-trains BERT: masked LM + next sentence, on any tf.distribute strategy.

google-research/bert's script name, which its commands run. The command itself is
`official_bert/commands/pretrain.py` (also `bert pretrain`): its flags, an example and
what it writes are in `python run_pretraining.py --help`.
"""

if __name__ == "__main__":
    from official_bert.commands import registry

    registry.run_command("pretrain")
