#!/usr/bin/env bash
# attention.c and PyTorch side by side, in one sitting, on this machine:
#   examples/bench_vs_pytorch.sh [WORKLOAD ...]      (default: all five, at 1 and 2 threads)
# The GPT workloads take seconds to minutes a step and are named by hand: gpt-124m gpt-generate
# gpt-classify gpt-lora gpt-sft gpt-dpo (gpt-sft holds about 9.3 GB on each side, one side at a time;
# gpt-dpo, the DPO notebook's step, more: its PyTorch side is tests/tools/dpo_bench.py); llm-generate,
# llm-generate-llama and llm-train (Qwen3's and Llama 3.2's; their PyTorch side is tests/tools/llm_bench.py,
# generation in float32 and BF16).
# Prints each side's JSON line per workload and thread count. PyTorch is
# Debian's python3-torch, run with Debian's own python3; set OPENBLAS_CORETYPE
# (SKYLAKEX with AVX-512, HASWELL with AVX2) where OpenBLAS misdetects the core:
# OPENBLAS_VERBOSE=2 shows what it picked. Debian's python3-torch calls the BLAS that the
# libblas.so.3 alternative names, by default the reference BLAS (about 3 GFLOP/s, 30x slower on
# the GPT steps): where libopenblas0-pthread is installed its directory is put first on
# LD_LIBRARY_PATH for the PyTorch side ($TORCH_BLAS_DIR names another, e.g. one dpkg-deb -x made).
# What a machine without AVX-512 runs, timed on one with it: cap both sides alike,
#   AC_CPU_CAPABILITY=avx2 ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=HASWELL examples/bench_vs_pytorch.sh ...
set -u
cd "$(dirname "$0")/.."
py=/usr/bin/python3
blas_dir=${TORCH_BLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-pthread}
[ -e "$blas_dir/libblas.so.3" ] && export LD_LIBRARY_PATH="$blas_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(article train-tiny train-base matmul long-context)
make -s build/bench >/dev/null || exit 1
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores;" \
     "OpenBLAS core: $(OPENBLAS_VERBOSE=2 $py -c 'import torch; torch.ones(64,64) @ torch.ones(64,64)' 2>&1 | grep -m1 Core | cut -d: -f2 | xargs)" \
     "$(grep -q avx512f /proc/cpuinfo && echo '(AVX-512)')"
torch_blas=$(ldd "$($py -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))')" 2>/dev/null |
    awk '/libblas\.so/ {print $3; exit}')
readlink -f "${torch_blas:-none}" | grep -q openblas || echo "# PyTorch's BLAS is not OpenBLAS here (reference BLAS?): its GPT figures are not comparable"
for t in 1 2; do
    for w in "${workloads[@]}"; do
        if [ "$w" = gpt-sft ] && [ "$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)" -lt 11 ]; then
            echo "# gpt-sft skipped: under 11 GB available"; continue
        fi
        if [ "$w" = gpt-dpo ] && [ "$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)" -lt 14 ]; then
            echo "# gpt-dpo skipped: under 14 GB available"; continue
        fi
        echo "# $w, $t thread(s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
        ./build/bench --threads "$t" "$w"
        if [ "$w" = gpt-dpo ]; then
            OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" $py tests/tools/dpo_bench.py --threads "$t"
        elif [ "$w" = llm-generate ] || [ "$w" = llm-generate-llama ]; then
            shape=Qwen3-0.6B; [ "$w" = llm-generate-llama ] && shape=Llama-3.2-1B
            for dt in F32 BF16; do
                OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" $py tests/tools/llm_bench.py llm-generate --threads "$t" \
                    --dtype "$dt" --shape "$shape"
            done
        elif [ "$w" = llm-train ]; then
            OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" $py tests/tools/llm_bench.py "$w" --threads "$t"
        else
            OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" $py ../shared/pytorch/workloads.py "$w" --threads "$t"
        fi
    done
done
