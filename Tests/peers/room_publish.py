"""Publishes one room event through the realtime server's HTTP API, signed by hand as in
docs/rooms-protocol.md ("Publishing from Python"): the example there, runnable.

Usage: room_publish.py HOST:PORT APP_ID KEY SECRET ROOM EVENT DATA_JSON
Prints the server's JSON answer, or {"status": N, "body": …} for an error status.
"""
import hashlib
import hmac
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def publish_room(host, app_id, key, secret, room, event, data):
    path = f"/apps/{app_id}/room_events"
    body = json.dumps({"name": event, "room": room, "data": json.dumps(data)}).encode()
    query = f"auth_key={key}&auth_timestamp={int(time.time())}&auth_version=1.0&body_md5={hashlib.md5(body).hexdigest()}"
    signature = hmac.new(secret.encode(), f"POST\n{path}\n{query}".encode(), hashlib.sha256).hexdigest()
    request = urllib.request.Request(f"http://{host}{path}?{query}&auth_signature={signature}", body,
                                     {"Content-Type": "application/json"}, method="POST")
    return json.load(urllib.request.urlopen(request))


def history(host, app_id, key, secret, room):
    path = f"/apps/{app_id}/rooms/{urllib.parse.quote(room, safe='')}/history"
    query = f"auth_key={key}&auth_timestamp={int(time.time())}&auth_version=1.0"
    signature = hmac.new(secret.encode(), f"GET\n{path}\n{query}".encode(), hashlib.sha256).hexdigest()
    return json.load(urllib.request.urlopen(f"http://{host}{path}?{query}&auth_signature={signature}"))


if __name__ == "__main__":
    host, app_id, key, secret, room, event, data = sys.argv[1:8]
    try:
        print(json.dumps(publish_room(host, app_id, key, secret, room, event, json.loads(data))), flush=True)
        print(json.dumps(history(host, app_id, key, secret, room)), flush=True)
    except urllib.error.HTTPError as error:
        print(json.dumps({"status": error.code, "body": error.read().decode()}), flush=True)
