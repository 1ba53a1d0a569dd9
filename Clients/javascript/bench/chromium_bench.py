"""The browser client's benchmarks in real headless Chromium (issue 32); prints a table.

Usage: chromium_bench.py --server PATH --backend PATH [--runs 3] [--events 100000] [--resumes 20]
                         [--chromium PATH] [--chromedriver PATH]

(a) Room events a second. A firehose on loopback (a WebSocket server written here: RFC 6455's
    handshake, then pre-encoded unmasked frames in one write, so the sender is never the
    bottleneck) answers a room join with `joined` and writes N `bird:room_event` frames, the
    reference server's bytes (data {"seq":N,"p":1.5}, meta with ids 1…N). In one page, in turn:
    a bare `WebSocket` that sends the join itself and counts frames after `joined` (parsing
    nothing), then `BirdRealtime` with a `room.on("tick")` handler counting events. The rate is
    N / (time from the first event to the last), on the page's clock; a warm-up run of each
    first, then --runs runs. Target: room.on ≥ 60 % of the bare socket. A third row feeds the
    same frames to `BirdRealtime` through a fake socket in the page (no network, no browser
    WebSocket): the client's own ceiling.
(b) Reconnect → the last of 1,000 missed room events. The real `realtime-server` (use a release
    build) and `room-backend` (`bench:{id}`, history 1000): the page joins, `disconnect()`s,
    1,000 events are published through the signed HTTP API (`batch_room_events`, 100 a request),
    then `connect()`; the time from `connect()` to the handler receiving the 1,000th (each with
    `meta.replayed`; the run fails if fewer were replayed). --resumes resumes after one warm-up.
    Target: ≤ 100 ms.
Loopback only; every wait bounded; children and the driver always ended.
"""
import argparse
import asyncio
import base64
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "Tests", "peers"))
from browser_client import APP_ID, APP_KEY, APP_SECRET, Child, make_driver, signed  # noqa: E402

ROOM = "bench:1"
SOURCE = os.path.normpath(os.path.join(HERE, "..", "src"))
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3


def frame(text):
    """One unmasked text frame (a server's, RFC 6455 §5.2)."""
    payload = text.encode()
    n = len(payload)
    if n < 126:
        return bytes([0x81, n]) + payload
    if n < 65536:
        return bytes([0x81, 126]) + n.to_bytes(2, "big") + payload
    return bytes([0x81, 127]) + n.to_bytes(8, "big") + payload


def room_frame(event, data, meta=None):
    inner = {"data": data, "event": event}
    if meta is not None:
        inner["meta"] = meta
    return frame(json.dumps({"channel": ROOM, "data": json.dumps(inner, separators=(",", ":"), sort_keys=True),
                             "event": "bird:room_event"}, separators=(",", ":"), sort_keys=True))


class Firehose:
    """Serves each connection the handshake, then, after its first frame (the room join),
    `joined` and the whole stream at once; reads and discards until the page closes."""

    def __init__(self, count):
        at = int(time.time() * 1000)
        self.stream = b"".join(room_frame("tick", {"p": 1.5, "seq": seq}, {"at": at, "from": None, "id": seq})
                               for seq in range(1, count + 1))
        self.joined = room_frame("joined", {"count": 1, "epoch": "e1", "id": 0})
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(asyncio.start_server(self.serve, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    async def serve(self, reader, writer):
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key:"))
            accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
            writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            writer.write(frame(json.dumps({"event": "bird:connection_established",
                                           "data": json.dumps({"socket_id": "1.1", "activity_timeout": 120})})))
            first = await asyncio.wait_for(reader.read(2), 5)  # the first frame's head: a join is all it can be here
            if len(first) < 2:
                return
            writer.write(self.joined + self.stream)
            await writer.drain()
            while await asyncio.wait_for(reader.read(65536), 30):
                pass
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, StopIteration):
            pass
        finally:
            writer.close()

    def stop(self):
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)


PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>chromium bench</title></head><body>
<script type="module">
import { BirdRealtime } from "/src/realtime.js";
const B = window.B = { ready: true };
const auth = location.origin + "/rooms/auth";
B.raw = (url, n) => new Promise((resolve, reject) => {
  const ws = new WebSocket(url);
  let joined = false, count = 0, first = 0;
  ws.onmessage = (message) => {
    if (!joined) {
      const frame = JSON.parse(message.data);
      if (frame.event === "bird:connection_established") {
        ws.send(JSON.stringify({ event: "bird:room_join", data: JSON.stringify({ room: "@@ROOM@@", token: "t" }) }));
      } else if (frame.event === "bird:room_event" && JSON.parse(frame.data).event === "joined") joined = true;
      return;
    }
    if (count === 0) first = performance.now();
    if (++count === n) { const ms = performance.now() - first; ws.close(); resolve({ count, ms }); }
  };
  ws.onerror = () => reject(new Error("socket error"));
});
B.client = (url, n) => new Promise((resolve) => {
  const bird = new BirdRealtime({ appKey: "@@KEY@@", url, roomAuthEndpoint: auth });
  let count = 0, first = 0;
  bird.join("@@ROOM@@").on("tick", () => {
    if (count === 0) first = performance.now();
    if (++count === n) { const ms = performance.now() - first; bird.disconnect(); resolve({ count, ms }); }
  });
});
// The client alone: a fake socket in the page hands it the same frames back to back, no network.
B.alone = (n) => new Promise((resolve) => {
  const at = Date.now();
  const event = (data, event, meta) => JSON.stringify({ channel: "@@ROOM@@", data: JSON.stringify(meta ? { data, event, meta } : { data, event }), event: "bird:room_event" });
  const frames = [];
  for (let id = 1; id <= n; id++) frames.push(event({ p: 1.5, seq: id }, "tick", { at, from: null, id }));
  const joined = event({ count: 1, epoch: "e1", id: 0 }, "joined");
  const handshake = JSON.stringify({ event: "bird:connection_established", data: JSON.stringify({ socket_id: "1.1", activity_timeout: 120 }) });
  class FakeSocket {
    constructor() {
      this.bufferedAmount = 0; this.onopen = this.onmessage = this.onclose = this.onerror = null;
      setTimeout(() => { this.onopen?.({}); this.onmessage?.({ data: handshake }); }, 0);
    }
    send(text) {
      if (text.includes("bird:room_join")) setTimeout(() => { this.onmessage?.({ data: joined }); for (const data of frames) this.onmessage?.({ data }); }, 0);
    }
    close() {}
  }
  const bird = new BirdRealtime({ appKey: "@@KEY@@", url: "ws://127.0.0.1:9/fake", roomAuthEndpoint: auth, environment: { WebSocket: FakeSocket } });
  let count = 0, first = 0;
  bird.join("@@ROOM@@").on("tick", () => {
    if (count === 0) first = performance.now();
    if (++count === n) { const ms = performance.now() - first; bird.disconnect(); resolve({ count, ms }); }
  });
});
B.open = (port) => {
  B.bird = new BirdRealtime({ appKey: "@@KEY@@", host: "127.0.0.1", port, roomAuthEndpoint: auth });
  B.room = B.bird.join("@@ROOM@@");
  B.room.on("tick", (data, meta) => {
    B.last = meta.id;
    if (meta.replayed) B.replayed += 1;
    if (B.waiting && meta.id === B.waiting.id) { const done = B.waiting; B.waiting = null; done.resolve({ ms: performance.now() - done.t0, replayed: B.replayed }); }
  });
  return B.room.ready().then(() => B.room.position);
};
B.disconnect = () => new Promise((resolve) => {
  B.bird.disconnect();
  const check = () => B.bird.connection.state === "disconnected" ? resolve(B.last ?? 0) : setTimeout(check, 5);
  check();
});
B.resume = (id) => new Promise((resolve) => {
  B.replayed = 0;
  B.waiting = { id, resolve, t0: performance.now() };
  B.bird.connect();
});
</script></body></html>"""


class Origin:
    """The page, the module (`src/`, as a page would load it) and the room auth route, forwarded
    to room-backend with an X-User (the firehose ignores the token; the real server checks it)."""

    def __init__(self, backend_port):
        page = PAGE.replace("@@ROOM@@", ROOM).replace("@@KEY@@", APP_KEY).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *arguments):
                pass

            def reply(self, status, body, kind):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/bench.html":
                    return self.reply(200, page, "text/html")
                name = self.path.removeprefix("/src/")
                if self.path.startswith("/src/") and "/" not in name and name.endswith(".js") and os.path.exists(os.path.join(SOURCE, name)):
                    with open(os.path.join(SOURCE, name), "rb") as file:
                        return self.reply(200, file.read(), "text/javascript")
                self.reply(404, b"not found", "text/plain")

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = urllib.request.Request(f"http://127.0.0.1:{backend_port}/rooms/auth", data=body, method="POST",
                                                 headers={"Content-Type": "application/json", "X-User": "bench"})
                with urllib.request.urlopen(request, timeout=5) as response:
                    self.reply(response.status, response.read(), "application/json")

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/bench.html"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def stop(self):
        self.http.shutdown()


def publish(server_port, first, count):
    for start in range(first, first + count, 100):
        batch = [{"name": "tick", "room": ROOM, "data": json.dumps({"n": n})} for n in range(start, min(start + 100, first + count))]
        status, answer = signed(server_port, "POST", f"/apps/{APP_ID}/batch_room_events", {"batch": batch})
        if status != 200:
            raise RuntimeError(f"publishing: {status} {answer}")


def throughput(driver, firehose, runs, events):
    url = f"ws://127.0.0.1:{firehose.port}/app/{APP_KEY}"
    rows = {"raw": [], "client": [], "alone": []}
    for run in range(runs + 1):  # the first is the warm-up
        for kind in ("raw", "client", "alone"):
            arguments = [events] if kind == "alone" else [url, events]
            result = driver.execute_async_script(f"B.{kind}(...arguments[0]).then(arguments[1], (e) => arguments[1]({{error: String(e)}}))",
                                                 arguments)
            if "error" in result or result["count"] != events:
                raise RuntimeError(f"{kind}: {result}")
            if run > 0:
                rows[kind].append(events / result["ms"] * 1000)
    return rows


def resumes(driver, server_port, count):
    driver.execute_async_script("B.open(arguments[0]).then(arguments[1])", server_port)
    times = []
    for resume in range(count + 1):  # the first is the warm-up
        last = driver.execute_async_script("B.disconnect().then(arguments[0])")
        publish(server_port, 1, 1000)
        result = driver.execute_async_script("B.resume(arguments[0]).then(arguments[1])", last + 1000)
        if result["replayed"] != 1000:
            raise RuntimeError(f"resume {resume}: {result['replayed']} replayed, expected 1000")
        if resume > 0:
            times.append(result["ms"])
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--resumes", type=int, default=20)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    temp = tempfile.mkdtemp(prefix="chromium-bench-")
    server = Child("realtime-server", [args.server, "--host", "127.0.0.1", "--port", "0", "--app-id", APP_ID, "--app-key", APP_KEY,
                                       "--app-secret", APP_SECRET, "--memory"], os.path.join(temp, "server.log"))
    backend = Child("room-backend", [args.backend, "--host", "127.0.0.1", "--port", "0", "--app-id", APP_ID, "--app-key", APP_KEY,
                                     "--app-secret", APP_SECRET, "--room", "bench:{id},history=1000"], os.path.join(temp, "backend.log"))
    firehose = origin = driver = None
    try:
        server.start()
        backend.start()
        firehose = Firehose(args.events)
        origin = Origin(backend.port)
        driver = make_driver(args, 0, os.path.join(temp, "profile"))
        driver.set_script_timeout(120)
        driver.get(origin.url)
        deadline = time.monotonic() + 10
        while not driver.execute_script("return window.B?.ready === true"):
            if time.monotonic() > deadline:
                raise RuntimeError("the bench page did not load")
            time.sleep(0.05)
        rates = throughput(driver, firehose, args.runs, args.events)
        times = resumes(driver, server.port, args.resumes)
    finally:
        for part in (driver and driver.quit, firehose and firehose.stop, origin and origin.stop, backend.stop, server.stop):
            if part:
                part()
        shutil.rmtree(temp, ignore_errors=True)

    print(f"Chromium {driver.capabilities.get('browserVersion', '?')}, {args.events} room events a run, {args.runs} runs after a warm-up\n")
    print("| run | bare WebSocket, frames/s | room.on, events/s | room.on / bare | target | room.on, fake socket (the client alone), events/s |")
    print("|---|---|---|---|---|---|")
    for index, (raw, client, alone) in enumerate(zip(rates["raw"], rates["client"], rates["alone"]), 1):
        print(f"| {index} | {raw:,.0f} | {client:,.0f} | {client / raw:.0%} | ≥ 60 % | {alone:,.0f} |")
    raw, client, alone = (statistics.median(rates[kind]) for kind in ("raw", "client", "alone"))
    print(f"| median | {raw:,.0f} | {client:,.0f} | {client / raw:.0%} | ≥ 60 % | {alone:,.0f} |")
    print()
    print("| reconnect → the last of 1,000 missed room events in the page | resumes | median | min | max | target |")
    print("|---|---|---|---|---|---|")
    print(f"| connect() → the handler runs for the 1,000th replayed event | {len(times)} | {statistics.median(times):.1f} ms | "
          f"{min(times):.1f} ms | {max(times):.1f} ms | ≤ 100 ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
