"""The FastDeploy plugin (fastdeploy_mtp.plugin) run as FastDeploy runs it.

Each case is a process of its own (tests/standin_fastdeploy/drive.py): a
stand-in for FastDeploy (tests/standin_fastdeploy/fastdeploy, our code, laid
out as FastDeploy's modules are) exposes the ops of one FastDeploy commit,
finds our entry point through importlib.metadata (a dist-info folder made
from pyproject.toml's entry-point lines, first on the path) and loads it
when its models package is imported, as FastDeploy does
(fastdeploy/model_executor/models/__init__.py line 68 at c29e86fc9). The plugin
runs once a process, so one process per case (two tests that ask for the same
case share its process's report).

FastDeploy's ops per commit (the stand-in's fastdeploy_ops.py, whose ops
compute what FastDeploy's kernels of that commit do): 9018ccf74 registers the
22-tensor draft_model_preprocess and the 10-tensor update_attn_mask_offsets
whose decode_states rule is the pr5738 form's, 2178f2829 the same
registrations with the pr6403 form's rule, ba915e03e a 20-tensor preprocess
(the pr5245 form), 7a6c28781 the 17-tensor and 8-tensor ones (the shadow
form), 52eda7fdb a 19-tensor preprocess (none of ours) and no mask op.
"""

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fastdeploy_mtp import plugin, reference
from fastdeploy_mtp.plugin import detect, log, replace
from fastdeploy_mtp.signature import FORMS, preprocess_form
from helpers import entry_point_folder

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "standin_fastdeploy"
PRE, MASK = "draft_model_preprocess", "update_attn_mask_offsets"
KEYS = [PRE, "static_op_" + PRE, MASK, "static_op_" + MASK]

# Where the stand-in holds FastDeploy's op objects: its ops module (the names
# callers import and the static-graph names), the proposer (imported by name)
# and, where the proposer is imported first, a module holding two under
# other names.
OPS_MODULE = "fastdeploy.model_executor.ops.gpu"
PROPOSER = "fastdeploy.spec_decode.mtp"
HELD = {PRE: [f"{OPS_MODULE}:{PRE}", f"{OPS_MODULE}:static_op_{PRE}", f"{PROPOSER}:{PRE}",
              "standin_holder:preprocess_by_another_name"],
        MASK: [f"{OPS_MODULE}:{MASK}", f"{OPS_MODULE}:static_op_{MASK}", f"{PROPOSER}:{MASK}",
               "standin_holder:static_mask_by_another_name"]}
# The proposer's calls of FastDeploy's ops in a run: the preprocess once, the mask op twice.
PRE_CALL, MASK_CALL = [PRE, "extension"], [MASK, "extension"]
ALL_CALLS = [PRE_CALL, MASK_CALL, MASK_CALL]
# The commit of FastDeploy that has each shipped form, and the decode_states
# rule of its mask op (drive.py's MASK_RULES).
COMMIT_OF = {"pr5245": "ba915e03e", "pr5738": "9018ccf74", "pr6403": "2178f2829",
             "shadow": "7a6c28781"}
RULE_OF = {"pr5245": "pr5738", "pr5738": "pr5738", "recompute": "pr5738", "pr6403": "pr6403"}


@pytest.fixture(scope="module")
def entry_point(tmp_path_factory):
    """A folder that makes our entry point visible to importlib.metadata."""
    return entry_point_folder(tmp_path_factory.mktemp("entry_point"))


_REPORTS = {}


