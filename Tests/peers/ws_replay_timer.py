"""Times a room replay as a browser-like client (the `websockets` package): rooms-bench's
permessage-deflate row.

Usage: ws_replay_timer.py URL ROOM TOKEN SINCE COUNT COMPRESSION
SINCE is a JSON position {"epoch": …, "id": …}; COMPRESSION is "deflate" (websockets' default
offer, as browsers make it) or "none". Connects, waits for the handshake, sends the join, and
prints one line `replayed N last_after SECONDS` once `joined` and COUNT kept events came
(SECONDS from the join sent to the last of them), or `error …` and exits 1. 120 s at most.
"""
import asyncio
import json
import sys
import time

import websockets


async def main(url: str, room: str, token: str, since: str, count: int, compression: str) -> None:
    options = {"open_timeout": 30, "ping_interval": None, "max_size": None}
    if compression == "none":
        options["compression"] = None
    async with websockets.connect(url, **options) as socket:
        await asyncio.wait_for(socket.recv(), 30)
        request = {"room": room, "token": token, "since": json.loads(since)}
        sent = time.monotonic()
        await socket.send(json.dumps({"event": "bird:room_join", "data": json.dumps(request)}))
        kept, joined, last = 0, False, sent
        while not joined or kept < count:
            frame = json.loads(await asyncio.wait_for(socket.recv(), 120))
            if frame.get("event") != "bird:room_event":
                continue
            event = json.loads(frame["data"])
            if event["event"] == "error":
                raise RuntimeError(json.dumps(event))
            if event["event"] == "joined":
                joined = True
            elif "id" in event.get("meta", {}):
                kept += 1
                last = time.monotonic()
        print(f"replayed {kept} last_after {last - sent:.3f}", flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]))
    except Exception as error:  # noqa: BLE001: the bench reads the line
        print(f"error {error!r}", flush=True)
        sys.exit(1)
