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
    commits where it was read; `forms`: the forms whose runner it patches."""
    name: str
    module: str
    owner: str
    method: str
    known: Dict[str, str]
    wrap: Callable[[Callable], Callable]
    forms: Tuple[str, ...]
    applied: bool = field(default=False, compare=False)
    # The patches of the same name (alternative targets), set by install.
    group: list = field(default_factory=list, compare=False, repr=False)

    waiting: bool = field(default=False, compare=False)

    def other_applied(self) -> bool:
        """Whether another target of the same name applied, or may still."""
        return any(p.applied or p.waiting for p in self.group if p is not self)
