"""Build and install the op library: ``python setup_ops.py install``.

With CPU Paddle it compiles the CPU path; with paddlepaddle-gpu it adds the
CUDA kernels (C++17, sm_90 code plus PTX). The result is the importable module
``fastdeploy_mtp_ops`` that ``fastdeploy_mtp.ops`` loads.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from paddle.utils.cpp_extension import CppExtension, CUDAExtension, setup  # noqa: E402

from fastdeploy_mtp import _build  # noqa: E402

cuda = _build.with_cuda()
flags = _build.compile_flags(cuda)
# setuptools wants paths relative to the directory it runs in; running in
# custom_ops/ also keeps the package metadata of pyproject.toml out of this build.
os.chdir(_build.SOURCE_DIR)
extension = (CUDAExtension if cuda else CppExtension)(
    sources=[os.path.basename(s) for s in _build.sources(cuda)],
    extra_compile_args=flags,
    extra_link_args=_build.link_flags(cuda),
)
print(f"building {_build.MODULE_NAME} for {'CPU and CUDA' if cuda else 'CPU'}", flush=True)
setup(name=_build.MODULE_NAME, ext_modules=extension)
if "install" in sys.argv:
    # Tells fastdeploy_mtp.ops, in this checkout, that the install is current.
    _build.write_install_stamp(cuda)
