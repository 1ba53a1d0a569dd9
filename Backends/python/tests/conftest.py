"""Shared fixtures: a fake realtime server that checks Pusher's REST signature as the Swift
server's HTTPAPI.authenticate does (every query parameter but auth_signature, sorted; the path
as sent or percent-decoded; body_md5)."""

import asyncio
import hashlib
import hmac
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

KEY = "app-key"
SECRET = "app-secret"
APP_ID = "42"


def check_signature(method, raw_path, query, body):
    """None when the request is signed, else why not (the Swift server's checks)."""
    parameters = {}
    for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        parameters[name.lower()] = value
    if parameters.get("auth_key") != KEY:
        return "unknown auth_key"
    signature = parameters.get("auth_signature")
    if signature is None:
        return "missing auth_signature"
    if abs(time.time() - float(parameters.get("auth_timestamp", "0"))) > 600:
        return "auth_timestamp"
    if body and parameters.get("body_md5") != hashlib.md5(body).hexdigest():
        return "body_md5"
    decoded = urllib.parse.unquote(raw_path)
    encoded = urllib.parse.quote(decoded, safe="-._~/")
    signed = "&".join(f"{name}={parameters[name]}" for name in sorted(parameters) if name != "auth_signature")
    for path in {decoded, encoded}:
        expected = hmac.new(SECRET.encode(), f"{method}\n{path}\n{signed}".encode(), hashlib.sha256).hexdigest()
        if hmac.compare_digest(expected, signature):
            return None
    return "invalid auth_signature"


class FakeServer:
    """Records requests; answers `answer(request) -> (status, body text)`; 401 when unsigned."""

    def __init__(self):
        self.requests = []
        self.answer = lambda request: (200, '{"ok":true}')
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urllib.parse.urlsplit(self.path)
                request = {"method": method, "path": urllib.parse.unquote(split.path), "raw_path": split.path,
                           "query": dict(urllib.parse.parse_qsl(split.query)), "body": body,
                           "content_type": self.headers.get("Content-Type"),
                           "refused": check_signature(method, split.path, split.query, body)}
                fake.requests.append(request)
                if request["refused"]:
                    status, text = 401, json.dumps({"error": request["refused"], "code": "bad_signature"})
                else:
                    status, text = fake.answer(request)
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self.handle_one("GET")

            def do_POST(self):
                self.handle_one("POST")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def run_asgi(app, scope, messages):
    """Runs an ASGI app on ``scope``, handing it ``messages`` (then waiting); what it sent."""
    messages = list(messages)
    sent = []

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, receive, send), 5))
    return sent


@pytest.fixture
def fake_server():
    server = FakeServer()
    yield server
    server.close()
