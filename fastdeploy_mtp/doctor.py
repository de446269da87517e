"""``fastdeploy-mtp doctor``: what the plugin will do in this environment,
one finding a line, run where FastDeploy runs.

It reads FastDeploy's package and its two ops' signatures (importing
FastDeploy's ops module, as its workers do), the form and mode the plugin
would put in place and why, whether ``FD_PLUGINS`` names the plugin's entry
point as FastDeploy reads it (split at commas, nothing trimmed), whether the
entry point is installed, the op library (built for these sources or not,
for which GPU archs, this GPU's among them, a compiler and nvcc to build it),
what that FastDeploy version's draft gets as shipped and with the plugin
(the verdict with the plugin, docs/results.md), and in the corrected mode
whether each patch of FastDeploy's proposer fits its code (its source read,
not imported). It changes nothing: no build, no op call, no FastDeploy
method patched.

Each finding is ``ok``, ``warn`` (the plugin works, but see the line) or
``fail`` (the plugin will not do what it is meant to). The exit code is 0
with no ``fail``, 1 otherwise; ``--json`` prints the findings as one JSON
document instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import List, Optional

ENTRY_POINT = "fastdeploy_mtp"
GROUP = "fastdeploy.model_register_plugins"

# What each FastDeploy version's draft gets, as the verdict with the plugin
# (``verdict --plugin``, docs/results.md) shows it: rows that drift as shipped,
# and every row exact with the plugin (tests/test_doctor.py holds these words
# to the table).
SHIPPED = {
    "pr5245": "its draft drifts from k = 2 at every decode step (mask and KV positions), "
              "and under chunked prefill at every k",
    "pr5738": "its draft drifts from k = 2 where a stopped draft re-syncs and on a decode "
              "node, and under chunked prefill at every k",
    "pr6403": "its draft drifts from k = 2 where a stopped draft re-syncs and on a decode "
              "node, and under chunked prefill at every k",
    "shadow": "its draft drifts under chunked prefill at every k",
}
WITH_PLUGIN = "with the plugin (corrected mode) every row of the verdict is exact"


@dataclass
class Finding:
    status: str  # "ok", "warn" or "fail"
    topic: str
    line: str


def _fd_plugins(value: Optional[str]) -> Finding:
    """FD_PLUGINS as FastDeploy reads it: split at commas, entry-point names
    compared as they are (fastdeploy/plugins/utils.py line 50 at c29e86fc9)."""
    if value is None:
        return Finding("fail", "FD_PLUGINS", (
            "FD_PLUGINS is not set: FastDeploy from 9018ccf74 on loads no plugin (up to "
            f"ba915e03e it loads every one installed); set FD_PLUGINS={ENTRY_POINT}"))
    names = value.split(",")
    if ENTRY_POINT in names:
        return Finding("ok", "FD_PLUGINS", f"FD_PLUGINS={value!r} names {ENTRY_POINT}")
    near = [n for n in names if n.strip().lower().replace("-", "_") == ENTRY_POINT]
    if near:
        return Finding("fail", "FD_PLUGINS", (
            f"FD_PLUGINS={value!r} has {near[0]!r}, which FastDeploy does not take for "
            f"{ENTRY_POINT} (it splits at commas and trims nothing): write {ENTRY_POINT}, "
            "no spaces"))
    return Finding("fail", "FD_PLUGINS", f"FD_PLUGINS={value!r} does not name {ENTRY_POINT}")


def _entry_point() -> Finding:
    from importlib.metadata import entry_points

    try:
        found = [e for e in entry_points(group=GROUP) if e.name == ENTRY_POINT]
    except TypeError:  # Python 3.9: entry_points() takes no group
        found = [e for e in entry_points().get(GROUP, []) if e.name == ENTRY_POINT]
    if found:
        return Finding("ok", "entry point", f"{GROUP}: {ENTRY_POINT} = {found[0].value}")
    return Finding("fail", "entry point", (
        f"no {ENTRY_POINT} entry point in {GROUP}: install the package in FastDeploy's "
        "environment (pip install on a checkout of it, or on its wheel)"))


def _fastdeploy() -> List[Finding]:
    """FastDeploy's package, its ops' signatures and the plugin's choice."""
    from .plugin import CORRECTED_OF, MODE_VARIABLE, mode
    from .plugin.detect import (FASTDEPLOY_OPS, MASK, PREPROCESS, code_marker, fastdeploy_op,
                                fastdeploy_version, forms_of, parameters)

    if importlib.util.find_spec("fastdeploy") is None:
        return [Finding("fail", "FastDeploy", "FastDeploy is not importable here: run doctor "
                        "in FastDeploy's environment")]
    try:
        __import__(FASTDEPLOY_OPS)
        fd_ops = sys.modules[FASTDEPLOY_OPS]
    except Exception as e:  # its compiled ops missing, or any failure of its import
        where = os.path.dirname(sys.modules["fastdeploy"].__file__) \
            if "fastdeploy" in sys.modules else "?"
        return [Finding("fail", "FastDeploy", (
            f"FastDeploy at {where}: its {FASTDEPLOY_OPS} did not import "
            f"({type(e).__name__}: {str(e).strip().splitlines()[0][:120] if str(e) else '-'})"))]
    import fastdeploy

    out = [Finding("ok", "FastDeploy", f"FastDeploy {fastdeploy_version()} at "
                                        f"{os.path.dirname(fastdeploy.__file__)}")]
    ops = {}
    for name in (PREPROCESS, MASK):
        op = fastdeploy_op(fd_ops, name)
        ops[name] = op
        if op is None:
            out.append(Finding("fail", "FastDeploy's ops", f"FastDeploy has no {name}"))
            continue
        names, count = parameters(op)
        said = (f"{count} parameters, {names[0]} ... {names[-1]}" if names
                else f"{count} unnamed parameters" if count is not None
                else "parameters it does not state")
        out.append(Finding("ok", "FastDeploy's ops", f"{name}: {said}"))
    if ops[PREPROCESS] is None:
        return out
    candidates, what = forms_of(fd_ops, ops[PREPROCESS])
    try:
        chosen = mode()
    except ValueError as e:
        out.append(Finding("fail", "mode", f"{e}: the plugin does nothing"))
        return out
    override = os.environ.get("FASTDEPLOY_MTP_FORM", "")
    if candidates is None:
        out.append(Finding("fail", "form", f"FastDeploy's {PREPROCESS} {what}: the plugin "
                           "leaves FastDeploy's ops in place"))
        return out
    form, how = candidates[0], f"its {PREPROCESS} {what}"
    if len(candidates) > 1:
        told, words = code_marker(candidates)
        form = told or candidates[0]
        how += f"; {words} (the probe of FastDeploy's mask op at the first call decides)"
    use = CORRECTED_OF[form] if chosen == "corrected" else form
    if override:
        out.append(Finding("warn", "form", (
            f"FASTDEPLOY_MTP_FORM={override} chooses the form (no patch); detected: {form}")))
    else:
        out.append(Finding("ok", "form", (
            f"{chosen} mode ({MODE_VARIABLE}): our {use} ops in place of FastDeploy's, "
            f"since {how}")))
        if chosen == "corrected":
            out += _patches(tuple(candidates), os.path.dirname(fastdeploy.__file__))
    verdict = SHIPPED.get(form)
    if verdict:
        out.append(Finding("ok" if chosen == "corrected" else "warn", "verdict", (
            f"as shipped, {verdict}; {WITH_PLUGIN}" + (
                "" if chosen == "corrected" else f"; {MODE_VARIABLE}=exact keeps the drift"))))
    return out


