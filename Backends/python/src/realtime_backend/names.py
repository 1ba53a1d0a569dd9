"""Room names and the patterns rules are declared by.

Source: docs/rooms-protocol.md "Names", Backends/README.md "Names and patterns", Swift's
``RoomName`` and the Node library's ``src/names.js``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

__all__ = ["MAX_NAME_LENGTH", "is_valid_room_name", "parse_pattern", "is_valid_pattern", "match_room"]

#: Longest room name, in bytes (Pusher's channel-name limit).
MAX_NAME_LENGTH = 164

# `re.fullmatch` with explicit ASCII classes: `$` would accept a trailing newline and `\d`/`\w`
# Unicode digits and letters.
_NAME = re.compile(r"[A-Za-z0-9_\-=@,.;:]+")
_KEY = re.compile(r"[A-Za-z0-9_\-=@,.;]+")

#: A pattern's part: ``("literal", text)`` or ``("param", name)``.
Part = Tuple[str, str]


def is_valid_room_name(name: object) -> bool:
    """Whether ``name`` is a room name.

    Args:
        name: the candidate (anything; only a ``str`` can be valid).

    Returns:
        ``True`` for 1…164 bytes of ``A–Z a–z 0–9 _ - = @ , . ; :`` (docs/rooms-protocol.md
        "Names"), else ``False``. Never raises.
    """
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME_LENGTH and _NAME.fullmatch(name) is not None


def parse_pattern(pattern: object) -> Optional[List[Part]]:
    """The parts of a pattern: literals and ``{param}`` placeholders.

    A pattern is name text with ``{param}`` placeholders whose names use the name alphabet but
    ``:``, are unique, and never follow one another (``{a}{b}`` is refused); at most 328 bytes
    (Backends/README.md "Names and patterns"; Swift ``RoomName.parse``).

    Args:
        pattern: ``"order:{id}"``, ``"chat:{a}:{b}"``, ``"shop"``.

    Returns:
        ``[("literal", "order:"), ("param", "id")]``, or ``None`` when it is not a valid pattern.
        Never raises.
    """
    if not isinstance(pattern, str) or not pattern or len(pattern.encode("utf-8", "surrogatepass")) > MAX_NAME_LENGTH * 2:
        return None
    parts: List[Part] = []
    names = set()
    rest = pattern
    while rest:
        if rest[0] == "{":
            close = rest.find("}")
            if close < 0:
                return None
            key = rest[1:close]
            if _KEY.fullmatch(key) is None or key in names:
                return None
            if parts and parts[-1][0] == "param":
                return None
            names.add(key)
            parts.append(("param", key))
            rest = rest[close + 1:]
        else:
            end = rest.find("{")
            literal = rest if end < 0 else rest[:end]
            if _NAME.fullmatch(literal) is None:
                return None
            parts.append(("literal", literal))
            rest = rest[len(literal):]
    return parts


def is_valid_pattern(pattern: object) -> bool:
    """Whether ``pattern`` is a valid pattern (see ``parse_pattern``). Never raises."""
    return parse_pattern(pattern) is not None


def match_room(name: object, pattern: object) -> Optional[Dict[str, str]]:
    """Matches a room name against a pattern.

    A placeholder takes one segment: up to the next ``:``, and, when the literal after it does
    not start with ``:``, up to that literal's first character; it is never empty
    (Backends/README.md "Names and patterns"; Swift ``RoomName.match``).

    Args:
        name: the room name (``"order:1042"``).
        pattern: the pattern (``"order:{id}"``) or a plain name.

    Returns:
        The parameters by name (``{"id": "1042"}``; ``{}`` for a plain name that is equal), or
        ``None`` when the name does not match or either is invalid. Never raises.
    """
    parts = parse_pattern(pattern)
    if not is_valid_room_name(name) or parts is None:
        return None
    assert isinstance(name, str)
    params: Dict[str, str] = {}
    rest = name
    for index, (kind, text) in enumerate(parts):
        if kind == "literal":
            if not rest.startswith(text):
                return None
            rest = rest[len(text):]
            continue
        colon = rest.find(":")
        value = rest if colon < 0 else rest[:colon]
        following = parts[index + 1] if index + 1 < len(parts) else None
        if following is not None and following[0] == "literal" and following[1][0] != ":":
            end = value.find(following[1][0])
            if end < 0:
                return None
            value = value[:end]
        if not value:
            return None
        params[text] = value
        rest = rest[len(value):]
    return params if not rest else None
