"""Room rules: what a room keeps and allows.

Source: docs/rooms-protocol.md "Tokens" (the rule keys and their ranges), Backends/README.md
"Rules by pattern", Swift's ``RoomRule`` and the Node library's ``src/rules.js``.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from .canonical import canonical_json
from .errors import RuleError

__all__ = ["MAX_HISTORY", "MAX_SPAN", "MAX_CAPACITY", "RULE_KEYS", "make_rule"]

#: Most events a room keeps.
MAX_HISTORY = 100000
#: Longest a room keeps events, in seconds (30 minutes).
MAX_SPAN = 1800
#: Largest ``max`` accepted (2**53 - 1, the Node library's ``Number.MAX_SAFE_INTEGER``).
MAX_CAPACITY = 2**53 - 1

_BOOLEANS = ("presence", "members_send", "webhook", "sealed", "public")
#: The option keys ``room()`` takes: the protocol's rule keys.
RULE_KEYS = ("history", "span", "max") + _BOOLEANS


def _integer(pattern: str, given: Mapping[str, Any], key: str, low: int, high: int, fallback: Optional[int]) -> Optional[int]:
    value = given.get(key)
    if value is None:
        value = fallback
    if value is None:
        return None
    # bool is an int subclass in Python: `history=True` is a wrong type, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < low or value > high:
        try:
            shown = canonical_json(value)
        except (TypeError, ValueError):
            shown = repr(value)
        raise RuleError("invalid_rule", f"rule for {pattern} out of range (history 0…{MAX_HISTORY}, span 1…{MAX_SPAN} s, max ≥ 1): {key} = {shown}")
    return int(value)


def make_rule(pattern: str, options: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The rule for ``options``, checked as the realtime server checks a token's rule.

    Args:
        pattern: the pattern the rule is for (only used in messages).
        options: the protocol's keys, each optional: ``history`` (int 0…100000, default 0),
            ``span`` (int seconds 1…1800, default 1800), ``max`` (int ≥ 1, or absent),
            ``presence``, ``members_send``, ``webhook``, ``sealed``, ``public`` (bool, default
            ``False``). A key given as ``None`` takes its default.

    Returns:
        The rule as the token carries it: ``{"history", "span", "presence", "members_send",
        "webhook", "sealed", "public"}`` plus ``"max"`` only when set.

    Raises:
        RuleError: ``invalid_rule`` for options that are not a mapping, an unknown key, an
            integer that is a ``bool``/``float``/``str`` or out of range, or a flag that is not
            a ``bool`` (``1`` is not ``True``).
    """
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise RuleError("invalid_rule", f"the options for {pattern} are not a mapping")
    for key in options:
        if key not in RULE_KEYS:
            raise RuleError("invalid_rule", f"unknown rule key {key} for {pattern}")
    flags = {}
    for key in _BOOLEANS:
        value = options.get(key)
        if value is None:
            value = False
        if not isinstance(value, bool):
            raise RuleError("invalid_rule", f"{key} for {pattern} must be True or False")
        flags[key] = value
    rule: Dict[str, Any] = {
        "history": _integer(pattern, options, "history", 0, MAX_HISTORY, 0),
        "span": _integer(pattern, options, "span", 1, MAX_SPAN, MAX_SPAN),
        "presence": flags["presence"],
        "members_send": flags["members_send"],
        "webhook": flags["webhook"],
        "sealed": flags["sealed"],
        "public": flags["public"],
    }
    capacity = _integer(pattern, options, "max", 1, MAX_CAPACITY, None)
    if capacity is not None:
        rule["max"] = capacity
    return rule
