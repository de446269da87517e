"""The FastDeploy plugin (fastdeploy_mtp.plugin) run as FastDeploy runs it.

Each case is a process of its own (tests/standin_fastdeploy/drive.py): a
stand-in for FastDeploy (tests/standin_fastdeploy/fastdeploy, our code, laid
out as FastDeploy's modules are) exposes the ops of one FastDeploy commit,
finds our entry point through importlib.metadata (a dist-info folder made
from pyproject.toml's entry-point lines, first on the path) and loads it
when its models package is imported, as FastDeploy does
(fastdeploy/model_executor/models/__init__.py line 68 at c29e86fc9). The plugin
runs once a process, so one process per case.

FastDeploy's signatures per commit (the stand-in's fastdeploy_ops.py):
9018ccf74 registers the 22-tensor draft_model_preprocess and the 10-tensor
update_attn_mask_offsets (our pr5738 form, its rules), 7a6c28781 the 17-tensor and
8-tensor ones (our shadow form), ba915e03e a 20-tensor one (none of ours).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastdeploy_mtp import plugin
from fastdeploy_mtp.signature import FORMS

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "standin_fastdeploy"
GROUP = "fastdeploy.model_register_plugins"

# Where the stand-in holds FastDeploy's op objects: its ops module (the names
# callers import and the static-graph names), the proposer (imported by name)
# and, where the proposer is imported first, a module holding two under
# other names.
OPS_MODULE = "fastdeploy.model_executor.ops.gpu"
HELD = [f"{OPS_MODULE}:{p}{op}" for p in ("", "static_op_")
        for op in ("draft_model_preprocess", "update_attn_mask_offsets")]
HELD += ["fastdeploy.spec_decode.mtp:draft_model_preprocess",
         "fastdeploy.spec_decode.mtp:update_attn_mask_offsets"]
HELD_BY_ALIAS = ["standin_holder:preprocess_by_another_name",
                 "standin_holder:static_mask_by_another_name"]


def entry_point_lines() -> str:
    """pyproject.toml's entry points of FastDeploy's group, as entry_points.txt
    states them."""
    text = (ROOT / "pyproject.toml").read_text()
    header = f'[project.entry-points."{GROUP}"]'
    assert header in text, f"pyproject.toml has no {header}"
    body = text.split(header, 1)[1].split("\n[", 1)[0]
    lines = [ln for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    pairs = [re.fullmatch(r'\s*([\w.-]+)\s*=\s*"([^"]+)"\s*', ln) for ln in lines]
    assert all(pairs), f"unexpected lines under {header}: {lines}"
    return f"[{GROUP}]\n" + "".join(f"{m.group(1)} = {m.group(2)}\n" for m in pairs)


@pytest.fixture(scope="module")
def entry_point(tmp_path_factory):
    """A folder that makes our entry point visible to importlib.metadata."""
    folder = tmp_path_factory.mktemp("entry_point")
    info = folder / "fastdeploy_mtp-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fastdeploy_mtp\nVersion: 0\n")
    (info / "entry_points.txt").write_text(entry_point_lines())
    return folder


def drive(entry_point, commit, env=None, **spec):
    """Runs drive.py with the stand-in of FastDeploy `commit`; returns its
    report and its stderr. FD_PLUGINS and FASTDEPLOY_MTP_FORM come only from
    `env`."""
    full = {k: v for k, v in os.environ.items() if k not in ("FD_PLUGINS", plugin.FORM_VARIABLE)}
    full.update(env or {})
    full["PYTHONPATH"] = os.pathsep.join([str(entry_point), str(STANDIN), str(ROOT)])
    full["STANDIN_FASTDEPLOY_COMMIT"] = commit
    proc = subprocess.run([sys.executable, str(STANDIN / "drive.py"), json.dumps(spec)],
                          env=full, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"the process failed (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):]), proc.stderr


ENABLED = {"FD_PLUGINS": "fastdeploy_mtp"}


def op_parameters(form):
    sig = FORMS[form]["draft_model_preprocess"]
    return list(sig.input_names + sig.attr_names)


@pytest.mark.parametrize("commit,form", [("9018ccf74", "pr5738"), ("7a6c28781", "shadow")])
def test_fd_plugins_puts_the_matching_form_in_place(entry_point, commit, form):
    """The proposer, imported before the plugins ran, calls our op of the
    form FastDeploy's signature is, which leaves what the reference leaves;
    no module holds FastDeploy's op objects any more; the static-graph names
    hold our registered ops."""
    got, _ = drive(entry_point, commit, ENABLED, proposer_first=True, run=form, form=form)
    assert got["mismatch"] is None, got["mismatch"]
    assert got["calls"] == [], f"FastDeploy's stand-in ops were called: {got['calls']}"
    assert got["fastdeploy_left"] == [], got["fastdeploy_left"]
    assert got["signature"] == op_parameters(form)
    assert got["proposer_uses_ops_module"]
    assert got["static_names_hold_library"] is True, got["static_names_hold_library"]
    assert len(got["log"]) == 1, got["log"]
    level, line = got["log"][0]
    assert level == "INFO" and f"our {form} form" in line and "registered inputs" in line, line


def test_register_twice_changes_nothing(entry_point):
    """The proposer imported after the plugins ran gets ours from the ops
    module; a second register() changes no module and logs nothing."""
    got, _ = drive(entry_point, "9018ccf74", ENABLED, run="pr5738", register_twice=True)
    assert got["mismatch"] is None, got["mismatch"]
    assert got["fastdeploy_left"] == [] and got["proposer_uses_ops_module"]
    assert got["second_call_changed"] == [], got["second_call_changed"]
    assert got["second_call_logged"] == [] and len(got["log"]) == 1


def assert_untouched(got, proposer_first=True):
    """FastDeploy's op objects are where they were, and its op ran."""
    assert set(HELD + (HELD_BY_ALIAS if proposer_first else [])) <= set(got["fastdeploy_left"]), \
        got["fastdeploy_left"]
    assert got["calls"] == [["draft_model_preprocess", "extension"]], (got["calls"],
                                                                       got.get("call_error"))


