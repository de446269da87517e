"""The guarded CPU driver (tests/guarded.py) is only worth the tests that use
it as a device if its guard holds and its faults are reported; and the calls
that touch least memory are where a guard matters most."""

import signal
import subprocess

import numpy as np
import pytest

import guarded
from fastdeploy_mtp.harness import states
from fastdeploy_mtp.signature import UPDATE_ATTN_MASK_OFFSETS
from helpers import GUARDED, assert_mask_like_reference


@pytest.mark.parametrize("where", ["past", "before"])
def test_the_byte_past_or_before_a_tensor_faults(where):
    r = subprocess.run([str(guarded.executable()), where], capture_output=True, timeout=60)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)


def test_a_driver_that_dies_is_reported_with_its_words():
    s = states.mask_state(np.random.default_rng(0), 2)
    with pytest.raises(guarded.GuardedFault, match=r"(?s)exit code 2.*unknown op 3"):
        guarded._SERVER.ask(b"\x03" + b"\x00" * 7, UPDATE_ATTN_MASK_OFFSETS.input_names,
                            "a call of no op")
    # The next call starts a driver of its own.
    assert_mask_like_reference(s, GUARDED)


def _no_tokens(bsz, skipped):
    s = states.mask_state(np.random.default_rng(bsz), bsz)
    s["seq_lens_this_time"][:] = 0
    s["cu_seqlens_q"][:] = 0
    s["ids_remove_padding"] = np.zeros(0, np.int64)
    s["is_block_step"][:bsz] = skipped
    return s


@pytest.mark.parametrize("skipped", [False, True])
def test_a_mask_call_with_no_tokens_touches_no_output(skipped):
    """attn_mask_offsets has no memory at all: the output's zeroing must not
    reach it (memset of 0 bytes at the guard), decodes of no tokens write no
    entry, and the cursors still consume their rollbacks as the reference
    says."""
    s = _no_tokens(5, skipped)
    out = assert_mask_like_reference(s, GUARDED)
    assert out.shape == (0,)
