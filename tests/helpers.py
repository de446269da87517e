"""The tests' shared core: the devices, a numpy state as tensors and back, the
op and the numpy reference run on a state, and the checks that two states are
equal or a state unchanged. By concern, beside it: bad_states.py (corrupted
states and how op and reference end on them), raw_op.py (the raw registered
ops and their refusals), fastdeploy_forms.py (the forms that run FastDeploy's
kernels and the models they are held to), case_states.py (states made for one
case) and cpp_harness.py (the C++ harnesses' build)."""

from __future__ import annotations

import os
import sys

import numpy as np
import paddle

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastdeploy_mtp import ops, reference  # noqa: E402
from fastdeploy_mtp.buffers import tensors  # noqa: E402
from fastdeploy_mtp.signature import DRAFT_MODEL_PREPROCESS, UPDATE_ATTN_MASK_OFFSETS  # noqa: E402


CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# A sitecustomize.py that makes `import paddle` fail as it does where Paddle is
# not installed, in every process that starts with its folder on its path.
NO_PADDLE = """\
import importlib.abc
import sys


class NoPaddle(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "paddle" or name.startswith("paddle."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoPaddle())
"""


def child_env(*front: str, **variables: str) -> dict:
    """The environment of a child process that imports this checkout's
    fastdeploy_mtp: the folders `front`, then the checkout, first on
    PYTHONPATH, and the parent's PYTHONPATH after them, never dropped (Paddle
    may come from it, as on a machine whose paddlepaddle-gpu is not
    installed into this Python). `variables` are set on top; a value of None
    removes the variable."""
    env = dict(os.environ)
    path = [*front, CHECKOUT, *env.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in path if p))
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def gpu_available() -> bool:
    return paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0


DEVICES = ["cpu"] + (["gpu"] if gpu_available() else [])
# The CPU driver with a guard page on each side of every tensor (tests/guarded.py):
# its "tensors" are a state's numpy arrays, and call_op runs it. It comes first,
# so that a write outside a tensor faults before a Paddle tensor hides it.
GUARDED = "guarded"
WITH_GUARDED = [GUARDED] + DEVICES


def place_of(device: str):
    """"cpu", "gpu" (gpu:0) or "gpu:N"."""
    if device == "cpu":
        return paddle.CPUPlace()
    return paddle.CUDAPlace(int(device.partition(":")[2] or 0))


def to_tensors(state, device="cpu", host_flag=True):
    """Paddle tensors of a numpy state on `device` ("cpu", "gpu" or "gpu:N"),
    or copies of its arrays for GUARDED. not_need_stop stays on the CPU
    unless host_flag is False. Only copies: Paddle's own GPU kernels are not
    used."""
    if device == GUARDED:
        return {k: v.copy() for k, v in state.items()}
    return tensors(state, place_of(device), flag_on_gpu=not host_flag)


def to_numpy(tensors):
    return {k: v if isinstance(v, np.ndarray) else v.numpy() for k, v in tensors.items()}


def call_op(sig, t, attrs=None):
    """Op `sig` on `t` (to_tensors' result, of any device) with `attrs`: its
    wrapper in fastdeploy_mtp.ops, or the guarded driver for numpy arrays.
    Returns the op's result as a numpy array (None for preprocess)."""
    attrs = attrs or {}
    if all(isinstance(v, np.ndarray) for v in t.values()):
        import guarded

        return guarded.call(sig, t, attrs)
    out = getattr(ops, sig.name)(**t, **attrs)
    return None if out is None else out.numpy()


def run_preprocess_op(state, attrs, device="cpu"):
    """Runs the op; returns the state after it (numpy)."""
    t = to_tensors(state, device)
    call_op(DRAFT_MODEL_PREPROCESS, t, attrs)
    return to_numpy(t)


def run_preprocess_ref(state, attrs):
    s = {k: v.copy() for k, v in state.items()}
    reference.draft_model_preprocess(s, **attrs)
    return s


def run_mask_op(state, device="cpu"):
    t = to_tensors(state, device)
    out = call_op(UPDATE_ATTN_MASK_OFFSETS, t)
    return out, to_numpy(t)


def run_mask_ref(state):
    s = {k: v.copy() for k, v in state.items()}
    out = reference.update_attn_mask_offsets(s)
    return out, s


def assert_states_equal(got, want, context=""):
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{context} field {name}")


def assert_mask_like_reference(state, device="cpu", context=""):
    """update_attn_mask_offsets on `device` leaves its output and every tensor
    as the numpy reference does; returns the reference's output."""
    want_out, want = run_mask_ref(state)
    got_out, got = run_mask_op(state, device)
    np.testing.assert_array_equal(got_out, want_out, err_msg=f"{context} attn_mask_offsets")
    assert_states_equal(got, want, context)
    return want_out


def preprocess_attrs(k, truncate=False, splitwise=False, v1=False):
    return dict(num_model_step=k, truncate_first_token=truncate, splitwise_prefill=splitwise,
                kvcache_scheduler_v1=v1)


def assert_unchanged(tensors, before):
    """Every tensor holds exactly its old dtype and bytes (a refused call)."""
    after = to_numpy(tensors)
    for name, arr in before.items():
        assert after[name].dtype == arr.dtype and after[name].tobytes() == arr.tobytes(), name


def sim_args(**kw):
    """The simulator's command-line defaults, with `kw` set (for tests)."""
    import argparse

    from fastdeploy_mtp.harness import simulate_cli

    p = argparse.ArgumentParser()
    simulate_cli.add_arguments(p)
    a = p.parse_args([])
    for k, v in kw.items():
        setattr(a, k, v)
    return a


def entry_point_folder(folder) -> str:
    """Writes into `folder` a dist-info that makes pyproject.toml's entry
    points of FastDeploy's plugin group visible to importlib.metadata, and
    returns the folder: a child given it on PYTHONPATH finds our plugin as
    FastDeploy does, installed or not (where the checkout and Paddle come
    from PYTHONPATH, nothing installs it)."""
    import re
    from pathlib import Path

    group = "fastdeploy.model_register_plugins"
    text = (Path(CHECKOUT) / "pyproject.toml").read_text()
    header = f'[project.entry-points."{group}"]'
    assert header in text, f"pyproject.toml has no {header}"
    body = text.split(header, 1)[1].split("\n[", 1)[0]
    lines = [ln for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    pairs = [re.fullmatch(r'\s*([\w.-]+)\s*=\s*"([^"]+)"\s*', ln) for ln in lines]
    assert all(pairs), f"unexpected lines under {header}: {lines}"
    info = Path(folder) / "fastdeploy_mtp-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fastdeploy_mtp\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        f"[{group}]\n" + "".join(f"{m.group(1)} = {m.group(2)}\n" for m in pairs))
    return str(folder)