def test_an_unknown_signature_leaves_fastdeploy_s_ops(entry_point):
    got, _ = drive(entry_point, "ba915e03e", ENABLED, proposer_first=True, run="fastdeploy")
    assert_untouched(got)
    assert len(got["log"]) == 1, got["log"]
    level, line = got["log"][0]
    assert level == "WARNING" and "takes 24 parameters" in line and "stay in place" in line, line


def test_fastdeploy_mtp_form_chooses_among_the_forms_of_fastdeploy_s_signature(entry_point):
    """FastDeploy 9018ccf74's 22-tensor op is the pr5738 form's signature, and
    the recompute form's too: the variable chooses the recompute form's rules
    for it (the proposer calls it as it calls its own)."""
    got, _ = drive(entry_point, "9018ccf74", {**ENABLED, plugin.FORM_VARIABLE: "recompute"},
                   proposer_first=True, run="recompute", form="recompute")
    assert got["mismatch"] is None, got["mismatch"]
    assert got["signature"] == op_parameters("recompute")
    assert got["fastdeploy_left"] == [], got["fastdeploy_left"]
    assert got["static_names_hold_library"] is True, got["static_names_hold_library"]
    assert len(got["log"]) == 1, got["log"]
    level, line = got["log"][0]
    assert level == "INFO" and "our recompute form" in line
    assert f"{plugin.FORM_VARIABLE}=recompute" in line, line


@pytest.mark.parametrize("commit,form", [
    ("9018ccf74", "shadow"),  # a 17-tensor op for a 22-tensor call
    ("ba915e03e", "recompute"),  # a 22-tensor op for a 20-tensor call
])
def test_fastdeploy_mtp_form_of_another_signature_leaves_fastdeploy_s_ops(entry_point, commit,
                                                                          form):
    """FastDeploy's proposer calls its ops positionally with its own
    signature: an op of another would fail at its first call, in every
    worker. So the variable is not followed there: one line, FastDeploy's ops
    stay."""
    got, _ = drive(entry_point, commit, {**ENABLED, plugin.FORM_VARIABLE: form},
                   proposer_first=True, run="fastdeploy")
    assert_untouched(got)
    assert len(got["log"]) == 1, got["log"]
    level, line = got["log"][0]
    assert level == "WARNING" and "cannot call" in line and "stay in place" in line, line


@pytest.mark.parametrize("env,said", [
    ({}, None),  # FastDeploy loads no plugin with FD_PLUGINS unset
    ({"FD_PLUGINS": "another_plugin"}, None),
    ({**ENABLED, plugin.FORM_VARIABLE: "bogus"}, "'bogus' is none of our forms"),
])
def test_fastdeploy_s_ops_stay_unless_enabled_and_valid(entry_point, env, said):
    got, _ = drive(entry_point, "9018ccf74", env, proposer_first=True, run="fastdeploy")
    assert_untouched(got)
    if said is None:
        assert got["log"] == []
    else:
        assert len(got["log"]) == 1 and said in got["log"][0][1], got["log"]


def test_a_library_that_fails_to_load_leaves_fastdeploy_s_ops(entry_point):
    """register() raises nothing (FastDeploy would not catch it): one line,
    FastDeploy's ops in place, FastDeploy's import goes on."""
    got, _ = drive(entry_point, "9018ccf74", ENABLED, proposer_first=True, run="fastdeploy",
                   break_library=True)
    assert_untouched(got)
    assert len(got["log"]) == 1, got["log"]
    level, line = got["log"][0]
    assert level == "WARNING" and "the compiler is missing" in line and "stay in place" in line


