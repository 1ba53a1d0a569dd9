"""Publishes through the server's HTTP API with Pusher's official server library.

Usage: pusher_publish.py PORT APP_ID KEY SECRET CHANNEL EVENT DATA
Prints {"ok": true} on success, or {"ok": false, "status": …, "error": …} when refused.
"""
import json
import sys

import pusher


def main(port, app_id, key, secret, channel, event, data):
    client = pusher.Pusher(app_id=app_id, key=key, secret=secret, host="127.0.0.1", port=int(port), ssl=False, timeout=15)
    try:
        client.trigger(channel, event, data)
        print(json.dumps({"ok": True}), flush=True)
    except pusher.errors.PusherBadAuth as error:
        print(json.dumps({"ok": False, "status": 401, "error": str(error)}), flush=True)
    except pusher.errors.PusherError as error:
        print(json.dumps({"ok": False, "status": None, "error": str(error)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:8]))
