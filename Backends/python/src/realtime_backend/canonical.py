"""Canonical JSON out, strict JSON in.

``canonical_json`` writes the exact text Swift's ``JSONEncoder`` writes with ``.sortedKeys`` and
``.withoutEscapingSlashes`` (``RealtimeMessage.jsonText``), so answers and tokens agree byte for
byte across the four backends (Backends/README.md, "Canonical JSON").

``strict_loads`` reads peer JSON the way Swift's ``StrictJSON.decode`` does: RFC 8259's grammar
only (no ``NaN``/``Infinity``, no byte-order mark), nesting at most 64 deep, and no object that
names a member twice (RFC 7519 §4; Python's ``json`` would keep the last one silently).
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["canonical_json", "strict_loads", "StrictJSONError", "MAX_DEPTH"]

#: Deepest nesting of arrays and objects ``strict_loads`` accepts (Swift: ``StrictJSON.maxDepth``).
MAX_DEPTH = 64

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quote(text: str) -> str:
    out = []
    for char in text:
        escaped = _ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char < " ":
            out.append("\\u%04x" % ord(char))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


#: Beyond this magnitude Swift's ``Double.description`` uses an exponent (2**53 itself is plain).
_PLAIN_LIMIT = float(2**53)


def _number(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a JSON number")
    text = repr(value)
    # Swift writes `Double.description` without a trailing ".0": 12.0 → 12, -0.0 → -0,
    # 1e16 → 1e+16 (Python's repr and Swift's description agree on the digits, and on the
    # layout everywhere but between 2**53 and 1e16).
    if text.endswith(".0"):
        text = text[:-2]
    if _PLAIN_LIMIT < abs(value) < 1e16:
        # Swift switches to an exponent above 2**53, Python's repr only from 1e16: these are
        # integral, 16 digits, so 9007199254740994.0 → 9.007199254740994e+15.
        sign, digits = ("-", text[1:]) if text.startswith("-") else ("", text)
        significant = digits.rstrip("0")
        mantissa = significant[0] + ("." + significant[1:] if len(significant) > 1 else "")
        text = f"{sign}{mantissa}e+{len(digits) - 1:02d}"
    return text


def _integer(value: int) -> str:
    # JSON numbers are doubles to Swift (and JavaScript): an int is written as the double of the
    # same value (2**53 + 2 → 9.007199254740994e+15, 10**16 → 1e+16), and refused when no double
    # holds it exactly (2**53 + 1), as writing its digits would not be what every library writes.
    try:
        double = float(value)
    except OverflowError:
        double = math.inf
    if not math.isfinite(double) or int(double) != value:
        shown = f"the integer {value}" if value.bit_length() <= 256 else f"a {value.bit_length()}-bit integer"
        raise ValueError(f"no double holds {shown} exactly, so not every library could "
                         "write it the same (canonical JSON numbers are doubles): send it as a string")
    return _number(double)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value``.

    Object keys sorted by code point (the order of their UTF-8 bytes), no whitespace, ``/`` and
    non-ASCII characters written as they are, ``"`` and ``\\`` escaped, control characters as
    ``\\b \\f \\n \\r \\t`` or ``\\u00xx`` (lowercase hex), and a number as Swift writes a
    ``Double``: the shortest text that round-trips, without a trailing ``.0`` (``12.0`` → ``12``,
    ``0.5`` → ``0.5``), plain from 1e-4 up to 2**53 in magnitude and with an exponent outside
    (``1e-05``, ``9.5e+15``, ``1e+16``). An ``int`` is written as the double of the same
    value (``10**16`` → ``1e+16``), and refused when no double holds it exactly
    (``2**53 + 1``, ``123456789012345678``): a rounded number would be silently wrong.
    Source: Backends/README.md "Canonical JSON"; Swift ``JSONEncoder`` (``JSONWriter``).

    Args:
        value: ``None``, ``bool``, ``int``, ``float``, ``str``, a ``list``/``tuple`` of values or
            a ``dict`` with ``str`` keys.

    Returns:
        The JSON text (a ``str``; encode it as UTF-8 to send it).

    Raises:
        ValueError: a NaN or infinite float, or an ``int`` no double holds exactly.
        TypeError: a value JSON cannot hold (bytes, a set, an object, a non-``str`` key).
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, int):
        return _integer(int(value))
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(item) for item in value) + "]"
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"a JSON object's keys are strings, not {type(key).__name__}")
        return "{" + ",".join(_quote(key) + ":" + canonical_json(value[key]) for key in sorted(value)) + "}"
    raise TypeError(f"a {type(value).__name__} is not a JSON value")


class StrictJSONError(ValueError):
    """Text refused by ``strict_loads``: not RFC 8259 JSON, too deep, or a repeated member name."""


def _refuse_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not JSON (RFC 8259)")


def _parse_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise StrictJSONError(f"the number {text[:32]} is out of a double's range")
    return number


def _unique(pairs: "list[tuple[str, Any]]") -> "dict[str, Any]":
    result: "dict[str, Any]" = {}
    for key, item in pairs:
        if key in result:
            raise StrictJSONError(f'the member name "{key[:64]}" appears twice in one object')
        result[key] = item
    return result


def _check_depth(text: str) -> None:
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    in_string = False
    escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise StrictJSONError(f"nested deeper than {MAX_DEPTH}")
        elif char in "]}":
            depth -= 1


def strict_loads(data: "str | bytes | bytearray") -> Any:
    """Parses peer JSON as Swift's ``StrictJSON.decode`` accepts it.

    Args:
        data: the text, or its bytes (which must be UTF-8).

    Returns:
        The value (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` or ``None``).

    Raises:
        StrictJSONError: bytes that are not UTF-8, a byte-order mark, ``NaN``/``Infinity``, a
            number beyond a double's range, nesting deeper than 64, an object naming a member
            twice, or anything else that is not exactly one JSON value (RFC 8259).
    """
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as error:
            raise StrictJSONError("not UTF-8") from error
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError("strict_loads takes str or bytes")
    if text.startswith("\ufeff"):
        raise StrictJSONError("a byte-order mark is not JSON (RFC 8259 §8.1)")
    _check_depth(text)
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_constant=_refuse_constant, parse_float=_parse_float)
    except StrictJSONError:
        raise
    except (ValueError, RecursionError) as error:
        raise StrictJSONError(f"not JSON: {error}") from error
