"""Ready handlers: the rooms' auth route and ``config`` for WSGI and ASGI, and a webhook receiver.

Routes and answers follow docs/rooms-protocol.md "Auth route" (the sample backend's
``POST /rooms/auth`` and ``GET /config``) and the Node library's ``src/http.js``; the interfaces
are PEP 3333 (WSGI) and the ASGI 3 HTTP scope (https://asgi.readthedocs.io/).

Statuses: ``200`` the answer (canonical JSON, ``Cache-Control: no-store``); ``400`` a body that is
not ``{"rooms": [names]}`` with at most 100 string names (or a bad ``Content-Length``); ``401``
the ``user`` function raised (the client may retry once); ``404`` another path (unless a
``fallback`` app takes it); ``405`` another method (with ``Allow``); ``413`` a body over 64 KiB.
``OPTIONS`` is a browser's preflight, answered for the ``allowed_origins`` given
(``realtime_backend.cors``); a listed origin's answers carry its CORS headers.
"""

from __future__ import annotations

import asyncio
import inspect
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, Iterable, List, Optional, Tuple

from .canonical import StrictJSONError, canonical_json, strict_loads
from .cors import CrossOrigin, Headers
from .errors import WebhookError
from .realtime import MAX_ROOMS, MAX_WEBHOOK_BYTES

if TYPE_CHECKING:  # pragma: no cover
    from .realtime import Realtime

__all__ = ["MAX_BODY_BYTES", "wsgi_app", "asgi_app", "webhook_wsgi_app", "webhook_asgi_app", "parse_auth_request"]

#: Largest auth request body read, in bytes (an auth request naming 100 rooms is about 17 KiB).
MAX_BODY_BYTES = 64 * 1024

_ROOMS_EXPECTED = f'expected {{"rooms": [names]}} with at most {MAX_ROOMS} rooms'


class _BadRequest(Exception):
    pass


def parse_auth_request(body: bytes) -> Optional[List[str]]:
    """The room names of an auth request body, or ``None`` when it is not
    ``{"rooms": [names]}`` (strict JSON, UTF-8) with at most 100 ``str`` names.

    Source: docs/rooms-protocol.md "Auth route" ("At most 100 rooms a request").
    """
    try:
        request = strict_loads(body)
    except StrictJSONError:
        return None
    if not isinstance(request, dict):
        return None
    rooms = request.get("rooms")
    if not isinstance(rooms, list) or len(rooms) > MAX_ROOMS or not all(isinstance(name, str) for name in rooms):
        return None
    return rooms


def _json_bytes(value: Any) -> bytes:
    return canonical_json(value).encode("utf-8")


def _status_line(status: int) -> str:
    return f"{status} {HTTPStatus(status).phrase}"


def _headers(length: int, allow: Optional[str], extra: Headers = ()) -> List[Tuple[str, str]]:
    headers = [("Content-Type", "application/json"), ("Content-Length", str(length)), ("Cache-Control", "no-store")]
    if allow:
        headers.append(("Allow", allow))
    return headers + list(extra)


def _wsgi_reply(start_response: Callable[..., Any], status: int, value: Any, allow: Optional[str] = None,
                extra: Headers = ()) -> List[bytes]:
    if value is None:  # 204: no body
        start_response(_status_line(status), [("Cache-Control", "no-store")] + list(extra))
        return []
    text = _json_bytes(value)
    start_response(_status_line(status), _headers(len(text), allow, extra))
    return [text]


