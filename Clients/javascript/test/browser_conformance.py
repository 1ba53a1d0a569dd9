"""The shared transcripts (Clients/conformance) run by the browser client in real headless Chromium.

Usage: browser_conformance.py [--chromium PATH] [--chromedriver PATH]

Serves Clients/ on a loopback port, opens test/conformance.html with every transcript's file
name, and waits for the page's results: one `ok FILE` or `FAIL FILE message` line each, then a
JSON line {"passed", "failed"}. Exits 0 only when every transcript passed. Loopback only; a run
ends after 120 s whatever happens.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

CLIENTS = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(CLIENTS, "..", "Tests", "peers"))
import headless  # noqa: E402  (the shared Chromium flags)
LIMIT = 120


class Quiet(SimpleHTTPRequestHandler):
    """The static files, with JavaScript's media type (a module script needs it)."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".js": "text/javascript", ".json": "application/json"}

    def log_message(self, *arguments):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, lambda *_: (print(json.dumps({"passed": 0, "failed": 1, "error": "timed out"}), flush=True), os._exit(1)))
    signal.alarm(LIMIT)

    files = sorted(name for name in os.listdir(os.path.join(CLIENTS, "conformance", "transcripts")) if name.endswith(".json"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=CLIENTS))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    driver = headless.driver(args.chromium, args.chromedriver, "browser-conformance-")
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/javascript/test/conformance.html?files={','.join(files)}")
        deadline = time.monotonic() + 60
        results = None
        while results is None and time.monotonic() < deadline:
            results = driver.execute_script("return window.results ?? null")
            if results is None:
                time.sleep(0.1)
        if results is None:
            console = [entry.get("message") for entry in driver.get_log("browser")]
            print(json.dumps({"passed": 0, "failed": len(files), "error": "no results", "console": console[-10:]}), flush=True)
            return 1
    finally:
        driver.quit()
        server.shutdown()
    for result in results:
        print(f"ok {result['file']}" if result["ok"] else f"FAIL {result['file']} {result['message']}", flush=True)
    passed = sum(1 for result in results if result["ok"])
    failed = len(results) - passed + (len(files) - len(results))
    print(json.dumps({"passed": passed, "failed": failed}), flush=True)
    return 0 if failed == 0 and passed == len(files) else 1


if __name__ == "__main__":
    sys.exit(main())
