"""Which form FastDeploy's ops are: read from their signatures, and where
two forms share one, from a probe of FastDeploy's mask op.

How FastDeploy exposes its ops: ``fastdeploy/model_executor/ops/gpu/__init__.py``
(line 22 at 9018ccf74, 47 at c29e86fc9) copies every member of its compiled
``fastdeploy_ops`` into the module (``fastdeploy/import_ops.py`` lines 24-48).
That holds, per op, the C++ extension's function (``custom_ops/gpu_ops/
cpp_extensions.cc`` lines 1620-1622 and 1682-1684 at 9018ccf74, no Python
parameter names) and Paddle's generated function of the registered op,
``static_op_<name>`` (``custom_ops/gpu_ops/helper.h`` lines 68-70 prefix the
name), whose parameters are the registered inputs then attributes.
``import_ops.py`` lines 66-113 then make ``<name>`` one function that calls the
C++ one in dynamic mode (a one-element list comes back as its element) and the
static one otherwise; it wraps the static one (``functools.wraps``), so
``inspect.signature`` reads the registered names through it.

How the proposer calls them (``fastdeploy/spec_decode/mtp.py``): it imports
both by name at import time (lines 55-68 at 9018ccf74, 57-72 at 2178f2829,
57-70 at 7a6c28781, 37-50 at ba915e03e) and calls them positionally, in
dynamic mode: ``draft_model_preprocess`` with 22 tensors and 4 attributes at
9018ccf74 (lines 757-784) and 2178f2829 (lines 698-725), 17 tensors and 2 at
7a6c28781 (lines 723-743), 20 tensors and 4 at ba915e03e (lines 685-710),
ignoring what it returns (the C++ function returns nothing); and
``attn_mask_offsets = update_attn_mask_offsets(...)`` with 10 tensors at
9018ccf74 (lines 871-883), 2178f2829 (lines 828-842) and ba915e03e (lines
797-809), 8 at 7a6c28781 (lines 892-904), copying the result into a buffer
with ``copy_`` (the last line of each): one tensor, as the C++ function's
one-element list is unwrapped. The mask op runs before the draft model's
forward (``self.model(...)``, 2178f2829 line 888), outside its CUDA graph.

Which form each FastDeploy version gets (``SHIPPED_FORMS``; ``SIGNATURES``
groups them by the registered inputs of their ``draft_model_preprocess``):

- 20 tensors: ``pr5245``. FastDeploy's kernel of that op is the same from
  88d44a2c9 (#3695) to ba915e03e (#5245) (``draft_model_preprocess.cu`` has
  no change between them). The ten-tensor mask op is ba915e03e's (and
  9018ccf74's: ``update_attn_mask_offsets.cu`` has no change between them);
  from 11398790d (#4641) to ba915e03e it did not reset ``mask_rollback``,
  but the proposer of those commits never writes its ``mask_rollback``
  (``mtp.py`` line 452 at ba915e03e^ fills it with 0; line 801 only passes
  it), so ours computes what FastDeploy's did there too.
- 22 tensors: ``pr5738`` (9018ccf74, dcb0ccede) or ``pr6403`` (2178f2829 on).
  Both register the same inputs for both ops, and the same preprocess kernel
  (``draft_model_preprocess.cu`` is unchanged from 9018ccf74 to 2178f2829);
  only the mask op's ``decode_states`` rule differs
  (``update_attn_mask_offsets.cu`` lines 68-77 at 9018ccf74: a decode of more
  than one token rewrites its row; lines 68-75 at 2178f2829: every decode
  does, a 1 among its tokens' columns becoming -1). A probe tells them apart
  (below).
- 17 tensors: ``shadow`` (e87ce4b8c, 7a6c28781).

The rollback form is ours alone (FastDeploy never registered it) and the
recompute form is commit 0956b09a's, on no FastDeploy branch: only
``FASTDEPLOY_MTP_FORM`` chooses them. ``FASTDEPLOY_MTP_FORM`` names the form
instead of the detection, among the forms whose ``draft_model_preprocess``
FastDeploy's proposer can call (for a 22-tensor op: pr5738, pr6403 or
recompute); no probe runs then.

What ``register`` does: it reads FastDeploy's ``draft_model_preprocess``
parameter names (``inspect.signature``; else the C++ function's documented
parameters, else their number) and finds the forms that register them
(``SIGNATURES``; FastDeploy's ``update_attn_mask_offsets`` must then take
those forms' tensors too). It puts a stand-in of ours in place of each of
FastDeploy's op objects, in ``fastdeploy.model_executor.ops.gpu``
(``<name>`` and ``static_op_<name>``) and wherever else a module in
``sys.modules`` already holds one (the proposer imported before the plugins
ran), and logs one line on the ``fastdeploy_mtp`` logger: the form and why,
or why FastDeploy's ops stay. It never raises, and a second call does
nothing. It neither loads our library nor touches a device: FastDeploy's
engine runs it too and never calls the ops, and creating a CUDA context
there, or on a device a worker does not own, would cost memory on it.

"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from ..signature import FORMS, preprocess_form

# FastDeploy's module of GPU ops, where its proposer imports them from.
FASTDEPLOY_OPS = "fastdeploy.model_executor.ops.gpu"
PREPROCESS = "draft_model_preprocess"
MASK = "update_attn_mask_offsets"
# The prefix of the name under which FastDeploy's ops module holds Paddle's
# generated function of a registered op (static graphs).
STATIC_PREFIX = "static_op_"

# The forms FastDeploy has shipped, which its signature may select: PR #5245's
# 20-tensor op (ba915e03e), PR #5738 as merged (9018ccf74 on develop, dcb0ccede
# on the release branch), PR #6403's mask rule (2178f2829) and the shadow form.
SHIPPED_FORMS = ("pr5245", "pr5738", "pr6403", "shadow")


def _signature_table() -> Dict[Tuple[str, ...], Tuple[str, ...]]:
    table: Dict[Tuple[str, ...], Tuple[str, ...]] = {}
    for form in SHIPPED_FORMS:
        names = FORMS[form][PREPROCESS].input_names
        table[names] = table.get(names, ()) + (form,)
    return table


# The one table: FastDeploy's draft_model_preprocess's registered inputs ->
# the forms that register the same inputs. More than one form under a key is
# told apart by choose().
SIGNATURES: Dict[Tuple[str, ...], Tuple[str, ...]] = _signature_table()


@dataclass(frozen=True)
class Probe:
    """FastDeploy's op `op`, run once on a state crafted so that the forms it
    tells apart leave different results. `run(fastdeploy_op, place)` builds
    the state on `place`, calls the op positionally as FastDeploy's proposer
    does and returns what it left; `expect` is what each form's op leaves;
    `state` says in words what the state is."""
    op: str
    state: str
    run: Callable[[Callable[..., Any], Any], Tuple[Tuple[int, ...], ...]]
    expect: Dict[str, Tuple[Tuple[int, ...], ...]]
    fields: Tuple[str, ...]

    def words(self, seen) -> str:
        return ", ".join(f"{f} {list(v)}" for f, v in zip(self.fields, seen))


def _ints(tensor) -> Tuple[int, ...]:
    import numpy as np

    return tuple(int(v) for v in np.asarray(tensor.numpy()).reshape(-1))


def _run_mask_probe(fastdeploy_op: Callable[..., Any], place) -> Tuple[Tuple[int, ...], ...]:
    """One decode request feeding one token (seq_lens_decoder 5, the mask
    cursor at 3, nothing to roll back), its decode_states row [1, 7]: the
    decode branch of every version writes the offset 3 + 1 and moves the
    cursor to 4; 9018ccf74's rewrites decode_states only for more than one
    token, 2178f2829's for every decode (1 -> -1, past the token -> -1)."""
    import numpy as np
    import paddle

    def tensor(values, dtype):
        return paddle.to_tensor(np.asarray(values, dtype), place=place)

    i32 = np.int32
    cursor, decode_states, rollback = tensor([3], i32), tensor([[1, 7]], i32), tensor([0], i32)
    out = fastdeploy_op(
        tensor([0], np.int64),           # ids_remove_padding: one token
        tensor([1], i32),                # seq_lens_this_time
        tensor([0], i32),                # seq_lens_encoder
        tensor([5], i32),                # seq_lens_decoder
        tensor([0, 1], i32),             # cu_seqlens_q
        tensor(np.zeros((1, 4)), i32),   # attn_mask_offsets_full
        cursor,                          # attn_mask_offsets_decoder
        tensor([False], np.bool_),       # is_block_step
        decode_states,
        rollback)                        # mask_rollback
    if isinstance(out, (list, tuple)):  # Paddle's generated function: every output
        out = out[0]
    return _ints(decode_states), _ints(out), _ints(cursor), _ints(rollback)


