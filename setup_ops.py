"""Build and install the op library: ``python setup_ops.py install``.

With CPU Paddle it compiles the CPU path; with paddlepaddle-gpu it adds the
CUDA kernels (C++17): code for the visible GPUs' archs (for sm_80, 86, 89, 90
and 100 where none is visible), or for those FASTDEPLOY_MTP_CUDA_ARCH lists
("8.0 9.0", "80;90"), plus the highest one's PTX. The result is the
importable module ``fastdeploy_mtp_ops`` that ``fastdeploy_mtp.ops`` loads.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from paddle.utils.cpp_extension import CppExtension, CUDAExtension, setup  # noqa: E402

from fastdeploy_mtp import _build  # noqa: E402

cuda = _build.with_cuda()
try:
    flags = _build.compile_flags(cuda)
except _build.BuildError as e:  # a bad setting: its one line, not a traceback
    sys.exit(f"setup_ops.py: {e}")
# setuptools wants paths relative to the directory it runs in; running in
# custom_ops/ also keeps the package metadata of pyproject.toml out of this build.
os.chdir(_build.SOURCE_DIR)
extension = (CUDAExtension if cuda else CppExtension)(
    sources=[os.path.basename(s) for s in _build.sources(cuda)],
    extra_compile_args=flags,
    extra_link_args=_build.link_flags(cuda),
)
if cuda:
    sass, ptx = _build.cuda_archs()
    target = ("CPU and CUDA (" + ", ".join(f"sm_{a}" for a in sass)
              + "; PTX " + ", ".join(f"compute_{a}" for a in ptx) + ")")
else:
    target = "CPU"
print(f"building {_build.MODULE_NAME} for {target}", flush=True)
setup(name=_build.MODULE_NAME, ext_modules=extension)
if "install" in sys.argv:
    # Tells fastdeploy_mtp._library._installed_is_current, in this checkout,
    # that the install is current.
    _build.write_install_stamp(cuda)