def drive(entry_point, commit, env=None, **spec):
    """Runs drive.py with the stand-in of FastDeploy `commit` (once per
    case); returns its report and its stderr. FD_PLUGINS and
    FASTDEPLOY_MTP_FORM come only from `env`."""
    key = json.dumps([commit, env, spec], sort_keys=True)
    if key in _REPORTS:
        return _REPORTS[key]
    from helpers import child_env

    full = child_env(str(entry_point), str(STANDIN), FD_PLUGINS=None,
                     **{plugin.FORM_VARIABLE: None, plugin.MODE_VARIABLE: None})
    full.update(env or {})
    full["STANDIN_FASTDEPLOY_COMMIT"] = commit
    proc = subprocess.run([sys.executable, str(STANDIN / "drive.py"), json.dumps(spec)],
                          env=full, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"the process failed (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    _REPORTS[key] = json.loads(lines[-1][len("RESULT "):]), proc.stderr
    return _REPORTS[key]


ENABLED = {"FD_PLUGINS": "fastdeploy_mtp", "FASTDEPLOY_MTP_MODE": "exact"}


def op_parameters(form):
    sig = FORMS[form][PRE]
    return list(sig.input_names + sig.attr_names)


def ours(form):
    """What FastDeploy's ops module holds once a run chose `form`: the op of
    the form whose preprocess kernel it runs, and the form's mask op."""
    return {PRE: preprocess_form(form), "static_op_" + PRE: preprocess_form(form),
            MASK: form, "static_op_" + MASK: form}


def fastdeploy_s(keys=KEYS):
    return {key: "fastdeploy" for key in keys}


def lines_of(got, level):
    return [line for lvl, line in got["log"] if lvl == level]


# --- Each FastDeploy version gets its form -----------------------------------

def patch_lines(got):
    return [line for _, line in got["log"] if "patch " in line]


@pytest.mark.parametrize("mode", ["exact", "corrected"])
@pytest.mark.parametrize("form", ["pr5245", "pr5738", "pr6403", "shadow"])
def test_fd_plugins_puts_the_form_of_each_fastdeploy_version_in_place(entry_point, form, mode):
    """The proposer, imported before the plugins ran, calls our ops of the
    form FastDeploy's are (exact mode) or of the form that corrects it (the
    corrected mode, the default: FASTDEPLOY_MTP_MODE unset), which leave what
    the models of that form's ops leave (the mask op's decode_states rule
    included); no module holds FastDeploy's op objects any more; the
    static-graph names hold our registered ops. A 22-tensor op is told pr5738
    or pr6403 by one probe of FastDeploy's own mask op, whose one INFO line
    names the form."""
    env = ENABLED if mode == "exact" else {"FD_PLUGINS": "fastdeploy_mtp"}
    use = form if mode == "exact" else plugin.CORRECTED_OF[form]
    got, _ = drive(entry_point, COMMIT_OF[form], env, proposer_first=True, run=use)
    assert got["mismatch"] is None, got["mismatch"]
    assert got["calls"] == [], f"the proposer's calls reached FastDeploy's ops: {got['calls']}"
    assert got["held"] == ours(use), got["held"]
    assert got["fastdeploy_left"] == [], got["fastdeploy_left"]
    assert got["signature"] == op_parameters(form)
    assert got["proposer_uses_ops_module"]
    if form != "shadow":
        assert got["mask_rule"] == [RULE_OF[form]], got["mask_rule"]
    probed = form in ("pr5738", "pr6403")
    assert got["probe_calls"] == ([MASK_CALL] if probed else []), got["probe_calls"]
    log = [entry for entry in got["log"] if "patch " not in entry[1]]
    assert [lvl for lvl, _ in log] == ["INFO"] * (2 if probed else 1), got["log"]
    # The stand-in's proposer is not FastDeploy's code: no patch fits it.
    assert all("not applied" in line or "waits" in line for line in patch_lines(got)), got["log"]
    assert bool(patch_lines(got)) == (mode == "corrected"), got["log"]
    line = got["log_at_register"][0][1]
    assert line.startswith(f"fastdeploy_mtp: {mode} mode, FastDeploy "), line
    assert len(line) < 200, line
    if probed:
        assert (f"our {plugin.CORRECTED_OF['pr5738'] if mode == 'corrected' else 'pr5738'} or "
                f"{plugin.CORRECTED_OF['pr6403'] if mode == 'corrected' else 'pr6403'} ops") \
            in line, line
        assert log[1][1].endswith(f"as our {form} form's does: using our {use} form's "
                                  "update_attn_mask_offsets"), log[1][1]
    else:
        assert f": our {use} ops in place of its " in line, line


@pytest.mark.parametrize("form", ["pr5245", "pr5738", "pr6403", "shadow"])
def test_nothing_is_loaded_or_run_before_the_first_call(entry_point, form):
    """register() (run in FastDeploy's engine too, which never calls the ops)
    neither loads our library nor runs the probe: its stand-ins stand where
    FastDeploy's ops were until the proposer's first call."""
    got, _ = drive(entry_point, COMMIT_OF[form], ENABLED, proposer_first=True, run=form)
    assert got["loads_at_register"] == [], f"forms.load asked: {got['loads_at_register']}"
    assert got["library_at_register"] is False
    assert got["calls_at_register"] == [], f"FastDeploy's ops ran: {got['calls_at_register']}"
    assert got["held_at_register"] == {key: "deferred" for key in KEYS}, got["held_at_register"]
    assert got["fastdeploy_left_at_register"] == [], got["fastdeploy_left_at_register"]
    assert len(got["log_at_register"]) == 1 and got["log_at_register"][0][0] == "INFO"


def test_register_twice_changes_nothing(entry_point):
    """The proposer imported after the plugins ran gets ours from the ops
    module; a second register() changes no module and logs nothing."""
    got, _ = drive(entry_point, "9018ccf74", ENABLED, run="pr5738", register_twice=True)
    assert got["mismatch"] is None, got["mismatch"]
    assert got["fastdeploy_left"] == [] and got["proposer_uses_ops_module"]
    assert got["second_call_changed"] == [], got["second_call_changed"]
    assert got["second_call_logged"] == [] and len(got["log_at_register"]) == 1


@pytest.mark.parametrize("commit,form", [
    ("9018ccf74", "pr6403"), ("2178f2829", "pr5738"),  # the other of the two forms
    ("9018ccf74", "recompute"),  # commit 0956b09a's rules (on no FastDeploy branch)
])
def test_fastdeploy_mtp_form_chooses_among_the_forms_of_fastdeploy_s_signature(entry_point,
                                                                               commit, form):
    """FastDeploy's 22-tensor op is the pr5738, pr6403 and recompute forms'
    signature: the variable chooses, and no probe runs."""
    got, _ = drive(entry_point, commit, {**ENABLED, plugin.FORM_VARIABLE: form},
                   proposer_first=True, run=form)
    assert got["mismatch"] is None, got["mismatch"]
    assert got["mask_rule"] == [RULE_OF[form]], got["mask_rule"]
    assert got["signature"] == op_parameters(form)
    assert got["held"] == ours(form), got["held"]
    assert got["fastdeploy_left"] == [], got["fastdeploy_left"]
    assert got["calls"] == [] and got["probe_calls"] == [], (got["calls"], got["probe_calls"])
    assert len(got["log"]) == 1, got["log"]
    level, line = got["log"][0]
    assert level == "INFO" and f"our {form} ops" in line
    assert f"{plugin.FORM_VARIABLE}={form}" in line, line


# --- Where FastDeploy's ops stay -----------------------------------------------

def assert_untouched(got):
    """FastDeploy's op objects are where they were, and its ops ran the
    proposer's calls (computing what the models of its version's form do)."""
    assert got["held_at_register"] == fastdeploy_s() and got["held"] == fastdeploy_s()
    assert set(HELD[PRE] + HELD[MASK]) <= set(got["fastdeploy_left"]), got["fastdeploy_left"]
    assert got["calls"] == ALL_CALLS and got["probe_calls"] == [], (got["calls"],
                                                                    got["probe_calls"])
    assert got["mismatch"] is None, got["mismatch"]
    assert got["loads"] == [], got["loads"]


def test_an_unknown_signature_leaves_fastdeploy_s_ops(entry_point):
    got, _ = drive(entry_point, "52eda7fdb", ENABLED, proposer_first=True)
    assert got["held"] == fastdeploy_s([PRE, "static_op_" + PRE]), got["held"]
    assert set(HELD[PRE]) <= set(got["fastdeploy_left"]), got["fastdeploy_left"]
    assert len(got["log"]) == 1, got["log"]
    level, line = got["log"][0]
    assert level == "WARNING" and "takes 22 parameters" in line, line
    assert "as none of our forms does" in line and "stay in place" in line, line


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
                   proposer_first=True, run="pr5738" if commit == "9018ccf74" else "pr5245")
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
    got, _ = drive(entry_point, "9018ccf74", env, proposer_first=True, run="pr5738")
    assert_untouched(got)
    if said is None:
        assert got["log"] == []
    else:
        assert len(got["log"]) == 1 and said in got["log"][0][1], got["log"]


