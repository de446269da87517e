#!/usr/bin/env bash
# The CUDA path on a real GPU, in one go, with a short report.
#
# Run on the device machine from the repo root, with paddlepaddle-gpu on
# PYTHONPATH (../shared/gpu/README.md) and, in .whl/, wheels of pytest and
# hypothesis if the machine lacks them. Writes logs and report.md to $OUT
# (default ./gpu-report). Steps: build and install the CUDA library, the
# registration check, the whole test suite (every differential and bad-input
# test runs on the GPU too), compute-sanitizer memcheck and racecheck over a
# fuzz run, and the GPU benchmark. Exits non-zero if any step failed.
set -u
OUT="${OUT:-$PWD/gpu-report}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    > "$OUT/pip.log" 2>&1 || { echo "wheel install failed"; cat "$OUT/pip.log"; }
fi
report="$OUT/report.md"
failed=0
step() {  # step NAME LOG COMMAND...
  local name="$1" log="$OUT/$2"; shift 2
  local t0=$SECONDS
  "$@" > "$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || failed=1
  printf '| %s | %s | %ss | %s |\n' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED ($rc)")" \
    "$((SECONDS - t0))" "$(grep -E "$PATTERN" "$log" | tail -n 1 | tr '|' '/')" >> "$report"
  echo "== $name: rc=$rc"; tail -n 5 "$log"
}
{
  echo "# GPU check, $(date -u +%F' '%T) UTC"
  echo
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/GPU: /'
  python3 -c "import paddle; print('paddle', paddle.__version__, 'cuda', paddle.version.cuda())" 2>/dev/null
  echo
  echo "| step | result | time | last line |"
  echo "|---|---|---|---|"
} > "$report"

PATTERN="building|error" step "build (setup_ops.py install)" build.log python3 setup_ops.py install
smoke() {  # an op's error path: must raise, not crash
  python3 -c "
import numpy as np, paddle
from fastdeploy_mtp import ops, states
s = states.mask_state(np.random.default_rng(1), 4)
s['seq_lens_this_time'][:] = -1; s['is_block_step'][:] = False; s['seq_lens_decoder'][:] = 3
try:
    ops.update_attn_mask_offsets(**{k: paddle.to_tensor(v, place=paddle.CUDAPlace(0)) for k, v in s.items()})
except ops.BadInputError as e:
    print('raised:', e)
"
}
PATTERN="raised" step "error path" smoke.log smoke
if ! grep -q raised "$OUT/smoke.log"; then  # diagnose: which compilers, which libstdc++
  { which -a g++ gcc; g++ --version | head -1; ls /usr/bin/g++* /usr/bin/gcc* 2>&1
    ldd "$(python3 -c 'import importlib.util as u; print(u.find_spec("fastdeploy_mtp_ops").origin)')" | grep -i "stdc\|gcc"
  } > "$OUT/compilers.log" 2>&1
  cat "$OUT/compilers.log"
fi
PATTERN="matches|difference" step "registration check" check.log python3 -m fastdeploy_mtp check
PATTERN="passed|failed" step "pytest (CPU and GPU)" pytest.log python3 -m pytest -q -p no:cacheprovider tests
PATTERN="ERROR SUMMARY|gpu_fuzz" step "memcheck over fuzz" memcheck.log \
  compute-sanitizer --tool memcheck --error-exitcode 3 python3 tests/gpu_fuzz.py --iterations 40
PATTERN="ERROR SUMMARY|gpu_fuzz" step "racecheck over fuzz" racecheck.log \
  compute-sanitizer --tool racecheck --error-exitcode 3 python3 tests/gpu_fuzz.py --iterations 10 --max-bsz 4096
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  PATTERN="." step "benchmark vs numpy" bench.log python3 -m fastdeploy_mtp bench --device gpu
  PATTERN="." step "benchmark vs floor and baseline" bench_gpu.log python3 -m fastdeploy_mtp bench-gpu
  for b in bench bench_gpu; do
    { echo; grep -v -i "warn\|^I[0-9]\|^W[0-9]\|INFO\|Compiling" "$OUT/$b.log"; } >> "$report"
  done
fi
for tool in memcheck racecheck; do
  echo "$tool: $(grep -m1 'ERROR SUMMARY' "$OUT/$tool.log")" >> "$report"
done
cat "$report"
exit $failed
