"""A third-party WebSocket peer (the `websockets` package) joining a room.

Usage: ws_room_client.py URL ROOM TOKEN SINCE COUNT
SINCE is "-" or a JSON position {"epoch": …, "id": …}. Connects, joins ROOM with TOKEN, prints
every frame as a JSON line, and exits 0 after `joined` and COUNT kept events (frames whose
meta has an id), or exits 3 after a room `error` (printed first). 15 s at most per frame.
"""
import asyncio
import json
import sys

import websockets


async def main(url: str, room: str, token: str, since: str, count: int) -> int:
    async with websockets.connect(url, open_timeout=None, ping_interval=None) as socket:
        handshake = json.loads(await asyncio.wait_for(socket.recv(), 15))
        print(json.dumps(handshake), flush=True)
        request = {"room": room, "token": token}
        if since != "-":
            request["since"] = json.loads(since)
        await socket.send(json.dumps({"event": "bird:room_join", "data": json.dumps(request)}))
        joined = False
        kept = 0
        while not joined or kept < count:
            frame = json.loads(await asyncio.wait_for(socket.recv(), 15))
            print(json.dumps(frame), flush=True)
            if frame.get("event") != "bird:room_event":
                continue
            event = json.loads(frame["data"])
            if event["event"] == "error":
                return 3
            if event["event"] == "joined":
                joined = True
            elif "id" in event.get("meta", {}):
                kept += 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))))