def _patches(forms, package: str) -> List[Finding]:
    """Whether each patch of FastDeploy's proposer the plugin would install
    fits FastDeploy's source here (read, not imported): ``ok`` where it
    will apply, ``warn`` where FastDeploy's own method will stay."""
    import logging
    from pathlib import Path

    from .plugin import patches

    return [Finding("ok" if level == logging.INFO else "warn", "patch",
                    line[len("patch "):] if line.startswith("patch ") else line)
            for level, line in patches.check(forms, Path(package))]


def _library() -> List[Finding]:
    """The op library: installed or built into the cache for these sources,
    its archs against this GPU's, and what a build would need."""
    from . import _build

    out: List[Finding] = []
    cuda = _build.with_cuda()
    key = _build.source_hash(cuda)
    folder = _build.cache_root() / key
    installed = importlib.util.find_spec(_build.MODULE_NAME) is not None
    built = _build.finished_build(folder, _build.MODULE_NAME)
    recorded = getattr(_build, "recorded_archs", lambda: None)() if built else None
    if built or installed:
        where = f"built in {folder}" if built else f"installed ({_build.MODULE_NAME})"
        out.append(Finding("ok", "library", f"the {'CUDA' if cuda else 'CPU'} op library is "
                           f"{where}" + (f", for {recorded}" if recorded else "")))
    else:
        out.append(Finding("warn", "library", (
            f"no op library built for these sources in {_build.cache_root()}: each worker "
            "builds it at its first op call (prebuild: fastdeploy-mtp build)")))
        missing = _build.missing_compiler()
        if missing:
            out.append(Finding("fail", "library", missing))
        if cuda and _build._nvcc() is None:
            out.append(Finding("fail", "library", "no nvcc (CUDA_HOME or PATH) to build the CUDA "
                               "library"))
    if cuda:
        try:
            gpus = _build.visible_gpu_archs()
        except Exception:  # no GPU to ask
            gpus = ()
        if gpus:
            wanted = ", ".join(f"sm_{a}" for a in gpus)
            if recorded is not None and not all(f"sm_{a}" in recorded or str(a) in recorded
                                                for a in gpus):
                out.append(Finding("fail", "library", f"this GPU is {wanted}, which the build "
                                   f"({recorded}) does not include: fastdeploy-mtp build"))
            else:
                out.append(Finding("ok", "GPU", f"this GPU: {wanted}"))
        else:
            out.append(Finding("warn", "GPU", "Paddle is built with CUDA but sees no GPU"))
    return out


def findings(env=None) -> List[Finding]:
    env = os.environ if env is None else env
    out = [_fd_plugins(env.get("FD_PLUGINS")), _entry_point()]
    if importlib.util.find_spec("paddle") is None:
        out.append(Finding("fail", "Paddle", "Paddle is not importable: the plugin does nothing"))
        return out
    out += _fastdeploy()
    out += _library()
    return out


def main(args) -> int:
    found = findings()
    failed = any(f.status == "fail" for f in found)
    if getattr(args, "json", False):
        print(json.dumps({"ok": not failed, "findings": [asdict(f) for f in found]}, indent=1))
    else:
        for f in found:
            print(f"{f.status:>4}  {f.topic}: {f.line}")
        print("doctor: the plugin will work as intended" if not failed
              else "doctor: the plugin will NOT work as intended (see the fail lines)")
    return 1 if failed else 0
