"""Room names and the patterns rules are declared by.

Source: docs/rooms-protocol.md "Names", Backends/README.md "Names and patterns", Swift's
``RoomName`` and the Node library's ``src/names.js``.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, List, Optional, Set, Tuple, Union

__all__ = ["MAX_NAME_LENGTH", "is_valid_room_name", "parse_pattern", "is_valid_pattern", "match_room", "patterns_overlap"]

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


def patterns_overlap(a: object, b: object) -> bool:
    """Whether some room name matches both patterns (a plain name is a pattern without
    placeholders).

    A backend refuses a public rule whose pattern overlaps another rule's: the public grant
    admits every name its pattern matches, so a name that another rule claims (first match
    wins) would let a visitor past that rule's authorizer (Backends/README.md "Public rules";
    Swift ``RoomName.patternsOverlap``, the Node library's ``patternsOverlap``).

    Each pattern is a regular language: its literal bytes, and for each placeholder one or more
    name bytes other than ``:`` and the first byte of the literal after it (what ``match_room``
    takes). The answer is a breadth-first search of the two automata's product for the
    shortest common name, which must fit in ``MAX_NAME_LENGTH`` bytes; at most (n + 1)(m + 1)
    states for patterns of n and m steps.

    Args:
        a: a pattern (``"news:{topic}"``).
        b: another pattern (``"news:{topic}-staff"``).

    Returns:
        ``True`` when a valid name matches both (``"news:x-staff"``); ``False`` when none does
        or either is not a valid pattern. Never raises.
    """
    first = parse_pattern(a)
    second = parse_pattern(b)
    if first is None or second is None:
        return False
    steps_a = _steps(first)
    steps_b = _steps(second)
    width = len(steps_b) + 1
    # Breadth first over (position in a, position in b): the first visit is the shortest.
    seen: Set[int] = {0}
    frontier: List[Tuple[int, int]] = [(0, 0)]
    for _ in range(MAX_NAME_LENGTH):
        following: List[Tuple[int, int]] = []
        for i, j in frontier:
            for target_a, step_a in _moves(steps_a, i):
                for target_b, step_b in _moves(steps_b, j):
                    if not _admits_some(step_a, step_b):
                        continue
                    if target_a == len(steps_a) and target_b == len(steps_b):
                        return True
                    key = target_a * width + target_b
                    if key not in seen:
                        seen.add(key)
                        following.append((target_a, target_b))
        frontier = following
    return False


#: One byte of a pattern's language: a literal byte (``int``), or any name byte but the
#: excluded ones (a placeholder, which repeats: a ``frozenset``).
_Step = Union[int, FrozenSet[int]]

_COLON = ord(":")


def _steps(parts: List[Part]) -> List[_Step]:
    """A valid pattern's steps: one per literal byte, one per placeholder."""
    steps: List[_Step] = []
    for index, (kind, text) in enumerate(parts):
        if kind == "literal":
            steps.extend(text.encode("utf-8"))
            continue
        excluded = {_COLON}
        following = parts[index + 1] if index + 1 < len(parts) else None
        if following is not None and following[0] == "literal" and following[1]:
            first = following[1].encode("utf-8")[0]
            if first != _COLON:
                excluded.add(first)
        steps.append(frozenset(excluded))
    return steps


def _moves(steps: List[_Step], position: int) -> List[Tuple[int, _Step]]:
    """The automaton's moves from ``position`` (steps before it taken): the next step, and a
    placeholder just taken taking one more byte."""
    moves: List[Tuple[int, _Step]] = []
    if position < len(steps):
        moves.append((position + 1, steps[position]))
    if position > 0 and isinstance(steps[position - 1], frozenset):
        moves.append((position, steps[position - 1]))
    return moves


def _admits_some(x: _Step, y: _Step) -> bool:
    """Whether some name byte satisfies both steps. Two placeholders always share one: each
    excludes at most two of the alphabet's 69 bytes."""
    if isinstance(x, int):
        return x == y if isinstance(y, int) else x not in y
    if isinstance(y, int):
        return y not in x
    return True
