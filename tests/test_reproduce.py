"""`python -m fastdeploy_mtp reproduce FORM [--role R] [-k K] [--chunk N]`:
for each drifting row of the verdict table, the one-request state it prints
drifts by what the numpy models of the ops (fastdeploy_mtp.reference,
fastdeploy_mtp.reference_fastdeploy) compute on that same printed state, every
tensor it prints after a call is what those models leave, and the state is
one a form without the drift keeps exact; an exact row prints no drift and
exits 0; with --chunk, every form and role shows the draft's input at the
first chunk's last position taken from the base model's sample, on tensors
those models compute; a bad argument is one line on stderr and exit 2."""

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from fastdeploy_mtp import __main__ as cli
from fastdeploy_mtp import reference, reference_fastdeploy
from fastdeploy_mtp.harness import reproduce, verdict
from fastdeploy_mtp.signature import FORMS

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results.md"

# docs/results.md, "Where a row drifts, and why": the roles in which each
# form's k >= 2 rows drift, and the quantity that shows it; at k = 1 the forms
# whose runner's draft update (FastDeploy ba915e03e to 2178f2829) leaves a
# draft's end token among the base model's drafts drift at its re-sync.
DRIFTS_IN = {"rollback": ("pd",), "recompute": ("mixed", "pd"), "pr5245": ("mixed", "pd"),
             "pr5738": ("mixed", "pd"), "pr6403": ("mixed", "pd"), "xpu": ("mixed", "pd"),
             "shadow": ()}
DRIFTS_AT_K1 = ("pr5245", "pr5738", "pr6403")
QUANTITY = {"rollback": "alignment", "recompute": "mask end", "pr5245": "mask end",
            "pr5738": "invariant", "pr6403": "invariant", "xpu": "mask end"}
ALL = [(f, r, k) for f in DRIFTS_IN for r in verdict.ROLES for k in verdict.KS]
DRIFTING = [(f, r, k) for f, r, k in ALL
            if r in DRIFTS_IN[f] and (k >= 2 or f in DRIFTS_AT_K1)]


def quantity(form, k):
    """The quantity the reproducer shows `form`'s drift at `k` by: at k = 1,
    a re-sync's invariant."""
    return "invariant" if k == 1 else QUANTITY[form]
EXACT = [c for c in ALL if c not in DRIFTING]
ATTRS = ("num_model_step", "truncate_first_token", "splitwise_prefill", "kvcache_scheduler_v1")