_MASK_PROBE = Probe(
    op=MASK,
    state="one decode of one token, decode_states [1, 7]",
    run=_run_mask_probe,
    expect={"pr5738": ((1, 7), (0, 4), (4,), (0,)),
            "pr6403": ((-1, -1), (0, 4), (4,), (0,))},
    fields=("decode_states", "attn_mask_offsets", "attn_mask_offsets_decoder", "mask_rollback"),
)

# Where FastDeploy's mask op cannot be run (a CPU-only FastDeploy has no
# compiled op), its Python code tells the forms apart: PR #6403 (2178f2829),
# the commit that changed the mask op's decode_states rule, added
# fastdeploy/spec_decode/suffix.py (its suffix decoding), which 9018ccf74 and
# dcb0ccede lack. The forms that share a key of SIGNATURES -> (package, file,
# the form where the package has the file, the form where it lacks it).
CODE_MARKERS: Dict[Tuple[str, ...], Tuple[str, str, str, str]] = {
    ("pr5738", "pr6403"): ("fastdeploy.spec_decode", "suffix.py", "pr6403", "pr5738")}


def code_marker(candidates: Tuple[str, ...]) -> Tuple[Optional[str], str]:
    """(The form among `candidates` FastDeploy's code says, or None; in
    words.) Reads where FastDeploy's package lies, imports nothing of it
    (``importlib.util.find_spec`` of the package, which FastDeploy's process
    has already imported)."""
    entry = CODE_MARKERS.get(tuple(candidates))
    if entry is None:
        return None, ""
    package, filename, present, absent = entry
    try:
        spec = importlib.util.find_spec(package)
    except Exception:  # a package that cannot be found tells nothing
        return None, ""
    if spec is None or not spec.submodule_search_locations:
        return None, ""
    found = any(os.path.exists(os.path.join(folder, filename))
                for folder in spec.submodule_search_locations)
    form = present if found else absent
    return form, f"FastDeploy's {package} {'has' if found else 'lacks'} {filename}, as at " \
                 f"the {form} form's commit"


