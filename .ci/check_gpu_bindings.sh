#!/usr/bin/env bash
# Compiles the Paddle bindings' CUDA branches (-DPADDLE_WITH_CUDA) for syntax
# only, against the headers of paddlepaddle 2.6.2, the GPU runtime of the test
# machine, so a GPU-only compile error shows up in CI without a GPU. (CPU
# Paddle 3.3's CUDA headers need cuBLAS headers this machine does not have.)
set -euo pipefail
cd "$(dirname "$0")/.."
hdr="${PADDLE26_HEADERS:-${TMPDIR:-/tmp}/fastdeploy_mtp_paddle26_include}"
if [ ! -d "$hdr/paddle" ]; then
  work="$(mktemp -d)"
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$work" "paddlepaddle==2.6.2"
  python3 - "$work" <<'PY'
import glob, sys, zipfile
work = sys.argv[1]
with zipfile.ZipFile(glob.glob(work + "/paddlepaddle-2.6.2-*.whl")[0]) as z:
    z.extractall(work + "/x", [n for n in z.namelist() if n.startswith("paddle/include/")])
PY
  mkdir -p "$(dirname "$hdr")"
  rm -rf "$hdr"
  mv "$work/x/paddle/include" "$hdr"
  rm -rf "$work"
fi
cuda="${CUDA_HOME:-/usr/local/cuda}"
py="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
for src in custom_ops/*_op.cc custom_ops/bench/bench_ops.cc; do
  g++ -std=c++17 -fsyntax-only -DPADDLE_WITH_CUDA -D_GLIBCXX_USE_CXX11_ABI=1 \
    -I"$hdr" -I"$hdr/third_party" -I"$py" -I"$cuda/include" -I"$cuda/include/cccl" \
    -Icustom_ops "$src"
  echo "GPU branch compiles: $src"
done
