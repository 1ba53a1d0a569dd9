"""A third-party permessage-deflate peer (the `websockets` package, RFC 7692 through zlib).

Usage:
  ws_deflate_peer.py client URL OFFER BOMB   connects offering OFFER ("default": what
      websockets offers, "server_no_context_takeover", or "none"), prints `extensions <header
      or ->`, sends 200 texts that repeat one another (context takeover pays) and a 300 KB
      incompressible binary, checks each echo, prints `ok`, then, when BOMB is not 0, sends a
      text of BOMB zeros (a few KB compressed) and prints `closed CODE` when the server closes.
  ws_deflate_peer.py server BOMB             serves on an ephemeral port (websockets' default
      answer: 12 window bits each way), prints `port N`, echoes every message, and sends a
      text of BOMB zeros after a text "bomb please", an unsolicited pong with a payload after
      "pong please"; prints `closed CODE REASON`.
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
        print("ok", flush=True)
        if bomb:
            try:
                await socket.send("0" * bomb)
                await asyncio.wait_for(socket.recv(), 15)
            except websockets.ConnectionClosed:
                pass
            print(f"closed {socket.close_code}", flush=True)


async def server(bomb: int) -> None:
    done = asyncio.get_running_loop().create_future()

    async def echo(socket, *unused):
        try:
            async for message in socket:
                if message == "bomb please":
                    await socket.send("0" * bomb)
                elif message == "pong please":
                    await socket.pong(b"unsolicited")
                else:
                    await socket.send(message)
        except websockets.ConnectionClosed:
            pass
        finally:
            if not done.done():
                done.set_result(f"closed {socket.close_code} {socket.close_reason}")

    async with websockets.serve(echo, "127.0.0.1", 0, max_size=None, open_timeout=None, ping_interval=None) as served:
        port = list(served.sockets)[0].getsockname()[1]
        print(f"port {port}", flush=True)
        print(await asyncio.wait_for(done, 60), flush=True)


if __name__ == "__main__":
    try:
        if sys.argv[1] == "client":
            asyncio.run(client(sys.argv[2], sys.argv[3], int(sys.argv[4])))
        else:
            asyncio.run(server(int(sys.argv[2])))
    except Exception as error:  # noqa: BLE001: the test reads the line
        print(f"error {error!r}", flush=True)
        sys.exit(1)