def test_a_library_that_fails_to_load_leaves_fastdeploy_s_ops(entry_point):
    """The library loads at the first call; where it fails, that call and
    every later one go to FastDeploy's ops, which are back in every module,
    the load is not tried again, and one WARNING line says why. Nothing is
    raised (FastDeploy's proposer would not catch it)."""
    got, _ = drive(entry_point, "9018ccf74", ENABLED, proposer_first=True, run="pr5738",
                   break_library=True)
    assert got["held_at_register"] == {key: "deferred" for key in KEYS}
    assert got["held"] == fastdeploy_s(), got["held"]
    assert set(HELD[PRE] + HELD[MASK]) <= set(got["fastdeploy_left"]), got["fastdeploy_left"]
    assert got["calls"] == ALL_CALLS and got["probe_calls"] == [], got["calls"]
    assert got["mismatch"] is None, got["mismatch"]
    assert got["loads"] == ["pr5738"], f"one try, at the first call: {got['loads']}"
    assert [lvl for lvl, _ in got["log"]] == ["INFO", "WARNING"], got["log"]
    line = got["log"][1][1]
    assert "the compiler is missing" in line and "stay in use in this process" in line, line


@pytest.mark.parametrize("commit,upset,said", [
    ("2178f2829", "nothing", "left decode_states [1, 7], attn_mask_offsets [0, 0], "
                             "attn_mask_offsets_decoder [3], mask_rollback [0], as none of our "
                             "forms pr5738, pr6403 does"),
])
def test_a_probe_that_cannot_tell_leaves_fastdeploy_s_mask_op(entry_point, commit, upset, said):
    """A probe of FastDeploy's mask op that leaves what neither form's op
    leaves (an op none of ours is): one WARNING line, FastDeploy's mask op for the process
    (back in every module), our preprocess (one kernel for both forms)."""
    form = {"9018ccf74": "pr5738", "2178f2829": "pr6403"}[commit]
    got, _ = drive(entry_point, commit, ENABLED, proposer_first=True, run=form, mask_upset=upset)
    assert got["probe_calls"] == [MASK_CALL], got["probe_calls"]
    assert got["calls"] == [MASK_CALL, MASK_CALL], got["calls"]
    assert got["held"] == {**ours("pr5738"), **fastdeploy_s([MASK, "static_op_" + MASK])}, \
        got["held"]
    assert set(HELD[MASK]) <= set(got["fastdeploy_left"]), got["fastdeploy_left"]
    assert not set(HELD[PRE]) & set(got["fastdeploy_left"]), got["fastdeploy_left"]
    assert got["mismatch"] is None and got["mask_rule"] == [RULE_OF[form]], got
    assert [lvl for lvl, _ in got["log"]] == ["INFO", "WARNING"], got["log"]
    line = got["log"][1][1]
    assert said in line and "FastDeploy's update_attn_mask_offsets stays in use" in line, line


