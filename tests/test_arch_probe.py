"""Clusters and programmatic dependent launches where the kernel code that runs
has them, on a real GPU (tests/arch_probe.cu): the op library's kernels built
with plain nvcc as compute_80 PTX alone (an sm_90 device JIT-compiles it, with
no cluster code and no wait for the previous kernel) and for the library's own
archs, each asked what it launches, launched at every scope, and raced
against a writer that lets the next kernel launch early. GPU only."""

import subprocess
from pathlib import Path

import pytest

from fastdeploy_mtp import _build
from helpers import gpu_available

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs Paddle with CUDA and a GPU"),
              pytest.mark.skipif(_build._nvcc() is None, reason="needs nvcc")]

REPO = Path(__file__).resolve().parent.parent
# The late writer lets the next kernel launch early wherever the device can.
WRITER = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
          "-gencode", "arch=compute_90,code=compute_90"]


def _nvcc(flags, *args):
    r = subprocess.run([_build._nvcc(), "-std=c++17", "-O3", *flags, f"-I{REPO / 'custom_ops'}",
                        *map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="module")
def writer(tmp_path_factory):
    out = tmp_path_factory.mktemp("writer") / "bench_kernels.o"
    _nvcc(WRITER, "-c", REPO / "custom_ops" / "bench" / "bench_kernels.cu", "-o", out)
    return out


BUILDS = {"compute_80 PTX": ([], [80])}  # (SASS archs, PTX archs)


@pytest.fixture(scope="module", params=["compute_80 PTX", "the library's archs"])
def probe(request, writer, tmp_path_factory):
    sass, ptx = BUILDS.get(request.param) or _build.cuda_archs()
    flags = ([f for a in sass for f in ("-gencode", f"arch=compute_{a},code=sm_{a}")]
             + [f for a in ptx for f in ("-gencode", f"arch=compute_{a},code=compute_{a}")])
    d = tmp_path_factory.mktemp("probe")
    _nvcc(flags, "-c", REPO / "tests" / "arch_probe.cu", "-o", d / "probe.o")
    _nvcc(flags, d / "probe.o", writer, "-o", d / "probe")
    return _image_arch(sass, ptx, _device_arch()), d / "probe"


def _device_arch() -> int:
    import paddle

    major, minor = paddle.device.cuda.get_device_capability(0)
    return major * 10 + minor


def _image_arch(sass, ptx, device):
    """The code the CUDA runtime loads from a build of `sass` and `ptx` on a
    device of arch `device`: SASS of its major arch and no newer minor, else
    the newest PTX it can JIT-compile. The arch that code was compiled for."""
    same_major = [a for a in sass if a // 10 == device // 10 and a <= device]
    if same_major:
        return max(same_major)
    return max(a for a in ptx if a <= device)


def _run(exe, *args):
    r = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_the_launcher_takes_clusters_and_early_launches_only_where_the_code_has_them(probe):
    """The probe's own checks pass, and the image it reports is the one the
    build should load (compute_80 PTX: arch 80 however new the device, since
    the driver JIT-compiles it; it has neither clusters nor the wait)."""
    image, exe = probe
    rc, out = _run(exe)
    assert rc == 0 and out.endswith("ok\n"), out
    facts = out.splitlines()[0]
    assert f"kernel image: PTX {image}," in facts, facts
    clusters = _device_arch() >= 90 and image >= 90
    assert facts.endswith(f"launches: {int(clusters)}"), facts


def test_a_cluster_of_code_without_clusters_fails(probe):
    """Why the launcher asks the kernel image, not the device: launched as a
    cluster anyway, code compiled without clusters traps (or the launch is
    refused, on a device without them)."""
    image, exe = probe
    rc, out = _run(exe, "cluster")
    if _device_arch() >= 90 and image >= 90:
        assert rc == 0 and "cluster ran" in out, out
    else:
        assert rc != 0 and "cluster failed" in out, out
