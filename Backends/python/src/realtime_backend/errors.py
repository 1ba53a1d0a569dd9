"""The library's typed errors: each carries the ``code`` the four backends share.

Source: Backends/README.md ("What every library does"), the Node library's ``src/errors.js``
and Swift's ``RealtimeBackend.RuleError``, ``AuthorizationSignerError.code`` and
``RealtimeWebhookError.code``.
"""

from __future__ import annotations

__all__ = ["RealtimeError", "RuleError", "ChannelError", "WebhookError", "ApiError"]


class RealtimeError(Exception):
    """Base class of the library's errors (never raised itself)."""


class CodedError(RealtimeError):
    """An error with a ``code`` shared by the four backends (Backends/README.md)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class RuleError(CodedError):
    """A room rule refused when declared, or an event that no rule can carry.

    ``code`` is one of:

    - ``invalid_pattern``: the pattern is not a valid pattern (docs/rooms-protocol.md "Names"),
      or ``room_event_body`` was asked for a room no declared pattern matches;
    - ``invalid_rule``: an unknown option key, a value of the wrong type (a ``bool`` where a
      number is expected or the reverse) or out of range (history 0…100000, span 1…1800 s,
      max ≥ 1), or an authorizer that is not callable;
    - ``master_key_required``: ``sealed=True`` on a backend without ``encryption_master_key``;
    - ``public_authorizer``: an authorizer on a public rule (its grant admits anyone without
      asking the backend, so the authorizer could never refuse anyone);
    - ``public_overlap``: a rule whose pattern can match a name an already declared rule's
      pattern matches too, when either is public (``patterns_overlap``): the grant would admit a
      visitor to a room the other rule claims, or the other rule would never apply;
    - ``sealed_not_supported``: publishing into a sealed room, which needs XSalsa20-Poly1305
      (NaCl), not in Python's standard library (the Node library refuses the same way).

    Attributes:
        code: the code above.
        message: what is wrong (also ``str(error)``).
    """


class ChannelError(CodedError):
    """A channel authorisation or a user signin refused (Pusher's signatures).

    ``code`` is Swift's ``AuthorizationSignerError.code``: ``invalid_socket_id``,
    ``invalid_channel``, ``public_channel``, ``member_required``, ``member_not_allowed``,
    ``invalid_member``, ``master_key_required`` or ``invalid_user_data``
    (Backends/README.md, "Channels").

    Attributes:
        code: the code above.
        message: what is wrong (also ``str(error)``).
    """


class WebhookError(CodedError):
    """A webhook request refused: answer it 401 and ignore it.

    ``code`` is ``bad_key`` (``X-Pusher-Key`` missing or not this app's key),
    ``bad_signature`` (``X-Pusher-Signature`` missing or not the body's HMAC) or ``malformed``
    (signed, but not ``{"time_ms": integer, "events": [{"name": …}, …]}``, not UTF-8, not
    strict JSON, or over 1 MiB). Source: docs/rooms-protocol.md "Webhooks", Swift's
    ``RealtimeWebhookError``.

    Attributes:
        code: the code above.
        message: what is wrong (also ``str(error)``).
    """


class ApiError(RealtimeError):
    """A request to the realtime server's HTTP API failed.

    Attributes:
        status: the HTTP status the server answered (``0`` when no answer arrived: refused
            connection, DNS failure, the 10 s timeout).
        message: what the server said (its body, at most 1000 characters) or what went wrong.
        code: the server's ``code`` when its answer was ``{"error", "code"}``
            (docs/rooms-protocol.md "HTTP API": ``store_full``, ``no_history``, ``not_found``,
            ``bad_request``, ``invalid_room``, ``not_allowed``), else ``None``.
    """

    def __init__(self, status: int, message: str, code: "str | None" = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
