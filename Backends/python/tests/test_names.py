"""Names, patterns and matching (docs/rooms-protocol.md "Names"; Backends/README.md "Names and patterns")."""

import pytest

from realtime_backend import MAX_NAME_LENGTH, is_valid_pattern, is_valid_room_name, match_room, parse_pattern


@pytest.mark.parametrize("name", ["a", "Z", "0", "_-=@,.;:", "order:1042", "a" * MAX_NAME_LENGTH, ":", "a;b"])
def test_valid_names(name):
    assert is_valid_room_name(name)


@pytest.mark.parametrize("name", [
    "", "a" * (MAX_NAME_LENGTH + 1), "order 1042", "order/1042", "ordér", "a\n", "order:1042\n", "\n", "a{b}", "a}", "tab\t",
    "١٢٣",  # Unicode digits are not name characters
    "a+b", "a#b", "a%3A", None, 7, b"order:1",
])
def test_invalid_names(name):
    assert not is_valid_room_name(name)


@pytest.mark.parametrize("pattern, parts", [
    ("shop", [("literal", "shop")]),
    ("order:{id}", [("literal", "order:"), ("param", "id")]),
    ("{a}:{b}", [("param", "a"), ("literal", ":"), ("param", "b")]),
    ("x{id}y", [("literal", "x"), ("param", "id"), ("literal", "y")]),
    ("{a_b-c=d@e,f.g;h}", [("param", "a_b-c=d@e,f.g;h")]),
])
def test_parse_pattern(pattern, parts):
    assert parse_pattern(pattern) == parts


@pytest.mark.parametrize("pattern", [
    "", "{}", "{", "}", "a}", "{a", "{a}{b}", "{a}:{a}", "{a:b}", "{a b}", "{ä}", "ä{a}", "a{{b}}", "{a}\n",
    "x" * (2 * MAX_NAME_LENGTH + 1), None, 3,
])
def test_invalid_patterns(pattern):
    assert not is_valid_pattern(pattern)
    assert parse_pattern(pattern) is None


def test_a_pattern_may_be_longer_than_a_name_up_to_twice():
    assert is_valid_pattern("x" * (2 * MAX_NAME_LENGTH))


@pytest.mark.parametrize("name, pattern, params", [
    ("order:1042", "order:{id}", {"id": "1042"}),
    ("order:", "order:{id}", None),
    ("order:1:2", "order:{id}", None),
    ("chat:34:42", "chat:{a}:{b}", {"a": "34", "b": "42"}),
    ("chat:34:", "chat:{a}:{b}", None),
    ("user-ann", "user-{id}", {"id": "ann"}),
    ("inbox:ann.spam", "inbox:{user}.{box}", {"user": "ann", "box": "spam"}),
    ("inbox:ann.sp.am", "inbox:{user}.{box}", {"user": "ann", "box": "sp.am"}),
    ("inbox:ann", "inbox:{user}.{box}", None),
    ("inbox:.spam", "inbox:{user}.{box}", None),
    ("x:7:y", "x:{id}:y", {"id": "7"}),
    ("x:7:yy", "x:{id}:y", None),
    ("a-b-c", "{x}-{y}", {"x": "a", "y": "b-c"}),
    ("shop", "shop", {}),
    ("Shop", "shop", None),
    ("anything", "{any}", {"any": "anything"}),
    ("any:thing", "{any}", None),
    ("order:1042", "order:{id", None),
    ("bad room", "{any}", None),
    ("order:1042\n", "order:{id}", None),
])
def test_match_room(name, pattern, params):
    assert match_room(name, pattern) == params


def test_match_room_takes_names_over_the_length_limit_as_no_match():
    assert match_room("a" * (MAX_NAME_LENGTH + 1), "{x}") is None
    assert match_room("a" * MAX_NAME_LENGTH, "{x}") == {"x": "a" * MAX_NAME_LENGTH}
