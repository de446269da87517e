"""The plugin's detection of FastDeploy's ops, against every signature shape
FastDeploy has had or could have, each with the one line the user sees.

FastDeploy's ops module is a stand-in put in sys.modules here (not the
stand-in package tests/test_plugin.py installs): its draft_model_preprocess
and update_attn_mask_offsets state their parameters the ways FastDeploy's
can (fastdeploy_mtp/plugin/detect.py's docstring): by name, as Paddle's
generated function does through functools.wraps, or only in a C++ extension
function's docstring, named or as argN. ``plugin._register`` reads them and
returns the line that ``register`` logs; where it refuses, every op object
stays FastDeploy's. The forms' signatures come from the table
(fastdeploy_mtp/signature.py), the shapes from changing them: a parameter
added, one left out, two swapped; names known, only their count, or both.
"""

from __future__ import annotations

import inspect
import logging
import sys
import types

import pytest

from fastdeploy_mtp import plugin
from fastdeploy_mtp.plugin import detect, replace
from fastdeploy_mtp.signature import FORMS

PRE, MASK = detect.PREPROCESS, detect.MASK
FORM_VARIABLE = plugin.FORM_VARIABLE
SHIPPED = detect.SHIPPED_FORMS
# The forms each shipped form's signature selects (pr5738 and pr6403 share one).
CANDIDATES = {"pr5245": ("pr5245",), "pr5738": ("pr5738", "pr6403"),
              "pr6403": ("pr5738", "pr6403"), "shadow": ("shadow",)}


def params(form, op=PRE):
    sig = FORMS[form][op]
    return list(sig.input_names + sig.attr_names)


def named(name, names):
    """Paddle's generated function (or FastDeploy's wrap of it): the names
    inspect.signature reads."""
    def op(*args):
        return None
    op.__name__ = name
    op.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    return op


class Documented:
    """A C++ extension's function: (*args) to inspect, its parameters in its
    docstring's first line only."""

    def __init__(self, name, pieces):
        self.__doc__ = f"{name}({', '.join(pieces)}) -> None\n\nAn op.\n"

    def __call__(self, *args):
        return None


def documented(name, names, type_="paddle::Tensor"):
    return Documented(name, [f"{n}: {type_}" for n in names])


def unnamed(name, count):
    return Documented(name, [f"arg{k}: paddle::Tensor" for k in range(count)])


@pytest.fixture
def fastdeploy(monkeypatch):
    """Installs a FastDeploy ops module holding the given ops; returns it."""
    monkeypatch.delenv(FORM_VARIABLE, raising=False)
    # The detection is the same in both modes; the exact one applies no
    # patch (which would wait for FastDeploy's proposer on sys.meta_path).
    monkeypatch.setenv("FASTDEPLOY_MTP_MODE", "exact")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))

    def install(preprocess, mask=None):
        parts = detect.FASTDEPLOY_OPS.split(".")
        for k in range(1, len(parts)):
            monkeypatch.setitem(sys.modules, ".".join(parts[:k]),
                                types.ModuleType(".".join(parts[:k])))
        ops = types.ModuleType(detect.FASTDEPLOY_OPS)
        ops.draft_model_preprocess = preprocess
        if mask is not None:
            ops.update_attn_mask_offsets = mask
        monkeypatch.setitem(sys.modules, detect.FASTDEPLOY_OPS, ops)
        return ops
    return install


def register(ops):
    """plugin._register on `ops`: (level, the line), and whether the ops
    module still holds FastDeploy's op objects, each of them."""
    before = dict(ops.__dict__)
    lines = plugin._register()
    assert len(lines) == 1, lines  # the decision, and no patch in the exact mode
    level, line = lines[0]
    assert "\n" not in line, line
    kept = all(ops.__dict__[k] is v for k, v in before.items() if not k.startswith("__"))
    return level, line, kept


def assert_refused(ops, *said):
    level, line, kept = register(ops)
    assert level == logging.WARNING and kept, (level, line)
    assert "FastDeploy's ops stay in place" in line, line
    for words in said:
        assert words in line, line
    return line


def assert_taken(ops, candidates):
    level, line, kept = register(ops)
    assert level == logging.INFO and not kept, (level, line)
    assert ops.draft_model_preprocess.fastdeploy_mtp_deferred
    for form in candidates:
        assert form in line, line
    return line


# ---------------------------------------------------------------------------
# draft_model_preprocess of every shape


