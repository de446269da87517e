"""The forms of FastDeploy's ops: their tables, every form's ops in one
library and one process, and the choice of the process's form."""

import inspect

import numpy as np
import paddle
import pytest

from fastdeploy_mtp import forms, ops
from fastdeploy_mtp.buffers import tensors
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.signature import DEFAULT_FORM, FORMS, op_name

# FastDeploy's registration of its recompute form, as its source lists it.
FASTDEPLOY_RECOMPUTE_INPUTS = (
    "draft_tokens input_ids stop_flags seq_lens_this_time seq_lens_encoder seq_lens_decoder "
    "step_idx not_need_stop is_block_step batch_drop pre_ids mask_rollback recompute_token_num "
    "accept_tokens accept_num base_model_seq_lens_this_time base_model_seq_lens_encoder "
    "base_model_seq_lens_decoder base_model_step_idx base_model_stop_flags "
    "base_model_is_block_step base_model_draft_tokens").split()
FASTDEPLOY_RECOMPUTE_IN_PLACE = (
    "draft_tokens input_ids stop_flags seq_lens_this_time seq_lens_encoder seq_lens_decoder "
    "step_idx not_need_stop batch_drop pre_ids").split()


# FastDeploy's registration of develop's shadow form, as its source lists it.
FASTDEPLOY_SHADOW_INPUTS = (
    "draft_tokens input_ids stop_flags seq_lens_this_time seq_lens_encoder seq_lens_decoder "
    "step_idx not_need_stop pre_ids accept_tokens accept_num target_model_seq_lens_encoder "
    "target_model_seq_lens_decoder target_model_step_idx target_model_stop_flags max_dec_len "
    "target_model_draft_tokens").split()
FASTDEPLOY_SHADOW_IN_PLACE = FASTDEPLOY_SHADOW_INPUTS[:9]
# Its update_attn_mask_offsets, as its proposer calls it.
FASTDEPLOY_SHADOW_MASK_INPUTS = (
    "ids_remove_padding seq_lens_this_time seq_lens_encoder seq_lens_decoder cu_seqlens_q "
    "attn_mask_offsets_full is_block_step decode_states").split()


def test_the_shadow_tables_are_fastdeploy_s_registration():
    sig = FORMS["shadow"]["draft_model_preprocess"]
    assert list(sig.input_names) == FASTDEPLOY_SHADOW_INPUTS
    assert list(sig.output_names) == [f"{n}_out" for n in FASTDEPLOY_SHADOW_IN_PLACE]
    assert sig.inplace_map == {n: f"{n}_out" for n in FASTDEPLOY_SHADOW_IN_PLACE}
    assert [a.registration for a in sig.attrs] == ["num_model_step: int",
                                                   "is_splitwise_prefill: bool"]
    assert set(sig.written) - set(sig.declared) == {"target_model_draft_tokens"}
    assert sig.input("max_dec_len").dtype is np.int64
    mask = FORMS["shadow"]["update_attn_mask_offsets"]
    assert list(mask.input_names) == FASTDEPLOY_SHADOW_MASK_INPUTS
    assert mask.output_names == ("attn_mask_offsets", "decode_states_out")


def test_the_recompute_table_is_fastdeploy_s_registration():
    sig = FORMS["recompute"]["draft_model_preprocess"]
    assert list(sig.input_names) == FASTDEPLOY_RECOMPUTE_INPUTS
    assert list(sig.output_names) == [f"{n}_out" for n in FASTDEPLOY_RECOMPUTE_IN_PLACE]
    assert sig.inplace_map == {n: f"{n}_out" for n in FASTDEPLOY_RECOMPUTE_IN_PLACE}
    assert sig.attr_names == FORMS["rollback"]["draft_model_preprocess"].attr_names
    # Written all the same, as FastDeploy's kernel writes them.
    assert set(sig.written) - set(sig.declared) == {
        "is_block_step", "mask_rollback", "recompute_token_num", "base_model_draft_tokens"}