# The forms that share a key of SIGNATURES -> the probe that tells them apart.
PROBES: Dict[Tuple[str, ...], Probe] = {("pr5738", "pr6403"): _MASK_PROBE}


def choose(candidates: Tuple[str, ...], fastdeploy_op: Optional[Callable[..., Any]] = None,
           place: Any = None) -> Tuple[Optional[str], str]:
    """(The form among `candidates` (forms whose registered inputs
    FastDeploy's op shares) that FastDeploy's op is, or None where it cannot
    be told; what told it, in words.) One candidate is that one; several are
    told apart by their probe (PROBES), run once on `fastdeploy_op` (the
    FastDeploy op the probe names) on `place`: exactly one form must leave
    what it saw. An exception of the probe is raised."""
    if len(candidates) == 1:
        return candidates[0], f"the one form of FastDeploy's {PREPROCESS}'s signature"
    probe = PROBES.get(tuple(candidates))
    if probe is None:
        return None, f"no probe tells the forms {', '.join(candidates)} apart"
    seen = probe.run(fastdeploy_op, place)
    matching = [form for form in candidates if probe.expect.get(form) == seen]
    what = f"a probe of FastDeploy's {probe.op} ({probe.state}) left {probe.words(seen)}"
    if len(matching) == 1:
        return matching[0], f"{what}, as our {matching[0]} form's does"
    return None, f"{what}, as {'none' if not matching else 'more than one'} of our forms " \
                 f"{', '.join(candidates)} does"


def fastdeploy_op(module, name: str) -> Optional[Callable[..., Any]]:
    """FastDeploy's op `name` in its ops module: the one its callers import,
    else its static-graph function."""
    for key in (name, STATIC_PREFIX + name):
        op = module.__dict__.get(key)
        if op is not None:
            return op
    return None


# --- Reading FastDeploy's signature -----------------------------------------

_PLACEHOLDER = re.compile(r"arg\d+")


def parameters(op) -> Tuple[Optional[Tuple[str, ...]], Optional[int]]:
    """(parameter names, or None where they are not known; their number, or
    None). Paddle's generated function carries the registered names; the C++
    extension's function states its parameters only in its docstring's first
    line, ``name(arg0: type, ...) -> type``, where unnamed ones are argN."""
    try:
        sig = inspect.signature(op)
        if all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in sig.parameters.values()):
            return tuple(sig.parameters), len(sig.parameters)
    except (TypeError, ValueError):
        pass
    names = documented_parameters(getattr(op, "__doc__", None) or "")
    if names is None:
        return None, None
    if all(_PLACEHOLDER.fullmatch(n) for n in names):
        return None, len(names)
    return names, len(names)