def shapes(names):
    """The shapes of a signature: as it is, a parameter added at the end
    and among the tensors, the last left out, the first two swapped."""
    return {
        "as it is": names,
        "a parameter added at the end": names + ["extra"],
        "a parameter added among the tensors": names[:3] + ["extra"] + names[3:],
        "the last left out": names[:-1],
        "the first two swapped": [names[1], names[0]] + names[2:],
    }


KINDS = {"names": lambda n: named(PRE, n), "documented names": lambda n: documented(PRE, n),
         "a count only": lambda n: unnamed(PRE, len(n))}
CASES = [(form, shape, kind) for form in SHIPPED for shape in shapes(params(form))
         for kind in KINDS
         # A count alone cannot see two parameters swapped.
         if not (kind == "a count only" and shape == "the first two swapped")]


@pytest.mark.parametrize("form,shape,kind", CASES)
def test_each_shape_of_fastdeploy_s_preprocess(fastdeploy, form, shape, kind):
    """Its own form's signature is taken; any other shape leaves FastDeploy's
    ops, saying what FastDeploy's op takes."""
    names = shapes(params(form))[shape]
    ops = fastdeploy(KINDS[kind](names),
                     named(MASK, params(CANDIDATES[form][0], MASK)))
    if shape == "as it is":
        assert_taken(ops, CANDIDATES[form])
        return
    count = len(names)
    said = (f"takes {count} parameters" if kind != "a count only"
            else f"takes {count} unnamed parameters")
    # An extra parameter of one form can be another form's count.
    if kind == "a count only" and detect.forms_of(ops, ops.draft_model_preprocess)[0]:
        pytest.skip(f"{count} parameters are another form's count")
    assert_refused(ops, said, "as none of our forms does")


# ---------------------------------------------------------------------------
# update_attn_mask_offsets of every shape beside a known preprocess

MASK_KINDS = {"names": lambda n: named(MASK, n), "documented names": lambda n: documented(MASK, n),
              "a count only": lambda n: unnamed(MASK, len(n))}


MASK_CASES = [(form, shape, kind) for form in SHIPPED
              for shape in ("a parameter added at the end", "the last left out",
                            "the first two swapped")
              for kind in sorted(MASK_KINDS)
              # A count alone cannot see two parameters swapped.
              if not (kind == "a count only" and shape == "the first two swapped")]


@pytest.mark.parametrize("form,shape,kind", MASK_CASES)
def test_a_mask_op_of_another_shape_leaves_fastdeploy_s_ops(fastdeploy, form, shape, kind):
    """The preprocess is a known form's; its mask op must take that form's
    tensors too, whether its names, only its count, or both are known."""
    names = shapes(params(form, MASK))[shape]
    ops = fastdeploy(named(PRE, params(form)), MASK_KINDS[kind](names))
    assert_refused(ops, f"but its {MASK} takes {len(names)} parameters")


@pytest.mark.parametrize("form", SHIPPED)
@pytest.mark.parametrize("kind", sorted(MASK_KINDS))
def test_a_mask_op_of_the_form_s_shape_is_taken(fastdeploy, form, kind):
    ops = fastdeploy(named(PRE, params(form)), MASK_KINDS[kind](params(form, MASK)))
    assert_taken(ops, CANDIDATES[form])


# ---------------------------------------------------------------------------
# Docstring signatures with nested brackets

NESTED_TYPES = {
    "<>": "std::vector<paddle::Tensor, std::allocator<paddle::Tensor>>",
    "[]": "Dict[str, List[int]]",
    "()": "Callable[(int, int), None]",
    "<[(": "std::map<Tuple[int, (int, str)], std::pair<int, int>>",
    "{}": "Set{int, int}",
}


@pytest.mark.parametrize("brackets", sorted(NESTED_TYPES))
def test_a_documented_signature_with_nested_brackets(brackets, request):
    """Commas inside any bracket belong to a parameter's type: the names are
    read whole, and a form is found by them."""
    names = params("pr5245")
    pieces = [f"{n}: {NESTED_TYPES[brackets]}" for n in names[:-4]] + \
        [f"{n}: int" if n == "num_model_step" else f"{n}: bool" for n in names[-4:]]
    op = Documented(PRE, pieces)
    assert detect.parameters(op) == (tuple(names), len(names))


def test_a_documented_signature_with_defaults_and_brackets():
    pieces = ["a: std::pair<int, int> = std::pair<int, int>(1, 2)", "b: List[int] = [1, 2]",
              "c: int = 3"]
    assert detect.documented_parameters(f"f({', '.join(pieces)}) -> None") == ("a", "b", "c")


