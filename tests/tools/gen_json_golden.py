#!/usr/bin/env python3
"""Writes the golden files of tests/test_json.c: what Python's json module reads and writes.

    /usr/bin/python3 tests/tools/gen_json_golden.py        (Debian's python3, 3.11)

  - tests/data/json_cases.txt: one case a line, fields separated by tabs, bytes in hex:
      ok   NAME  INPUT  DUMPS_INDENT4  DUMPS_NONE  DUMPS_INDENT0   json.loads(INPUT) written back three ways
      err  MODE  INPUT  MESSAGE                                      what reading INPUT raises (str(exception))
    MODE "loads" is json.loads(INPUT.decode("utf-8")); "load" is json.load of INPUT as a file opened with
    encoding="utf-8" (text mode: CR LF and a lone CR read as "\\n", which moves lines and columns).
  - tests/data/json_hostile_in.json (ensure_ascii=False, raw UTF-8, odd whitespace) and
    tests/data/json_hostile.json: json.dump(obj, f, indent=4) of the same object;
  - tests/data/json_testset.json: the instruction data's test split (entries 935..1044 of
    ../shared/data/instruction-data.json) with a "model_response" per entry (RESPONSES[i % 6] + " #i"),
    as finetune.py's cmd_instruct writes it with json.dump(test_data, f, indent=4).
"""
import io
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data")
SHARED = os.path.join(ROOT, "..", "shared")

# test_json.c has the same six strings (keep them in step)
RESPONSES = [
    "The capital of France is Paris.",
    "emoji \U0001F600\U0001F389 CJK \u6f22\u5b57\u304b\u306a\ud55c\uad6d\uc5b4 accents \u00e9\u00fc\u00df",
    "quote \" backslash \\ slash / apostrophe '",
    "ctrl \x00\x01\x1f\x7f\x80\x9f tab\t nl\n cr\r bs\b ff\f",
    "astral \U0001D11E max \U0010FFFF bmp-end \uFFFF ls\u2028ps\u2029 bom\ufeff",
    "",
]

HOSTILE = {
    "plain": "Hello, world",
    "escapes": "\" \\ / \b \f \n \r \t",
    "controls": "".join(chr(c) for c in range(0x20)) + "\x7f",
    "latin1": "".join(chr(c) for c in range(0x80, 0x100)),
    "cjk": "\u6f22\u5b57 \u304b\u306a \ud55c\uad6d\uc5b4 \u4e2d\u6587",
    "emoji": "\U0001F600\U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F1EB\U0001F1F7",
    "astral": "\U00010000\U0001D11E\U0010FFFF",
    "specials": "\u2028\u2029\ufeff\ufffd\uffff\u00a0",
    "nul": "a\x00b",
    "empty": "",
    "keys in order": {"z": 1, "a": 2, "m": 3, "\u00e9": 4, "\U0001F600": 5, "": 6, "a\"b\\c\n": 7},
    "numbers": [0, -1, 123456789012345678901234567890, -98765432109876543210, 0.1, -0.0, 1.5, 100.0,
                1e16, 1e-5, 1.5e300, 5e-324, 1.7976931348623157e308, 123456789012345678.0, 0.0001,
                1234567890123456.0, 2.5e-7, float("nan"), float("inf"), float("-inf")],
    "constants": [True, False, None],
    "empties": [[], {}, [[]], [{}], {"a": []}, {"b": {}}],
    "nested": {"a": [1, [2, [3, {"b": [4, {"c": "d"}]}]]]},
}


def hexs(b):
    return b.hex() if b else "-"


def read_as_file(data):
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()


def outcome(mode, data):
    try:
        text = read_as_file(data) if mode == "load" else data.decode("utf-8")
        json.loads(text)
        return None
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return str(e)


OK_INPUTS = [
    ("hostile", json.dumps(HOSTILE, ensure_ascii=False).encode("utf-8")),
    ("whitespace", b' \t\r\n{ "a" :\t[ 1 ,2\r\n, {} , [ ] ] ,"b":"x" } \n\t '),
    ("duplicate keys", b'{"a": 1, "b": 2, "a": 3, "c": {"x": 1, "x": [2]}, "b": null}'),
    ("surrogate pair", b'["\\ud83d\\ude00", "\\uD834\\uDD1E", "x\\ud83d\\ude00y"]'),
    ("lone surrogates", b'["\\ud800", "\\udfff", "\\ud83dx", "\\ude00\\ud83d", "\\ud83d\\u0041", "a\\udc00b"]'),
    ("escapes", b'"\\"\\\\\\/\\b\\f\\n\\r\\t\\u0000\\u001f\\u007f\\u00e9\\u20ac\\uFFFF"'),
    ("numbers", b'[0, -0, 1, -1, 1.0, 1e2, 1E2, 1e+2, 1e-2, -1.5E-300, 1e400, -1e400, 0.1e1, 123.456e-7, '
                b'12345678901234567890123, 2.2250738585072014e-308, 4.9e-324, 1e-400]'),
    ("constants", b'[NaN, Infinity, -Infinity, true, false, null]'),
    ("top scalar", b' 42 '),
    ("top string", b'"only"'),
    ("deep 60", b"[" * 60 + b"]" * 60),
    ("empty containers", b'[[], {}, [[], {}], {"": {}}]'),
    ("raw utf8", "\"\u00e9\u6f22\U0001F600\u2028\"".encode("utf-8")),
    ("big int 4300", b"9" * 4300),
]

