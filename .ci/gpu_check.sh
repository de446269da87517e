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
PATTERN="matches|difference" step "registration check" check.log python3 -m fastdeploy_mtp check
PATTERN="passed|failed" step "pytest (CPU and GPU)" pytest.log python3 -m pytest -q -p no:cacheprovider tests
PATTERN="ERROR SUMMARY|gpu_fuzz" step "memcheck over fuzz" memcheck.log \
  compute-sanitizer --tool memcheck --error-exitcode 3 python3 tests/gpu_fuzz.py --iterations 40
PATTERN="ERROR SUMMARY|gpu_fuzz" step "racecheck over fuzz" racecheck.log \
  compute-sanitizer --tool racecheck --error-exitcode 3 python3 tests/gpu_fuzz.py --iterations 10 --max-bsz 4096
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  PATTERN="." step "benchmark" bench.log python3 -m fastdeploy_mtp bench --device gpu
  { echo; echo '```'; cat "$OUT/bench.log" | grep -v -i "warn\|^I[0-9]\|^W[0-9]"; echo '```'; } >> "$report"
fi
for tool in memcheck racecheck; do
  echo "$tool: $(grep -m1 'ERROR SUMMARY' "$OUT/$tool.log")" >> "$report"
done
cat "$report"
exit $failed
