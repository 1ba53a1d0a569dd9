"""The ready handlers, called in-process: WSGI (PEP 3333 environ) and ASGI (http scope)."""

import asyncio
import hashlib
import hmac
import io
import json

import pytest

from conftest import run_asgi
from realtime_backend import MAX_BODY_BYTES, Realtime

KEY, SECRET = "app-key", "app-secret"
NOW = 1764579200123


def backend():
    async def async_check(user, params):
        return params["id"] != "13"

    realtime = Realtime(app_key=KEY, app_secret=SECRET, clock=lambda: NOW)
    realtime.room("order:{id}", lambda user, p: p["id"] != "13")
    realtime.room("chat:{id}", async_check, presence=True)
    realtime.room("news:{topic}", public=True)
    return realtime


def header_user(environ):
    value = environ.get("HTTP_X_USER")
    if value == "expired":
        raise PermissionError("session expired")
    return value or None


def call_wsgi(app, method="POST", path="/rooms/auth", body=b"", headers=None, content_length=True, terminated=False):
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
               "wsgi.input": io.BytesIO(body), "SERVER_NAME": "test", "SERVER_PORT": "80", "wsgi.url_scheme": "http"}
    if content_length is True:
        environ["CONTENT_LENGTH"] = str(len(body))
    elif content_length is not None:
        environ["CONTENT_LENGTH"] = content_length
    if terminated:
        environ["wsgi.input_terminated"] = True
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    started = {}

    def start_response(status, response_headers, exc_info=None):
        started["status"] = int(status.split()[0])
        started["headers"] = dict(response_headers)

    text = b"".join(app(environ, start_response))
    assert started["headers"]["Content-Length"] == str(len(text))
    assert started["headers"]["Content-Type"] == "application/json"
    return started["status"], started["headers"], json.loads(text)


def rooms_body(*names):
    return json.dumps({"rooms": list(names)}).encode()


# WSGI

def test_wsgi_200_answers_per_room():
    app = backend().wsgi_app(user=header_user, info=lambda environ, user: {"name": user})
    status, headers, answer = call_wsgi(app, body=rooms_body("order:1", "order:13", "chat:1", "chat:13", "nothing:1"), headers={"X-User": "ann"})
    assert status == 200 and headers["Cache-Control"] == "no-store"
    assert answer["time"] == NOW
    rooms = answer["rooms"]
    assert "token" in rooms["order:1"] and "token" in rooms["chat:1"]
    assert rooms["order:13"] == rooms["chat:13"] == {"error": "forbidden"}
    assert rooms["nothing:1"] == {"error": "no_rule"}


def test_wsgi_visitor_and_config():
    app = backend().wsgi_app(user=header_user)
    status, _, answer = call_wsgi(app, body=rooms_body("order:1", "news:a"))
    assert status == 200 and answer["rooms"]["order:1"] == {"error": "forbidden"} and "token" in answer["rooms"]["news:a"]
    status, _, config = call_wsgi(app, method="GET", path="/config")
    assert status == 200 and [grant["pattern"] for grant in config["grants"]] == ["news:{topic}"]


@pytest.mark.parametrize("body", [
    b"", b"not json", b"[]", b'{"rooms":"order:1"}', b'{"rooms":[1]}', b'{"room":["a"]}', b'{"rooms":["a"],"rooms":["b"]}',
    b'{"rooms":[NaN]}', b"\xff", json.dumps({"rooms": [f"order:{i}" for i in range(101)]}).encode(),
])
def test_wsgi_400(body):
    status, _, answer = call_wsgi(backend().wsgi_app(user=header_user), body=body, headers={"X-User": "ann"})
    assert status == 400 and "error" in answer


def test_wsgi_400_for_a_bad_content_length():
    app = backend().wsgi_app(user=header_user)
    for bad in ("-1", "abc", "1.5", "²"):
        assert call_wsgi(app, body=rooms_body("order:1"), content_length=bad)[0] == 400


def test_wsgi_401_when_the_user_function_raises():
    status, _, answer = call_wsgi(backend().wsgi_app(user=header_user), body=rooms_body("order:1"), headers={"X-User": "expired"})
    assert status == 401 and answer == {"error": "unauthorized"}


def test_wsgi_400_comes_before_401():
    status, _, _ = call_wsgi(backend().wsgi_app(user=header_user), body=b"nope", headers={"X-User": "expired"})
    assert status == 400