def _read_wsgi_body(environ: Dict[str, Any], limit: int) -> Optional[bytes]:
    """The request's body, ``None`` when it is over ``limit`` bytes (not read then).

    Raises:
        _BadRequest: a ``Content-Length`` that is not a non-negative integer.
    """
    stream = environ.get("wsgi.input")
    declared = (environ.get("CONTENT_LENGTH") or "").strip()
    if declared:
        if not (declared.isascii() and declared.isdigit()):
            raise _BadRequest()
        length = int(declared)
        if length > limit:
            return None
        chunks = []
        remaining = length
        while remaining > 0 and stream is not None:
            chunk = stream.read(remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    if stream is not None and environ.get("wsgi.input_terminated"):
        data = stream.read(limit + 1)
        return None if len(data) > limit else data
    return b""


def _run(awaitable: Awaitable[Any]) -> Any:
    """Runs an awaitable from sync code (a WSGI thread has no running event loop)."""
    async def wrapper() -> Any:
        return await awaitable
    return asyncio.run(wrapper())


def wsgi_app(realtime: "Realtime", *, user: Callable[[Dict[str, Any]], Optional[str]],
             info: Optional[Callable[[Dict[str, Any], str], Any]] = None, path: str = "",
             fallback: Optional[Callable[..., Iterable[bytes]]] = None,
             allowed_origins: Iterable[str] = ()) -> Callable[..., Iterable[bytes]]:
    """The rooms' routes as a WSGI application (PEP 3333): ``POST {path}/rooms/auth``
    (``{"rooms": [names]}`` → ``authorize_rooms``' answer) and ``GET {path}/config``
    (``config()``). Statuses: see the module's docstring.

    Args:
        realtime: the backend.
        user: ``user(environ) -> str | None``: the app's user from its own session (cookie,
            header), ``None`` for a visitor; raising answers 401.
        info: ``info(environ, user) -> JSON``: a signed-in user's presence info (only for
            presence rooms' tokens); ``None`` for none.
        path: the routes' prefix (``""``), compared with ``PATH_INFO`` (the path under the
            app's mount point, ``SCRIPT_NAME``).
        fallback: a WSGI application for every other path (Node's middleware ``next``); without
            one, other paths get 404.
        allowed_origins: the origins of pages on another origin than this backend that may call
            the routes with the user's credentials (``https://shop.example``, ``http://127.0.0.1:8080``);
            none by default (same origin only). ``*`` is refused.

    Returns:
        ``app(environ, start_response)``.

    Raises:
        ValueError: an allowed origin that is ``*`` or not ``scheme://host[:port]``.
    """
    auth_path = f"{path}/rooms/auth"
    config_path = f"{path}/config"
    cross_origin = CrossOrigin(allowed_origins)

    def app(environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        route = environ.get("PATH_INFO") or "/"
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        if route not in (config_path, auth_path):
            if fallback is not None:
                return fallback(environ, start_response)
            return _wsgi_reply(start_response, 404, {"error": "POST /rooms/auth or GET /config"})
        origin = environ.get("HTTP_ORIGIN")
        if method == "OPTIONS":
            status, error, headers = cross_origin.preflight("GET" if route == config_path else "POST", origin,
                                                            environ.get("HTTP_ACCESS_CONTROL_REQUEST_METHOD"),
                                                            environ.get("HTTP_ACCESS_CONTROL_REQUEST_HEADERS"))
            return _wsgi_reply(start_response, status, error, extra=headers)
        cors = cross_origin.headers(origin)

        def reply(status: int, value: Any, allow: Optional[str] = None) -> List[bytes]:
            return _wsgi_reply(start_response, status, value, allow, cors)

        if route == config_path:
            if method != "GET":
                return reply(405, {"error": "GET /config"}, allow="GET")
            return reply(200, realtime.config())
        if method != "POST":
            return reply(405, {"error": "POST /rooms/auth"}, allow="POST")
        try:
            body = _read_wsgi_body(environ, MAX_BODY_BYTES)
        except _BadRequest:
            return reply(400, {"error": "a bad Content-Length"})
        if body is None:
            return reply(413, {"error": f"a body over {MAX_BODY_BYTES} bytes"})
        rooms = parse_auth_request(body)
        if rooms is None:
            return reply(400, {"error": _ROOMS_EXPECTED})
        try:
            who = user(environ)
            if inspect.isawaitable(who):
                who = _run(who)
        except Exception:
            return reply(401, {"error": "unauthorized"})
        extra = None
        if who is not None and info is not None:
            extra = info(environ, who)
            if inspect.isawaitable(extra):
                extra = _run(extra)
        return reply(200, realtime.authorize_rooms(rooms, who, extra))

    return app


def webhook_wsgi_app(realtime: "Realtime", on_webhook: Callable[[Dict[str, Any]], Any]) -> Callable[..., Iterable[bytes]]:
    """A webhook receiver as a WSGI application: verifies the request with ``verify_webhook``
    (``X-Pusher-Key``, ``X-Pusher-Signature``, the body), hands the webhook to ``on_webhook`` and
    answers ``200 {}``; a refused one gets ``401 {"error": code}`` (``bad_key``,
    ``bad_signature``, ``malformed``) and is not handed on. A body over 1 MiB gets 413, a method
    other than POST 405 (docs/rooms-protocol.md "Webhooks"; Node ``webhookHandler``).

    Args:
        realtime: the backend.
        on_webhook: ``on_webhook({"time_ms", "events"})``, the app's code (may return an
            awaitable, then run with ``asyncio.run``); what it raises propagates (500).

    Returns:
        ``app(environ, start_response)``.
    """

    def app(environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if str(environ.get("REQUEST_METHOD", "GET")).upper() != "POST":
            return _wsgi_reply(start_response, 405, {"error": "POST a webhook"}, allow="POST")
        try:
            body = _read_wsgi_body(environ, MAX_WEBHOOK_BYTES)
        except _BadRequest:
            return _wsgi_reply(start_response, 400, {"error": "a bad Content-Length"})
        if body is None:
            return _wsgi_reply(start_response, 413, {"error": "a body over 1 MiB"})
        try:
            webhook = realtime.verify_webhook(environ.get("HTTP_X_PUSHER_KEY"), environ.get("HTTP_X_PUSHER_SIGNATURE"), body)
        except WebhookError as error:
            return _wsgi_reply(start_response, 401, {"error": error.code})
        result = on_webhook(webhook)
        if inspect.isawaitable(result):
            _run(result)
        return _wsgi_reply(start_response, 200, {})

    return app


# ASGI

async def _asgi_reply(send: Callable[[Dict[str, Any]], Awaitable[None]], status: int, value: Any, allow: Optional[str] = None,
                      extra: Headers = ()) -> None:
    text = b"" if value is None else _json_bytes(value)  # None: 204, no body
    fields = [("Cache-Control", "no-store")] + list(extra) if value is None else _headers(len(text), allow, extra)
    headers = [(name.lower().encode("latin-1"), content.encode("latin-1")) for name, content in fields]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text, "more_body": False})


def _asgi_headers(scope: Dict[str, Any]) -> Dict[str, str]:
    headers: Dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers") or []:
        name = bytes(raw_name).decode("latin-1").lower()
        value = bytes(raw_value).decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


class _Disconnected(Exception):
    pass


async def _read_asgi_body(receive: Callable[[], Awaitable[Dict[str, Any]]], headers: Dict[str, str], limit: int) -> Optional[bytes]:
    """The body, ``None`` when over ``limit`` bytes.

    Raises:
        _BadRequest: a bad ``Content-Length``.
        _Disconnected: the client went away.
    """
    declared = headers.get("content-length", "").strip()
    if declared:
        if not (declared.isascii() and declared.isdigit()):
            raise _BadRequest()
        if int(declared) > limit:
            return None
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            raise _Disconnected()
        if message.get("type") != "http.request":
            continue
        chunk = message.get("body") or b""
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _not_http(scope: Dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    # Lifespan is acknowledged so that servers start; a WebSocket is refused (closed before accept).
    if scope.get("type") == "lifespan":
        while True:
            message = await receive()
            if message.get("type") == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message.get("type") == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    elif scope.get("type") == "websocket":
        await send({"type": "websocket.close", "code": 1000})


def _route(scope: Dict[str, Any]) -> str:
    path = scope.get("path") or "/"
    root = scope.get("root_path") or ""
    return path[len(root):] or "/" if root and path.startswith(root) else path


def asgi_app(realtime: "Realtime", *, user: Callable[..., Any], info: Optional[Callable[..., Any]] = None, path: str = "",
             fallback: Optional[Callable[..., Awaitable[None]]] = None,
             allowed_origins: Iterable[str] = ()) -> Callable[..., Awaitable[None]]:
    """The rooms' routes as an ASGI 3 application (``http`` scope): ``POST {path}/rooms/auth``
    and ``GET {path}/config``, answered as ``wsgi_app`` answers them (statuses: see the
    module's docstring); authorizers are awaited with ``authorize_rooms_async``.

    Args:
        realtime: the backend.
        user: ``user(scope, headers) -> str | None`` or an ``async def`` of it; ``headers`` maps
            lowercase names to values (repeated headers joined with ``", "``); ``None`` is a
            visitor; raising answers 401.
        info: ``info(scope, headers, user) -> JSON`` (sync or async): a signed-in user's
            presence info; ``None`` for none.
        path: the routes' prefix, compared with ``scope["path"]`` less ``scope["root_path"]``.
        fallback: an ASGI application for other paths and for non-``http`` scopes; without
            one, other paths get 404, ``lifespan`` is acknowledged and a WebSocket is closed.
        allowed_origins: pages' origins that may call the routes across origins, as for
            ``wsgi_app``.

    Returns:
        ``app(scope, receive, send)``.

    Raises:
        ValueError: an allowed origin that is ``*`` or not ``scheme://host[:port]``.
    """
    auth_path = f"{path}/rooms/auth"
    config_path = f"{path}/config"
    cross_origin = CrossOrigin(allowed_origins)

    async def app(scope: Dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope.get("type") != "http":
            if fallback is not None:
                return await fallback(scope, receive, send)
            return await _not_http(scope, receive, send)
        route = _route(scope)
        method = str(scope.get("method", "GET")).upper()
        if route not in (config_path, auth_path):
            if fallback is not None:
                return await fallback(scope, receive, send)
            return await _asgi_reply(send, 404, {"error": "POST /rooms/auth or GET /config"})
        headers = _asgi_headers(scope)
        origin = headers.get("origin")
        if method == "OPTIONS":
            status, error, fields = cross_origin.preflight("GET" if route == config_path else "POST", origin,
                                                           headers.get("access-control-request-method"),
                                                           headers.get("access-control-request-headers"))
            return await _asgi_reply(send, status, error, extra=fields)
        cors = cross_origin.headers(origin)

        async def reply(status: int, value: Any, allow: Optional[str] = None) -> None:
            await _asgi_reply(send, status, value, allow, cors)

        if route == config_path:
            if method != "GET":
                return await reply(405, {"error": "GET /config"}, allow="GET")
            return await reply(200, realtime.config())
        if method != "POST":
            return await reply(405, {"error": "POST /rooms/auth"}, allow="POST")
        try:
            body = await _read_asgi_body(receive, headers, MAX_BODY_BYTES)
        except _BadRequest:
            return await reply(400, {"error": "a bad Content-Length"})
        except _Disconnected:
            return None
        if body is None:
            return await reply(413, {"error": f"a body over {MAX_BODY_BYTES} bytes"})
        rooms = parse_auth_request(body)
        if rooms is None:
            return await reply(400, {"error": _ROOMS_EXPECTED})
        try:
            who = await _maybe_await(user(scope, headers))
        except Exception:
            return await reply(401, {"error": "unauthorized"})
        extra = None
        if who is not None and info is not None:
            extra = await _maybe_await(info(scope, headers, who))
        answer = await realtime.authorize_rooms_async(rooms, who, extra)
        return await reply(200, answer)

    return app


def webhook_asgi_app(realtime: "Realtime", on_webhook: Callable[[Dict[str, Any]], Any]) -> Callable[..., Awaitable[None]]:
    """A webhook receiver as an ASGI 3 application (``http`` scope), answering as
    ``webhook_wsgi_app`` does; ``on_webhook`` may be sync or async.

    Returns:
        ``app(scope, receive, send)``.
    """

    async def app(scope: Dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope.get("type") != "http":
            return await _not_http(scope, receive, send)
        if str(scope.get("method", "GET")).upper() != "POST":
            return await _asgi_reply(send, 405, {"error": "POST a webhook"}, allow="POST")
        headers = _asgi_headers(scope)
        try:
            body = await _read_asgi_body(receive, headers, MAX_WEBHOOK_BYTES)
        except _BadRequest:
            return await _asgi_reply(send, 400, {"error": "a bad Content-Length"})
        except _Disconnected:
            return None
        if body is None:
            return await _asgi_reply(send, 413, {"error": "a body over 1 MiB"})
        try:
            webhook = realtime.verify_webhook(headers.get("x-pusher-key"), headers.get("x-pusher-signature"), body)
        except WebhookError as error:
            return await _asgi_reply(send, 401, {"error": error.code})
        await _maybe_await(on_webhook(webhook))
        return await _asgi_reply(send, 200, {})

    return app
