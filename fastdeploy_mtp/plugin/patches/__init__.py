"""Patches of FastDeploy's proposer, for what no op can fix: what its runner
feeds the draft. One module a patched method; each says what it replaces,
why, at which commits it was read, and what FastDeploy would have to change
for it to go.

A patch is applied only to the code it was written for: the method's code,
parsed (so comments and layout do not count), must hash to one of the digests
its module lists (``Patch.known``), each read from FastDeploy's source at a
named commit. Where the method differs, or is not there, one WARNING line
says so and FastDeploy's own method stays. A patch never raises into
FastDeploy (its own failures leave FastDeploy's method's result as it was)
and never changes the base model's tokens.

Installed by the plugin in the corrected mode (``install``): a proposer
module already imported is patched at once; one not yet imported is patched
as soon as it is (a finder on ``sys.meta_path``, put there only in
FastDeploy's process, by the plugin's register).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.abc
import importlib.util
import inspect
import logging
import sys
import textwrap
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from ..log import first_line
from .patch import Patch


def code_digest(function) -> str:
    """The first 16 hex digits of the SHA-256 of `function`'s parsed code
    (``ast.dump`` of its source, dedented): the same for a method whose
    comments, docstring-free layout or blank lines differ, another for any
    change of its code."""
    return _node_digest(ast.parse(textwrap.dedent(inspect.getsource(function))).body[0])


def _node_digest(node) -> str:
    if (node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(getattr(node.body[0], "value", None), ast.Constant)
            and isinstance(node.body[0].value.value, str)):
        node.body = node.body[1:]  # its docstring is words, not code
    return hashlib.sha256(ast.dump(node).encode()).hexdigest()[:16]


def source_digest(path: Path, owner: str, method: str) -> Optional[str]:
    """code_digest of `owner.method` as the Python file `path` defines it,
    read without importing it; None where the file, the class or the method
    is not there."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == owner:
            for fn in cls.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == method:
                    return _node_digest(fn)
    return None


def check(forms: Tuple[str, ...], package: Path,
          patches: Optional[List[Patch]] = None) -> List[Tuple[int, str]]:
    """What the patches of the runners of `forms` would do to FastDeploy's
    source under `package` (the folder of its ``fastdeploy`` package), read
    without importing it: one (level, line) a patch, INFO where a target of
    it fits, else WARNING with each target's reason. `patches`: these
    instead of every module's."""
    by_name = _by_name(forms, patches)
    lines: List[Tuple[int, str]] = []
    fits = set()
    for name, targets in by_name.items():
        if targets[0].needs and targets[0].needs not in fits:
            lines.append((logging.WARNING, targets[0].refused()))
            continue
        why = []
        for patch in targets:
            path = package.joinpath(*patch.module.split(".")[1:]).with_suffix(".py")
            digest = source_digest(path, patch.owner, patch.method)
            where = f"{patch.owner}.{patch.method}"
            if digest in patch.known:
                lines.append((logging.INFO, f"patch {name} fits {where} as at "
                                            f"{patch.known[digest]}"))
                fits.add(name)
                break
            if path.is_file():
                why.append(f"{where} is not there" if digest is None else
                           f"{where} is code it was not written for (digest {digest})")
        else:
            lines.append((logging.WARNING, f"patch {name} will not apply: "
                                           f"{'; '.join(why) or 'its module is not there'}; "
                                           "FastDeploy's own method stays"))
    return lines


def _all() -> List[Patch]:
    from . import chunk_next_token, chunk_next_token_v0

    return list(chunk_next_token.PATCHES) + list(chunk_next_token_v0.PATCHES)


def _by_name(forms, patches: Optional[List[Patch]]) -> Dict[str, List[Patch]]:
    """The patches of the runners of `forms`, by name (the targets of one
    name are alternatives), those another needs before it."""
    by_name: Dict[str, List[Patch]] = {}
    for patch in _all() if patches is None else patches:
        if set(forms) & set(patch.forms):
            by_name.setdefault(patch.name, []).append(patch)
    for targets in by_name.values():
        for patch in targets:
            patch.group = targets
            patch.needed = by_name.get(patch.needs, [])
    return dict(sorted(by_name.items(), key=lambda item: bool(item[1][0].needs)))