def run(capsys, *argv):
    code = cli.main(["reproduce", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# One row of a call's table: index, the op's input, the runner's buffer, the
# values before, and after (or "(unchanged)").
ROW = re.compile(r"^\s+\d+ (\w+)\s+(\S+(?: \S+)*?)\s+(\[.*?\])(?: -> (\[.*\])| \(unchanged\))$")


def calls(out):
    """{op name: {"rows": {op input: (buffer, before, after)}, "returned": list}}."""
    found, current = {}, None
    for line in out.splitlines():
        head = re.match(r"^\[\d+\] (\w+)", line)
        if head:
            current = found.setdefault(head.group(1), {"rows": {}, "returned": None})
            continue
        m = ROW.match(line)
        if m and current is not None:
            before = ast.literal_eval(m.group(3))
            after = before if m.group(4) is None else ast.literal_eval(m.group(4))
            current["rows"][m.group(1)] = (m.group(2), before, after)
        elif current is not None and line.strip().startswith("returned attn_mask_offsets "):
            current["returned"] = ast.literal_eval(line.split("attn_mask_offsets ", 1)[1])
    return found


def printed_drift(out):
    found = re.findall(r"^drift: ([+-]\d+): ", out, re.M)
    assert len(found) == 1, out
    return int(found[0])


def arrays(form, op, values):
    """The printed values as the op's dtypes."""
    sig = FORMS[form][op]
    return {n: np.array(v, dtype=sig.input(n).dtype) if sig.input(n).dtype else np.array(v)
            for n, v in values.items()}


def model_preprocess(form, state, k, prefill_node=False):
    """`form`'s draft_model_preprocess in numpy, on a copy of `state`, with
    the attributes FastDeploy's MTP proposer passes on a mixed or decode node
    (`prefill_node`: on the prefill node of a PD split)."""
    s = {n: a.copy() for n, a in state.items()}
    attrs = dict(zip(ATTRS, (k, True, prefill_node, True)))
    if form == "shadow":  # num_model_step, is_splitwise_prefill
        reference.draft_model_preprocess_shadow(s, k, prefill_node)
    elif form in ("pr5738", "pr6403"):
        reference_fastdeploy.draft_model_preprocess_pr5738(s, **attrs)
    elif form == "pr5245":
        reference_fastdeploy.draft_model_preprocess_pr5245(s, **attrs)
    elif form == "xpu":
        reference_fastdeploy.draft_model_preprocess_xpu(s, **attrs)
    elif form == "recompute":
        reference.draft_model_preprocess_recompute(s, **attrs)
    else:
        reference.draft_model_preprocess(s, **attrs)
    return s


def model_mask(form, state):
    s = {n: a.copy() for n, a in state.items()}
    op = (reference.update_attn_mask_offsets_pr6403 if form == "pr6403"
          else reference.update_attn_mask_offsets)
    return op(s), s


def independent(form, role, k, out):
    """What the numpy models make of the printed state: the drift of the
    form's quantity, each call's tensors after it, and the mask op's result."""
    found = calls(out)
    pre, mask = found["draft_model_preprocess"], found["update_attn_mask_offsets"]
    before = arrays(form, "draft_model_preprocess", {n: v[1] for n, v in pre["rows"].items()})
    after = model_preprocess(form, before, k)
    # The runner's buffers after the preprocess, by FastDeploy's names (the
    # swap of batch_drop and is_block_step is in the printed buffer column).
    runner = {pre["rows"][n][0]: a for n, a in after.items()}
    mask_before = arrays(form, "update_attn_mask_offsets",
                         {n: v[1] for n, v in mask["rows"].items()})
    for n, (buffer, _, _) in mask["rows"].items():
        if buffer in runner:  # the mask op reads what the preprocess left there
            np.testing.assert_array_equal(mask_before[n].reshape(-1),
                                          runner[buffer].reshape(-1), err_msg=n)
    fed = int(after["seq_lens_this_time"][0])
    np.testing.assert_array_equal(mask_before["cu_seqlens_q"], [0, fed])
    np.testing.assert_array_equal(mask_before["ids_remove_padding"],
                                  after["draft_tokens"][0, :fed])
    returned, mask_after = model_mask(form, mask_before)
    cursor = int(mask_before["attn_mask_offsets_decoder"][0])
    rollback_before = int(mask_before["mask_rollback"][0]) if form in ("pr5245", "xpu") else \
        int(before["mask_rollback"][0])
    S0, S1 = int(before["seq_lens_decoder"][0]), int(after["seq_lens_decoder"][0])
    rollback_after = int(mask_before["mask_rollback"][0])
    if quantity(form, k) == "invariant":
        drift = (cursor - rollback_after - S1) - (cursor - rollback_before - S0)
    elif quantity(form, k) == "mask end":  # a text prompt: position p's true end is p + 1
        drift = int(returned[1]) - (S1 + 1)
    else:
        drift = S1 - (int(after["base_model_seq_lens_decoder"][0]) - int(after["accept_num"][0]))
    return drift, after, returned, mask_after


@pytest.mark.parametrize("form,role,k", DRIFTING)
def test_the_printed_drift_is_what_the_numpy_models_compute_on_the_printed_state(
        capsys, form, role, k):
    code, out, err = run(capsys, form, "--role", role, "-k", str(k))
    assert code == 1 and out.splitlines()[-1].startswith("FAILED: "), out
    assert "text prompt [11, 12, 13, 14] (mask offsets [0, 1, 2, 3])" in out
    drift, after, returned, mask_after = independent(form, role, k, out)
    assert drift != 0
    assert printed_drift(out) == drift
    found = calls(out)
    for n, (_, _, shown) in found["draft_model_preprocess"]["rows"].items():
        np.testing.assert_array_equal(np.array(shown), after[n], err_msg=n)
    for n, (_, _, shown) in found["update_attn_mask_offsets"]["rows"].items():
        np.testing.assert_array_equal(np.array(shown), mask_after[n], err_msg=n)
    np.testing.assert_array_equal(found["update_attn_mask_offsets"]["returned"], returned)


@pytest.mark.parametrize("form,role,k", [c for c in DRIFTING if c[2] == 2])
def test_the_state_is_one_a_form_without_the_drift_keeps_exact(capsys, form, role, k):
    """The rollback form's rules on the printed state keep the invariant and
    the alignment; where the state is FastDeploy's decode-node insert, so does
    FastDeploy's own op there (recompute_token_num = 0, its insert's). So the
    drift is the form's rule, not the state's."""
    _, out, _ = run(capsys, form, "--role", role, "-k", str(k))
    found = calls(out)
    pre, mask = found["draft_model_preprocess"]["rows"], found["update_attn_mask_offsets"]["rows"]
    state = {n: v[1] for n, v in pre.items()}
    state.setdefault("mask_rollback", mask["mask_rollback"][1])  # pr5245's op takes none
    cursor = mask["attn_mask_offsets_decoder"][1][0]
    if "[1] insert_tasks_v1" in out:
        n = 4  # FastDeploy's decode-node insert (9018ccf74, mtp.py lines 552-574)
        assert (state["seq_lens_decoder"], state["step_idx"], state["mask_rollback"],
                state["seq_lens_encoder"], cursor) == ([n], [1], [1], [0], n + 1)
        state["recompute_token_num"] = [0]
        control = "pr5738"
    elif state["seq_lens_decoder"] == [0] and state["stop_flags"] == [True]:
        # A draft parked by a block step: FastDeploy's kernel zeroed its
        # seq_lens_decoder, so the cursor invariant means nothing until it
        # resumes. The corrected form of the same signature, on the printed
        # state, re-syncs to the base model and gives the first token fed its
        # true end (a text prompt: KV position p ends at p + 1).
        s = arrays("corrected_pr5738", "draft_model_preprocess", state)
        reference.draft_model_preprocess_corrected(s, k, True, False, True)
        S = int(s["seq_lens_decoder"][0])
        assert S == int(s["base_model_seq_lens_decoder"][0]) - int(s["accept_num"][0]) > 0
        m = {n: v[1] for n, v in mask.items()}
        m["attn_mask_offsets_decoder"], m["mask_rollback"] = [cursor], s["mask_rollback"].tolist()
        m["seq_lens_decoder"] = [S]
        m["seq_lens_this_time"] = s["seq_lens_this_time"].tolist()
        returned = reference.update_attn_mask_offsets_corrected(
            arrays("corrected_pr5738", "update_attn_mask_offsets", m))
        assert int(returned[1]) == S + 1
        return
    else:
        control = "rollback"
    names = FORMS[control]["draft_model_preprocess"].input_names
    s = arrays(control, "draft_model_preprocess", {n: state[n] for n in names})
    got = model_preprocess(control, s, k)
    assert cursor - int(s["mask_rollback"][0]) - int(s["seq_lens_decoder"][0]) == 0
    assert cursor - int(got["mask_rollback"][0]) - int(got["seq_lens_decoder"][0]) == 0
    assert int(got["seq_lens_decoder"][0]) == (int(got["base_model_seq_lens_decoder"][0])
                                               - int(got["accept_num"][0]))


@pytest.mark.parametrize("form,role,k", EXACT)
def test_an_exact_row_has_nothing_to_reproduce(capsys, form, role, k):
    code, out, err = run(capsys, form, "--role", role, "-k", str(k))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 2 and lines[-1].startswith("OK: nothing to reproduce"), out
    assert "drift:" not in out and "FAILED" not in out


def test_the_defaults_are_the_mixed_node_and_k_2(capsys):
    code, out, _ = run(capsys, "pr5738")
    assert code == 1 and out.startswith("reproduce: the pr5738 form, role mixed, k 2: ")
    code, out, _ = run(capsys, "rollback")
    assert code == 0 and "the rollback form's mixed k = 2 row" in out


def test_every_form_has_a_case_and_the_cases_are_the_drifting_rows():
    assert list(reproduce.CASES) == list(FORMS)
    assert [c for c in ALL if reproduce.case_for(*c)] == DRIFTING


def test_the_drifting_rows_are_those_of_the_verdict_table_in_docs_results():
    """Each row the table holds drifts (disagreements, violations or writes
    outside a row) exactly where this test's list says."""
    rows = re.findall(r"^\| (\w+) \| (mixed|pd) \| (\d) \| \d+ \| (\d+) \| ([^|]+) \| (\d+) \|$",
                      RESULTS.read_text(), re.M)
    assert len(rows) >= 32, rows
    for form, role, k, disagreements, violations, outside in rows:
        drifts = disagreements != "0" or violations.strip() != "0" or outside != "0"
        assert drifts == ((form, role, int(k)) in DRIFTING), (form, role, k)


@pytest.mark.parametrize("argv", [[], ["nope"], ["pr5738", "-k", "0"], ["pr5738", "-k", "5"],
                                  ["pr5738", "-k", "x"], ["pr5738", "--role", "prefill"],
                                  ["pr5738", "--bogus"], ["pr5738", "shadow"],
                                  ["shadow", "--chunk", "0"], ["pr5738", "--chunk", "-3"],
                                  ["pr5738", "--chunk", "33"], ["pr5738", "--chunk", "x"],
                                  ["pr5738", "--chunk"]])
def test_a_bad_argument_is_one_line_and_exit_2(capsys, argv):
    """(An option no command has is the top-level parser's to refuse, as for
    every command.)"""
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("python -m fastdeploy_mtp"), err
    assert (argv[-1] if argv else "FORM") in err, err


# --chunk N: FastDeploy's chunked prefill. Where each form's kernel puts the
# base model's token at a prefill's last draft input (file, lines at the
# commit; read there): a mixed node's branch and the prefill node's.
GPU = "custom_ops/gpu_ops/speculate_decoding/draft_model/draft_model_preprocess.cu"
XPU = "custom_ops/xpu_ops/src/plugin/src/wrapper/mtp_wrapper/draft_model_preprocess.cpp"
PR5738_KERNEL = {"mixed": ("9018ccf74", GPU, "204-213"), "pd": ("9018ccf74", GPU, "99-111")}
CHUNK_CAUSE = {"rollback": PR5738_KERNEL, "recompute": PR5738_KERNEL, "pr5738": PR5738_KERNEL,
               "pr6403": PR5738_KERNEL,
               "pr5245": {"mixed": ("ba915e03e", GPU, "200-213"), "pd": ("ba915e03e", GPU, "97-109")},
               "xpu": {"mixed": ("c29e86fc9", XPU, "145-158"), "pd": ("c29e86fc9", XPU, "94-106")},
               "shadow": {"mixed": ("c29e86fc9", GPU, "107-113"), "pd": ("c29e86fc9", GPU, "107-113")}}
# Every form, both roles (pd: the prefill node), k 1 and 2, a chunk of 1 to 4.
CHUNKED = [(f, r, k, 1 + (i % 4)) for i, (f, r, k) in enumerate(
    (f, r, k) for f in CHUNK_CAUSE for r in verdict.ROLES for k in (1, 2))]
# A buffer's row without an op's index: an insert's, or the base model's.
BUFFER_ROW = re.compile(r'^    ((?:model_inputs|target_model_inputs)\["\w+"\])\s+(\[.*?\])'
                        r'(?: -> (\[.*\])| \(unchanged\))$')


def buffer_rows(out, start, stop):
    """{buffer: (before, after)} of the unindexed rows between the line that
    starts with `start` and the next that starts with `stop`."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    rows = {}
    for line in lines[first + 1:]:
        if line.startswith(stop):
            break
        m = BUFFER_ROW.match(line)
        if m:
            before = ast.literal_eval(m.group(2))
            rows[m.group(1)] = (before, before if m.group(3) is None else
                                ast.literal_eval(m.group(3)))
    return rows


@pytest.mark.parametrize("form,role,k,chunk", CHUNKED)
def test_a_chunk_s_last_draft_input_is_the_base_model_s_sample(capsys, form, role, k, chunk):
    """After the first chunk [0, N) of a 2N-token prompt, the draft's input at
    position N - 1 is the base model's sample (not output: its
    seq_lens_decoder N is short of the prompt), not the prompt's token N; the
    insert is FastDeploy's of a prefill task (mtp.py 9018ccf74:527-566), and
    every tensor the preprocess leaves is what the numpy model of the form
    computes on the printed state."""
    code, out, err = run(capsys, form, "--role", role, "-k", str(k), "--chunk", str(chunk))
    assert code == 1 and err == "" and out.splitlines()[-1].startswith("FAILED: "), out
    prompt = list(range(11, 11 + 2 * chunk))
    assert f"a text prompt of {2 * chunk} tokens {prompt} " in out
    # [1] the insert of the task [0, N): the chunk's tokens shifted by one,
    # encoder and this_time N from decoder 0, step_idx 0 (the prompt goes on),
    # the chunk's mask offsets and the cursor N - 1 + 1 (none in the shadow
    # form's GPU runner, c29e86fc9:516-521).
    ins = {n[len('model_inputs["'):-2]: v[1] for n, v in
           buffer_rows(out, "[1] insert_tasks_v1", "the base model").items()}
    before_ins = {n[len('model_inputs["'):-2]: v[0] for n, v in
                  buffer_rows(out, "[1] insert_tasks_v1", "the base model").items()}
    assert ins["input_ids"][0][:chunk - 1] == prompt[1:chunk]
    assert (ins["seq_lens_encoder"], ins["seq_lens_this_time"], ins["seq_lens_decoder"],
            ins["step_idx"]) == ([chunk], [chunk], [0], [0])
    assert ins["attn_mask_offsets_full"][0][:chunk] == list(range(chunk))
    assert ins["attn_mask_offsets_decoder"] == (before_ins["attn_mask_offsets_decoder"]
                                                if form == "shadow" else [chunk])
    assert (ins["stop_flags"], ins["batch_drop"]) == ([False], [False])
    # The base model after the chunk: one sample, lengths at the chunk's end.
    base = {n[len('target_model_inputs["'):-2]: v[1] for n, v in
            buffer_rows(out, "the base model", "[2] ").items()}
    sample = base["accept_tokens"][0][0]
    assert sample != prompt[chunk] and sample not in prompt
    assert (base["accept_num"], base["seq_lens_decoder"], base["seq_lens_encoder"],
            base["stop_flags"], base["step_idx"]) == ([1], [chunk], [0], [False], [1])
    assert "The runner does not output that sample" in out
    # [2] the raw preprocess on that state, against the numpy model.
    pre = calls(out)["draft_model_preprocess"]["rows"]
    for n, (buffer, shown, _) in pre.items():
        name = buffer.split('"')[1]
        held = base if buffer.startswith("target_") else ins
        if name in held and buffer != 'model_inputs["max_dec_len"]':
            assert shown == held[name], n  # the preprocess reads what [1] and the base left
    state = arrays(form, "draft_model_preprocess", {n: v[1] for n, v in pre.items()})
    after = model_preprocess(form, state, k, prefill_node=role == "pd")
    for n, (_, _, shown) in pre.items():
        np.testing.assert_array_equal(np.array(shown), after[n], err_msg=n)
    got = int(after["input_ids"][0, chunk - 1])
    assert got == sample != prompt[chunk]
    assert int(after["seq_lens_this_time"][0]) == chunk and int(after["seq_lens_decoder"][0]) == 0
    drift = [line for line in out.splitlines() if line.startswith("drift: ")]
    assert drift == [f"drift: input_ids[0, {chunk - 1}] = {got} where the prompt's token {chunk} "
                     f"({prompt[chunk]}) belongs: the draft computes KV position {chunk - 1} on "
                     f"the base model's sample, and the next chunk starts at {chunk}, so nothing "
                     "computes it again"], out
    commit, path, lines = CHUNK_CAUSE[form][role]
    causes = [line for line in out.splitlines() if line.startswith("cause: ")]
    assert len(causes) == 1 and causes[0].startswith(
        f"cause: FastDeploy {commit}, {path} lines {lines}: "), causes
    assert out.startswith(f"reproduce: the {form} form, role {role}, k {k}, chunk {chunk}: ")


def test_without_chunk_the_rows_are_reproduced_as_without_the_option(capsys):
    """--chunk changes nothing it is not given: the exact row stays exact."""
    code, out, _ = run(capsys, "shadow")
    assert code == 0 and "chunk" not in out
    code, out, _ = run(capsys, "pr5245", "--role", "pd")  # pd: the decode node
    assert code == 1 and "prefilled in chunks" not in out and "insert_tasks_v1 as FastDeploy " \
        "ba915e03e's decode node" in out


def test_a_chunk_out_of_range_says_the_range(capsys):
    code, out, err = run(capsys, "rollback", "--chunk", "33")
    assert code == 2 and out == ""
    assert "--chunk: must be within [1, 32]" in err and "got 33" in err, err


DRAFT_ROW = re.compile(r'(?<![\w])model_inputs\["(\w+)"\]\s+(\[.*?\])'
                       r'(?: -> (\[.*\])| \(unchanged\))$')
INVARIANT_NOTE = re.compile(r"^\s+invariant attn_mask_offsets_decoder - mask_rollback - "
                            r"seq_lens_decoder: (-?\d+) -> (-?\d+)$")


@pytest.mark.parametrize("form,role,k", [c for c in DRIFTING if c[2] == 2])
def test_each_printed_invariant_is_the_printed_tensors(capsys, form, role, k):
    """Every 'invariant ...: a -> b' a call's block prints is the cursor less
    the rollback less seq_lens_decoder of the draft's buffers that block
    prints, before and after the call (a buffer a call does not take keeps
    its value from the call before)."""
    _, out, _ = run(capsys, form, "--role", role, "-k", str(k))
    names = ("attn_mask_offsets_decoder", "mask_rollback", "seq_lens_decoder")
    # A buffer keeps its value up to the first call that prints it: its
    # value before that call is its value from the start.
    now, seen = {}, 0
    for line in out.splitlines():
        m = DRAFT_ROW.search(line)
        if m and m.group(1) in names:
            now.setdefault(m.group(1), ast.literal_eval(m.group(2))[0])
    block_before = {}
    for line in out.splitlines():
        if re.match(r"^\[\d+\] ", line):
            block_before = dict(now)
            continue
        m = DRAFT_ROW.search(line)
        if m and m.group(1) in names:
            before = ast.literal_eval(m.group(2))[0]
            after = before if m.group(3) is None else ast.literal_eval(m.group(3))[0]
            block_before[m.group(1)] = before
            now[m.group(1)] = after
            continue
        m = INVARIANT_NOTE.match(line)
        if m:
            a = (block_before["attn_mask_offsets_decoder"] - block_before["mask_rollback"]
                 - block_before["seq_lens_decoder"])
            b = now["attn_mask_offsets_decoder"] - now["mask_rollback"] - now["seq_lens_decoder"]
            assert (int(m.group(1)), int(m.group(2))) == (a, b), line
            seen += 1
    assert seen >= 1, out