ERR_INPUTS = [
    ("loads", b""), ("loads", b"   "), ("loads", b"[1,]"), ("loads", b'{"a":1,}'), ("loads", b'{"a" 1}'),
    ("loads", b"[1 2]"), ("loads", b'"\\x"'), ("loads", b'"\\u12"'), ("loads", b'"\\u12"xx'),
    ("loads", b'"\\u00zz"'), ("loads", b'"abc'), ("loads", b'"a\x01"'), ("loads", b'"a\nb"'),
    ("loads", b"[1] x"), ("loads", b"{1:2}"), ("loads", b"nan"), ("loads", b"-"), ("loads", b"01"),
    ("loads", b"1."), ("loads", b"1e"), ("loads", b".5"), ("loads", b"+1"), ("loads", b"[1,2"),
    ("loads", b"["), ("loads", b"{"), ("loads", b'{"a"'), ("loads", b'{"a":'), ("loads", b'{"a":1'),
    ("loads", b'"\\'), ("loads", b'"abc\\'), ("loads", b'"\\ud83d\\uzzzz"'), ("loads", b'"\\ud83d\\ude00'),
    ("loads", b'"\\ud83d\\ude0'), ("loads", b"tru"), ("loads", b"nul"),
    ("loads", b"[true false]"), ("loads", b"\xef\xbb\xbf[]"), ("loads", b"[\"\xc3\xa9\", 1 2]"),
    ("loads", "[\"\u6f22\U0001F600\", x]".encode("utf-8")),
    ("loads", b"[\n  1,\n  2\n  3\n]"), ("loads", b'{\n "a": 1,\n "b" 2\n}'), ("loads", b"{\n\n\n    ]"),
    ("loads", b"[1,\r\n 2,\r\n x]"), ("load", b"[1,\r\n 2,\r\n x]"), ("load", b"[1,\r 2,\r x]"),
    ("loads", b"[1,\r 2,\r x]"), ("load", b'[\r\n"a\xc3\xa9", \r\n"\x01"]'),
    ("loads", b"\xff"), ("loads", b'["a", "\xff"]'), ("loads", b"[\"\xc3\"]"), ("loads", b"\xc3"),
    ("loads", b"\xe2\x82"), ("loads", b"x\xe2\x82A"), ("loads", b"\xc0\xaf"), ("loads", b"\xe0\x80\x80"),
    ("loads", b"\xed\xa0\x80"), ("loads", b"\xf4\x90\x80\x80"), ("loads", b"\xf0\x9f\x98"),
    ("loads", b"\xf5"), ("loads", b"\x80"), ("load", b"[1,\r\n\xff]"), ("loads", b"[\n\"\xc3\xa9\",\n\xfe]"),
    ("loads", b"1" * 4301), ("loads", b"-" + b"1" * 4301), ("loads", b"[" + b"2" * 5000 + b"]"),
    ("loads", b"[" * 1200 + b"]" * 1200),
]


def main():
    lines = []
    for name, data in OK_INPUTS:
        obj = json.loads(data.decode("utf-8"))
        outs = [json.dumps(obj, indent=4), json.dumps(obj), json.dumps(obj, indent=0)]
        lines.append("\t".join(["ok", name.replace(" ", "_"), hexs(data)] + [hexs(o.encode("ascii")) for o in outs]))
    for mode, data in ERR_INPUTS:
        msg = outcome(mode, data)
        assert msg is not None, data
        lines.append("\t".join(["err", mode, hexs(data), msg.encode("utf-8").hex()]))
    with open(os.path.join(DATA, "json_cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    raw = json.dumps(HOSTILE, ensure_ascii=False, indent="\t", separators=(" ,", " :  "))
    with open(os.path.join(DATA, "json_hostile_in.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\r\n " + raw + "\n")
    with open(os.path.join(DATA, "json_hostile_in.json"), encoding="utf-8") as f:
        obj = json.load(f)
    with open(os.path.join(DATA, "json_hostile.json"), "w") as f:
        json.dump(obj, f, indent=4)

    with open(os.path.join(SHARED, "data", "instruction-data.json"), encoding="utf-8") as f:
        data = json.load(f)
    train_portion, test_portion = int(len(data) * 0.85), int(len(data) * 0.1)
    test_data = data[train_portion:train_portion + test_portion]
    for i, entry in enumerate(test_data):
        entry["model_response"] = RESPONSES[i % len(RESPONSES)] + f" #{i}"
    with open(os.path.join(DATA, "json_testset.json"), "w") as f:
        json.dump(test_data, f, indent=4)


if __name__ == "__main__":
    main()