def test_wsgi_405_and_404():
    app = backend().wsgi_app(user=header_user)
    status, headers, _ = call_wsgi(app, method="GET", path="/rooms/auth")
    assert status == 405 and headers["Allow"] == "POST"
    status, headers, _ = call_wsgi(app, method="POST", path="/config")
    assert status == 405 and headers["Allow"] == "GET"
    assert call_wsgi(app, path="/other")[0] == 404


def test_wsgi_413_without_reading_the_body():
    app = backend().wsgi_app(user=header_user)
    status, _, _ = call_wsgi(app, body=b"x" * (MAX_BODY_BYTES + 1))
    assert status == 413
    big = json.dumps({"rooms": ["order:1"], "pad": "x" * (MAX_BODY_BYTES - 40)}).encode()
    assert len(big) <= MAX_BODY_BYTES and call_wsgi(app, body=big, headers={"X-User": "a"})[0] == 200


def test_wsgi_body_without_content_length():
    app = backend().wsgi_app(user=header_user)
    assert call_wsgi(app, body=rooms_body("order:1"), content_length=None, terminated=True, headers={"X-User": "a"})[0] == 200
    assert call_wsgi(app, body=b"x" * (MAX_BODY_BYTES + 1), content_length=None, terminated=True)[0] == 413
    # no Content-Length and no wsgi.input_terminated: the body is empty (PEP 3333)
    assert call_wsgi(app, body=rooms_body("order:1"), content_length=None)[0] == 400


def test_wsgi_prefix_and_fallback():
    def fallback(environ, start_response):
        start_response("418 I'm a teapot", [("Content-Type", "application/json"), ("Content-Length", "2")])
        return [b"{}"]

    app = backend().wsgi_app(user=header_user, path="/api", fallback=fallback)
    assert call_wsgi(app, path="/api/rooms/auth", body=rooms_body("news:a"))[0] == 200
    assert call_wsgi(app, method="GET", path="/api/config")[0] == 200
    assert call_wsgi(app, path="/rooms/auth", body=rooms_body("news:a"))[0] == 418


def test_wsgi_async_user_function():
    async def user(environ):
        return "ann"

    status, _, answer = call_wsgi(backend().wsgi_app(user=user), body=rooms_body("order:1"))
    assert status == 200 and "token" in answer["rooms"]["order:1"]


# The webhook handler (WSGI)

def signed(body):
    return {"X-Pusher-Key": KEY, "X-Pusher-Signature": hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()}


def test_webhook_wsgi():
    received = []
    app = backend().webhook_wsgi_app(received.append)
    body = b'{"time_ms":1,"events":[{"name":"channel_occupied","channel":"c"}]}'
    status, _, answer = call_wsgi(app, path="/webhook", body=body, headers=signed(body))
    assert status == 200 and answer == {}
    assert received == [{"time_ms": 1, "events": [{"name": "channel_occupied", "channel": "c"}]}]
    headers = signed(body)
    status, _, answer = call_wsgi(app, path="/webhook", body=body + b" ", headers=headers)
    assert status == 401 and answer == {"error": "bad_signature"}
    status, _, answer = call_wsgi(app, path="/webhook", body=body, headers={**headers, "X-Pusher-Key": "other"})
    assert status == 401 and answer == {"error": "bad_key"}
    status, _, answer = call_wsgi(app, path="/webhook", body=b"not json", headers=signed(b"not json"))
    assert status == 401 and answer == {"error": "malformed"}
    assert call_wsgi(app, method="GET", path="/webhook")[0] == 405
    assert call_wsgi(app, path="/webhook", body=b"x" * ((1 << 20) + 1))[0] == 413
    assert len(received) == 1


def test_webhook_wsgi_async_callback():
    received = []

    async def on_webhook(webhook):
        received.append(webhook)

    body = b'{"time_ms":1,"events":[]}'
    assert call_wsgi(backend().webhook_wsgi_app(on_webhook), body=body, headers=signed(body))[0] == 200
    assert received == [{"time_ms": 1, "events": []}]


# ASGI