def test_a_probe_that_cannot_run_is_told_by_fastdeploy_s_code(entry_point):
    """FastDeploy's mask op raising at the probe (as a CPU-only FastDeploy,
    with no compiled op, does): FastDeploy's Python package tells the two
    forms apart instead. The stand-in, like 9018ccf74, has no
    spec_decode/suffix.py: the pr5738 form, and one INFO line saying why."""
    got, _ = drive(entry_point, "9018ccf74", ENABLED, proposer_first=True, run="pr5738",
                   mask_upset="raise")
    assert got["probe_calls"] == [MASK_CALL] and got["calls"] == [], got
    assert got["held"] == ours("pr5738"), got["held"]
    assert got["mismatch"] is None and got["mask_rule"] == ["pr5738"], got
    assert [lvl for lvl, _ in got["log"]] == ["INFO", "INFO"], got["log"]
    line = got["log"][1][1]
    assert "could not run (RuntimeError: the probe's tensors are refused)" in line, line
    assert "lacks suffix.py" in line and line.endswith("using our pr5738 form's "
                                                       "update_attn_mask_offsets"), line


@pytest.mark.parametrize("files,form", [((), "pr5738"), (("suffix.py",), "pr6403"),
                                        (("suffix.pyc",), "pr5738")])
def test_the_code_marker_reads_fastdeploy_s_package(tmp_path, monkeypatch, files, form):
    """2178f2829, which changed the mask op's decode_states rule, added
    fastdeploy/spec_decode/suffix.py; 9018ccf74 lacks it."""
    package = tmp_path / "fastdeploy" / "spec_decode"
    package.mkdir(parents=True)
    (tmp_path / "fastdeploy" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    for name in files:
        (package / name).write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    ours = lambda: [m for m in sys.modules if m == "fastdeploy" or m.startswith("fastdeploy.")]
    for name in ours():
        monkeypatch.delitem(sys.modules, name)
    try:
        got, words = detect.code_marker(("pr5738", "pr6403"))
    finally:  # the fake package imported here must not outlive the test
        for name in ours():
            del sys.modules[name]
    assert got == form, words
    assert detect.code_marker(("pr5245",)) == (None, "")


def test_a_failure_register_does_not_foresee_is_one_line(entry_point):
    """FastDeploy does not catch what a plugin raises
    (fastdeploy/plugins/model_register/__init__.py line 34 at c29e86fc9)."""
    got, _ = drive(entry_point, "9018ccf74", ENABLED, proposer_first=True, hostile_op=True)
    assert set(HELD[PRE] + HELD[MASK]) <= set(got["fastdeploy_left"]), got["fastdeploy_left"]
    assert len(got["log"]) == 1, got["log"]
    level, line = got["log"][0]
    assert level == "WARNING" and "RuntimeError: a signature that cannot be read" in line, line


def test_no_fastdeploy_op_is_one_line(entry_point):
    got, _ = drive(entry_point, "none", ENABLED)
    assert len(got["log"]) == 1 and "has no draft_model_preprocess" in got["log"][0][1], got["log"]


@pytest.mark.parametrize("env,said", [
    (ENABLED, "our pr5738 or pr6403 ops"),  # Paddle, imported, gave the root logger a handler
    ({**ENABLED, plugin.FORM_VARIABLE: "bogus"}, "'bogus' is none of our forms"),  # nothing did
])
def test_the_line_reaches_stderr_where_the_process_configured_no_logging(entry_point, env, said):
    paddle = pytest.importorskip("paddle")

    if env is ENABLED and int(paddle.__version__.split(".")[0]) == 2:
        pytest.skip("Paddle 2's import sets the root logger to WARNING, which drops the INFO "
                    "line as configured; FastDeploy runs on Paddle 3")
    _, err = drive(entry_point, "9018ccf74", env, capture_log=False)
    found = [ln for ln in err.splitlines() if said in ln]
    assert len(found) == 1, err[-2000:]


# --- The choice itself, in this process ----------------------------------------

def test_our_own_forms_are_never_detected():
    """Ours alone, and commit 0956b09a's (on no FastDeploy branch): no
    FastDeploy registration chooses the rollback or the recompute form (the
    recompute form's is pr5738's)."""
    assert detect.SIGNATURES and all("rollback" not in forms and "recompute" not in forms
                                     for forms in detect.SIGNATURES.values())


def test_forms_that_share_a_signature_have_a_probe_and_one_preprocess_kernel():
    """The probe runs at the mask op's first call, after the preprocess has
    run: the preprocess must be the same for every form the probe may
    choose."""
    shared = [forms for forms in detect.SIGNATURES.values() if len(forms) > 1]
    assert shared and all(forms in detect.PROBES for forms in shared)
    for forms in shared:
        assert set(detect.PROBES[forms].expect) == set(forms)
        assert len({preprocess_form(f) for f in forms}) == 1
        assert len(set(detect.PROBES[forms].expect.values())) == len(forms)


def as_fastdeploy_op(model):
    """A numpy model of a mask kernel as FastDeploy's op is called: paddle
    tensors positionally, written in place, one tensor back."""
    import paddle

    names, to_tensor = FORMS["pr5738"][MASK].input_names, paddle.to_tensor

    def op(*tensors):
        state = {n: t.numpy().copy() for n, t in zip(names, tensors)}
        out = model(state)
        for n, t in zip(names, tensors):
            t.set_value(state[n])
        return to_tensor(out, place=tensors[0].place)

    return op


@pytest.mark.parametrize("form,model", [
    ("pr5738", reference.update_attn_mask_offsets),
    ("pr6403", reference.update_attn_mask_offsets_pr6403)])
def test_the_probe_expects_what_each_form_s_op_and_fastdeploy_s_kernel_leave(form, model):
    """Our form's registered op (every output back, as Paddle's generated
    function returns them) and the model of FastDeploy's kernel (one tensor
    back, as FastDeploy's op returns it) leave what the probe expects of the
    form."""
    import paddle

    from fastdeploy_mtp import forms

    probe = detect.PROBES[("pr5738", "pr6403")]
    raw = forms.load(form).library.update_attn_mask_offsets
    assert probe.run(raw, paddle.CPUPlace()) == probe.expect[form]
    assert probe.run(as_fastdeploy_op(model), paddle.CPUPlace()) == probe.expect[form]
    assert detect.choose(("pr5738", "pr6403"), as_fastdeploy_op(model),
                         paddle.CPUPlace())[0] == form


@pytest.mark.parametrize("form", ["pr5738", "pr6403"])
def test_the_probe_runs_on_the_gpu(form):
    """FastDeploy's mask op runs on GPU tensors only: the probe, on a GPU
    place, with our form's op standing for FastDeploy's there, tells the
    form."""
    from helpers import gpu_available

    if not gpu_available():
        pytest.skip("no GPU")
    import paddle

    from fastdeploy_mtp import forms

    raw = forms.load(form).library.update_attn_mask_offsets
    probe = detect.PROBES[("pr5738", "pr6403")]
    assert probe.run(raw, paddle.CUDAPlace(0)) == probe.expect[form]
    assert detect.choose(("pr5738", "pr6403"), raw, paddle.CUDAPlace(0))[0] == form


def test_the_probe_builds_its_state_on_the_place_it_is_given(monkeypatch):
    """Every tensor of the probe is made on the place of the call it runs at
    (a GPU op runs only on its own device's tensors)."""
    import paddle

    place, asked = object(), []
    to_tensor = paddle.to_tensor
    fastdeploy_op = as_fastdeploy_op(reference.update_attn_mask_offsets)

    def recording(data, dtype=None, place=None, stop_gradient=True):
        asked.append(place)
        return to_tensor(data, dtype=dtype, place=paddle.CPUPlace(), stop_gradient=stop_gradient)

    monkeypatch.setattr(paddle, "to_tensor", recording)
    detect.PROBES[("pr5738", "pr6403")].run(fastdeploy_op, place)
    assert len(asked) == 10 and all(p is place for p in asked), asked


def test_the_place_is_that_of_the_call_s_ids_remove_padding():
    import paddle

    # Places compared by their text: Paddle 2's Place has no equality.
    ids, other = paddle.to_tensor([1]), paddle.to_tensor([2])
    assert str(replace.call_place((ids, other), {})) == str(ids.place)
    assert str(replace.call_place((), {"seq_lens_this_time": other,
                                       "ids_remove_padding": ids})) == str(ids.place)
    with pytest.raises(TypeError, match="not a paddle.Tensor"):
        replace.call_place((np.zeros(1),), {})
    paddle.enable_static()
    try:
        with pytest.raises(RuntimeError, match="static graph"):
            replace.call_place((ids,), {})
    finally:
        paddle.disable_static()


def test_choose_takes_the_one_candidate_and_tells_several_apart_by_their_probe(monkeypatch):
    seen = []
    probe = detect.Probe(op=MASK, state="s", run=lambda op, place: seen.append((op, place)) or op,
                         expect={"pr5738": "a", "pr6403": "b"}, fields=("x",))
    monkeypatch.setitem(detect.PROBES, ("pr5738", "pr6403"), probe)
    assert detect.choose(("pr5245",))[0] == "pr5245" and seen == []
    assert detect.choose(("pr5738", "pr6403"), "b", "here")[0] == "pr6403"
    assert seen == [("b", "here")]
    assert detect.choose(("pr5738", "pr6403"), "a", "here")[0] == "pr5738"
    form, what = detect.choose(("pr5738", "pr6403"), "c", "here")
    assert form is None and "as none of our forms" in what, what
    assert detect.choose(("rollback", "recompute"), "a", "here")[0] is None


class FakeOps:
    """FastDeploy's ops module, for _Deferred: its two ops by name."""

    def __init__(self, **ops):
        self.__dict__.update(ops)


def test_the_first_calls_of_many_threads_run_one_probe(caplog):
    """The choice is made once per process, under a lock: threads that call
    the mask op's stand-in at once wait for the one probe, then all run the
    chosen op."""
    import paddle

    calls, lock = [], threading.Lock()
    model = as_fastdeploy_op(reference.update_attn_mask_offsets_pr6403)

    def fastdeploy_mask(*tensors):
        with lock:
            calls.append(tensors[0].shape[0])
        time.sleep(0.05)  # a slow probe: the other threads arrive meanwhile
        return model(*tensors)

    deferred = replace.Deferred(FakeOps(draft_model_preprocess=lambda *a: None,
                                        update_attn_mask_offsets=fastdeploy_mask),
                                ("pr5738", "pr6403"))
    stand_in = deferred.stand_ins[MASK]
    rng = np.random.default_rng(3)
    from fastdeploy_mtp.buffers import tensors
    from fastdeploy_mtp.harness import states

    inputs = [states.mask_state(rng, 4) for _ in range(6)]
    outs = [None] * len(inputs)

    def call(k):
        t = tensors(inputs[k])
        outs[k] = (stand_in(*[t[n] for n in FORMS["pr6403"][MASK].input_names]).numpy(),
                   t["decode_states"].numpy())

    with caplog.at_level(logging.INFO, logger=log.LOGGER_NAME):
        threads = [threading.Thread(target=call, args=(k,)) for k in range(len(inputs))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert calls == [1], f"FastDeploy's mask op ran {len(calls)} times: {calls}"
    assert [r.levelname for r in caplog.records] == ["INFO"], caplog.records
    assert "using our pr6403 form's" in caplog.records[0].getMessage()
    for k, s in enumerate(inputs):
        want = {n: v.copy() for n, v in s.items()}
        out = reference.update_attn_mask_offsets_pr6403(want)
        np.testing.assert_array_equal(outs[k][0], out)
        np.testing.assert_array_equal(outs[k][1], want["decode_states"])
    assert deferred.chosen[MASK].fastdeploy_mtp_form == "pr6403"
    assert paddle.in_dynamic_mode()


def test_a_first_call_in_a_static_graph_keeps_fastdeploy_s_mask_op(caplog):
    """The probe runs FastDeploy's op eagerly; a static graph runs nothing
    then: one WARNING line, FastDeploy's mask op for the process."""
    import paddle

    fastdeploy_mask = object()
    deferred = replace.Deferred(FakeOps(draft_model_preprocess=lambda *a: None,
                                        update_attn_mask_offsets=fastdeploy_mask),
                                ("pr5738", "pr6403"))
    paddle.enable_static()
    try:
        with caplog.at_level(logging.INFO, logger=log.LOGGER_NAME):
            chosen = deferred.choose(MASK, (None,), {})
    finally:
        paddle.disable_static()
    assert chosen[MASK] is fastdeploy_mask
    assert [r.levelname for r in caplog.records] == ["WARNING"], caplog.records
    assert "static graph" in caplog.records[0].getMessage()


def test_ours_return_what_fastdeploy_s_return():
    """In dynamic mode FastDeploy's preprocess returns nothing and its mask op
    one tensor; in a static graph both return every output."""
    import paddle

    def raw(*args):
        return ["first", "second"]

    assert replace.as_fastdeploy_returns(raw, "pr5738", keep_first=False)() is None
    assert replace.as_fastdeploy_returns(raw, "pr5738", keep_first=True)() == "first"
    paddle.enable_static()
    try:
        assert replace.as_fastdeploy_returns(raw, "pr5738", keep_first=True)() == raw()
    finally:
        paddle.disable_static()


class ExtensionFunction:
    """A C++ extension's function: its parameters only in its docstring."""

    def __init__(self, name, params):
        self.__doc__ = f"{name}({', '.join(f'{p}: paddle::Tensor' for p in params)}) -> None\n"

    def __call__(self, *args):
        pass


@pytest.mark.parametrize("form,candidates", [
    ("pr5245", ("pr5245",)), ("pr5738", ("pr5738", "pr6403")), ("shadow", ("shadow",))])
def test_an_extension_function_s_parameters_are_read_from_its_docstring(form, candidates):
    """Names where it states them, else their number (argN)."""
    params = op_parameters(form)
    named = ExtensionFunction(PRE, params)
    assert detect.parameters(named) == (tuple(params), len(params))
    unnamed = ExtensionFunction(PRE, [f"arg{k}" for k in range(len(params))])
    assert detect.parameters(unnamed) == (None, len(params))

    ops = FakeOps(draft_model_preprocess=unnamed)
    assert detect.forms_of(ops, unnamed)[0] == candidates
    assert detect.forms_of(ops, named)[0] == candidates
    unknown = ExtensionFunction(PRE, ["arg0"] * (len(params) + 1))
    assert detect.forms_of(ops, unknown)[0] is None


def test_a_mask_op_of_another_form_makes_the_signature_unknown():
    """FastDeploy's preprocess of one form beside a mask op of another: neither is replaced."""
    preprocess = ExtensionFunction(PRE, op_parameters("pr5738"))
    mask = ExtensionFunction(MASK, FORMS["shadow"][MASK].input_names)
    ops = FakeOps(draft_model_preprocess=preprocess, update_attn_mask_offsets=mask)
    form, what = detect.forms_of(ops, preprocess)
    assert form is None and "update_attn_mask_offsets takes 8 parameters" in what, what
    ops.__dict__[MASK] = ExtensionFunction(MASK, FORMS["pr6403"][MASK].input_names)
    assert detect.forms_of(ops, preprocess)[0] == ("pr5738", "pr6403")


@pytest.mark.parametrize("form", ["pr5245", "corrected_pr5245", "corrected_pr5738"])
@pytest.mark.parametrize("static_name", [False, True])
def test_an_int_flag_is_taken_where_fastdeploy_passes_one(form, static_name):
    """FastDeploy 88d44a2c9 to ba915e03e passes envs.ENABLE_V1_KVCACHE_SCHEDULER,
    an int (fastdeploy/envs.py line 84 at ba915e03e), as the bool attribute
    kvcache_scheduler_v1 (mtp.py lines 684 and 709 there); its C++ op takes
    it. Our registered op refuses an int, so the plugin's stand-ins give it
    the bool: the same result as with True, in both its names."""
    from fastdeploy_mtp import forms
    from fastdeploy_mtp.harness import states as st_
    from helpers import to_numpy, to_tensors

    sig = FORMS[form][PRE]
    rng = np.random.default_rng(11)
    s = st_.recompute_state(rng, 12, num_model_step=3)
    s = {n: s[n] for n in sig.input_names}
    raw = forms.load(form).library.draft_model_preprocess
    # What FastDeploy's int meets without the stand-in (Paddle 2 raises ValueError).
    with pytest.raises((TypeError, ValueError), match="must be bool, but got int"):
        t = to_tensors(s)
        raw(*[t[n] for n in sig.input_names], 3, True, False, 1)
    ours = (replace.as_static(raw, form, PRE) if static_name
            else replace.as_fastdeploy_returns(raw, form, keep_first=False))
    got, want = to_tensors(s), to_tensors(s)
    ours(*[got[n] for n in sig.input_names], 3, True, False, 1)
    raw(*[want[n] for n in sig.input_names], 3, True, False, True)
    for name in sig.input_names:
        np.testing.assert_array_equal(to_numpy(got)[name], to_numpy(want)[name], err_msg=name)
    assert not np.array_equal(to_numpy(got)["seq_lens_this_time"], s["seq_lens_this_time"]) or \
        not np.array_equal(to_numpy(got)["stop_flags"], s["stop_flags"])


def test_without_paddle_register_says_so_in_one_warning_and_does_nothing(monkeypatch):
    """FD_PLUGINS set where Paddle is not importable: one WARNING line, and
    nothing of FastDeploy's is touched (no ops module imported)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "paddle" else real(name, *a))
    monkeypatch.delenv(plugin.FORM_VARIABLE, raising=False)
    monkeypatch.delenv(plugin.MODE_VARIABLE, raising=False)
    before = set(sys.modules)
    lines = plugin._register()
    assert [lvl for lvl, _ in lines] == [logging.WARNING], lines
    assert "Paddle is not importable" in lines[0][1] and "does nothing" in lines[0][1]
    assert not any(m.startswith("fastdeploy") for m in set(sys.modules) - before)


@pytest.mark.parametrize("value", ["Exact", "fixed", "corrected "])
def test_a_bad_mode_is_one_warning_and_fastdeploy_s_ops_stay(monkeypatch, value):
    monkeypatch.setenv(plugin.MODE_VARIABLE, value)
    lines = plugin._register()
    assert [lvl for lvl, _ in lines] == [logging.WARNING], lines
    assert f"{plugin.MODE_VARIABLE}={value!r} is none of corrected, exact" in lines[0][1]
