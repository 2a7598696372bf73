#!/usr/bin/env bash
# attention.c and PyTorch side by side, in one sitting, on this machine:
#   examples/bench_vs_pytorch.sh [WORKLOAD ...]      (default: all five, at 1 and 2 threads)
# Prints each side's JSON line per workload and thread count. PyTorch is
# Debian's python3-torch, run with Debian's own python3; set OPENBLAS_CORETYPE
# (SKYLAKEX with AVX-512, HASWELL with AVX2) where OpenBLAS misdetects the core:
# OPENBLAS_VERBOSE=2 shows what it picked.
set -u
cd "$(dirname "$0")/.."
py=/usr/bin/python3
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(article train-tiny train-base matmul long-context)
make -s build/bench >/dev/null || exit 1
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores;" \
     "OpenBLAS core: $(OPENBLAS_VERBOSE=2 $py -c 'import torch; torch.ones(64,64) @ torch.ones(64,64)' 2>&1 | grep -m1 Core | cut -d: -f2 | xargs)"
for t in 1 2; do
    for w in "${workloads[@]}"; do
        ./build/bench --threads "$t" "$w"
        OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" $py ../shared/pytorch/workloads.py "$w" --threads "$t"
    done
done
