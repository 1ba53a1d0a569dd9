"""Many clients that stop reading, then read everything: a server's backlog and its close.

Usage: ws_backlog_clients.py URL CHANNEL CLIENTS
Opens CLIENTS connections (the `websockets` package) with a 4 KiB receive buffer and a
one-frame queue, so a client that does not call recv() stops reading from its socket and the
server has to keep what it sends. Each subscribes to CHANNEL; then "ready" is printed. On a
line "read" on stdin every client reads until its connection closes. Prints one JSON line:
{"closes": {"4200": n, ...}, "events": [app events per client]}; "none" counts connections
that ended without a close frame.
"""
import asyncio
import json
import socket
import sys
from urllib.parse import urlparse

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed


async def open_client(url, channel):
    parsed = urlparse(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parsed.hostname, parsed.port))
    client = await connect(url, sock=sock, max_queue=1, ping_interval=None, open_timeout=60, close_timeout=30)
    handshake = json.loads(await client.recv())
    namespace = handshake["event"].split(":")[0]
    await client.send(json.dumps({"event": f"{namespace}:subscribe", "data": {"channel": channel}}))
    while True:
        frame = json.loads(await client.recv())
        if frame["event"].endswith("subscription_succeeded"):
            return client, namespace


async def drain(client, namespace):
    events = 0
    try:
        while True:
            frame = json.loads(await client.recv())
            if not frame["event"].startswith(namespace):
                events += 1
    except ConnectionClosed as closed:
        return events, str(closed.rcvd.code) if closed.rcvd else "none"


async def main(url, channel, count):
    clients = []
    for start in range(0, count, 50):
        clients += await asyncio.gather(*(open_client(url, channel) for _ in range(start, min(count, start + 50))))
    print("ready", flush=True)
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    if line.strip() != "read":
        return 2
    results = await asyncio.gather(*(drain(client, namespace) for client, namespace in clients))
    closes = {}
    for _, code in results:
        closes[code] = closes.get(code, 0) + 1
    print(json.dumps({"closes": closes, "events": [events for events, _ in results]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
