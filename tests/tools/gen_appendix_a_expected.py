#!/usr/bin/env python3
"""Writes tests/data/appendix_a_expected.txt: what tests/tools/appendix_a.py (the cells of the book's
appendix A notebook, code-part1.ipynb, as one script) prints with PyTorch 1.13; tests/test_appendix_a.c
runs ./build/appendix_a and requires the same bytes.

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_appendix_a_expected.py   (Debian's python3-torch)

The scalar kernels (ATEN_CPU_CAPABILITY=default) and Debian's reference BLAS: the path attention.c's
exact math follows. appendix_a.py's docstring says what it leaves out and where 1.13 prints
differently from the notebook (sci_mode=False keeps the scientific width)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "tools", "appendix_a.py")], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=True)
    with open(os.path.join(ROOT, "tests", "data", "appendix_a_expected.txt"), "w") as f:
        f.write(r.stdout)
    print(f"tests/data/appendix_a_expected.txt: {len(r.stdout.splitlines())} lines")


if __name__ == "__main__":
    main()
