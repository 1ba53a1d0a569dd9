"""A third-party permessage-deflate peer (the `websockets` package, RFC 7692 through zlib).

Usage:
  ws_deflate_peer.py client URL OFFER BOMB   connects offering OFFER ("default": what
      websockets offers, "server_no_context_takeover", or "none"), prints `extensions <header
      or ->`, sends 200 texts that repeat one another (context takeover pays), a 300 KB
      incompressible binary, a 870 KB compressible text and a text in 20 fragments, checks
      each echo, prints `ok`, then, when BOMB is not 0, sends a
      text of BOMB zeros (a few KB compressed) and prints `closed CODE` when the server closes.
Errors print `error ...` and exit 1. 15 s at most per step.
"""
import asyncio
import os
import sys

import websockets
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory


async def client(url: str, offer: str, bomb: int) -> None:
    options = {"open_timeout": None, "ping_interval": None, "max_size": None}
    if offer == "server_no_context_takeover":
        options["extensions"] = [ClientPerMessageDeflateFactory(server_no_context_takeover=True)]
        options["compression"] = None
    elif offer == "none":
        options["compression"] = None
    async with websockets.connect(url, **options) as socket:
        print(f"extensions {socket.response.headers.get('Sec-WebSocket-Extensions', '-')}", flush=True)
        for index in range(200):
            text = f'{{"event":"bird:room_event","data":{{"id":{index},"text":"hello from python, message {index}"}}}}'
            await socket.send(text)
            assert await asyncio.wait_for(socket.recv(), 15) == text, f"echo {index}"
        noise = os.urandom(300_000)
        await socket.send(noise)
        assert await asyncio.wait_for(socket.recv(), 15) == noise, "incompressible echo"
        long = "a compressible line of JSON, " * 30_000
        await socket.send(long)
        assert await asyncio.wait_for(socket.recv(), 15) == long, "compressible echo"
        fragments = [f"fragment {index} " * 2_000 for index in range(20)]
        await socket.send(fragments)
        assert await asyncio.wait_for(socket.recv(), 15) == "".join(fragments), "fragmented echo"
        print("ok", flush=True)
        if bomb:
            try:
                await socket.send("0" * bomb)
                await asyncio.wait_for(socket.recv(), 15)
            except websockets.ConnectionClosed:
                pass
            print(f"closed {socket.close_code}", flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(client(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    except Exception as error:  # noqa: BLE001: the test reads the line
        print(f"error {error!r}", flush=True)
        sys.exit(1)