def call_asgi(app, method="POST", path="/rooms/auth", body=b"", headers=None, chunks=None, scope_type="http", root_path=""):
    raw_headers = [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    scope = {"type": scope_type, "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "path": path,
             "raw_path": path.encode(), "root_path": root_path, "query_string": b"", "headers": raw_headers}
    pieces = chunks if chunks is not None else [body]
    messages = [{"type": "http.request", "body": piece, "more_body": index < len(pieces) - 1} for index, piece in enumerate(pieces)]
    sent = run_asgi(app, scope, messages)
    if not sent:
        return None, None, None
    start, body_message = sent
    response_headers = {name.decode(): value.decode() for name, value in start["headers"]}
    assert response_headers["content-length"] == str(len(body_message["body"]))
    return start["status"], response_headers, json.loads(body_message["body"])


def asgi_user(scope, headers):
    if headers.get("x-user") == "expired":
        raise PermissionError("session expired")
    return headers.get("x-user") or None


async def async_asgi_user(scope, headers):
    return asgi_user(scope, headers)


@pytest.mark.parametrize("user", [asgi_user, async_asgi_user])
def test_asgi_200(user):
    async def info(scope, headers, who):
        return {"name": who}

    app = backend().asgi_app(user=user, info=info)
    status, headers, answer = call_asgi(app, body=rooms_body("order:1", "chat:1", "chat:13", "order:13"), headers={"X-User": "ann"})
    assert status == 200 and headers["cache-control"] == "no-store"
    assert "token" in answer["rooms"]["order:1"] and "token" in answer["rooms"]["chat:1"]
    assert answer["rooms"]["chat:13"] == answer["rooms"]["order:13"] == {"error": "forbidden"}
    status, _, config = call_asgi(app, method="GET", path="/config")
    assert status == 200 and len(config["grants"]) == 1


def test_asgi_body_in_chunks():
    app = backend().asgi_app(user=asgi_user)
    body = rooms_body("news:a", "news:b")
    status, _, answer = call_asgi(app, chunks=[body[:5], body[5:12], body[12:]])
    assert status == 200 and len(answer["rooms"]) == 2


def test_asgi_refusals():
    app = backend().asgi_app(user=asgi_user)
    assert call_asgi(app, body=b"nope")[0] == 400
    assert call_asgi(app, body=b'{"rooms":[1]}')[0] == 400
    assert call_asgi(app, body=rooms_body("a"), headers={"Content-Length": "x"})[0] == 400
    assert call_asgi(app, body=rooms_body("order:1"), headers={"X-User": "expired"})[:3:2] == (401, {"error": "unauthorized"})
    status, headers, _ = call_asgi(app, method="GET", path="/rooms/auth")
    assert status == 405 and headers["allow"] == "POST"
    assert call_asgi(app, method="PUT", path="/config")[0] == 405
    assert call_asgi(app, path="/elsewhere")[0] == 404
    # over 64 KiB: by Content-Length before reading, or while reading chunks
    assert call_asgi(app, body=b"", headers={"Content-Length": str(MAX_BODY_BYTES + 1)})[0] == 413
    assert call_asgi(app, chunks=[b"x" * MAX_BODY_BYTES, b"x"])[0] == 413


def test_asgi_disconnect_sends_nothing():
    app = backend().asgi_app(user=asgi_user)
    sent = []

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/rooms/auth", "headers": []}
    asyncio.run(app(scope, receive, send))
    assert sent == []


def test_asgi_root_path_prefix_and_fallback():
    async def fallback(scope, receive, send):
        await send({"type": "http.response.start", "status": 418, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"{}"})

    app = backend().asgi_app(user=asgi_user, path="/api", fallback=fallback)
    assert call_asgi(app, path="/mount/api/rooms/auth", root_path="/mount", body=rooms_body("news:a"))[0] == 200
    assert call_asgi(app, path="/api/config", method="GET")[0] == 200
    assert call_asgi(app, path="/x")[0] == 418


def test_asgi_lifespan_and_websocket_scopes():
    app = backend().asgi_app(user=asgi_user)
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent = []

    async def receive():
        return incoming.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(app({"type": "lifespan"}, receive, send))
    assert [message["type"] for message in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    sent.clear()
    asyncio.run(app({"type": "websocket", "path": "/rooms/auth", "headers": []}, receive, send))
    assert sent == [{"type": "websocket.close", "code": 1000}]


def test_webhook_asgi():
    received = []

    async def on_webhook(webhook):
        received.append(webhook)

    app = backend().webhook_asgi_app(on_webhook)
    body = b'{"time_ms":3,"events":[{"name":"room_member_added","room":"r","user_id":"u"}]}'
    assert call_asgi(app, path="/webhook", body=body, headers=signed(body)) == (200, {"content-type": "application/json", "content-length": "2", "cache-control": "no-store"}, {})
    assert received[0]["events"][0]["user_id"] == "u"
    assert call_asgi(app, path="/webhook", body=body, headers={"X-Pusher-Key": KEY})[2] == {"error": "bad_signature"}
    assert call_asgi(app, method="GET", path="/webhook")[0] == 405
