"""Canonical JSON (Backends/README.md "Canonical JSON") and strict JSON parsing (Swift StrictJSON)."""

import math

import pytest

from realtime_backend import StrictJSONError, canonical_json, strict_loads


@pytest.mark.parametrize("value, text", [
    (None, "null"), (True, "true"), (False, "false"), (0, "0"), (-7, "-7"),
    (12.0, "12"), (0.5, "0.5"), (2.5, "2.5"), (-3.0, "-3"), (-0.0, "-0"), (0.1, "0.1"),
    # Swift's Double.description, without ".0" (checked against swift 6.3's JSONEncoder)
    (1e15, "1000000000000000"), (1e16, "1e+16"), (2.0**54, "1.8014398509481984e+16"), (1e21, "1e+21"),
    # plain up to 2**53, an exponent above (Swift's Double.description; Python's repr waits for 1e16)
    (2.0**53, "9007199254740992"), (2.0**53 + 2, "9.007199254740994e+15"), (9.5e15, "9.5e+15"),
    (-9999999999999998.0, "-9.999999999999998e+15"),
    (0.0001, "0.0001"), (0.00001, "1e-05"), (1e-7, "1e-07"), (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
    ("", '""'), ("a/b", '"a/b"'), ('"\\', '"\\"\\\\"'), ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
    ("\x00\x01\x0b\x1f", '"\\u0000\\u0001\\u000b\\u001f"'), ("\x7f\u2028é😀", '"\x7f\u2028é😀"'),
    ([], "[]"), ((1, "a"), '[1,"a"]'), ({}, "{}"),
    ({"b": 1, "a": [None, {"d": True, "c": False}]}, '{"a":[null,{"c":false,"d":true}],"b":1}'),
])
def test_canonical_json(value, text):
    assert canonical_json(value) == text


def test_keys_sorted_by_code_point_as_utf8_bytes():
    # the order Swift's JSONEncoder writes (checked against swift 6.3)
    value = {"b": 1, "a": 2, "_": 3, "Z": 4, "é": 5, "z": 6, "\U00010000": 7, "\uffff": 8}
    assert canonical_json(value) == '{"Z":4,"_":3,"a":2,"b":1,"z":6,"é":5,"\uffff":8,"\U00010000":7}'


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, [1, math.nan]])
def test_non_finite_numbers_are_refused(value):
    with pytest.raises(ValueError):
        canonical_json(value)


@pytest.mark.parametrize("value, text", [
    # an int is written as Swift writes the double of the same value, when one holds it exactly
    (2**53, "9007199254740992"), (-(2**53), "-9007199254740992"), (2**53 + 2, "9.007199254740994e+15"),
    (9_500_000_000_000_000, "9.5e+15"), (10**15, "1000000000000000"), (10**16, "1e+16"),
    (-(10**16), "-1e+16"), (2**60, "1.152921504606847e+18"), (2**64, "1.8446744073709552e+19"), (-(2**63), "-9.223372036854776e+18"),
    (2**1023, "8.98846567431158e+307"), ([10**16, 1e16], "[1e+16,1e+16]"),
])
def test_integers_as_their_double(value, text):
    assert canonical_json(value) == text


@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 1, 123456789012345678, 2**63 - 1, 2**1024, -(10**400), {"a": [2**53 + 1]}])
def test_integers_no_double_holds_are_refused_not_rounded(value):
    with pytest.raises(ValueError, match="no double holds"):
        canonical_json(value)


def test_the_refusal_names_the_integer():
    with pytest.raises(ValueError, match="the integer 123456789012345678 exactly, so not every library could write it the same"):
        canonical_json(123456789012345678)


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object(), {1: "int key"}, {None: 1}])
def test_values_json_cannot_hold_are_refused(value):
    with pytest.raises(TypeError):
        canonical_json(value)


@pytest.mark.parametrize("text, value", [
    ('{"a":1}', {"a": 1}), (' [1, 2.5, "x", true, null] ', [1, 2.5, "x", True, None]), ('"\\u00e9"', "é"),
    (b'{"a":"\xc3\xa9"}', {"a": "é"}),
])
def test_strict_loads_accepts_json(text, value):
    assert strict_loads(text) == value


@pytest.mark.parametrize("text", [
    "NaN", "[NaN]", "Infinity", "-Infinity", '{"a":NaN}', "1e400", "[-1e999]",
    '{"a":1,"a":2}', '{"a":1,"\\u0061":2}', '[{"x":{"k":1,"k":1}}]',
    "\ufeff{}", b"\xef\xbb\xbf{}", b"\xff", b'"\xc3"',
    "[1,]", "{,}", "", " ", "01", "'a'", '{"a" 1}', '"a\nb"', "[1] [2]",
    "[" * 65 + "]" * 65, '{"a":' * 65 + "1" + "}" * 65,
])
def test_strict_loads_refuses(text):
    with pytest.raises(StrictJSONError):
        strict_loads(text)


def test_nesting_64_deep_is_accepted():
    value = strict_loads("[" * 64 + "]" * 64)
    depth = 0
    while isinstance(value, list):
        depth += 1
        value = value[0] if value else None
    assert depth == 64


def test_brackets_inside_strings_do_not_count_as_depth():
    text = '["' + "[" * 200 + '"]'
    assert strict_loads(text) == ["[" * 200]
