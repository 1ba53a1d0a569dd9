"""An app backend's webhook route, checked with Pusher's own library (`pusher.validate_webhook`).

Usage: webhook_receiver.py KEY SECRET FAIL_FIRST
Listens on 127.0.0.1 (a free port, printed as "port N"), answers 500 to the first FAIL_FIRST
requests (printing {"refused": n}), then validates each body with the pusher library and prints
{"valid": true, "events": [...]} (200) or {"valid": false} (401). Runs until killed.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

import pusher

KEY, SECRET, FAIL_FIRST = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = pusher.Pusher(app_id="1", key=KEY, secret=SECRET)
seen = 0


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global seen
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        seen += 1
        if seen <= FAIL_FIRST:
            print(json.dumps({"refused": seen}), flush=True)
            self.send_response(500)
            self.end_headers()
            return
        valid = client.validate_webhook(self.headers.get("X-Pusher-Key", ""), self.headers.get("X-Pusher-Signature", ""), body)
        if valid is None:
            print(json.dumps({"valid": False}), flush=True)
            self.send_response(401)
        else:
            print(json.dumps({"valid": True, "events": valid["events"]}), flush=True)
            self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
print(f"port {server.server_address[1]}", flush=True)
server.serve_forever()
