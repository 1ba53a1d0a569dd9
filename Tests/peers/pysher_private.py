"""A third-party Pusher client (`pysher`) on a private channel of our server.

Usage: pysher_private.py HOST PORT APP_ID KEY SECRET CHANNEL EVENT DATA [AUTH_SECRET]

pysher connects to ws://HOST:PORT/app/KEY (it adds ?protocol=6, so the server speaks the
`pusher` namespace). The subscription is authorised by Pusher's official server library
(`pusher.Pusher.authenticate`, signed with AUTH_SECRET, SECRET by default) for pysher's socket
id. Once subscribed, the same library publishes EVENT with DATA on CHANNEL through the server's
HTTP API (`trigger`), and pysher must receive it.

Prints one JSON line per step: {"connected": socket_id}, {"subscribed": channel},
{"published": true}, {"received": {"event", "data"}}; or {"subscription_error": data} when the
server refuses the subscription. Exit status 0 when the event (or, with a wrong AUTH_SECRET,
the refusal) arrived; 1 on a timeout (15 s per step) or an unexpected answer.
"""
import json
import logging
import sys
import threading

import pusher
import pysher

TIMEOUT = 15


def say(line):
    print(json.dumps(line), flush=True)


def main(host, port, app_id, key, secret, channel_name, event, data, auth_secret=None):
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    connected = threading.Event()
    subscribed = threading.Event()
    refused = threading.Event()
    received = threading.Event()
    answers = {}

    client = pysher.Pusher(key, custom_host=host, port=int(port), secure=False, log_level=logging.WARNING, reconnect_interval=1)
    signer = pusher.Pusher(app_id=app_id, key=key, secret=auth_secret or secret)

    def on_subscribed(payload):
        subscribed.set()

    def on_refused(payload):
        answers["refusal"] = payload
        refused.set()

    def on_event(payload):
        answers["event"] = payload
        received.set()

    def on_connected(payload):
        # pysher's usual pattern: subscribe and bind in this handler. It runs on the thread
        # that reads the socket, so the server's answer cannot arrive before the bindings.
        socket_id = json.loads(payload)["socket_id"]
        answers["socket_id"] = socket_id
        auth = signer.authenticate(channel=channel_name, socket_id=socket_id)["auth"]
        channel = client.subscribe(channel_name, auth=auth)
        channel.bind("pusher_internal:subscription_succeeded", on_subscribed)
        channel.bind("pusher:subscription_error", on_refused)
        channel.bind(event, on_event)
        connected.set()

    client.connection.bind("pusher:connection_established", on_connected)
    client.connect()
    try:
        if not connected.wait(TIMEOUT):
            say({"error": "no pusher:connection_established"})
            return 1
        say({"connected": answers["socket_id"]})

        for _ in range(TIMEOUT * 10):
            if subscribed.wait(0.1) or refused.is_set():
                break
        if refused.is_set():
            say({"subscription_error": answers["refusal"]})
            return 0 if auth_secret else 1
        if not subscribed.is_set():
            say({"error": "neither pusher_internal:subscription_succeeded nor pusher:subscription_error"})
            return 1
        say({"subscribed": channel_name})
        if auth_secret:
            say({"error": "subscribed with an authorisation signed by another secret"})
            return 1

        publisher = pusher.Pusher(app_id=app_id, key=key, secret=secret, host=host, port=int(port), ssl=False, timeout=TIMEOUT)
        publisher.trigger(channel_name, event, data)
        say({"published": True})

        if not received.wait(TIMEOUT):
            say({"error": f"no {event} event"})
            return 1
        say({"received": {"event": event, "data": answers["event"]}})
        return 0
    finally:
        client.disconnect(timeout=2)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:10]))
