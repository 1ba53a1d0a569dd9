"""Holds many subscribers on one channel (the `websockets` package, one process): rooms-bench's
memory row for permessage-deflate.

Usage: ws_many_subscribers.py URL COUNT CHANNEL COMPRESSION
COMPRESSION is "deflate" (websockets' default offer, as browsers make it) or "none". Opens COUNT
connections, subscribes each to CHANNEL and prints `subscribed`; once every one received an
event on it (and so holds the server's deflate state when compressed), prints `received`;
then keeps them open until its standard input closes. Prints `error …` and exits 1 on a failure.
"""
import asyncio
import json
import sys

import websockets


async def subscriber(url, channel, options, subscribed, received, done):
    async with websockets.connect(url, **options) as socket:
        await asyncio.wait_for(socket.recv(), 60)
        await socket.send(json.dumps({"event": "bird:subscribe", "data": {"channel": channel}}))
        while "subscription_succeeded" not in await asyncio.wait_for(socket.recv(), 60):
            pass
        subscribed.release()
        while json.loads(await socket.recv()).get("channel") != channel:
            pass
        received.release()
        await done.wait()


async def main(url, count, channel, compression):
    options = {"open_timeout": 60, "ping_interval": None, "max_size": None}
    if compression == "none":
        options["compression"] = None
    subscribed, received, done = asyncio.Semaphore(0), asyncio.Semaphore(0), asyncio.Event()
    tasks = []
    for _ in range(count):
        tasks.append(asyncio.create_task(subscriber(url, channel, options, subscribed, received, done)))
        await asyncio.sleep(0)
    for _ in range(count):
        await asyncio.wait_for(subscribed.acquire(), 120)
    print("subscribed", flush=True)
    for _ in range(count):
        await asyncio.wait_for(received.acquire(), 120)
    print("received", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    done.set()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]))
    except Exception as error:  # noqa: BLE001: the bench reads the line
        print(f"error {error!r}", flush=True)
        sys.exit(1)
