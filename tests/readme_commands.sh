#!/bin/sh
# Runs every fenced shell block that a README marks runnable: the line `<!-- runnable -->` right
# before a ```sh fence. Each block runs with bash -e -o pipefail from the root of a fresh clone of
# the committed tree (build/readme/main, made by `make -j2 all` there), with ../shared beside it as
# the READMEs assume; the first failing block stops the check with its file and line.
set -eu
top=$(git rev-parse --show-toplevel)
cd "$top"
shared=$(cd ../shared 2>/dev/null && pwd) || { echo "readme-check: needs ../shared beside the checkout"; exit 1; }
work="$top/build/readme"
rm -rf "$work"
mkdir -p "$work"
git clone -q "$top" "$work/main"
ln -s "$shared" "$work/shared"
make -C "$work/main" -j2 all >"$work/make.log" 2>&1 || { tail -20 "$work/make.log"; echo "readme-check: make failed"; exit 1; }
blocks=0
for readme in README.md tensor/README.md nn/README.md examples/README.md tests/README.md; do
    [ -f "$work/main/$readme" ] || continue
    # each marked block to its own file, named for where it starts
    awk -v dir="$work" -v name="$(echo "$readme" | tr / _)" '
        mark && /^```sh/ { n++; out = sprintf("%s/%s.%03d.%d.sh", dir, name, n, NR); inb = 1; mark = 0; next }
        inb && /^```/ { inb = 0; close(out); next }
        inb { print > out; next }
        { mark = ($0 ~ /^<!-- runnable -->[ \t]*$/) }
    ' "$work/main/$readme"
done
for block in "$work"/*.sh; do
    [ -e "$block" ] || continue
    blocks=$((blocks + 1))
    where=$(basename "$block" .sh | sed 's/_/\//g; s/\.\([0-9]*\)\.\([0-9]*\)$/ (block \1, line \2)/')
    if ! (cd "$work/main" && timeout 300 bash -e -o pipefail "$block" >"$block.out" 2>&1); then
        cat "$block"
        tail -20 "$block.out"
        echo "readme-check: the runnable block of $where failed"
        exit 1
    fi
done
[ "$blocks" -gt 0 ] || { echo "readme-check: no runnable block found"; exit 1; }
echo "readme-check: $blocks runnable README blocks ran on a fresh clone, all passed"
