"""bert itself: a command or a flag it does not know."""

from ..case import Case

COMMAND = "bert"

CASES = [
    Case("unknown command", ["bert nosuchcommand"], names=["nosuchcommand"]),
    Case("unknown flag", ["bert classify", "--no_such_flag"], names=["no_such_flag"]),
]
