"""The output plan: what the output policy found at each output before the work,
which the publishing step then follows.

The policy (`official_bert.outputs`) checks every output a command declares
before any work and writes down in the job's `OutputPlan` how each may be
published (a `Claim`):

* "new": nothing was there, so publishing never replaces (of two writers, the
  one that got there first wins; the other gets one line);
* "ours": the project's own earlier output, replaced only while it is still
  that file;
* "replace": --overwrite.

Publishing (`publishing.publish_file`, `publish_directory`) asks the plan in
force; a path the plan does not name (a run directory's own files) is
published as its writer says. The plan also names the job's outputs (flag →
path) for an error line whose error names no path.

One plan is in force at a time: the command boundary (`app.run`) puts a fresh
one in force for each job (`OutputPlan.in_force`). A library call made outside
a command (a test, a notebook) works in the default plan the process starts
with. A single slot rather than a context variable, so that a writer on
another thread follows the job's plan too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Iterator

from official_bert.io.paths import identity, is_local, local_key, local_path

STATES = ("new", "ours", "replace")


@dataclasses.dataclass(frozen=True)
class Claim:
    """How one output may be published, and what was there when it was checked."""

    state: str  # one of STATES
    was: tuple | None  # `paths.identity` of what was there then; None when nothing was


class OutputPlan:
    """The claims of one job's outputs (by absolute local path) and the names
    its error lines give them."""

    def __init__(self):
        self._claims: dict[str, Claim] = {}
        self.named: dict[str, str] = {}  # flag → path, every output the job was given

    def claim(self, path: str, state: str) -> None:
        """Records how the output `path` may be published; made by the output
        policy after its checks, before any work. Paths with a scheme are not
        claimed (object stores: a rename replaces)."""
        if state not in STATES:
            raise ValueError(f"OutputPlan.claim: state {state!r}")
        if is_local(path):
            self._claims[local_key(path)] = Claim(state, identity(path))

    def name(self, flag: str, path: str | None) -> None:
        """Names an output of the job (its flag and value) for error lines."""
        if path:
            self.named[flag] = os.fspath(path)

    def claim_of(self, path: str) -> Claim | None:
        return self._claims.get(local_key(path)) if is_local(path) else None

    def is_claimed(self, path: str) -> bool:
        return self.claim_of(path) is not None

    def holds(self, path: str) -> bool:
        """Whether `path` is still as its claim found it (nothing appeared at a
        "new" one, "ours" unchanged): for a writer to check before it touches
        anything shared (a set's manifest). Unclaimed paths hold."""
        claim = self.claim_of(path)
        if claim is None:
            return True
        if claim.state == "new":
            return not os.path.lexists(local_path(path))
        if claim.state == "ours":
            return identity(path) in (claim.was, None)
        return True

    def published(self, path: str) -> None:
        """After publishing a claimed `path`: it is the project's own now, as it
        is (a second publication in this job replaces it only while unchanged)."""
        self._claims[local_key(path)] = Claim("ours", identity(path))

    @contextlib.contextmanager
    def in_force(self) -> Iterator[OutputPlan]:
        """Makes this plan the one publishing follows, until the block ends."""
        global _in_force
        before, _in_force = _in_force, self
        try:
            yield self
        finally:
            _in_force = before


# The plan publishing follows now (`OutputPlan.in_force`); the default one
# serves library calls made outside a command.
_in_force = OutputPlan()


def plan_in_force() -> OutputPlan:
    """The plan the publishing step follows now."""
    return _in_force
