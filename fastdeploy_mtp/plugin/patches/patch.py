"""One patch of FastDeploy's proposer, as data: the method it wraps, the
code it was written for, and its wrapper (the package's ``install`` applies
it; each module beside this one lists its own)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Tuple


@dataclass
class Patch:
    """One patched method: `owner` (a class) of `module` (a FastDeploy
    module), its `method`, replaced by `wrap(original)`; `known`: the digests
    (code_digest) of the method it was written for, each with the FastDeploy
    commits where it was read; `forms`: the forms whose runner it patches;
    `needs`: the name of the patch without which it does nothing (one that
    notes what another writes), applied only where that one applies or may
    still."""
    name: str
    module: str
    owner: str
    method: str
    known: Dict[str, str]
    wrap: Callable[[Callable], Callable]
    forms: Tuple[str, ...]
    needs: str = ""
    applied: bool = field(default=False, compare=False)
    # The patches of the same name (alternative targets), set by install.
    group: list = field(default_factory=list, compare=False, repr=False)

    waiting: bool = field(default=False, compare=False)
    # The targets of the patch it needs, set by install.
    needed: list = field(default_factory=list, compare=False, repr=False)

    def other_applied(self) -> bool:
        """Whether another target of the same name applied, or may still."""
        return any(p.applied or p.waiting for p in self.group if p is not self)

    def needs_met(self) -> bool:
        """Whether the patch it needs (if any) applied, or may still."""
        return not self.needs or any(p.applied or p.waiting for p in self.needed)

    def refused(self) -> str:
        return (f"patch {self.name} not applied: it needs patch {self.needs}, which does not "
                "apply; FastDeploy's own method stays")