@pytest.mark.parametrize("doc", [
    "not a signature",
    "f(a: int, 2: int) -> None",              # a name that is no identifier
    "",
])
def test_a_docstring_that_is_no_signature_states_no_parameters(doc):
    assert detect.documented_parameters(doc) is None


# ---------------------------------------------------------------------------
# FASTDEPLOY_MTP_FORM against FastDeploy's op


@pytest.mark.parametrize("override,theirs,kind", [
    ("pr5738", "pr5738", "names"), ("pr6403", "pr5738", "documented names"),
    ("recompute", "pr5738", "a count only"), ("pr5245", "pr5245", "names"),
])
def test_the_override_of_fastdeploy_s_signature_is_taken(fastdeploy, monkeypatch, override,
                                                          theirs, kind):
    ops = fastdeploy(KINDS[kind](params(theirs)), named(MASK, params(theirs, MASK)))
    monkeypatch.setenv(FORM_VARIABLE, override)
    line = assert_taken(ops, (override,))
    assert f"{FORM_VARIABLE}={override}" in line, line


@pytest.mark.parametrize("override", ["pr5738", "recompute", "pr6403"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("change", ["an attribute left out", "an attribute added"])
def test_the_override_against_a_mismatching_attribute_count(fastdeploy, monkeypatch, override,
                                                            kind, change):
    """FastDeploy's op takes the form's 22 tensors but another number of
    attributes: its proposer would call ours with them, so the override is
    refused, in one line."""
    names = params(override)
    names = names[:-1] if change == "an attribute left out" else names + ["extra_flag"]
    ops = fastdeploy(KINDS[kind](names), named(MASK, params(override, MASK)))
    monkeypatch.setenv(FORM_VARIABLE, override)
    assert_refused(ops, f"{FORM_VARIABLE}={override} names a form FastDeploy's proposer "
                        "cannot call", f"not the {override} form's 22 tensors and 4 attributes")


# ---------------------------------------------------------------------------
# Replacement: all or nothing


class Fragile(types.ModuleType):
    """A module that refuses to have one of its names set."""

    def __setattr__(self, name, value):
        if name == "draft_model_preprocess":
            raise AttributeError(f"{self.__name__}.{name} is read-only")
        super().__setattr__(name, value)


def test_a_failure_part_way_through_replacement_leaves_nothing_replaced(fastdeploy, monkeypatch):
    """The proposer imported FastDeploy's ops into a module that refuses
    the replacement of one of them: register's line says so, and no module,
    the ops module included, keeps a stand-in."""
    ops = fastdeploy(named(PRE, params("pr5245")), named(MASK, params("pr5245", MASK)))
    proposer = types.ModuleType("fastdeploy.spec_decode.mtp")
    proposer.update_attn_mask_offsets = ops.update_attn_mask_offsets
    fragile = Fragile("fastdeploy.spec_decode.fragile")
    types.ModuleType.__setattr__(fragile, "draft_model_preprocess", ops.draft_model_preprocess)
    # In sys.modules' order: the ops module, the proposer, then the fragile one.
    monkeypatch.setitem(sys.modules, proposer.__name__, proposer)
    monkeypatch.setitem(sys.modules, fragile.__name__, fragile)
    held = {(m.__name__, k): v for m in (ops, proposer, fragile)
            for k, v in vars(m).items() if k in (PRE, MASK)}
    monkeypatch.setattr(plugin, "_done", False)
    said = []
    monkeypatch.setattr(plugin, "_say", lambda level, line: said.append((level, line)))
    plugin.register()
    assert len(said) == 1 and said[0][0] == logging.WARNING, said
    assert said[0][1] == ("FastDeploy's ops stay in place: AttributeError: "
                          "fastdeploy.spec_decode.fragile.draft_model_preprocess is read-only")
    now = {(m.__name__, k): v for m in (ops, proposer, fragile)
           for k, v in vars(m).items() if k in (PRE, MASK)}
    assert now == held


def test_replace_everywhere_undoes_every_module_it_changed(monkeypatch):
    old, new = object(), object()
    first, second = types.ModuleType("audit_first"), Fragile("audit_second")
    first.draft_model_preprocess = old
    first.alias = old
    types.ModuleType.__setattr__(second, "draft_model_preprocess", old)
    monkeypatch.setitem(sys.modules, "audit_first", first)
    monkeypatch.setitem(sys.modules, "audit_second", second)
    with pytest.raises(AttributeError):
        replace.replace_everywhere({id(old): (old, new)})
    assert first.draft_model_preprocess is old and first.alias is old
    assert second.draft_model_preprocess is old