def test_a_failure_register_does_not_foresee_is_one_line(entry_point):
    """FastDeploy does not catch what a plugin raises
    (fastdeploy/plugins/model_register/__init__.py line 34 at c29e86fc9)."""
    got, _ = drive(entry_point, "9018ccf74", ENABLED, proposer_first=True, hostile_op=True)
    assert set(HELD + HELD_BY_ALIAS) <= set(got["fastdeploy_left"]), got["fastdeploy_left"]
    assert len(got["log"]) == 1, got["log"]
    level, line = got["log"][0]
    assert level == "WARNING" and "RuntimeError: a signature that cannot be read" in line, line


def test_no_fastdeploy_op_is_one_line(entry_point):
    got, _ = drive(entry_point, "none", ENABLED)
    assert len(got["log"]) == 1 and "has no draft_model_preprocess" in got["log"][0][1], got["log"]


@pytest.mark.parametrize("env,said", [
    (ENABLED, "using our pr5738 form"),  # Paddle, imported, gave the root logger a handler
    ({**ENABLED, plugin.FORM_VARIABLE: "bogus"}, "'bogus' is none of our forms"),  # nothing did
])
def test_the_line_reaches_stderr_where_the_process_configured_no_logging(entry_point, env, said):
    _, err = drive(entry_point, "9018ccf74", env, capture_log=False)
    ours = [ln for ln in err.splitlines() if said in ln]
    assert len(ours) == 1, err[-2000:]


# --- The choice itself, in this process (nothing loaded) ---------------------

def test_the_signature_table_is_our_shipped_forms_registered_inputs():
    assert plugin.SIGNATURES == {FORMS[f]["draft_model_preprocess"].input_names: (f,)
                                 for f in ("pr5738", "shadow")}
    # Ours alone, and commit 0956b09a's (on no FastDeploy branch): never detected.
    assert all("rollback" not in forms and "recompute" not in forms
               for forms in plugin.SIGNATURES.values())


def test_choose_takes_the_one_candidate_and_tells_several_apart_by_probes(monkeypatch):
    fastdeploy_op = object()
    assert plugin.choose(("recompute",), fastdeploy_op) == "recompute"
    assert plugin.choose(("recompute", "rollback"), fastdeploy_op) is None
    seen = []
    monkeypatch.setitem(plugin.PROBES, "recompute", lambda op: seen.append(op) or False)
    monkeypatch.setitem(plugin.PROBES, "rollback", lambda op: True)
    assert plugin.choose(("recompute", "rollback"), fastdeploy_op) == "rollback"
    assert seen == [fastdeploy_op]


class ExtensionFunction:
    """A C++ extension's function: its parameters only in its docstring."""

    def __init__(self, name, params):
        self.__doc__ = f"{name}({', '.join(f'{p}: paddle::Tensor' for p in params)}) -> None\n"

    def __call__(self, *args):
        pass


@pytest.mark.parametrize("form", ["pr5738", "shadow"])
def test_an_extension_function_s_parameters_are_read_from_its_docstring(form):
    """Names where it states them, else their number (argN)."""
    params = op_parameters(form)
    named = ExtensionFunction("draft_model_preprocess", params)
    assert plugin._parameters(named) == (tuple(params), len(params))
    unnamed = ExtensionFunction("draft_model_preprocess", [f"arg{k}" for k in range(len(params))])
    assert plugin._parameters(unnamed) == (None, len(params))

    class Ops:
        pass

    ops = Ops()
    ops.__dict__.update(draft_model_preprocess=unnamed)
    assert plugin._detect(ops, unnamed)[0] == form
    unknown = ExtensionFunction("draft_model_preprocess", ["arg0"] * (len(params) + 1))
    assert plugin._detect(ops, unknown)[0] is None


def test_a_mask_op_of_another_form_makes_the_signature_unknown():
    """FastDeploy's preprocess of one form beside a mask op of another: neither is replaced."""
    class Ops:
        pass

    ops = Ops()
    preprocess = ExtensionFunction("draft_model_preprocess", op_parameters("pr5738"))
    mask = ExtensionFunction("update_attn_mask_offsets",
                             FORMS["shadow"]["update_attn_mask_offsets"].input_names)
    ops.__dict__.update(draft_model_preprocess=preprocess, update_attn_mask_offsets=mask)
    form, what = plugin._detect(ops, preprocess)
    assert form is None and "update_attn_mask_offsets takes 8 parameters" in what, what
    ops.__dict__["update_attn_mask_offsets"] = ExtensionFunction(
        "update_attn_mask_offsets", FORMS["pr5738"]["update_attn_mask_offsets"].input_names)
    assert plugin._detect(ops, preprocess)[0] == "pr5738"
