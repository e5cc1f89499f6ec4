"""The end-to-end demo on bundled data: `python quickstart.py` (also `bert quickstart`).

Its stages and flags: `official_bert/commands/quickstart.py`.
"""

if __name__ == "__main__":
    from official_bert.commands import registry

    registry.run_command("quickstart")
