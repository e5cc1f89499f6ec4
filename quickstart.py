"""The end-to-end demo on bundled data: `python quickstart.py` (also `bert quickstart`).

Its stages and flags: `official_bert/commands/quickstart.py`.
"""

from official_bert.commands import quickstart

if __name__ == "__main__":
    quickstart.entry()
