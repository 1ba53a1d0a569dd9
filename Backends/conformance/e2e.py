"""End to end for a backend library: its sample app beside a real realtime-server,
with the Swift `realtime join` CLI as the app's user.

Usage: e2e.py --app 'COMMAND with {port}' --server PATH --cli PATH [--name NAME] [--chromium PATH --chromedriver PATH]

Starts realtime-server (posting webhooks to the app), the app (its command, with APP_ID, APP_KEY,
APP_SECRET, REALTIME_API and PORT in its environment; every library's example app serves POST
/rooms/auth, GET /config, POST /publish, POST /webhook and GET /webhooks), a counting forwarder
in front of the app's auth route and a TCP proxy in front of the server that the run cuts. Then
`realtime join` joins order:1, order:13 (its owner is someone else), chat:1:2 and news:tech as
ann: one auth request for all four, order:13 failing alone with forbidden; an event published
through the library arrives; the proxy is cut while two more are published, and after the
reconnect they arrive replayed, in order, once, with no new auth request; the server's room_event
webhooks reach the app verified by the library, and a tampered one is refused with 401.
Last, across origins in headless Chromium: a page served from another origin than the app
(ALLOWED_ORIGINS names it) joins order:2 through the app's auth route, its preflight answered,
and gets an event published through the app; a page on an origin not listed cannot read the
auth route's answer.

Prints `ok NAME detail` or `FAIL NAME detail` per check, then a JSON line; exits 0 only when
every check passed. Loopback only; bounded: a hard stop at 60 s.
"""
import argparse
import hashlib
import hmac
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "peers"))
from browser_client import Child, Clock, Loop, Results, drive, expect, run_check  # noqa: E402

APP_ID, APP_KEY, APP_SECRET = "42", "app-key", "app-secret"
HARD_STOP = 60


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http(method, url, body=None, headers=None):
    """(status, parsed JSON or text) of one request; 5 s timeout."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode(errors="replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


class AuthCounter:
    """Forwards POST /rooms/auth to the app, counting the requests and the rooms each named."""

    def __init__(self, app_port):
        counter = self
        self.requests = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *arguments):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    counter.requests.append(json.loads(body).get("rooms"))
                except ValueError:
                    counter.requests.append(None)
                status, answer = http("POST", f"http://127.0.0.1:{app_port}{self.path}", body, {"X-User": self.headers.get("X-User", "")})
                text = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


PAGE = """<!doctype html><meta charset="utf-8"><title>cross-origin</title><script type="module">
import { BirdRealtime } from "/client/realtime.js";
const auth = "http://127.0.0.1:%(app_port)d/rooms/auth";
window.received = [];
window.errors = [];
// The auth route read directly, as a page's own code would: its status, or the browser's refusal.
window.probe = () => fetch(auth, { method: "POST", credentials: "include", body: JSON.stringify({ rooms: ["news:tech"] }),
  headers: { "Content-Type": "application/json", "X-User": "ann" } }).then((answer) => `status ${answer.status}`, (error) => `refused: ${error.name}`);
if (%(join)s) {
  const bird = new BirdRealtime({ appKey: "%(key)s", host: "127.0.0.1", port: %(server_port)d, roomAuthEndpoint: auth,
    authHeaders: { "X-User": "ann" }, authCredentials: "include" });
  const room = bird.join("order:2");
  room.on("joined", () => { window.joined = true; });
  room.on("updated", (data) => { window.received.push(data.n); });
  room.on("error", (error) => { window.errors.push(error.code + " " + error.message); });
}
</script>"""


class PageServer:
    """A page on an origin of its own (a loopback port), with the client under /client/ fetched
    from the realtime-server (the page's module then loads from its own origin)."""

    def __init__(self, join):
        page = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *arguments):
                pass

            def do_GET(self):
                if self.path.startswith("/client/"):
                    status, body, kind = page.client(self.path)
                else:
                    status, body, kind = 200, (PAGE % page.values).encode(), "text/html; charset=utf-8"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.values = {"join": "true" if join else "false", "key": APP_KEY}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def client(self, path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.values['server_port']}{path}", timeout=5) as answer:
                return answer.status, answer.read(), answer.headers.get("Content-Type", "text/javascript")
        except urllib.error.HTTPError as error:
            return error.code, b"", "text/plain"


