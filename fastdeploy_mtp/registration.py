"""Compare what the op library registered with the signature table.

``python -m fastdeploy_mtp check`` prints both side by side and exits 1 on any
difference; CI runs it, and so does the test suite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

from .signature import DEFAULT_FORM, FORMS, OpSignature, op_name

# Attributes Paddle adds to every op.
_FRAMEWORK_ATTRS = {"op_role", "op_role_var", "op_namescope", "op_callstack", "op_device",
                    "with_quant_attr"}
# framework.proto's AttrType codes for the attribute types we use.
_ATTR_TYPE_CODES = {int: 0, bool: 6}
_TYPE_NAMES = {code: t.__name__ for t, code in _ATTR_TYPE_CODES.items()}


@dataclass
class Registered:
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    attrs: Tuple[Tuple[str, int], ...]
    inplace: Dict[int, int]


def read_registered(op_name: str) -> Registered:
    """What Paddle knows of `op_name` (the library must be loaded)."""
    from paddle.base import core, framework

    proto = framework.OpProtoHolder.instance().get_op_proto(op_name)
    return Registered(
        inputs=tuple(i.name for i in proto.inputs),
        outputs=tuple(o.name for o in proto.outputs),
        attrs=tuple((a.name, a.type) for a in proto.attrs if a.name not in _FRAMEWORK_ATTRS),
        inplace=dict(core.eager._get_custom_operator_inplace_map(op_name)),
    )


def expected(sig: OpSignature) -> Registered:
    return Registered(
        inputs=sig.input_names,
        outputs=sig.output_names,
        attrs=tuple((a.name, _ATTR_TYPE_CODES[a.type]) for a in sig.attrs),
        inplace=sig.inplace_index_map,
    )


def differences(sig: OpSignature, reg: Registered) -> List[str]:
    want = expected(sig)
    out = []
    for field in ("inputs", "outputs", "attrs", "inplace"):
        w, g = getattr(want, field), getattr(reg, field)
        if w != g:
            out.append(f"{sig.name}.{field}: table {w!r}, registered {g!r}")
    return out


def check_all(form: str = DEFAULT_FORM, print_fn=print) -> List[str]:
    """Load the library, print each of `form`'s ops' registration against
    that form's table; return the differences."""
    from .ops import load_library

    load_library()
    problems: List[str] = []
    for sig in FORMS[form].values():
        name = op_name(form, sig)
        reg = read_registered(name)
        diffs = differences(sig, reg)
        problems += diffs
        print_fn(f"{name}: {'OK' if not diffs else 'DIFFERS'}")
        print_fn(f"  inputs  ({len(reg.inputs)}): {', '.join(reg.inputs)}")
        print_fn(f"  outputs ({len(reg.outputs)}): {', '.join(reg.outputs)}")
        print_fn(f"  attrs   ({len(reg.attrs)}): "
                 + ", ".join(f"{n}: {_TYPE_NAMES.get(c, c)}" for n, c in reg.attrs))
        pairs = ", ".join(f"{reg.inputs[i]} -> {reg.outputs[o]}"
                          for o, i in sorted(reg.inplace.items())
                          if i < len(reg.inputs) and o < len(reg.outputs))
        print_fn(f"  in place ({len(reg.inplace)}): {pairs}")
        for d in diffs:
            print_fn(f"  DIFFERENCE {d}")
    return problems
