"""A sample app backend with realtime_backend, for the shared end-to-end harness.

    APP_ID=1 APP_KEY=app-key APP_SECRET=app-secret REALTIME_API=http://127.0.0.1:6001 PORT=0 \\
        python3 Backends/python/example/app.py

Prints ``port N`` on stdout once listening (``PORT=0`` picks a free port). Routes:

- ``POST /rooms/auth``, ``GET /config``: the library's WSGI handler; the user is the ``X-User``
  header (empty or absent: a visitor), presence info ``{"name": user}``; pages on the origins in
  ``ALLOWED_ORIGINS`` (optional, separated by spaces or commas) may call them across origins;
- ``POST /publish`` ``{"room", "event", "data"}``: ``publish_room`` → 200 with the server's
  answer, 502 ``{"error"}`` when the server refused or did not answer, 400 for a bad body or
  a room no rule (or a sealed rule) can publish to;
- ``POST /webhook``: verified with the library and recorded → 200; refused → 401 ``{"error": code}``;
- ``GET /webhooks``: the verified webhooks so far, as a JSON list.

Rules: ``order:{id}`` (history 20, webhook; id 13 is refused), ``chat:{a}:{b}`` (history 50,
presence, members send), ``news:{topic}`` (public).
"""

import os
import re
import sys
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

# Run from a checkout without installing: the package's src folder beside this one.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from realtime_backend import ApiError, Realtime, RuleError, canonical_json, strict_loads  # noqa: E402
from realtime_backend.canonical import StrictJSONError  # noqa: E402


def environment(name):
    """The environment variable ``name``; exits with status 2 when it is missing or empty."""
    value = os.environ.get(name)
    if not value:
        sys.stderr.write(f"app.py: {name} is required (APP_ID, APP_KEY, APP_SECRET, REALTIME_API, PORT)\n")
        sys.exit(2)
    return value


def build(app_id, app_key, app_secret, api):
    """The backend with the sample's rules, and the WSGI application serving it."""
    realtime = Realtime(app_key=app_key, app_secret=app_secret, app_id=app_id, server=api)
    realtime.room("order:{id}", lambda user, p: p["id"] != "13", history=20, webhook=True)
    realtime.room("chat:{a}:{b}", history=50, presence=True, members_send=True)
    realtime.room("news:{topic}", public=True)

    webhooks = []
    lock = threading.Lock()

    def record(webhook):
        with lock:
            webhooks.append(webhook)

    receive_webhook = realtime.webhook_wsgi_app(record)

    def reply(start_response, status, value):
        text = canonical_json(value).encode("utf-8")
        phrases = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large", 502: "Bad Gateway"}
        start_response(f"{status} {phrases[status]}", [("Content-Type", "application/json"), ("Content-Length", str(len(text)))])
        return [text]

    def publish(environ, start_response):
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return reply(start_response, 400, {"error": "a bad Content-Length"})
        if length > 256 * 1024:
            return reply(start_response, 413, {"error": "a body over 256 KiB"})
        try:
            body = strict_loads(environ["wsgi.input"].read(length))
        except StrictJSONError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("room"), str) or not isinstance(body.get("event"), str):
            return reply(start_response, 400, {"error": 'expected {"room", "event", "data"}'})
        try:
            answer = realtime.publish_room(body["room"], body["event"], body.get("data"))
        except RuleError as error:
            return reply(start_response, 400, {"error": error.code})
        except ApiError as error:
            return reply(start_response, 502, {"error": error.message, "status": error.status})
        return reply(start_response, 200, answer)

    def fallback(environ, start_response):
        route = environ.get("PATH_INFO") or "/"
        method = environ.get("REQUEST_METHOD", "GET")
        if route == "/publish":
            return publish(environ, start_response) if method == "POST" else reply(start_response, 405, {"error": "POST /publish"})
        if route == "/webhook":
            return receive_webhook(environ, start_response)
        if route == "/webhooks":
            if method != "GET":
                return reply(start_response, 405, {"error": "GET /webhooks"})
            with lock:
                recorded = list(webhooks)
            return reply(start_response, 200, recorded)
        return reply(start_response, 404, {"error": "POST /rooms/auth, GET /config, POST /publish, POST /webhook, GET /webhooks"})

    def user(environ):
        return environ.get("HTTP_X_USER") or None

    allowed_origins = [origin for origin in re.split(r"[ \t\r\n,]+", os.environ.get("ALLOWED_ORIGINS", "")) if origin]
    application = realtime.wsgi_app(user=user, info=lambda environ, who: {"name": who}, fallback=fallback,
                                    allowed_origins=allowed_origins)
    return realtime, application


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """wsgiref's server, one thread per request."""

    daemon_threads = True
    allow_reuse_address = True


class QuietHandler(WSGIRequestHandler):
    """Requests logged to stderr only when ``APP_LOG`` is set."""

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        """Logs a request as wsgiref does, when ``APP_LOG`` is set."""
        if os.environ.get("APP_LOG"):
            super().log_message(format, *args)


def main():
    """Reads the environment, serves the app and prints ``port N`` once listening."""
    app_id = environment("APP_ID")
    app_key = environment("APP_KEY")
    app_secret = environment("APP_SECRET")
    api = environment("REALTIME_API")
    port_text = environment("PORT")
    if not port_text.isdigit() or int(port_text) > 65535:
        sys.stderr.write(f"app.py: PORT must be a port number, not {port_text}\n")
        sys.exit(2)
    _, application = build(app_id, app_key, app_secret, api)
    server = make_server(os.environ.get("HOST", "127.0.0.1"), int(port_text), application,
                         server_class=ThreadingWSGIServer, handler_class=QuietHandler)
    print(f"port {server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