def test_the_pr5245_table_is_fastdeploy_s_registration_at_ba915e03e():
    """FastDeploy ba915e03e, draft_model_preprocess.cu lines 432-474: the 22
    tensors of 9018ccf74 less mask_rollback and recompute_token_num, the same
    ten in place, the same attributes."""
    sig = FORMS["pr5245"]["draft_model_preprocess"]
    dropped = ("mask_rollback", "recompute_token_num")
    assert list(sig.input_names) == [n for n in FASTDEPLOY_RECOMPUTE_INPUTS if n not in dropped]
    assert sig.inplace_map == {n: f"{n}_out" for n in FASTDEPLOY_RECOMPUTE_IN_PLACE}
    assert list(sig.output_names) == [f"{n}_out" for n in FASTDEPLOY_RECOMPUTE_IN_PLACE]
    assert sig.attr_names == FORMS["rollback"]["draft_model_preprocess"].attr_names
    assert set(sig.written) - set(sig.declared) == {"is_block_step", "base_model_draft_tokens"}
    # Its kernel reads base_model_seq_lens_this_time (the re-sync, lines 221-225).
    assert sig.input("base_model_seq_lens_this_time").access == "R"


@pytest.mark.parametrize("seed", range(4))
def test_the_pr6403_form_is_pr5738_s_preprocess_and_the_ten_tensor_mask_op(seed):
    """FastDeploy 2178f2829 changed update_attn_mask_offsets.cu's decode branch
    only (lines 68-75); its registration (lines 126-140) and the preprocess are
    9018ccf74's: the pr6403 form's preprocess leaves what the pr5738 form's
    does."""
    s = states.recompute_state(np.random.default_rng(seed), 16, num_model_step=3)
    attrs = dict(num_model_step=3, truncate_first_token=seed % 2 == 0, splitwise_prefill=False,
                 kvcache_scheduler_v1=seed < 2)
    after = {}
    for form in ("pr5738", "pr6403"):
        t = tensors(s, paddle.CPUPlace())
        forms.load(form).draft_model_preprocess(**t, **attrs)
        after[form] = {n: v.numpy() for n, v in t.items()}
    for n in s:
        np.testing.assert_array_equal(after["pr6403"][n], after["pr5738"][n], err_msg=n)
    a, b = FORMS["pr6403"]["update_attn_mask_offsets"], FORMS["rollback"]["update_attn_mask_offsets"]
    assert (a.input_names, a.output_names, a.inplace_map) == (b.input_names, b.output_names,
                                                             b.inplace_map)


def test_every_form_is_registered_under_its_own_names_in_one_library():
    lib = ops.load_library()
    names = {op_name(form, sig) for form, table in FORMS.items() for sig in table.values()}
    # One name an op of each form, but the op every form shares.
    assert len(names) == 2 * len(FORMS) + 1
    for name in names:
        assert callable(getattr(lib, name)), name
    # None is FastDeploy's own name: its library can be loaded beside ours.
    assert not hasattr(lib, "draft_model_preprocess")
    assert not hasattr(lib, "update_attn_mask_offsets")


def test_every_form_s_library_view_holds_its_own_raw_ops_under_fastdeploy_s_names():
    lib = ops.load_library()
    for form in FORMS:
        view = forms.load(form).library
        for name, sig in FORMS[form].items():
            assert getattr(view, name) is getattr(lib, op_name(form, sig))


def test_every_form_runs_in_this_one_process():
    # Each form's wrappers bind by their own table (the forms' own tests call
    # every form's ops in this process).
    for form in FORMS:
        with pytest.raises(TypeError, match="missing a required argument"):
            forms.load(form).draft_model_preprocess()
    assert ops.process_form() == DEFAULT_FORM
    assert ops.draft_model_preprocess is forms.load(DEFAULT_FORM).draft_model_preprocess


@pytest.mark.parametrize("form", ["recompute", "shadow"])
def test_the_form_variable_chooses_the_ops_module_s_wrappers(monkeypatch, form):
    monkeypatch.setenv("FASTDEPLOY_MTP_FORM", form)
    for name in FORMS[form]:
        assert getattr(ops, name) is getattr(forms.load(form), name)
    assert list(inspect.signature(ops.draft_model_preprocess).parameters) == \
        list(FORMS[form]["draft_model_preprocess"].input_names
             + FORMS[form]["draft_model_preprocess"].attr_names)


@pytest.mark.parametrize("bad", ["bogus", "Recompute"])
def test_an_unknown_form_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=f"unknown form '{bad}': the forms here are "
                                         + ", ".join(FORMS)):
        forms.load(bad)


def test_an_unknown_form_in_the_environment_is_refused(monkeypatch):
    monkeypatch.setenv("FASTDEPLOY_MTP_FORM", "nope")
    with pytest.raises(ValueError, match="FASTDEPLOY_MTP_FORM='nope'"):
        ops.process_form()
    with pytest.raises(ValueError, match="FASTDEPLOY_MTP_FORM='nope'"):
        ops.draft_model_preprocess
