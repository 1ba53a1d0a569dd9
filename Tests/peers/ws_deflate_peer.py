"""A third-party permessage-deflate peer (the `websockets` package, RFC 7692 through zlib).

Usage:
  ws_deflate_peer.py client URL OFFER BOMB   connects offering OFFER ("default": what
      websockets offers, "server_no_context_takeover", "server_max_window_bits" (10), or "none"), prints `extensions <header
      or ->`, sends 200 texts that repeat one another (context takeover pays), then 50 random
      binaries of 3,000 bytes and 50 texts of 3.5 KB (each under the server's 4 KiB inflated
      a read), checks each echo, prints `ok`, then, when BOMB is not 0, sends a
      text of BOMB zeros (a few KB compressed) and prints `closed CODE` when the server closes.
  ws_deflate_peer.py expect URL LETTER COUNT   connects with the default offer, prints
      `extensions <header or ->`, reads COUNT texts, the Nth LETTER and 20,000 hex digits of
      `hex_noise(LETTER, N)`, and prints `ok`
      (or `error message N differs`).
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
    elif offer == "server_max_window_bits":
        options["extensions"] = [ClientPerMessageDeflateFactory(server_max_window_bits=10)]
        options["compression"] = None
    elif offer == "none":
        options["compression"] = None
    async with websockets.connect(url, **options) as socket:
        print(f"extensions {socket.response.headers.get('Sec-WebSocket-Extensions', '-')}", flush=True)
        for index in range(200):
            text = f'{{"event":"bird:room_event","data":{{"id":{index},"text":"hello from python, message {index}"}}}}'
            await socket.send(text)
            assert await asyncio.wait_for(socket.recv(), 15) == text, f"echo {index}"
        # Under the server's 4 KiB a read inflated; the echoes deflate past lws' 1 KiB buffer.
        for index in range(50):
            noise = os.urandom(3_000)
            await socket.send(noise)
            assert await asyncio.wait_for(socket.recv(), 15) == noise, f"incompressible echo {index}"
            text = f"line {index} of a compressible message, " * 90
            await socket.send(text)
            assert await asyncio.wait_for(socket.recv(), 15) == text, f"compressible echo {index}"
        print("ok", flush=True)
        if bomb:
            try:
                await socket.send("0" * bomb)
                await asyncio.wait_for(socket.recv(), 15)
            except websockets.ConnectionClosed:
                pass
            print(f"closed {socket.close_code}", flush=True)


def hex_noise(letter: str, index: int) -> str:
    """20,000 hex digits from a 64-bit LCG seeded by the letter and the index: half
    compressible, so their deflated form outgrows lws' 1 KiB buffer (the test computes the same)."""
    state = ord(letter) * 1000 + index
    digits = []
    for _ in range(20_000):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        digits.append("0123456789abcdef"[state >> 60])
    return letter + "".join(digits)


async def expect(url: str, letter: str, count: int) -> None:
    async with websockets.connect(url, open_timeout=None, ping_interval=None, max_size=None) as socket:
        print(f"extensions {socket.response.headers.get('Sec-WebSocket-Extensions', '-')}", flush=True)
        for index in range(count):
            if await asyncio.wait_for(socket.recv(), 15) != hex_noise(letter, index):
                print(f"error message {index} differs", flush=True)
                return
        print("ok", flush=True)


if __name__ == "__main__":
    try:
        if sys.argv[1] == "expect":
            asyncio.run(expect(sys.argv[2], sys.argv[3], int(sys.argv[4])))
        else:
            asyncio.run(client(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    except Exception as error:  # noqa: BLE001: the test reads the line
        print(f"error {error!r}", flush=True)
        sys.exit(1)
