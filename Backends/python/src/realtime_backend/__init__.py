"""realtime-backend: rooms, channels and webhooks for an app's Python server.

Rules by pattern, the batched room auth answer, public grants, Pusher-compatible channel and
signin signatures, the signed HTTP API and webhook checks, with the standard library only
(Backends/README.md; docs/rooms-protocol.md). The rooms seed's line::

    from realtime_backend import Realtime

    realtime = Realtime(app_key="app-key", app_secret="app-secret")
    realtime.room("order:{id}", lambda user, p: (order := find_order(p["id"])) is not None
                  and order.user_id == user, history=20)
"""

from .canonical import MAX_DEPTH, StrictJSONError, canonical_json, strict_loads
from .cors import CrossOrigin
from .errors import ApiError, ChannelError, RealtimeError, RuleError, WebhookError
from .handlers import MAX_BODY_BYTES, asgi_app, parse_auth_request, webhook_asgi_app, webhook_wsgi_app, wsgi_app
from .names import MAX_NAME_LENGTH, is_valid_pattern, is_valid_room_name, match_room, parse_pattern, patterns_overlap
from .realtime import (API_TIMEOUT, MAX_ROOM_BATCH, MAX_ROOMS, MAX_TRIGGER_BATCH, MAX_WEBHOOK_BYTES, MIN_LIFETIME,
                       DeclaredRule, Realtime)
from .rules import MAX_HISTORY, MAX_SPAN, RULE_KEYS, make_rule
from .signing import sign_token, signed_query

__version__ = "0.1.0"

__all__ = [
    "Realtime", "DeclaredRule",
    "RealtimeError", "RuleError", "ChannelError", "WebhookError", "ApiError",
    "canonical_json", "strict_loads", "StrictJSONError", "MAX_DEPTH",
    "is_valid_room_name", "is_valid_pattern", "parse_pattern", "match_room", "patterns_overlap", "MAX_NAME_LENGTH",
    "make_rule", "MAX_HISTORY", "MAX_SPAN", "RULE_KEYS",
    "sign_token", "signed_query",
    "wsgi_app", "asgi_app", "CrossOrigin", "webhook_wsgi_app", "webhook_asgi_app", "parse_auth_request", "MAX_BODY_BYTES",
    "MAX_ROOMS", "MAX_WEBHOOK_BYTES", "MIN_LIFETIME", "MAX_ROOM_BATCH", "MAX_TRIGGER_BATCH", "API_TIMEOUT",
]
