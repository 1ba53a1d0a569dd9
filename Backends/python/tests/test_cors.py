"""Cross-origin requests to the ready handlers: the shared cases of Backends/conformance/cors.json,
through the WSGI and the ASGI application alike."""

import io
import json
from pathlib import Path

import pytest

from conftest import run_asgi
from realtime_backend import CrossOrigin, Realtime

CASES = json.loads((Path(__file__).resolve().parents[2] / "conformance" / "cors.json").read_text(encoding="utf-8"))


def backend():
    realtime = Realtime(app_key="app-key", app_secret="app-secret")
    realtime.room("news:{topic}", public=True)
    return realtime


def user(*_):
    return "ann"


def call_wsgi(app, request):
    body = request.get("body", "").encode()
    environ = {"REQUEST_METHOD": request["method"], "PATH_INFO": request["path"], "SCRIPT_NAME": "", "QUERY_STRING": "",
               "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)), "SERVER_NAME": "test", "SERVER_PORT": "80",
               "wsgi.url_scheme": "http"}
    for name, value in request["headers"].items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value.encode("utf-8").decode("latin-1")  # PEP 3333: bytes as latin-1
    started = {}

    def start_response(status, headers, exc_info=None):
        started["status"] = int(status.split()[0])
        started["headers"] = headers

    text = b"".join(app(environ, start_response))
    if started["status"] == 204:
        assert text == b"" and not any(name.lower() == "content-length" for name, _ in started["headers"])
    return started["status"], {name.lower(): value for name, value in started["headers"]}


def call_asgi(app, request):
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request["method"], "path": request["path"],
             "raw_path": request["path"].encode(), "root_path": "", "query_string": b"",
             "headers": [(name.lower().encode(), value.encode("utf-8")) for name, value in request["headers"].items()]}
    start, body = run_asgi(app, scope, [{"type": "http.request", "body": request.get("body", "").encode(), "more_body": False}])
    if start["status"] == 204:
        assert body["body"] == b""
    return start["status"], {name.decode(): value.decode() for name, value in start["headers"]}


def check(case, status, headers):
    assert status == case["status"], case.get("name")
    for name, value in case["headers"].items():
        assert headers.get(name.lower()) == value, (case.get("name"), name, headers)
    for name in case["absent"]:
        assert name.lower() not in headers, (case.get("name"), name, headers)


@pytest.mark.parametrize("call", [call_wsgi, call_asgi], ids=["wsgi", "asgi"])
def test_every_shared_case(call):
    realtime = backend()
    make = realtime.wsgi_app if call is call_wsgi else realtime.asgi_app
    app = make(user=user, allowed_origins=CASES["allowed_origins"])
    for case in CASES["cases"]:
        check(case, *call(app, case["request"]))
    closed = make(user=user)
    for case in CASES["without_origins"]["cases"]:
        check(case, *call(closed, case["request"]))


def test_a_refused_preflight_says_which_option_allows_the_origin():
    app = backend().wsgi_app(user=user)
    started = {}
    environ = {"REQUEST_METHOD": "OPTIONS", "PATH_INFO": "/rooms/auth", "wsgi.input": io.BytesIO(b""),
               "HTTP_ORIGIN": "https://shop.example", "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "POST"}
    body = json.loads(b"".join(app(environ, lambda status, headers: started.update(status=status))))
    assert started["status"].startswith("403")
    assert body == {"error": "the origin https://shop.example is not allowed: add it to allowed_origins"}


def test_origins_as_a_browser_sends_them_are_accepted():
    for origin in CASES["valid_origins"]["origins"]:
        assert CrossOrigin([origin]).allows(origin), origin


def test_an_origin_that_is_not_utf_8_is_refused_and_echoed_printable():
    app = backend().wsgi_app(user=user, allowed_origins=["https://shop.example"])
    started = {}
    environ = {"REQUEST_METHOD": "OPTIONS", "PATH_INFO": "/rooms/auth", "wsgi.input": io.BytesIO(b""),
               "HTTP_ORIGIN": b"https://e\xffvil.example".decode("latin-1") + "a" * 300, "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "POST"}
    body = json.loads(b"".join(app(environ, lambda status, headers: started.update(status=status))))
    assert started["status"].startswith("403")
    assert body["error"].startswith("the origin https://e?vil.example") and len(body["error"]) < 300


@pytest.mark.parametrize("origin", CASES["invalid_origins"])
def test_invalid_origins_are_refused_when_the_handler_is_built(origin):
    with pytest.raises(ValueError, match="allowed_origins"):
        backend().wsgi_app(user=user, allowed_origins=[origin])
    with pytest.raises(ValueError, match="allowed_origins"):
        CrossOrigin([origin])
