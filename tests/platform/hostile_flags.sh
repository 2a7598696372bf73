#!/bin/sh
# Hostile flags against the programs of one build (default build/; `make check-m32` runs it on the
# 32-bit build): each must end with its exit status and message, never a signal or a crash.
#     [RUN="qemu-i386 -L /"] sh tests/platform/hostile_flags.sh [BUILD_DIR]
# RUN, when set, runs each program (an i386 build on a kernel without IA32 emulation).
B=${1:-build}
RUN=${RUN:-}
fail=0 n=0
expect() { # STATUS MESSAGE COMMAND...
    want=$1 msg=$2
    shift 2
    out=$("$@" 2>&1 >/dev/null)
    rc=$?
    n=$((n + 1))
    case "$out" in *"$msg"*) ok=1 ;; *) ok=0 ;; esac
    if [ "$rc" -ne "$want" ] || [ $ok -eq 0 ]; then
        echo "hostile: $*: status $rc (want $want), said: $out (want: $msg)"
        fail=$((fail + 1))
    fi
}
# the ELF class byte: 1 for a 32-bit program, 2 for 64-bit
bits=$(od -An -tu1 -j4 -N1 "$B/train" | tr -d ' ')
if [ "$bits" = 1 ]; then
    # 2^32 floats (16 GiB) would wrap a 32-bit size_t into a small allocation written past
    expect 1 "not enough memory: you tried to allocate 17179869184 bytes" $RUN "$B/train" --dim 65536 --heads 1 --steps 1
    expect 1 "not enough memory: you tried to allocate" $RUN "$B/train" --batch 1073741824 --context 8 --steps 1
    # flags past a 32-bit long are refused as flags
    expect 2 "--sample expects an integer >= 0" $RUN "$B/train" --sample 2305843009213693951 --steps 1
    expect 2 "--dim expects an integer >= 1" $RUN "$B/train" --dim 4611686018427387904 --heads 1 --steps 1
else
    expect 1 "not enough memory: you tried to allocate" $RUN "$B/train" --sample 2305843009213693951 --steps 1
    expect 1 "not enough memory: you tried to allocate" $RUN "$B/train" --batch 2305843009213693952 --steps 1
    expect 1 "numel: integer multiplication overflow" $RUN "$B/train" --dim 4611686018427387904 --heads 1 --steps 1
fi
expect 1 "needs more than that" $RUN "$B/train" --context 1000000000 --steps 1
expect 2 "--steps expects an integer >= 0" $RUN "$B/train" --steps 99999999999999999999
expect 1 "must be in 0..1000000" $RUN "$B/gpt" tokenize --tokenizer train:99999999999
# output that cannot be written is an error
expect 1 "cannot write the output" sh -c "exec $RUN \"$B/article\" >/dev/full"
expect 1 "cannot write the output" sh -c "exec $RUN \"$B/train\" --steps 2 >/dev/full"
echo "hostile flags ($B): $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
