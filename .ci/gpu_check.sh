#!/usr/bin/env bash
# The CUDA path on a real GPU, in one go, with a short report.
#
# Run on the device machine from the repo root, with paddlepaddle-gpu on
# PYTHONPATH (paddlepaddle-gpu 2.6.2 runs there; Paddle's own GPU kernels need
# not) and, in .whl/, wheels of what the
# machine lacks (hypothesis). Writes report.md and gpu_check.log to $OUT
# (default ./gpu-report). Steps: build and install the CUDA library (and prove
# its error path raises rather than crashes), the registration check, the
# whole test suite (every differential and bad-input test runs on the GPU
# too), compute-sanitizer memcheck, racecheck and synccheck over a fuzz run, the
# simulator's closed loop with the ops on the GPU, and the benchmarks. Exits
# non-zero if any step failed. SKIP_PYTEST=1 skips the test suite (to run it
# in a call of its own; PYTEST_PARTS, default 12, sets how many processes run
# it side by side), SKIP_BENCH=1 the benchmarks,
# SKIP_NUMPY_BENCH=1 the one against the numpy reference; BENCH_ROUNDS sets
# bench-gpu's interleaved rounds (default 7); FUZZ_SEED gives the sanitizers'
# fuzz runs other states than the default seed's (gpu_fuzz.py --seed).
# ARCH80=1 adds, at the end, the library built as FASTDEPLOY_MTP_CUDA_ARCH=8.0
# (sm_80 code and compute_80 PTX, which an sm_90 GPU JIT-compiles: code with
# no clusters and no wait for the previous kernel, as an A100 build has) and
# the GPU tests and the sanitizers' fuzz runs on it; ARCH80=only runs those
# steps alone (SKIP_PYTEST=1 skips their tests, SKIP_FUZZ=1 their fuzz runs,
# so that they fit two calls; the build is cached between them).
set -u
PYTEST_PARTS="${PYTEST_PARTS:-12}"
if ! [[ $PYTEST_PARTS =~ ^[1-9][0-9]*$ ]]; then
  echo "gpu_check.sh: PYTEST_PARTS must be a whole number of at least 1, not '$PYTEST_PARTS'" >&2
  exit 2
fi
OUT="${OUT:-$PWD/gpu-report}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log="$OUT/gpu_check.log"
report="$OUT/report.md"
: > "$log"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >> "$log" 2>&1
fi
failed=0
step() {  # step NAME PATTERN COMMAND...: run, log, add a report row
  local name="$1" pattern="$2"; shift 2
  local t0=$SECONDS part="$OUT/.part"
  "$@" > "$part" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || failed=1
  { echo; echo "===== $name (rc=$rc)"; cat "$part"; } >> "$log"
  printf '| %s | %s | %ss | %s |\n' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED ($rc)")" \
    "$((SECONDS - t0))" "$(grep -E "$pattern" "$part" | tail -n 1 | tr '|' '/' | cut -c1-160)" >> "$report"
  echo "== $name: rc=$rc"; grep -E "$pattern" "$part" | tail -n 3
  rm -f "$part"
  return $rc
}
smoke() {  # an op's error path must raise a Python exception, not crash
  python3 -c "
import numpy as np, paddle
from fastdeploy_mtp import ops
B = 4  # four decodes whose mask cursor would pass int32: refused by the kernel's checks
s = dict(ids_remove_padding=np.zeros(B, np.int64), seq_lens_this_time=np.ones(B, np.int32),
         seq_lens_encoder=np.zeros(B, np.int32), seq_lens_decoder=np.full(B, 3, np.int32),
         cu_seqlens_q=np.arange(B + 1, dtype=np.int32),
         attn_mask_offsets_full=np.zeros((B, 8), np.int32),
         attn_mask_offsets_decoder=np.full(B, 2**31 - 1, np.int32),
         is_block_step=np.zeros(B, bool), decode_states=np.zeros((B, 4), np.int32),
         mask_rollback=np.zeros(B, np.int32))
try:
    ops.update_attn_mask_offsets(**{k: paddle.to_tensor(v, place=paddle.CUDAPlace(0)) for k, v in s.items()})
except ops.BadInputError as e:
    print('raised:', e)
else:
    raise SystemExit('the refused state was not refused')
"
}
{
  echo "# GPU check, $(date -u +%F' '%T) UTC"
  echo
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/GPU: /'
  python3 -c "import paddle; print('paddle', paddle.__version__, 'cuda', paddle.version.cuda())" 2>/dev/null
  echo "compilers: $(g++ --version | head -1) ($(command -v g++)); nvcc $(nvcc --version | grep -o 'release [0-9.]*')"
  echo
  echo "| step | result | time | last line |"
  echo "|---|---|---|---|"
} > "$report"

