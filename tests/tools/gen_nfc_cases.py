#!/usr/bin/env python3
"""Writes tests/data/nfc_cases.txt from Unicode's NormalizationTest.txt (15.0.0, the version of
nn/text/unicode_nfc_tables.c): Parts 0 and 3 whole, every 4th line of Part 2 and every 64th of Part 1, as
"c1;c2;c3;c4;c5" (code points in hex, space-separated), for tests/test_hf_tokenizer.c, which checks
NFC(c1) = NFC(c2) = NFC(c3) = c2 and NFC(c4) = NFC(c5) = c4, alone and between other text.

    python3 tests/tools/gen_nfc_cases.py [/usr/share/unicode/NormalizationTest.txt.bz2] > tests/data/nfc_cases.txt

NormalizationTest.txt: Copyright (c) Unicode, Inc., under the Unicode License (https://www.unicode.org/license.txt)."""
import bz2
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode/NormalizationTest.txt.bz2"
part, k = None, 0
with bz2.open(path, "rt", encoding="utf-8") as f:
    head = f.readline().strip()
    print(f"# from {head.lstrip('# ')} (Unicode License): c1;c2;c3;c4;c5")
    for line in f:
        if line.startswith("@Part"):
            part = line.split()[0]
            continue
        line = line.split("#")[0].strip()
        if not line:
            continue
        if part in ("@Part1", "@Part2"):
            k += 1
            if k % (64 if part == "@Part1" else 4):
                continue
        print(";".join(line.split(";")[:5]))
