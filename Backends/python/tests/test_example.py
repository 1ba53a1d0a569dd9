"""The sample app (example/app.py) as the end-to-end harness runs it: a process with APP_ID,
APP_KEY, APP_SECRET, REALTIME_API and PORT, talking to a fake realtime server."""

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import APP_ID, KEY, SECRET

APP = Path(__file__).resolve().parents[1] / "example" / "app.py"


@pytest.fixture
def sample(fake_server):
    env = {**os.environ, "APP_ID": APP_ID, "APP_KEY": KEY, "APP_SECRET": SECRET, "REALTIME_API": fake_server.url, "PORT": "0"}
    process = subprocess.Popen([sys.executable, str(APP)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(15)
    try:
        assert line and line[0].startswith("port "), (line, process.poll())
        yield f"http://127.0.0.1:{int(line[0].split()[1])}", fake_server
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close()
        process.stderr.close()


def call(url, method="GET", body=None, headers=None):
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def claims(token):
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def test_auth_and_config(sample):
    base, _ = sample
    status, answer = call(base + "/rooms/auth", "POST", {"rooms": ["order:1", "order:13", "chat:1:2", "news:x", "nope:1"]}, {"X-User": "ann"})
    assert status == 200
    rooms = answer["rooms"]
    assert claims(rooms["order:1"]["token"])["rule"]["webhook"] is True
    assert rooms["order:13"] == {"error": "forbidden"} and rooms["nope:1"] == {"error": "no_rule"}
    chat = claims(rooms["chat:1:2"]["token"])
    assert chat["info"] == {"name": "ann"} and chat["rule"]["presence"] and chat["rule"]["members_send"] and chat["rule"]["history"] == 50
    status, answer = call(base + "/rooms/auth", "POST", {"rooms": ["order:1", "news:x"]}, {"X-User": ""})
    assert answer["rooms"]["order:1"] == {"error": "forbidden"} and "sub" not in claims(answer["rooms"]["news:x"]["token"])
    status, config = call(base + "/config")
    assert status == 200 and [grant["pattern"] for grant in config["grants"]] == ["news:{topic}"]
    assert call(base + "/rooms/auth", "POST", b"nope")[0] == 400


def test_publish(sample):
    base, server = sample
    server.answer = lambda request: (200, '{"events":[{"epoch":"e1","id":1,"room":"order:1"}]}')
    status, answer = call(base + "/publish", "POST", {"room": "order:1", "event": "updated", "data": {"status": "paid"}})
    assert status == 200 and answer == {"events": [{"epoch": "e1", "id": 1, "room": "order:1"}]}
    request = server.requests[-1]
    assert request["refused"] is None and request["path"] == f"/apps/{APP_ID}/room_events"
    body = json.loads(request["body"])
    assert body["data"] == '{"status":"paid"}' and body["rule"]["history"] == 20
    server.answer = lambda request: (507, '{"error":"store full","code":"store_full"}')
    status, answer = call(base + "/publish", "POST", {"room": "order:1", "event": "updated", "data": 1})
    assert status == 502 and "store full" in answer["error"]
    assert call(base + "/publish", "POST", {"room": "nothing:1", "event": "e", "data": 1}) == (400, {"error": "invalid_pattern"})
    assert call(base + "/publish", "POST", b"[]")[0] == 400


def test_webhooks_are_verified_and_recorded(sample):
    base, _ = sample
    body = json.dumps({"time_ms": 1, "events": [{"name": "room_event", "room": "order:1", "event": "e", "data": "{}", "id": 1, "at": 2}]}).encode()
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert call(base + "/webhook", "POST", body, {"X-Pusher-Key": KEY, "X-Pusher-Signature": signature}) == (200, {})
    assert call(base + "/webhook", "POST", body + b" ", {"X-Pusher-Key": KEY, "X-Pusher-Signature": signature}) == (401, {"error": "bad_signature"})
    assert call(base + "/webhook", "POST", body, {"X-Pusher-Key": "x", "X-Pusher-Signature": signature}) == (401, {"error": "bad_key"})
    status, recorded = call(base + "/webhooks")
    assert status == 200 and recorded == [json.loads(body)]


def test_the_sample_needs_its_environment():
    env = {key: value for key, value in os.environ.items() if key not in ("APP_ID", "PORT")}
    result = subprocess.run([sys.executable, str(APP)], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "APP_ID" in result.stderr
    env = {**os.environ, "APP_ID": "1", "APP_KEY": "k", "APP_SECRET": "s", "REALTIME_API": "http://127.0.0.1:1", "PORT": "http"}
    result = subprocess.run([sys.executable, str(APP)], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "PORT" in result.stderr