def gate(patch: Patch, owner) -> Tuple[bool, str]:
    """(Whether `patch` fits `owner`'s method, in words.)"""
    original = owner.__dict__.get(patch.method)
    if original is None:
        return False, f"{patch.owner}.{patch.method} is not there"
    try:
        digest = code_digest(original)
    except (OSError, TypeError, SyntaxError, IndexError) as e:
        return False, f"{patch.owner}.{patch.method}'s code cannot be read ({type(e).__name__})"
    if digest not in patch.known:
        return False, (f"{patch.owner}.{patch.method} is code it was not written for "
                       f"(digest {digest})")
    return True, f"{patch.owner}.{patch.method} as at {patch.known[digest]}"


def apply(patch: Patch, module) -> Tuple[int, str]:
    """Applies `patch` to `module` if its gate lets it; (level, line)."""
    owner = getattr(module, patch.owner, None)
    if owner is None:
        return logging.WARNING, (f"patch {patch.name} not applied: {patch.module} has no "
                                 f"{patch.owner}; FastDeploy's own code stays")
    fits, words = gate(patch, owner)
    if not fits:
        return logging.WARNING, (f"patch {patch.name} not applied: {words}; FastDeploy's own "
                                 "method stays")
    original = owner.__dict__[patch.method]
    replacement = patch.wrap(original)
    replacement.fastdeploy_mtp_patch = patch.name
    replacement.__wrapped__ = original
    setattr(owner, patch.method, replacement)
    patch.applied = True
    return logging.INFO, f"patch {patch.name} applied to {words}"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Applies the patches of a module as soon as it is imported: finds it
    with the other finders and runs its loader, then the patches."""

    def __init__(self, waiting: Dict[str, List[Patch]], report: Callable[[int, str], None]):
        self.waiting = waiting
        self.report = report

    def find_spec(self, fullname, path=None, target=None):
        patches = self.waiting.get(fullname)
        if patches is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        del self.waiting[fullname]
        spec.loader = _PatchingLoader(spec.loader, patches, self.report)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, patches: List[Patch], report):
        self.loader, self.patches, self.report = loader, patches, report

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        for patch in self.patches:
            patch.waiting = False
            if not patch.needs_met():
                if not patch.other_applied():
                    self.report(logging.WARNING, patch.refused())
                continue
            try:
                level, line = apply(patch, module)
            except Exception as e:  # never a failed import of FastDeploy's module
                level, line = logging.WARNING, (f"patch {patch.name} not applied: "
                                                f"{type(e).__name__}: {first_line(str(e), 100)}")
            if level == logging.INFO or not patch.other_applied():
                self.report(level, line)


def install(forms: Tuple[str, ...], report: Optional[Callable[[int, str], None]] = None,
            patches: Optional[List[Patch]] = None) -> List[Tuple[int, str]]:
    """Applies every patch of the runners of `forms` (FastDeploy's ops' forms)
    to its module if imported, else as soon as it is; returns the lines to
    log now: one a patch (the targets of one name are alternatives, for
    FastDeploy's versions that moved the method: one that applies is
    enough). Lines of patches applied later go to `report`. `patches`: these
    instead of every module's."""
    from ..log import say

    report = report or say
    lines: List[Tuple[int, str]] = []
    waiting: Dict[str, List[Patch]] = {}
    by_name = _by_name(forms, patches)
    for name, targets in by_name.items():
        if not targets[0].needs_met():
            lines.append((logging.WARNING, targets[0].refused()))
            continue
        done: List[Tuple[int, str]] = []
        waits = []
        for patch in targets:
            module = sys.modules.get(patch.module)
            if module is None:
                waits.append(patch)
                continue
            try:
                done.append(apply(patch, module))
            except Exception as e:  # the plugin never raises into FastDeploy
                done.append((logging.WARNING, f"patch {name} not applied: "
                                              f"{type(e).__name__}: {first_line(str(e), 100)}"))
        applied = [d for d in done if d[0] == logging.INFO]
        if applied:
            lines.append(applied[0])
            continue
        for patch in waits:
            patch.waiting = True
            waiting.setdefault(patch.module, []).append(patch)
        if waits:
            lines.append((logging.INFO, f"patch {name} waits for {waits[0].module}'s import"))
        else:
            lines.append((logging.WARNING, "; ".join(line for _, line in done)))
    if waiting:
        sys.meta_path.insert(0, _AfterImport(waiting, report))
    return lines