def documented_parameters(doc: str) -> Optional[Tuple[str, ...]]:
    head = doc.strip().splitlines()[0] if doc.strip() else ""
    m = re.match(r"\s*[A-Za-z_]\w*\((.*)\)\s*(->.*)?$", head)
    if m is None:
        return None
    params, depth, piece = [], 0, ""
    for ch in m.group(1):
        if ch in "<[({":
            depth += 1
        elif ch in ">])}":
            depth -= 1
        if ch == "," and depth == 0:
            params.append(piece)
            piece = ""
        else:
            piece += ch
    if piece.strip():
        params.append(piece)
    names = tuple(p.split(":")[0].split("=")[0].strip() for p in params)
    return names if all(n.isidentifier() for n in names) else None


def matches(form: str, op: str, names, count) -> bool:
    """FastDeploy's `op` with these parameters (names, else their count) takes
    `form`'s tensors in its order and as many attributes."""
    sig = FORMS[form][op]
    if names is not None:
        return (names[:len(sig.inputs)] == sig.input_names
                and len(names) == len(sig.inputs) + len(sig.attrs))
    return count == len(sig.inputs) + len(sig.attrs)


def preprocess_parameters(fd_ops, theirs):
    """FastDeploy's draft_model_preprocess's parameters: (names or None,
    count or None), from its function, else from its static-graph one."""
    names, count = parameters(theirs)
    if names is None and count is None:
        static = fd_ops.__dict__.get(STATIC_PREFIX + PREPROCESS)
        if static is not None:
            names, count = parameters(static)
    return names, count


def forms_of(fd_ops, theirs) -> Tuple[Optional[Tuple[str, ...]], str]:
    """(the forms FastDeploy's ops may be, each of the signature they have, or
    None where none is or a probe could not tell them apart; words on what
    was read)."""
    names, count = preprocess_parameters(fd_ops, theirs)
    if names is None and count is None:
        return None, "states no parameters"
    # Its registered inputs are a key of SIGNATURES, then as many attributes
    # as the form has; without names, only the number of parameters can match.
    def attrs(form):
        return len(FORMS[form][PREPROCESS].attrs)

    if names is not None:
        candidates = tuple(f for key, forms in SIGNATURES.items() if names[:len(key)] == key
                           for f in forms if len(names) == len(key) + attrs(f))
        what = f"takes {len(names)} parameters ({', '.join(names)})"
    else:
        candidates = tuple(f for key, forms in SIGNATURES.items() for f in forms
                           if count == len(key) + attrs(f))
        what = f"takes {count} unnamed parameters"
    if not candidates:
        known = "; ".join(f"{' and '.join(fs)}: {len(FORMS[fs[0]][PREPROCESS].inputs)} tensors "
                          f"and {len(FORMS[fs[0]][PREPROCESS].attrs)} attributes"
                          for fs in SIGNATURES.values())
        return None, f"{what}, as none of our forms does ({known})"
    forms_words = (f"the {candidates[0]} form's" if len(candidates) == 1 else
                   f"the {' and '.join(candidates)} forms'")
    if len(candidates) > 1 and (tuple(candidates) not in PROBES
                                or len({preprocess_form(f) for f in candidates}) != 1):
        return None, f"{what}, as the forms {', '.join(candidates)} do, and no probe tells which"
    mask = fastdeploy_op(fd_ops, MASK)
    if mask is not None:
        mask_names, mask_count = parameters(mask)
        if (mask_names is not None or mask_count is not None) and \
                not all(matches(form, MASK, mask_names, mask_count) for form in candidates):
            return None, (f"is {forms_words} but its {MASK} takes "
                          f"{mask_count} parameters ({', '.join(mask_names or ())}), "
                          f"not {forms_words} {len(FORMS[candidates[0]][MASK].inputs)} tensors")
    sig = FORMS[candidates[0]][PREPROCESS]
    how = "registered inputs" if names is not None else "number of parameters"
    return candidates, (f"has {forms_words} {how}: {len(sig.inputs)} tensors, "
                        f"{len(sig.attrs)} attributes")



def fastdeploy_version() -> str:
    """FastDeploy's version as its package states it (``fastdeploy.__version__``,
    from the ``version.txt`` its build writes), with the commit where that
    file names one; "of unknown version" where neither is there (a source
    tree). Imports nothing: FastDeploy's process has imported ``fastdeploy``."""
    module = sys.modules.get("fastdeploy")
    version = getattr(module, "__version__", None)
    commit = None
    folder = os.path.dirname(getattr(module, "__file__", None) or "")
    try:
        with open(os.path.join(folder, "version.txt"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if "commit" in key.lower() and value.strip():
                    commit = value.strip()[:9]
    except OSError:
        pass
    if not version or version == "Unknown":
        version = None
    if version and commit:
        return f"{version} ({commit})"
    return version or (commit and f"at {commit}") or "unknown version"
