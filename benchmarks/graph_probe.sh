#!/usr/bin/env bash
# Builds the graph probe (benchmarks/graph_probe.cu) into build/probe with nvcc,
# with the CUDA kernels of git revision REV (default HEAD) as its baseline, and
# writes the benchmark states it reads. Needs nvcc and this checkout, no GPU:
#
#   bash benchmarks/graph_probe.sh [REV]
#
# then, on the GPU machine (build/probe travels with the working tree when
# carried): build/probe/probe build/probe/states [BSZ ...] [--quick] [--only NAME]
#
# KERNELS=DIR builds the probe's own side from the kernel sources in DIR (a
# scratch copy of custom_ops/ with a change to try) instead of
# custom_ops/, and PROBE=FILE names the binary (default build/probe/probe).
set -euo pipefail
cd "$(dirname "$0")/.."
rev="${1:-HEAD}"
kernels="${KERNELS:-custom_ops}"
out=build/probe
probe="${PROBE:-$out/probe}"
mkdir -p "$out/old"
rm -f "$out"/old/*
# Every source of custom_ops/ at REV (the kernels' headers vary by revision).
for f in $(git ls-tree --name-only "$rev" custom_ops/ | grep -E '\.(h|cuh|cu)$'); do
  git show "$rev:$f" > "$out/old/$(basename "$f")"
done
python3 benchmarks/graph_probe.py "$out/states"
f=(-std=c++17 -O3 -gencode arch=compute_90,code=sm_90)
# The baseline's names move to namespace mtp_old, so both revisions link together.
nvcc "${f[@]}" -Dmtp=mtp_old -I"$out/old" -c "$out/old/mtp_kernels.cu" -o "$out/old_kernels.o"
# agreement_floor.cu includes custom_ops/mtp_kernels.cu: the kernels, and their launches agreeing only.
nvcc "${f[@]}" -I"$kernels" -c "$kernels/bench/agreement_floor.cu" -o "$out/new_kernels.o"
nvcc "${f[@]}" -I"$kernels" -I"$out" -DPROBE_BASELINE -c benchmarks/graph_probe.cu -o "$out/graph_probe.o"
nvcc "${f[@]}" "$out/graph_probe.o" "$out/new_kernels.o" "$out/old_kernels.o" -o "$probe"
echo "built $probe (baseline: $rev)"
