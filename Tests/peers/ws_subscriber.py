"""A third-party WebSocket peer (the `websockets` package) speaking the realtime protocol.

Usage: ws_subscriber.py URL CHANNEL COUNT
Connects, prints the handshake, subscribes to CHANNEL, then prints every frame as a JSON line
until COUNT app events arrived (or 10 s passed). Exit status 0 on success.
"""
import asyncio
import json
import sys

import websockets


async def main(url: str, channel: str, count: int) -> int:
    async with websockets.connect(url, open_timeout=None, ping_interval=None) as socket:
        handshake = json.loads(await asyncio.wait_for(socket.recv(), 15))
        print(json.dumps({"handshake": handshake}), flush=True)
        namespace = handshake["event"].split(":")[0]
        await socket.send(json.dumps({"event": f"{namespace}:subscribe", "data": {"channel": channel}}))
        received = 0
        while received < count:
            frame = json.loads(await asyncio.wait_for(socket.recv(), 15))
            print(json.dumps({"frame": frame}), flush=True)
            if not frame["event"].startswith(namespace):
                received += 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