# The library as built for an A100 (ARCH80): in a cache folder of its own,
# built on first use by each process (the same hash, so once), never
# installed; PADDLE_CUDA_ARCH_LIST would add SASS for other archs.
arch80_cache="${TMPDIR:-/tmp}/fastdeploy_mtp-arch80"
arch80=(env -u PADDLE_CUDA_ARCH_LIST FASTDEPLOY_MTP_CUDA_ARCH=8.0 FASTDEPLOY_MTP_BUILD=1
        FASTDEPLOY_MTP_CACHE="$arch80_cache")
arch80_libs() {  # the library of these sources, where the compute_80 build puts it
  "${arch80[@]}" python3 -c "
from fastdeploy_mtp import _build
name = _build.MODULE_NAME
print(_build.cache_root() / _build.source_hash(True) / name / (name + '.so'))"
}
arch80_code() {  # the compute_80 build holds sm_80 code and compute_80 PTX, nothing newer
  local lib listed libs
  libs="$(arch80_libs)" || return 1
  while read -r lib; do
    [ -f "$lib" ] || { echo "no library at $lib"; return 1; }
    # One file a call (cuobjdump prints its usage, and succeeds, given two).
    # It names a PTX entry by its arch: "PTX file 1: <name>.sm_80.ptx".
    listed="$(cuobjdump --list-elf --list-ptx "$lib")" || return 1
    echo "$lib:"; echo "$listed"
    if grep -E '(sm|compute)_(9|1[0-9])' <<< "$listed"; then
      echo "code of sm_90 or later in the compute_80 build"; return 1
    fi
    grep -Eq 'ELF file.*sm_80' <<< "$listed" || { echo "no sm_80 code"; return 1; }
    grep -Eq 'PTX file.*(sm|compute)_80' <<< "$listed" || { echo "no compute_80 PTX"; return 1; }
  done <<< "$libs"
  echo "compute_80 build: sm_80 code and compute_80 PTX only"
}
arch80_steps() {
  step "compute_80 build (FASTDEPLOY_MTP_CUDA_ARCH=8.0)" "building|built|rror" \
    "${arch80[@]}" python3 -c "from fastdeploy_mtp import ops; ops.load_library()"
  step "compute_80 build: its code (cuobjdump)" "compute_80 build|code of|no " arch80_code
  [ "${SKIP_PYTEST:-0}" = 1 ] || arch80_tests
  [ "${SKIP_FUZZ:-0}" = 1 ] || arch80_fuzz
}
arch80_tests() {
  step "compute_80 build: GPU tests" "passed|failed" "${arch80[@]}" python3 -m pytest -q \
    -p no:cacheprovider tests/test_gpu.py tests/test_gpu_devices.py tests/test_arch_probe.py
  step "compute_80 build: differential and bad-input tests on the GPU" "passed|failed" \
    "${arch80[@]}" python3 -m pytest -q -p no:cacheprovider -k gpu \
    tests/test_differential.py tests/test_bad_input.py
  step "compute_80 build: the recompute and shadow forms' tests" "passed|failed" \
    "${arch80[@]}" python3 -m pytest -q -p no:cacheprovider tests/test_form_recompute.py \
    tests/test_form_shadow.py
  step "compute_80 build: simulate --device gpu --graphs, tiny model, PD, images" \
    "OK|FAILED|draft model" "${arch80[@]}" python3 -m fastdeploy_mtp simulate --device gpu \
    --graphs --draft-model tiny --mode pd -k 3 --image-prob 0.5 --steps 40 --quiet
}
arch80_fuzz() {
  step "compute_80 build: memcheck over fuzz" "ERROR SUMMARY|gpu_fuzz" \
    "${arch80[@]}" compute-sanitizer --tool memcheck --error-exitcode 3 "${fuzz[@]}" --iterations 60
  step "compute_80 build: racecheck over fuzz" "HAZARD|RACECHECK SUMMARY|gpu_fuzz" \
    "${arch80[@]}" compute-sanitizer --tool racecheck --error-exitcode 3 "${fuzz[@]}" \
    --iterations 10 --max-bsz 4096
  step "compute_80 build: synccheck over fuzz" "ERROR SUMMARY|gpu_fuzz" \
    "${arch80[@]}" compute-sanitizer --tool synccheck --error-exitcode 3 "${fuzz[@]}" \
    --iterations 10 --max-bsz 8192
  # Up to 512 requests: the sizes an sm_90 build runs as clusters.
  for tool in racecheck synccheck; do
    step "compute_80 build: $tool over fuzz, bsz <= 512" \
      "ERROR SUMMARY|RACECHECK SUMMARY|HAZARD|gpu_fuzz" \
      "${arch80[@]}" compute-sanitizer --tool $tool --error-exitcode 3 "${fuzz[@]}" \
      --iterations 10 --max-bsz 512
  done
}
fuzz=(python3 tests/gpu_fuzz.py --seed "${FUZZ_SEED:-2026}")
if [ "${ARCH80:-0}" = only ]; then
  arch80_steps
  cat "$report"
  exit $failed