class Run:
    def __init__(self, args, results):
        self.args, self.results, self.clock = args, results, Clock()
        self.temp = tempfile.mkdtemp(prefix="backend-e2e-")
        self.server = self.app = self.cli = self.loop = self.proxy = self.counter = self.driver = None
        self.lines = []
        # The page the app allows (ALLOWED_ORIGINS), and one on an origin it does not.
        self.page, self.stranger = PageServer(join=True), PageServer(join=False)

    def setup(self):
        self.app_port = free_port()
        self.server = Child("realtime-server", [self.args.server, "--host", "127.0.0.1", "--port", "0", "--app-id", APP_ID,
                                                "--app-key", APP_KEY, "--app-secret", APP_SECRET, "--memory",
                                                "--webhook", f"http://127.0.0.1:{self.app_port}/webhook"],
                            os.path.join(self.temp, "server.log"))
        self.server.start()
        environment = {**os.environ, "APP_ID": APP_ID, "APP_KEY": APP_KEY, "APP_SECRET": APP_SECRET,
                       "REALTIME_API": f"http://127.0.0.1:{self.server.port}", "PORT": str(self.app_port),
                       "ALLOWED_ORIGINS": self.page.origin}
        for page in (self.page, self.stranger):
            page.values.update(app_port=self.app_port, server_port=self.server.port)
        self.app_log = open(os.path.join(self.temp, "app.log"), "ab")
        self.app = subprocess.Popen(shlex.split(self.args.app.replace("{port}", str(self.app_port))), env=environment,
                                    stdin=subprocess.DEVNULL, stdout=self.app_log, stderr=self.app_log)
        self.clock.wait(lambda: self.app.poll() is not None or self.reachable(), 10, "the app answering GET /config")
        expect(self.app.poll() is None, f"the app exited: {self.app_log_text()}")
        self.counter = AuthCounter(self.app_port)
        self.loop = Loop()
        self.proxy = self.loop.proxy("server", self.server.port)

    def reachable(self):
        try:
            return http("GET", f"http://127.0.0.1:{self.app_port}/config")[0] == 200
        except OSError:
            return False

    def app_log_text(self):
        self.app_log.flush()
        with open(os.path.join(self.temp, "app.log"), "rb") as log:
            return log.read()[-2000:].decode(errors="replace")

    def teardown(self):
        if self.driver:
            try:
                self.driver.quit()
            except Exception:  # noqa: BLE001 (a browser already gone)
                pass
        for page in (self.page, self.stranger):
            page.server.shutdown()
        if self.cli and self.cli.poll() is None:
            self.cli.terminate()
            try:
                self.cli.wait(3)
            except subprocess.TimeoutExpired:
                self.cli.kill()
        if self.app and self.app.poll() is None:
            self.app.terminate()
            try:
                self.app.wait(3)
            except subprocess.TimeoutExpired:
                self.app.kill()
        if self.loop:
            self.loop.stop([self.proxy])
        if self.counter:
            self.counter.server.shutdown()
        if self.server:
            self.server.stop()

    def read_cli(self):
        for raw in self.cli.stdout:
            try:
                self.lines.append(json.loads(raw))
            except ValueError:
                self.lines.append({"kind": "text", "text": raw.strip()})

    def events(self, room="order:1"):
        return [line for line in list(self.lines) if line.get("kind") == "room" and line.get("room") == room]

    def publish(self, n):
        status, answer = http("POST", f"http://127.0.0.1:{self.app_port}/publish", {"room": "order:1", "event": "updated", "data": {"n": n}})
        expect(status == 200, f"publishing n={n} through the app: {status} {answer}")

    def check_join(self):
        self.cli = subprocess.Popen([self.args.cli, "join", f"ws://127.0.0.1:{self.proxy.port}/app/{APP_KEY}", "order:1", "order:13",
                                     "chat:1:2", "news:tech", "--auth-endpoint", f"http://127.0.0.1:{self.counter.port}/rooms/auth",
                                     "--header", "X-User: ann", "--json"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self.read_cli, daemon=True).start()
        joined = lambda: {line["room"] for line in list(self.lines) if line.get("kind") == "room-state" and line.get("event") == "joined"}
        self.clock.wait(lambda: {"order:1", "chat:1:2", "news:tech"} <= joined(), 10, "order:1, chat:1:2 and news:tech joined")
        refused = [line for line in list(self.lines) if line.get("kind") == "room-error" and line.get("room") == "order:13"]
        expect(refused and refused[0]["data"]["code"] == "forbidden", f"order:13: {refused}")
        others = [line for line in list(self.lines) if line.get("kind") == "room-error" and line.get("room") != "order:13"]
        expect(not others, f"other rooms failed: {others}")
        expect(len(self.counter.requests) == 1 and sorted(self.counter.requests[0]) == ["chat:1:2", "news:tech", "order:1", "order:13"],
               f"auth requests: {self.counter.requests}")
        return "1 auth request for 4 rooms; order:1, chat:1:2, news:tech joined; order:13 alone forbidden"

    def check_publish(self):
        self.publish(1)
        self.clock.wait(lambda: len(self.events()) >= 1, 5, "n=1 through the CLI")
        first = self.events()[0]
        expect(first["data"] == {"n": 1} and first["meta"]["replayed"] is False, f"the first event: {first}")
        return "n=1 published through the library arrived live"

    def check_replay(self):
        self.loop.cut(self.proxy)
        self.clock.wait(lambda: any(line.get("kind") == "state" and line.get("current") == "unavailable" for line in list(self.lines)),
                        10, "the CLI seeing the drop")
        self.publish(2)
        self.publish(3)
        self.loop.reopen(self.proxy)
        self.clock.wait(lambda: len(self.events()) >= 3, 15, "n=2 and n=3 after the reconnect")
        self.publish(4)
        self.clock.wait(lambda: len(self.events()) >= 4, 5, "n=4 live")
        time.sleep(0.3)  # anything doubled would arrive now
        events = self.events()
        ns = [event["data"]["n"] for event in events]
        replayed = [event["meta"]["replayed"] for event in events]
        expect(ns == [1, 2, 3, 4], f"events {ns}")
        expect(replayed == [False, True, True, False], f"replayed flags {replayed}")
        expect(len(self.counter.requests) == 1, f"{len(self.counter.requests)} auth requests after the reconnect")
        return "n=2, n=3 published while cut came back replayed, in order, once; n=4 live; still 1 auth request"

    def check_webhooks(self):
        def room_events():
            status, hooks = http("GET", f"http://127.0.0.1:{self.app_port}/webhooks")
            expect(status == 200 and isinstance(hooks, list), f"GET /webhooks: {status} {hooks}")
            return [event for hook in hooks for event in hook["events"] if event.get("name") == "room_event" and event.get("room") == "order:1"]
        events = self.clock.wait(lambda: (lambda found: found if len(found) >= 4 else None)(room_events()), 10, "4 room_event webhooks")
        expect([json.loads(event["data"])["n"] for event in events] == [1, 2, 3, 4], f"webhook events {events}")
        body = json.dumps({"time_ms": 1, "events": [{"name": "room_event", "room": "order:1", "event": "forged", "data": "{}"}]}).encode()
        signature = hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
        status, answer = http("POST", f"http://127.0.0.1:{self.app_port}/webhook", body + b" ", {"X-Pusher-Key": APP_KEY, "X-Pusher-Signature": signature})
        expect(status == 401, f"a tampered webhook: {status} {answer}")
        status, answer = http("POST", f"http://127.0.0.1:{self.app_port}/webhook", body, {"X-Pusher-Key": "another-key", "X-Pusher-Signature": signature})
        expect(status == 401, f"a webhook with another key: {status} {answer}")
        expect(len(room_events()) == 4, "a refused webhook reached the app's handler")
        return "the server's 4 room_event webhooks verified by the library, in order; a tampered one and another key's refused with 401"

    def check_cross_origin(self):
        import headless
        self.driver = headless.driver(self.args.chromium, self.args.chromedriver, "", profile=os.path.join(self.temp, "chromium"))
        self.driver.set_page_load_timeout(15)
        self.driver.set_script_timeout(10)
        self.driver.get(self.page.origin + "/")
        read = lambda name: self.driver.execute_script(f"return window.{name}")
        self.clock.wait(lambda: read("joined") or read("errors"), 15, f"order:2 joined from {self.page.origin}")
        expect(read("joined") and not read("errors"), f"the page's room: errors {read('errors')}")
        status, answer = http("POST", f"http://127.0.0.1:{self.app_port}/publish", {"room": "order:2", "event": "updated", "data": {"n": 7}})
        expect(status == 200, f"publishing to order:2: {status} {answer}")
        self.clock.wait(lambda: read("received") == [7], 10, "n=7 on the page")
        allowed = self.driver.execute_async_script("window.probe().then(arguments[0])")
        expect(allowed == "status 200", f"the allowed page reading the auth route: {allowed}")
        self.driver.get(self.stranger.origin + "/")
        refused = self.driver.execute_async_script("window.probe().then(arguments[0])")
        expect(refused == "refused: TypeError", f"a page on an origin not listed reading the auth route: {refused}")
        return (f"a page on {self.page.origin} joined order:2 through the app on port {self.app_port} (preflight answered) and got n=7; "
                f"one on {self.stranger.origin} was kept from the answer")

    def run(self):
        if not run_check(self.results, "join_one_auth_request", self.check_join):
            self.results.fail("rest", f"skipped: nothing joined (app log: {self.app_log_text()[-600:]})")
            return
        if run_check(self.results, "publish_through_library", self.check_publish):
            run_check(self.results, "drop_replayed_in_order", self.check_replay)
        run_check(self.results, "webhooks_verified", self.check_webhooks)
        run_check(self.results, "cross_origin_in_chromium", self.check_cross_origin)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--name", default="backend")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    results = Results(False)
    run = Run(args, results)
    drive(run, results, HARD_STOP)
    print(json.dumps({"backend": args.name, "passed": results.passed, "failed": results.failed,
                      "seconds": round(time.monotonic() - results.started, 1)}), flush=True)
    return 0 if results.failed == 0 and results.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
