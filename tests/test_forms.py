"""Choosing a form of FastDeploy's ops: the tables, the choice, and each
other form's own tests run in a process of that form."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fastdeploy_mtp import _build, forms, ops
from fastdeploy_mtp.signature import DEFAULT_FORM, FORMS

ROOT = Path(__file__).resolve().parent.parent

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


def test_the_forms_register_the_same_ops_each_with_its_own_tables():
    a, b, c = FORMS["rollback"], FORMS["recompute"], FORMS["shadow"]
    assert list(a) == list(b) == list(c)
    assert a["update_attn_mask_offsets"] is b["update_attn_mask_offsets"]
    assert c["update_attn_mask_offsets"] is not a["update_attn_mask_offsets"]
    assert len({id(f["draft_model_preprocess"]) for f in (a, b, c)}) == 3
    assert a["raise_pending_errors"] is b["raise_pending_errors"] is c["raise_pending_errors"]
    assert tuple(_build.FORM_NAMES) == tuple(FORMS) and _build.DEFAULT_FORM == DEFAULT_FORM


def test_this_process_uses_the_default_form():
    assert ops.process_form() == DEFAULT_FORM
    with pytest.raises(RuntimeError, match="FASTDEPLOY_MTP_FORM=recompute"):
        ops.load_library("recompute")
    with pytest.raises(RuntimeError, match="process of its own"):
        forms.load("recompute")
    assert forms.load(DEFAULT_FORM).library is ops.load_library()


@pytest.mark.parametrize("bad", ["bogus", "Recompute"])
def test_an_unknown_form_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=f"unknown form '{bad}'.*rollback, recompute, shadow"):
        forms.load(bad)
    with pytest.raises(ValueError, match="unknown form"):
        _build.module_name(bad)


def test_an_unknown_form_in_the_environment_is_refused(monkeypatch):
    monkeypatch.setattr(ops, "_loaded_form", None)
    monkeypatch.setenv("FASTDEPLOY_MTP_FORM", "nope")
    with pytest.raises(ValueError, match="FASTDEPLOY_MTP_FORM='nope'"):
        ops.process_form()


def test_each_form_has_its_own_library_and_build():
    assert _build.module_name("rollback") == "fastdeploy_mtp_ops"
    assert _build.module_name("recompute") == "fastdeploy_mtp_ops_recompute"
    assert _build.form_flags("rollback") == []
    assert _build.form_flags("recompute") == ["-DMTP_FORM_RECOMPUTE"]
    assert _build.module_name("shadow") == "fastdeploy_mtp_ops_shadow"
    assert _build.form_flags("shadow") == ["-DMTP_FORM_SHADOW"]
    hashes = {_build.source_hash(False, form=f) for f in _build.FORM_NAMES}
    assert len(hashes) == len(_build.FORM_NAMES)


@pytest.mark.parametrize("form", ["recompute", "shadow"])
def test_each_form_s_tests_pass_in_a_process_of_that_form(form):
    env = dict(os.environ, FASTDEPLOY_MTP_FORM=form)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / f"test_form_{form}.py")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    assert " passed" in tail and "skipped" not in tail.splitlines()[-1], tail
