#!/usr/bin/env bash
# Compiles the Paddle bindings' CUDA branches (-DPADDLE_WITH_CUDA) for syntax
# only, against the headers of both Paddles the ops are built with: 2.6.2
# (the GPU runtime that runs on the test GPU) and the installed 3.x (the one
# FastDeploy runs on), so a GPU-only compile error shows up in CI without a
# GPU. Paddle 3's CUDA headers include cuBLAS, cuDNN, cuFFT, cuRAND, cuSOLVER
# and cuSPARSE headers: their include/ folders (about 4.5 MB) are taken once
# from the nvidia-*-cu12 wheels and cached, like Paddle 2.6.2's headers.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${TMPDIR:-/tmp}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
py="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"

# wheel_includes DEST PATTERN SPEC...: extract the files matching PATTERN from
# the wheels of SPEC... into DEST (once).
wheel_includes() {
  local dest="$1" pattern="$2"; shift 2
  [ -d "$dest" ] && return 0
  local work
  work="$(mktemp -d)"
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$work" "$@"
  python3 - "$work" "$pattern" "$work/x" <<'PY'
import glob, re, sys, zipfile
work, pattern, out = sys.argv[1:]
for wheel in glob.glob(work + "/*.whl"):
    with zipfile.ZipFile(wheel) as z:
        z.extractall(out, [n for n in z.namelist() if re.match(pattern, n)])
PY
  mkdir -p "$(dirname "$dest")"
  rm -rf "$dest"
  mv "$work/x" "$dest"
  rm -rf "$work"
}

compile_all() {  # compile_all LABEL FLAGS...
  local label="$1"; shift
  for src in custom_ops/*.cc custom_ops/bench/bench_ops.cc; do
    g++ -std=c++17 -fsyntax-only -DPADDLE_WITH_CUDA -D_GLIBCXX_USE_CXX11_ABI=1 "$@" \
      -I"$py" -I"$cuda/include" -I"$cuda/include/cccl" -Icustom_ops "$src"
    echo "GPU branch compiles ($label): $src"
  done
}

# paddlepaddle 2.6.2
p26="$cache/fastdeploy_mtp_paddle262_headers"
wheel_includes "$p26" "paddle/include/" "paddlepaddle==2.6.2"
compile_all "paddle 2.6.2" -DFASTDEPLOY_MTP_PADDLE_MAJOR=2 -I"$p26/paddle/include" \
  -I"$p26/paddle/include/third_party"

# the installed paddlepaddle 3.x, with the CUDA libraries' headers
version="$(python3 -c 'import paddle; print(paddle.__version__)' 2>/dev/null)"
nv="$cache/fastdeploy_mtp_nvidia_cu12_include"
wheel_includes "$nv" "nvidia/[a-z]+/include/" nvidia-cublas-cu12 nvidia-cudnn-cu12 \
  nvidia-cufft-cu12 nvidia-curand-cu12 nvidia-cusolver-cu12 nvidia-cusparse-cu12
flags=(-DFASTDEPLOY_MTP_PADDLE_MAJOR="${version%%.*}")
while read -r d; do flags+=(-I"$d"); done < <(python3 -c '
from paddle.utils.cpp_extension.extension_utils import find_paddle_includes
print("\n".join(find_paddle_includes()))' 2>/dev/null)
for d in "$nv"/nvidia/*/include; do flags+=(-I"$d"); done
compile_all "paddle $version" "${flags[@]}"
