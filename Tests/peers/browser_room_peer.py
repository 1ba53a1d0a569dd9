"""A peer for interop tests: the browser client in a page of real headless Chromium, in one room.

Speaks the line protocol of js_room_peer.mjs (the same client in Node) and of the Kotlin
client's peer (Clients/kotlin/peer/RoomPeer.kt): one JSON line per thing the page sees, and
commands on stdin, one a line:
  send EVENT JSON   room.send(EVENT, the parsed JSON)
  leave             room.leave()
  quit              bird.disconnect(), the browser closed, exit 0 (also at the end of stdin)

Usage: browser_room_peer.py PORT APP_KEY AUTH_URL USER ROOM [--chromium PATH] [--chromedriver PATH]

The page is browser_client.py's test page, served from a loopback origin of its own that
forwards the page's room auth requests to AUTH_URL (with the page's X-User); it imports the
client from the realtime-server on PORT (`/client/realtime.js`) and connects to it there.
Bounded: a run ends after 150 s whatever happens.
"""

import argparse
import json
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import browser_client  # noqa: E402  (the page, its origin and the driver's settings)
from selenium.common.exceptions import WebDriverException  # noqa: E402

LIMIT = 150  # seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("port", "app_key", "auth_url", "user", "room"):
        parser.add_argument(name)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()

    def out(**line):
        print(json.dumps(line), flush=True)

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(LIMIT)

    browser_client.APP_KEY = args.app_key  # the page's configuration reads it
    backend_port = urllib.parse.urlsplit(args.auth_url).port
    origin = browser_client.Origin(lambda: int(args.port), backend_port)
    origin.proxy_ports = {"main": int(args.port)}  # no proxy: the page talks to the server
    profile = tempfile.mkdtemp(prefix="browser-room-peer-")
    driver = None
    commands = queue.Queue()

    def read_commands():
        for line in sys.stdin:
            commands.put(line.rstrip("\n"))
        commands.put("quit")

    threading.Thread(target=read_commands, daemon=True).start()
    try:
        driver = browser_client.make_driver(args, 0, profile)
        driver.get(f"{origin.url}/page.html?role=main&user={urllib.parse.quote(args.user)}")
        deadline = time.monotonic() + 15
        while not driver.execute_script("return window.T && (T.ready === true || T.loadErrors.length > 0)"):
            if time.monotonic() > deadline:
                out(failed="the page did not load")
                return 1
            time.sleep(0.05)
        errors = driver.execute_script("return T.loadErrors")
        if errors:
            out(failed=f"the page: {errors}")
            return 1
        driver.execute_script("T.join([arguments[0]])", args.room)
        told_ready, printed_own, printed_kept = False, 0, 0
        while True:
            try:
                command = commands.get(timeout=0.05)
            except queue.Empty:
                command = None
            if command is not None:
                verb, _, rest = command.partition(" ")
                if verb == "send":
                    event, _, text = rest.partition(" ")
                    try:
                        driver.execute_script("T.send(arguments[0], arguments[1], JSON.parse(arguments[2]))", args.room, event, text or "null")
                        out(sent=event)
                    except WebDriverException as error:
                        out(sendFailed=str(error.msg or error).splitlines()[0])
                elif verb == "leave":
                    driver.execute_script("T.leave(arguments[0])", args.room)
                    out(left=args.room)
                elif verb == "quit":
                    driver.execute_script("T.bird.disconnect()")
                    return 0
            view = driver.execute_script("return T.room(arguments[0])", args.room)
            for own in view["own"][printed_own:]:
                out(event=own["event"], data=own["data"], **{"from": None}, id=0, replayed=False)
            printed_own = len(view["own"])
            for kept in view["events"][printed_kept:]:
                meta = kept["meta"] or {}
                out(event=kept["event"], data=kept["data"], **{"from": meta.get("from")}, id=meta.get("id"), replayed=bool(meta.get("replayed")))
            printed_kept = len(view["events"])
            if not told_ready and view["state"] in ("joined", "failed"):
                told_ready = True
                if view["state"] == "joined":
                    out(ready=True, members=sorted(view["members"]))
                else:
                    out(failed=(view["error"] or {}).get("code"))
    finally:
        if driver:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001 - best effort at the end
                pass
        origin.stop()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
