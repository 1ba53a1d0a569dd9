"""The app backend's half of rooms and channels in Python.

The rooms seed's line runs as written::

    realtime.room("order:{id}", lambda user, p: (order := find_order(p["id"])) is not None
                  and order.user_id == user, history=20)

Swift's ``RealtimeBackend`` is the reference and the Node library (Backends/node) the sibling
this ports, behaviour for behaviour (Backends/README.md; conformance: Backends/conformance).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import hashlib
import http.client
import inspect
import json
import logging
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .canonical import StrictJSONError, canonical_json, strict_loads
from .errors import ApiError, ChannelError, RuleError, WebhookError
from .names import is_valid_room_name, match_room, parse_pattern, patterns_overlap
from .rules import make_rule
from .signing import hmac_sha256, same_bytes, sign_token, signed_query

__all__ = [
    "Realtime", "DeclaredRule", "MAX_ROOMS", "MAX_WEBHOOK_BYTES", "MIN_LIFETIME", "MAX_ROOM_BATCH",
    "MAX_TRIGGER_BATCH", "API_TIMEOUT",
]

#: Most rooms one auth request answers (the rest get ``bad_request``).
MAX_ROOMS = 100
#: Largest webhook body verified, in bytes (1 MiB).
MAX_WEBHOOK_BYTES = 1 << 20
#: Shortest token or grant lifetime, in seconds: the client renews 10 minutes before expiry.
MIN_LIFETIME = 660
#: Most room events one ``publish_rooms`` request carries.
MAX_ROOM_BATCH = 100
#: Most channel events one ``trigger_batch`` request carries (Pusher's limit).
MAX_TRIGGER_BATCH = 10
#: Seconds a request to the realtime server's HTTP API may take.
API_TIMEOUT = 10.0

_LOG = logging.getLogger("realtime_backend")

#: ``authorizer(user, params)``: ``True`` (or an awaitable of ``True``) admits; anything else refuses.
Authorizer = Callable[[Optional[str], Dict[str, str]], Union[bool, Awaitable[bool]]]

_SOCKET_DIGITS = frozenset("0123456789")
_CHANNEL_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-=@,.;")

# A webhook event's fields and their types (Swift `RealtimeWebhook.Event`): other members are
# left out of the parsed webhook, as Swift's decoder leaves them.
_WEBHOOK_STRINGS = ("name", "channel", "room", "event", "data", "user_id", "socket_id")
_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)


class DeclaredRule:
    """A declared rule: the pattern, what the room keeps and allows, who may join.

    Attributes:
        pattern: the pattern (``"order:{id}"``).
        rule: the rule as tokens carry it (``make_rule``'s result).
        authorize: the authorizer, or ``None`` (every signed-in user; everyone for a public rule).
    """

    __slots__ = ("pattern", "rule", "authorize")

    def __init__(self, pattern: str, rule: Dict[str, Any], authorize: Optional[Authorizer]) -> None:
        self.pattern = pattern
        self.rule = rule
        self.authorize = authorize

    def __repr__(self) -> str:
        return f"DeclaredRule({self.pattern!r}, {self.rule!r}, authorize={'yes' if self.authorize else 'no'})"


def _default_authorizer_error(error: BaseException, room: str) -> None:
    _LOG.error("realtime: the authorizer for %s raised", room, exc_info=(type(error), error, error.__traceback__))


def _is_socket_id(socket_id: object) -> bool:
    if not isinstance(socket_id, str):
        return False
    parts = socket_id.split(".")
    return len(parts) == 2 and all(part and set(part) <= _SOCKET_DIGITS for part in parts)


def _is_channel_text(text: object, longest: int) -> bool:
    return isinstance(text, str) and 0 < len(text) <= longest and set(text) <= _CHANNEL_ALPHABET


def _integer_in(value: object, bounds: Tuple[int, int]) -> Optional[int]:
    # A JSON number that is an integer (1 or 1.0, as Swift's JSONDecoder reads an Int), in range.
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int) and bounds[0] <= value <= bounds[1]:
        return value
    return None


class Realtime:
    """One app's backend: room rules by pattern, the batched auth answer, public grants,
    Pusher's channel signatures, the signed HTTP API and webhook checks.

    Source: Backends/README.md (the contract), docs/rooms-protocol.md, Swift's
    ``RealtimeBackend``, the Node library's ``Realtime``.

    Args:
        app_key: the app key (a non-empty ``str``).
        app_secret: the app secret: signs tokens, channel authorisations and API calls.
        app_id: the app id, for the HTTP API (``publish_room`` …).
        server: the realtime server's HTTP base (``"http://127.0.0.1:6001"``), for the HTTP API.
        encryption_master_key: 32 bytes, as standard base64 (``str``) or raw ``bytes``: sealed
            rooms' keys and encrypted channels' shared secrets.
        token_lifetime: seconds a room token is valid (3600; at least 660).
        grant_lifetime: seconds a public grant is valid (86400; at least 660).
        clock: milliseconds since 1970 (``time.time() * 1000`` by default).
        on_authorizer_error: ``(error, room)``, called when an authorizer raises (the room is
            answered ``forbidden``); default: logged on the ``realtime_backend`` logger.

    Raises:
        TypeError: ``app_key``/``app_secret`` missing or not strings, a lifetime that is not a
            number, ``clock`` not callable.
        ValueError: an encryption master key that is not 32 bytes (or not canonical base64), or a
            ``server`` that is not an ``http(s)://host`` URL.
    """

    def __init__(self, app_key: str, app_secret: str, app_id: Optional[str] = None, server: Optional[str] = None,
                 encryption_master_key: Union[str, bytes, None] = None, token_lifetime: float = 3600,
                 grant_lifetime: float = 86400, clock: Optional[Callable[[], float]] = None, *,
                 on_authorizer_error: Optional[Callable[[BaseException, str], None]] = None) -> None:
        if not isinstance(app_key, str) or not app_key or not isinstance(app_secret, str) or not app_secret:
            raise TypeError("Realtime needs app_key and app_secret (non-empty strings)")
        self.app_key = app_key
        self.app_id = None if app_id is None else str(app_id)
        self.server = None if server is None else self._check_server(server)
        self._secret = app_secret
        self._master_key: Optional[bytes] = None
        if encryption_master_key is not None:
            self._master_key = self._decode_master_key(encryption_master_key)
        self.token_lifetime = max(self._seconds(token_lifetime, "token_lifetime"), MIN_LIFETIME)
        self.grant_lifetime = max(self._seconds(grant_lifetime, "grant_lifetime"), MIN_LIFETIME)
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a function returning milliseconds since 1970")
        self._clock = clock or (lambda: time.time() * 1000)
        self.on_authorizer_error = on_authorizer_error or _default_authorizer_error
        #: The declared rules, in declaration order.
        self.rules: List[DeclaredRule] = []

    def __repr__(self) -> str:
        return f"Realtime(app_key={self.app_key!r}, app_id={self.app_id!r}, server={self.server!r}, rules={len(self.rules)})"

    @staticmethod
    def _seconds(value: object, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise TypeError(f"{name} is a number of seconds")
        # Whole seconds, as Swift's `Duration.components.seconds`: `exp` stays an integer.
        return int(value)

    @staticmethod
    def _decode_master_key(key: Union[str, bytes]) -> bytes:
        if isinstance(key, str):
            try:
                raw = base64.b64decode(key, validate=True)
            except (binascii.Error, ValueError) as error:
                raise ValueError("encryption_master_key must be 32 bytes in base64") from error
            if base64.b64encode(raw).decode("ascii") != key:
                raise ValueError("encryption_master_key must be 32 bytes in base64")
        elif isinstance(key, (bytes, bytearray)):
            raw = bytes(key)
        else:
            raise TypeError("encryption_master_key is base64 text or 32 bytes")
        if len(raw) != 32:
            raise ValueError(f"encryption_master_key must be 32 bytes, not {len(raw)}")
        return raw

    @staticmethod
    def _check_server(server: str) -> str:
        parts = urllib.parse.urlsplit(str(server))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) server URL: {server}")
        return str(server).rstrip("/")

    def _now(self) -> int:
        return int(math.floor(self._clock()))

    # Rules

    def room(self, pattern: str, authorizer: Optional[Authorizer] = None, **options: Any) -> "Realtime":
        """Declares the rule for rooms matching ``pattern``; the first declared match wins.

        ``realtime.room("order:{id}", lambda user, p: …, history=20)`` (the rooms seed's line).

        A public rule is joined with ``config()``'s grant, which the realtime server checks
        against the pattern alone: so a public rule takes no authorizer, and no name may match
        both a public pattern and another rule's (either declared first); both are refused
        here, so a visitor never gets into a room ``authorize_rooms`` refuses.

        Args:
            pattern: ``"order:{id}"``, ``"chat:{a}:{b}"``, ``"shop"`` (docs/rooms-protocol.md "Names").
            authorizer: ``(user, params) -> bool`` or an ``async def`` / a function returning an
                awaitable; ``user`` the signed-in user (a visitor is refused a non-public rule before
                it is asked), ``params`` the pattern's
                parameters by name (``{"id": "1042"}``). Only ``True`` admits. ``None`` admits
                every signed-in user (everyone, for a public rule, which takes none).
            **options: the protocol's rule keys: ``history`` (0…100000), ``span`` (seconds,
                1…1800), ``presence``, ``max`` (≥ 1), ``members_send``, ``webhook``, ``sealed``,
                ``public`` (Backends/README.md "Rules by pattern").

        Returns:
            The backend, to declare the next rule.

        Raises:
            RuleError: ``invalid_pattern``; ``invalid_rule`` (unknown key, wrong type — a bool
                for a number or a number for a flag — out of range, or an authorizer that is not
                callable); ``master_key_required`` (``sealed=True`` without the master key);
                ``public_authorizer`` (an authorizer on a public rule); ``public_overlap`` (a
                public pattern and another that can match the same name, ``patterns_overlap``;
                the rule is not added).
        """
        if parse_pattern(pattern) is None:
            raise RuleError("invalid_pattern", f"invalid room pattern {pattern}")
        rule = make_rule(pattern, options)
        if rule["sealed"] and self._master_key is None:
            raise RuleError("master_key_required", f"the sealed rule for {pattern} needs the backend's encryption_master_key")
        if authorizer is not None and not callable(authorizer):
            raise RuleError("invalid_rule", f"the authorizer for {pattern} is not a function")
        if rule["public"] and authorizer is not None:
            raise RuleError("public_authorizer",
                            f"the public rule for {pattern} takes no authorizer: its grant admits anyone without asking the backend")
        for declared in self.rules:
            if (declared.rule["public"] or rule["public"]) and patterns_overlap(declared.pattern, pattern):
                raise RuleError("public_overlap",
                                f"the rules for {declared.pattern} and {pattern} can match the same room, and one is public: "
                                "a public pattern must match no name another rule claims")
        self.rules.append(DeclaredRule(pattern, rule, authorizer))
        return self

    def rule_for(self, room: str) -> Optional[Tuple[DeclaredRule, Dict[str, str]]]:
        """The first declared rule whose pattern matches ``room``, and the parameters.

        Returns:
            ``(declared, params)`` or ``None`` (no pattern matches, or ``room`` is not a valid
            name). Never raises.
        """
        for declared in self.rules:
            params = match_room(room, declared.pattern)
            if params is not None:
                return declared, params
        return None

    # The batched auth answer

    @staticmethod
    def _names(rooms: Iterable[str]) -> List[str]:
        if isinstance(rooms, (str, bytes)):
            raise TypeError("rooms is a list of room names, not one string")
        names: List[str] = []
        seen = set()
        for name in rooms:
            if not isinstance(name, str):
                raise TypeError(f"a room name is a str, not {type(name).__name__}")
            if name not in seen:
                seen.add(name)
                names.append(name)
        return names

    @staticmethod
    def _user(user: object) -> Optional[str]:
        if user is None or isinstance(user, str):
            return user
        if isinstance(user, int) and not isinstance(user, bool):
            return str(user)
        raise TypeError(f"the user is a str or None, not {type(user).__name__}")

    def _plan(self, names: List[str], user: Optional[str]) -> Tuple[Dict[str, Any], List[Tuple[str, DeclaredRule, Any]]]:
        """Answers what needs no authorizer; calls the authorizers. Returns the entries decided
        so far (a ``DeclaredRule`` where a token is due) and the awaitables still pending."""
        entries: Dict[str, Any] = {}
        pending: List[Tuple[str, DeclaredRule, Any]] = []
        for index, name in enumerate(names):
            if index >= MAX_ROOMS:
                entries[name] = {"error": "bad_request"}
                continue
            if not is_valid_room_name(name):
                entries[name] = {"error": "invalid_room"}
                continue
            found = self.rule_for(name)
            if found is None:
                entries[name] = {"error": "no_rule"}
                continue
            declared, params = found
            if user is None and not declared.rule["public"]:
                entries[name] = {"error": "forbidden"}
                continue
            if declared.authorize is None:
                entries[name] = declared
                continue
            try:
                result = declared.authorize(user, dict(params))
            except Exception as error:  # an authorizer's failure refuses the room, never the request
                self._report(error, name)
                entries[name] = {"error": "forbidden"}
                continue
            if inspect.isawaitable(result):
                entries[name] = None
                pending.append((name, declared, result))
            else:
                entries[name] = declared if result is True else {"error": "forbidden"}
        return entries, pending

    def _report(self, error: BaseException, room: str) -> None:
        try:
            self.on_authorizer_error(error, room)
        except Exception:  # the hook's own failure must not turn a refusal into a 500
            _LOG.exception("realtime: on_authorizer_error raised")

    async def _settle(self, pending: List[Tuple[str, DeclaredRule, Any]]) -> List[bool]:
        async def one(name: str, awaitable: Any) -> bool:
            try:
                return (await awaitable) is True
            except Exception as error:
                self._report(error, name)
                return False
        return list(await asyncio.gather(*(one(name, awaitable) for name, _, awaitable in pending)))

    def _answer(self, names: List[str], entries: Dict[str, Any], user: Optional[str], info: Any) -> Dict[str, Any]:
        rooms: Dict[str, Any] = {}
        for name in names:
            entry = entries[name]
            if isinstance(entry, DeclaredRule):
                entry = self._entry(name, entry, user, info)
            rooms[name] = entry
        return {"time": self._now(), "rooms": rooms}

    def _entry(self, room: str, declared: DeclaredRule, user: Optional[str], info: Any) -> Dict[str, Any]:
        rule = declared.rule
        try:
            token, expires = self.token(room, user, info if rule["presence"] else None, rule, self.token_lifetime)
        except (TypeError, ValueError):
            # Info that is not JSON (a NaN, an object): Swift answers the room bad_request.
            return {"error": "bad_request"}
        entry: Dict[str, Any] = {"token": token, "expires": expires}
        if rule["sealed"]:
            key = self.room_key(room)
            if key is not None:
                entry["key"] = base64.b64encode(key).decode("ascii")
        return entry

    def authorize_rooms(self, rooms: Sequence[str], user: Optional[str], info: Any = None) -> Dict[str, Any]:
        """The batched auth answer (docs/rooms-protocol.md "Auth route"), synchronously.

        Sync authorizers are called in this thread, in the request's order; awaitables they
        return (coroutine authorizers) are then awaited concurrently with ``asyncio`` (in a
        worker thread with its own event loop when this thread already runs one: from async
        code, prefer ``authorize_rooms_async``).

        Args:
            rooms: room names. Duplicates are answered once; the first 100 distinct names in the
                request's order are answered, the rest get ``bad_request``.
            user: the signed-in user (a ``str``; an ``int`` is taken as its decimal text), or
                ``None`` for a visitor.
            info: the user's presence info (any JSON value), put in presence rooms' tokens;
                ``None`` for none.

        Returns:
            ``{"time": ms, "rooms": {name: {"token", "expires"[, "key"]} | {"error": code}}}``
            with ``time``/``expires`` in milliseconds and the codes ``invalid_room``,
            ``no_rule``, ``forbidden``, ``bad_request``. Write it with ``canonical_json``.

        Raises:
            TypeError: ``rooms`` not a list of ``str``, ``user`` not a ``str``/``int``/``None``.
        """
        names = self._names(rooms)
        user = self._user(user)
        entries, pending = self._plan(names, user)
        if pending:
            try:
                asyncio.get_running_loop()
                running = True
            except RuntimeError:
                running = False
            if running:
                with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                    allowed = pool.submit(asyncio.run, self._settle(pending)).result()
            else:
                allowed = asyncio.run(self._settle(pending))
            for (name, declared, _), ok in zip(pending, allowed):
                entries[name] = declared if ok else {"error": "forbidden"}
        return self._answer(names, entries, user, info)

    async def authorize_rooms_async(self, rooms: Sequence[str], user: Optional[str], info: Any = None) -> Dict[str, Any]:
        """The batched auth answer, for async code: awaitables returned by authorizers are
        awaited concurrently on the running loop (sync authorizers run inline, as in Node).

        Args, returns and raises: as ``authorize_rooms``.
        """
        names = self._names(rooms)
        user = self._user(user)
        entries, pending = self._plan(names, user)
        if pending:
            allowed = await self._settle(pending)
            for (name, declared, _), ok in zip(pending, allowed):
                entries[name] = declared if ok else {"error": "forbidden"}
        return self._answer(names, entries, user, info)

    def token(self, room: str, user: Optional[str], info: Any, rule: Mapping[str, Any], lifetime: int) -> Tuple[str, int]:
        """Mints a room token: an HS256 JWT of ``{exp, iat, info?, room, rule, sub?}``.

        ``iat`` is now in whole seconds, ``exp`` = ``iat`` + ``lifetime`` (docs/rooms-protocol.md
        "Tokens"; Backends/README.md "Tokens").

        Args:
            room: the room name (or a public pattern, for a grant).
            user: the user (``sub``), or ``None`` (no ``sub``).
            info: presence info, or ``None`` (no ``info``).
            rule: the rule it carries.
            lifetime: seconds.

        Returns:
            ``(token, expires)``, ``expires`` in milliseconds since 1970.

        Raises:
            TypeError, ValueError: ``info`` that is not JSON.
        """
        iat = self._now() // 1000
        exp = iat + int(lifetime)
        claims: Dict[str, Any] = {"exp": exp, "iat": iat, "room": room, "rule": dict(rule)}
        if info is not None:
            claims["info"] = info
        if user is not None:
            claims["sub"] = user
        return sign_token(claims, self._secret), exp * 1000

    def config(self) -> Dict[str, Any]:
        """The public grants: one token per public pattern, in declaration order, so the app
        joins those rooms with no auth request (docs/rooms-protocol.md "Auth route").

        Returns:
            ``{"time": ms, "grants": [{"pattern", "token", "expires"}]}``; each grant's token has
            the pattern as ``room``, no ``sub``, and lives ``grant_lifetime`` seconds.
        """
        grants = []
        for declared in self.rules:
            if declared.rule["public"]:
                token, expires = self.token(declared.pattern, None, None, declared.rule, self.grant_lifetime)
                grants.append({"pattern": declared.pattern, "token": token, "expires": expires})
        return {"time": self._now(), "grants": grants}

    def room_key(self, name: str) -> Optional[bytes]:
        """A sealed room's (or an encrypted channel's) 32-byte key: SHA-256 of the name's UTF-8
        bytes followed by the master key, as Pusher derives an encrypted channel's shared
        secret (docs/rooms-protocol.md "Sealed rooms"); ``None`` without a master key."""
        if self._master_key is None:
            return None
        return hashlib.sha256(name.encode("utf-8") + self._master_key).digest()

    # Channels (Pusher's signatures)

    def _sign(self, text: str) -> str:
        return f"{self.app_key}:{hmac_sha256(self._secret, text).hex()}"

    def authorize_channel(self, socket_id: str, channel: str, member: Optional[Mapping[str, Any]] = None) -> Dict[str, str]:
        """Signs a private, presence or encrypted channel subscription (Pusher's channel
        authorisation; Swift ``AuthorizationSigner.authorizeChannel``).

        Args:
            socket_id: the connection's socket id, ``digits.digits``.
            channel: ``private-…``, ``presence-…`` or ``private-encrypted-…`` (1…164 of
                ``A–Z a–z 0–9 _ - = @ , . ;``).
            member: for a presence channel only: ``{"user_id": str, "user_info"?: JSON}``.

        Returns:
            ``{"auth": "key:hex"}``, plus ``channel_data`` (the member's canonical JSON) for a
            presence channel, or ``shared_secret`` (base64 key) for an encrypted one.

        Raises:
            ChannelError: ``invalid_socket_id``, ``invalid_channel``, ``public_channel``,
                ``member_required``, ``member_not_allowed``, ``invalid_member`` (no ``user_id``
                string, or ``user_info`` that is not JSON), ``master_key_required``.
        """
        self._check_socket(socket_id)
        if not _is_channel_text(channel, 164):
            raise ChannelError("invalid_channel", f'invalid channel name "{str(channel)[:64]}": 1 to 164 characters of A-Z a-z 0-9 _ - = @ , . ;')
        if channel.startswith("private-encrypted-"):
            if member is not None:
                raise ChannelError("member_not_allowed", f"{channel} is not a presence channel: it takes no member")
            secret = self.room_key(channel)
            if secret is None:
                raise ChannelError("master_key_required", f"{channel} is an encrypted channel: the signer needs the app's encryption master key")
            return {"auth": self._sign(f"{socket_id}:{channel}"), "shared_secret": base64.b64encode(secret).decode("ascii")}
        if channel.startswith("private-"):
            if member is not None:
                raise ChannelError("member_not_allowed", f"{channel} is not a presence channel: it takes no member")
            return {"auth": self._sign(f"{socket_id}:{channel}")}
        if channel.startswith("presence-"):
            if member is None:
                raise ChannelError("member_required", f"{channel} is a presence channel: a member (user_id, user_info) is required")
            if not isinstance(member, Mapping):
                raise ChannelError("invalid_member", "invalid presence member: not a mapping of user_id and user_info")
            user_id = member.get("user_id")
            if not isinstance(user_id, str) or not user_id:
                raise ChannelError("invalid_member", "invalid presence member: the user id is empty")
            data: Dict[str, Any] = {"user_id": user_id}
            if member.get("user_info") is not None:
                data["user_info"] = member["user_info"]
            try:
                channel_data = canonical_json(data)
            except (TypeError, ValueError) as error:
                raise ChannelError("invalid_member", "invalid presence member: user_info is not representable as JSON") from error
            return {"auth": self._sign(f"{socket_id}:{channel}:{channel_data}"), "channel_data": channel_data}
        raise ChannelError("public_channel", f"{channel} is a public channel: it needs no authorisation")

    def authenticate_user(self, socket_id: str, user_data: str) -> Dict[str, str]:
        """Signs a user signin (Pusher's user authentication; Swift
        ``AuthorizationSigner.authenticateUser``).

        Args:
            socket_id: the connection's socket id, ``digits.digits``.
            user_data: the user's JSON object text, with a string ``id`` of 1…200 characters of
                ``A–Z a–z 0–9 _ - = @ , . ;``; it is signed and answered exactly as given.

        Returns:
            ``{"auth": "key:hex", "user_data": user_data}``.

        Raises:
            ChannelError: ``invalid_socket_id``; ``invalid_user_data`` (not strict JSON —
                ``NaN``, a member named twice, nesting over 64 — not an object, no ``id``, or an
                ``id`` that is not such a string).
        """
        self._check_socket(socket_id)
        if not isinstance(user_data, str):
            raise ChannelError("invalid_user_data", "invalid user data: not JSON text")
        try:
            user = strict_loads(user_data)
        except StrictJSONError as error:
            raise ChannelError("invalid_user_data", f"invalid user data: {error}") from error
        if not isinstance(user, dict):
            raise ChannelError("invalid_user_data", "invalid user data: not a JSON object")
        if "id" not in user:
            raise ChannelError("invalid_user_data", 'invalid user data: no "id"')
        if not _is_channel_text(user["id"], 200):
            raise ChannelError("invalid_user_data", 'invalid user data: "id" must be 1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ;')
        return {"auth": self._sign(f"{socket_id}::user::{user_data}"), "user_data": user_data}

    @staticmethod
    def _check_socket(socket_id: object) -> None:
        if not _is_socket_id(socket_id):
            raise ChannelError("invalid_socket_id", f'invalid socket id "{str(socket_id)[:64]}": expected digits.digits')

    # The realtime server's HTTP API

    def signed_query(self, method: str, path: str, body: Union[str, bytes] = "", params: Optional[Mapping[str, Any]] = None) -> str:
        """Pusher's REST signature for a request, as a query string (without ``?``), at the
        backend's clock: ``auth_key``, ``auth_signature``, ``auth_timestamp`` (seconds),
        ``auth_version=1.0``, ``body_md5`` for a body, and ``params`` (signed too), sorted
        (Backends/README.md "The signed HTTP API"; Swift ``RealtimeBackend.signedQuery``).

        Args:
            method: ``"GET"`` or ``"POST"``.
            path: the path as sent (``"/apps/42/events"``).
            body: the body (``str`` as UTF-8, or bytes); empty for a GET.
            params: extra query parameters (``{"limit": 50}``).

        Raises:
            ValueError: a ``params`` name that is a signature parameter.
        """
        return signed_query(self.app_key, self._secret, method, path, body, self._now() // 1000, params)

    def _room_event(self, room: str, event: str, data: Any) -> Dict[str, Any]:
        found = self.rule_for(room)
        if found is None:
            raise RuleError("invalid_pattern", f"no rule matches the room {room}")
        declared = found[0]
        if declared.rule["sealed"]:
            raise RuleError("sealed_not_supported", f"{room} is sealed: this library does not seal (XSalsa20-Poly1305 needs NaCl; the Swift RealtimeBackend does)")
        return {"data": canonical_json(data), "name": event, "room": room, "rule": dict(declared.rule)}

    def room_event_body(self, room: str, event: str, data: Any) -> str:
        """The body of ``POST /apps/{id}/room_events`` for one event: ``{data, name, room,
        rule}``, ``data`` the event's canonical JSON text and ``rule`` the declared rule, so the
        server keeps history by it even before anyone joined (docs/rooms-protocol.md "HTTP API").

        Args:
            room: the room name.
            event: the event name.
            data: the event's data (any JSON value).

        Returns:
            The body's canonical JSON text.

        Raises:
            RuleError: ``invalid_pattern`` when no declared rule matches ``room``;
                ``sealed_not_supported`` for a sealed room (sealing needs NaCl).
            TypeError, ValueError: ``data`` that is not JSON.
        """
        return canonical_json(self._room_event(room, event, data))

    def publish_room(self, room: str, event: str, data: Any) -> Any:
        """Publishes one room event (``POST /apps/{id}/room_events``).

        Returns:
            The server's answer, parsed: ``{"events": [{"room", "epoch", "id"}]}``.

        Raises:
            RuleError: as ``room_event_body``.
            ApiError: the server refused it (``status`` its HTTP status) or did not answer
                within 10 s (``status`` 0).
            ValueError: the backend has no ``server`` or ``app_id``.
        """
        return self._api("POST", "room_events", self.room_event_body(room, event, data))

    def publish_rooms(self, events: Sequence[Union[Mapping[str, Any], Tuple[str, str, Any]]]) -> Any:
        """Publishes up to 100 room events in one request (``POST /apps/{id}/batch_room_events``;
        the server checks all before publishing any).

        Args:
            events: ``{"room", "event", "data"}`` mappings or ``(room, event, data)`` tuples.

        Returns:
            The server's answer, parsed.

        Raises:
            ValueError: more than 100 events; no ``server``/``app_id``.
            RuleError, ApiError: as ``publish_room``.
        """
        events = list(events)
        if len(events) > MAX_ROOM_BATCH:
            raise ValueError(f"at most {MAX_ROOM_BATCH} room events a batch")
        batch = [self._room_event(*self._triple(item, "room")) for item in events]
        return self._api("POST", "batch_room_events", canonical_json({"batch": batch}))

    @staticmethod
    def _triple(item: Any, target: str) -> Tuple[Any, Any, Any]:
        if isinstance(item, Mapping):
            return item[target], item["event"], item.get("data")
        room, event, data = item
        return room, event, data

    def trigger(self, channels: Union[str, Sequence[str]], event: str, data: Any) -> Any:
        """Triggers a channel event (Pusher's ``POST /apps/{id}/events``): the body
        ``{channel | channels, data, name}``, ``data`` the data's canonical JSON text.

        Args:
            channels: one channel (``str``) or a list of them.
            event: the event name.
            data: the data (any JSON value).

        Returns:
            The server's answer, parsed.

        Raises:
            ApiError, ValueError: as ``publish_room``.
        """
        if isinstance(channels, str):
            body: Dict[str, Any] = {"channel": channels, "data": canonical_json(data), "name": event}
        else:
            body = {"channels": list(channels), "data": canonical_json(data), "name": event}
        return self._api("POST", "events", canonical_json(body))

    def trigger_batch(self, events: Sequence[Union[Mapping[str, Any], Tuple[str, str, Any]]]) -> Any:
        """Triggers up to 10 channel events (Pusher's ``POST /apps/{id}/batch_events``).

        Args:
            events: ``{"channel", "event", "data"}`` mappings or ``(channel, event, data)`` tuples.

        Raises:
            ValueError: more than 10 events; no ``server``/``app_id``.
            ApiError: as ``publish_room``.
        """
        events = list(events)
        if len(events) > MAX_TRIGGER_BATCH:
            raise ValueError(f"at most {MAX_TRIGGER_BATCH} events a batch")
        batch = []
        for item in events:
            channel, event, data = self._triple(item, "channel")
            batch.append({"channel": channel, "data": canonical_json(data), "name": event})
        return self._api("POST", "batch_events", canonical_json({"batch": batch}))

    def room_history(self, room: str, before: Optional[int] = None, limit: Optional[int] = None) -> Any:
        """A page of a room's history (``GET /apps/{id}/rooms/{room}/history``): the newest
        ``limit`` (1…100, 50 by default) events before the id ``before``, oldest first.

        Returns:
            ``{"events": [{"event", "data", "meta": {"id", "at", "from"}}], "more": bool}``.

        Raises:
            ApiError: 404 ``no_history`` for a room that keeps none; others as ``publish_room``.
        """
        params: Dict[str, Any] = {}
        if before is not None:
            params["before"] = int(before)
        if limit is not None:
            params["limit"] = int(limit)
        return self._api("GET", f"rooms/{self._segment(room)}/history", "", params)

    def room_users(self, room: str) -> Any:
        """A room's users (``GET /apps/{id}/rooms/{room}/users``).

        Returns:
            ``{"users": [{"id"}], "connections": n}``.

        Raises:
            ApiError, ValueError: as ``publish_room``.
        """
        return self._api("GET", f"rooms/{self._segment(room)}/users", "")

    @staticmethod
    def _segment(text: str) -> str:
        # A room in a path is percent-encoded (`chat%3A7`, `;` as `%3B`: docs/rooms-protocol.md
        # "HTTP API"); the server accepts a signature over the path as sent.
        return urllib.parse.quote(str(text), safe="-._~")

    def _api(self, method: str, endpoint: str, body: str, params: Optional[Mapping[str, Any]] = None) -> Any:
        if not self.server or not self.app_id:
            raise ValueError("the HTTP API needs the backend's server and app_id")
        base = urllib.parse.urlsplit(self.server)
        path = f"{base.path.rstrip('/')}/apps/{self._segment(self.app_id)}/{endpoint}"
        data = body.encode("utf-8")
        query = self.signed_query(method, path, data, params)
        url = urllib.parse.urlunsplit((base.scheme, base.netloc, path, query, ""))
        request = urllib.request.Request(url, data=data if method == "POST" else None, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=API_TIMEOUT) as response:
                status = response.status
                text = response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            try:
                text = error.read().decode("utf-8", "replace")
            except Exception:
                text = ""
            finally:
                error.close()
            code = None
            try:
                answer = json.loads(text)
                if isinstance(answer, dict) and isinstance(answer.get("code"), str):
                    code = answer["code"]
            except ValueError:
                pass
            raise ApiError(error.code, text[:1000] or str(error.reason), code) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
            reason = getattr(error, "reason", error)
            raise ApiError(0, f"the realtime server did not answer: {reason}") from None
        if not text:
            return {}
        try:
            return json.loads(text)
        except ValueError:
            raise ApiError(status, "an answer that is not JSON") from None

    # Webhooks

    def verify_webhook(self, key: Optional[str], signature: Optional[str], body: Union[str, bytes]) -> Dict[str, Any]:
        """Verifies a webhook request the realtime server posted, then parses it: the key first,
        then the signature over the exact body bytes (constant time), and only then the JSON
        (docs/rooms-protocol.md "Webhooks"; Swift ``RealtimeBackend.verifyWebhook``; Pusher's
        webhook signature).

        Args:
            key: the ``X-Pusher-Key`` header (``None`` when absent).
            signature: the ``X-Pusher-Signature`` header: hex HMAC-SHA256 of the body under the
                app secret (any case).
            body: the body as received (bytes; a ``str`` is taken as UTF-8).

        Returns:
            ``{"time_ms": int, "events": [{"name", …}]}``, each event with the fields Swift's
            ``RealtimeWebhook.Event`` knows (``name``, ``channel``, ``room``, ``event``,
            ``data``, ``id``, ``at``, ``user_id``, ``socket_id``) that are present and not null.

        Raises:
            WebhookError: ``bad_key``; ``bad_signature``; ``malformed`` (over 1 MiB, not UTF-8,
                not strict JSON — ``NaN``, a member named twice, nesting over 64 — or not
                ``{"time_ms": integer, "events": [{"name": str, …}]}`` with each known field of
                its type).
        """
        if key != self.app_key:
            raise WebhookError("bad_key", "the webhook's X-Pusher-Key is not this app's key")
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        expected = hmac_sha256(self._secret, data).hex().encode("ascii")
        if not isinstance(signature, str) or not same_bytes(signature.lower().encode("utf-8"), expected):
            raise WebhookError("bad_signature", "the webhook's X-Pusher-Signature does not sign its body")
        malformed = WebhookError("malformed", 'the webhook\'s body is not {"time_ms", "events"}')
        if len(data) > MAX_WEBHOOK_BYTES:
            raise malformed
        try:
            payload = strict_loads(data)
        except StrictJSONError:
            raise malformed from None
        if not isinstance(payload, dict) or not isinstance(payload.get("events"), list):
            raise malformed
        time_ms = _integer_in(payload.get("time_ms"), _INT64)
        if time_ms is None:
            raise malformed
        events = []
        for item in payload["events"]:
            event = self._webhook_event(item)
            if event is None:
                raise malformed
            events.append(event)
        return {"time_ms": time_ms, "events": events}

    @staticmethod
    def _webhook_event(item: object) -> Optional[Dict[str, Any]]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        event: Dict[str, Any] = {}
        for field in _WEBHOOK_STRINGS:
            value = item.get(field)
            if value is None:
                continue
            if not isinstance(value, str):
                return None
            event[field] = value
        for field, bounds in (("id", _UINT64), ("at", _INT64)):
            value = item.get(field)
            if value is None:
                continue
            number = _integer_in(value, bounds)
            if number is None:
                return None
            event[field] = number
        return event

    # Ready handlers (handlers.py)

    def wsgi_app(self, user: Callable[[Dict[str, Any]], Optional[str]], info: Optional[Callable[[Dict[str, Any], str], Any]] = None,
                 path: str = "", fallback: Optional[Callable[..., Any]] = None, allowed_origins: Iterable[str] = ()) -> Callable[..., Any]:
        """The rooms' routes as a WSGI application: ``POST {path}/rooms/auth`` and
        ``GET {path}/config``, across origins for ``allowed_origins``. See
        ``realtime_backend.handlers.wsgi_app``."""
        from .handlers import wsgi_app
        return wsgi_app(self, user=user, info=info, path=path, fallback=fallback, allowed_origins=allowed_origins)

    def asgi_app(self, user: Callable[..., Any], info: Optional[Callable[..., Any]] = None, path: str = "",
                 fallback: Optional[Callable[..., Any]] = None, allowed_origins: Iterable[str] = ()) -> Callable[..., Any]:
        """The rooms' routes as an ASGI application. See ``realtime_backend.handlers.asgi_app``."""
        from .handlers import asgi_app
        return asgi_app(self, user=user, info=info, path=path, fallback=fallback, allowed_origins=allowed_origins)

    def webhook_wsgi_app(self, on_webhook: Callable[[Dict[str, Any]], Any]) -> Callable[..., Any]:
        """A webhook receiver as a WSGI application. See ``realtime_backend.handlers.webhook_wsgi_app``."""
        from .handlers import webhook_wsgi_app
        return webhook_wsgi_app(self, on_webhook)

    def webhook_asgi_app(self, on_webhook: Callable[[Dict[str, Any]], Any]) -> Callable[..., Any]:
        """A webhook receiver as an ASGI application. See ``realtime_backend.handlers.webhook_asgi_app``."""
        from .handlers import webhook_asgi_app
        return webhook_asgi_app(self, on_webhook)