fi

step "build (setup_ops.py install)" "building|rror" python3 setup_ops.py install
if ! step "error path raises" "raised" smoke; then
  # Fallback: the shared libstdc++ with the system compiler, rebuilt from scratch.
  export FASTDEPLOY_MTP_STATIC_LIBSTDCXX=0 CC=/usr/bin/gcc CXX=/usr/bin/g++ LDSHARED="/usr/bin/g++ -shared"
  rm -rf custom_ops/build ~/.cache/fastdeploy_mtp
  step "rebuild: system g++, shared libstdc++" "building|rror" python3 setup_ops.py install
  step "error path raises (fallback)" "raised" smoke && failed=0
fi
step "registration check" "matches|DIFFER" python3 -m fastdeploy_mtp check
# The whole suite in PYTEST_PARTS parts side by side (every test file in one
# of them, in turn): one process takes longer than a call of the test
# machine may, and most files use one core. Each part's log is kept.
suite_in_parts() {
  local n="$PYTEST_PARTS" p i rc=0 logs=() files=() pids=() all=(tests/test_*.py)
  [ -e "${all[0]}" ] || { echo "failed: no tests/test_*.py to run"; return 1; }
  # No more parts than files: pytest given no file runs the whole suite.
  [ "$n" -gt "${#all[@]}" ] && n=${#all[@]}
  # A persistent $OUT holds an earlier run's parts, perhaps more of them.
  rm -f "$OUT"/pytest_part_*.log
  for ((p = 0; p < n; p++)); do
    files=()
    for ((i = p; i < ${#all[@]}; i += n)); do files+=("${all[i]}"); done
    logs[p]="$OUT/pytest_part_$p.log"
    python3 -m pytest -q -p no:cacheprovider -rfE "${files[@]}" > "${logs[p]}" 2>&1 &
    pids[p]=$!
  done
  for ((p = 0; p < n; p++)); do
    wait "${pids[p]}" || rc=1
    echo "part $p: $(tail -n 1 "${logs[p]}")"
  done
  grep -h '^FAILED\|^ERROR' "${logs[@]}"
  # Each part's counts from the last line shaped like pytest's closing line
  # alone: pytest writes it after the -rfE reports, which quote test output
  # that may hold such lines too.
  python3 - "${logs[@]}" <<'EOF'
import re, sys
line = re.compile(r"=* *((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s(?: \([\d:]+\))? *=*")
total, missing = {}, 0
for log in sys.argv[1:]:
    with open(log, errors="replace") as f:
        closing = [m for m in map(line.fullmatch, f.read().splitlines()) if m]
    if not closing:
        missing += 1
        continue
    for n, kind in re.findall(r"(\d+) ([a-z]+)", closing[-1].group(1)):
        kind = {"error": "errors", "warning": "warnings"}.get(kind, kind)  # 1 error, 2 errors
        total[kind] = total.get(kind, 0) + int(n)
words = [f"{n} {kind}" for kind, n in total.items()]
if missing:
    words.append(f"{missing} parts failed without pytest's closing line")
print(", ".join(words), "in all")
EOF
  return "$rc"
}
if [ "${SKIP_PYTEST:-0}" != 1 ]; then
  step "pytest (CPU and GPU), $PYTEST_PARTS parts side by side" "in all|failed" suite_in_parts
fi
for tool in memcheck racecheck synccheck; do
  step "$tool over the recompute, shadow and corrected forms' GPU cases" \
    "ERROR SUMMARY|RACECHECK SUMMARY|HAZARD|passed|failed" \
    compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -p no:cacheprovider \
    tests/test_form_recompute.py tests/test_form_shadow.py tests/test_form_corrected.py -k "gpu"
done
step "simulate --device gpu, the shadow form, tiny model, PD, images" "OK|FAILED|draft model" \
  python3 -m fastdeploy_mtp simulate --device gpu --runner fastdeploy --form shadow \
  --draft-model tiny --mode pd -k 3 --image-prob 0.5 --steps 40 --quiet
step "memcheck over fuzz" "ERROR SUMMARY|gpu_fuzz" \
  compute-sanitizer --tool memcheck --error-exitcode 3 "${fuzz[@]}" --iterations 60
step "racecheck over fuzz" "HAZARD|RACECHECK SUMMARY|gpu_fuzz" \
  compute-sanitizer --tool racecheck --error-exitcode 3 "${fuzz[@]}" --iterations 10 --max-bsz 4096
step "synccheck over fuzz" "ERROR SUMMARY|gpu_fuzz" \
  compute-sanitizer --tool synccheck --error-exitcode 3 "${fuzz[@]}" --iterations 10 --max-bsz 8192
# Up to 512 requests: mostly the one-block and cluster launches (up to 16 blocks).
step "racecheck over fuzz, bsz <= 512" "HAZARD|RACECHECK SUMMARY|gpu_fuzz" \
  compute-sanitizer --tool racecheck --error-exitcode 3 "${fuzz[@]}" --iterations 10 --max-bsz 512
step "synccheck over fuzz, bsz <= 512" "ERROR SUMMARY|gpu_fuzz" \
  compute-sanitizer --tool synccheck --error-exitcode 3 "${fuzz[@]}" --iterations 10 --max-bsz 512
# Prompts of up to 2048 tokens: past 64, every thread of a prompt's block
# checks and writes a share of it (a block barrier, shared memory).
for tool in memcheck racecheck synccheck; do
  step "$tool over fuzz, prompts <= 2048 tokens" "ERROR SUMMARY|RACECHECK SUMMARY|HAZARD|gpu_fuzz" \
    compute-sanitizer --tool $tool --error-exitcode 3 "${fuzz[@]}" --iterations 12 \
    --max-bsz 600 --mask-cols 2048
done
# The closed loop on the GPU: the draft state and the ops there, the real
# draft model (on the CPU) checked against a cache-free recomputation.
step "simulate --device gpu, tiny model, PD, images" "OK|FAILED|draft model" \
  python3 -m fastdeploy_mtp simulate --device gpu --draft-model tiny --mode pd -k 3 \
  --image-prob 0.5 --steps 40 --quiet
step "memcheck over simulate --device gpu" "ERROR SUMMARY" \
  compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m fastdeploy_mtp simulate \
  --device gpu --draft-model tiny --mode mixed -k 4 --image-prob 0.5 --steps 12 --quiet
# The same loop as a production runner drives it: preprocess and the mask call
# captured in CUDA graphs once, then only replayed.
step "simulate --device gpu --graphs, tiny model, PD, images" "OK|FAILED|draft model" \
  python3 -m fastdeploy_mtp simulate --device gpu --graphs --draft-model tiny --mode pd -k 3 \
  --image-prob 0.5 --steps 40 --quiet
step "memcheck over simulate --device gpu --graphs" "ERROR SUMMARY" \
  compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m fastdeploy_mtp simulate \
  --device gpu --graphs --draft-model tiny --mode mixed -k 4 --image-prob 0.5 --steps 12 --quiet
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  benches=("bench --device gpu" "bench-gpu --rounds ${BENCH_ROUNDS:-7}")
  [ "${SKIP_NUMPY_BENCH:-0}" = 1 ] && benches=("bench-gpu --rounds ${BENCH_ROUNDS:-7}")
  benches+=("bench-gpu --form recompute --rounds ${BENCH_ROUNDS:-7}"
            "bench-gpu --form shadow --rounds ${BENCH_ROUNDS:-7}")
  # The corrected forms' captured step beside the exact forms' they correct.
  for f in corrected_pr5245 corrected_pr5738 corrected_pr6403; do
    benches+=("bench-gpu --graph-only --form $f --rounds ${BENCH_ROUNDS:-7}")
  done
  for b in "${benches[@]}"; do
    step "python -m fastdeploy_mtp $b" "." python3 -m fastdeploy_mtp $b
    { echo; echo "python -m fastdeploy_mtp $b"; echo
      sed -n "/===== python -m fastdeploy_mtp $b /,\$p" "$log" | tail -n +2 | grep -v -E "^W[0-9]|^I[0-9]|INFO|Compiling|[Ww]arn"
    } >> "$report"
  done
fi
[ "${ARCH80:-0}" = 1 ] && arch80_steps
cat "$report"
exit $failed
