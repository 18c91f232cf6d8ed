"""gemini_split.json_values.loads gives json.loads's values and errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from gemini_split import json_values

CASES = [
    '{"a": 1, "a": 2}', '{"big": 123456789012345678901234567890, "neg": -9223372036854775809}',
    '{"f": -0.0, "g": 1E+2, "h": 0.1234567890123456789, "i": 5e-324, "j": 1.5e-400, "k": 123.0e0}',
    '{"u": "\\u00e9\\/\\u2028 é", "del": "\x7f", "crlf":\r\n1}', '[1, "x", true, false, null, {}]', '"top"', "7",
    # accepted by json, refused by msgspec: json decides
    '{"a": "\\ud800"}', '{"\\udc00\\ud800": 1}', '{"a": NaN, "b": Infinity, "c": -Infinity}', '{"a": 1e400}',
    '[' * 200 + ']' * 200,
]
BAD = ['{"a": 1,}', '[1,]', '{"a": "x\ty"}', '{"a": 01}', '\f{}', '\xa0{}', '{} x', '{"a": tru}', '"\\x"', "",
       "  ", '{"a": 1.}', '{"a": .5}', "{'a': 1}", "{\"a\" 1}"]


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b or repr(a) == repr(b)


@pytest.mark.parametrize("text", CASES)
def test_a_value_is_the_one_json_loads_gives(text):
    assert same(json_values.loads(text), json.loads(text))


@pytest.mark.parametrize("text", BAD)
def test_an_error_is_json_loads_own(text):
    with pytest.raises(json.JSONDecodeError) as mine:
        json_values.loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert (mine.value.msg, mine.value.lineno, mine.value.colno) == \
        (theirs.value.msg, theirs.value.lineno, theirs.value.colno)


def test_nesting_too_deep_is_a_recursion_error_as_with_json():
    with pytest.raises(RecursionError):
        json_values.loads("[" * 100_000 + "]" * 100_000)


def test_valid_json_is_read_without_importing_json():
    code = ("import sys; from gemini_split import json_values; "
            "json_values.loads('{\"a\": [1, 2.5, \"x\", null]}'); print('json' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert out.stdout.strip() == "False", out.stderr
