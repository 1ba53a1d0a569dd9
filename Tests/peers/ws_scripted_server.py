"""A scripted realtime server on the third-party `websockets` package, for client edge cases.

Usage: ws_scripted_server.py SCENARIO [NAMESPACE]
Listens on 127.0.0.1 (ephemeral port) and prints `port N`, then one line per event:
`open K`, `recv K FRAME`, `closed K CODE`. Connection K (from 1) follows SCENARIO on the first
connection only; later connections get a normal handshake and stay open, so the test sees
whether and when the client came back. Scenarios:
  close:CODE    handshake, then a close frame with CODE
  always-close:CODE  the same on every connection, not only the first
  always-huge   `huge` on every connection
  invalid-utf8  handshake, then a text frame whose payload is not UTF-8 (written raw)
  close-invalid-reason  handshake, then a close frame with 4200 and a reason that is not
                UTF-8 (written raw)
  ping-no-read  handshake, then pings as fast as the socket takes them, never reading the
                answers; prints `sent K N` every second
  flood         handshake; after the first subscribe, subscription_succeeded, then events
                `tick` with data {"n": 0, 1, 2, ...} on that channel as fast as the socket
                takes them, until the client goes; prints `sent K N` every second and at the end
  presence-flood  handshake; after the first subscribe (a presence channel),
                subscription_succeeded with one member ("me"), then 100,000 member_added
                ({"user_id": "mN", "user_info": {"n": N}}) and a ping; prints `sent K 100000`
  drop          handshake, then the TCP connection is cut without a close frame
  flap:N        the first N connections: handshake, then cut without a close frame 0.5 s
                later (a path that flaps); the next ones stay open
  late-close:CODE  handshake, then a close frame with CODE 0.3 s later
  invalid-json  handshake, then a text frame that is not JSON, then a valid ping
  binary        handshake, then a binary frame
  huge          handshake, then a 1.1 MB text frame (over the client's 1 MiB limit)
  no-handshake  nothing at all (the client must time out)
  no-socket-id  a handshake whose data has no socket_id
Runs for 60 s or until killed.
"""
import asyncio
import json
import sys

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

SCENARIO = sys.argv[1]
NAMESPACE = sys.argv[2] if len(sys.argv) > 2 else "bird"
count = 0


def handshake(number, socket_id=True):
    data = {"activity_timeout": 120}
    if socket_id:
        data["socket_id"] = f"{number}.{number}"
    return json.dumps({"event": f"{NAMESPACE}:connection_established", "data": json.dumps(data)})


async def handler(socket):
    global count
    count += 1
    number = count
    print(f"open {number}", flush=True)
    if SCENARIO.startswith("always-"):
        scenario = SCENARIO.removeprefix("always-")
    elif SCENARIO.startswith("flap:"):
        scenario = "flap" if number <= int(SCENARIO.split(":")[1]) else "normal"
    else:
        scenario = SCENARIO if number == 1 else "normal"
    try:
        if scenario == "no-handshake":
            pass
        elif scenario == "no-socket-id":
            await socket.send(handshake(number, socket_id=False))
        else:
            await socket.send(handshake(number))
        if scenario.startswith("close:"):
            await socket.close(code=int(scenario.split(":")[1]), reason="scripted")
        elif scenario == "drop":
            await asyncio.sleep(0.05)
            socket.transport.abort()
        elif scenario == "flap":
            await asyncio.sleep(0.5)
            socket.transport.abort()
        elif scenario.startswith("late-close:"):
            await asyncio.sleep(0.3)
            await socket.close(code=int(scenario.split(":")[1]), reason="scripted")
        elif scenario == "invalid-json":
            await socket.send("{this is not json")
            await socket.send(json.dumps({"event": f"{NAMESPACE}:ping", "data": "{}"}))
        elif scenario == "binary":
            await socket.send(b"\x00\x01\x02")
        elif scenario == "huge":
            await socket.send("x" * 1_100_000)
        elif scenario == "invalid-utf8":
            socket.transport.write(bytes([0x81, 0x02, 0xFF, 0xFE]))
        elif scenario == "close-invalid-reason":
            socket.transport.write(bytes([0x88, 0x04, 0x10, 0x68, 0xFF, 0xFE]))
        elif scenario == "flood":
            await flood(socket, number)
        elif scenario == "presence-flood":
            await presence_flood(socket, number)
        elif scenario == "ping-no-read":
            ping = json.dumps({"event": f"{NAMESPACE}:ping", "data": "{}"})
            await send_forever(socket, number, lambda _: ping)
        async for frame in socket:
            print(f"recv {number} {frame}", flush=True)
    except ConnectionClosed:
        pass
    finally:
        code = socket.close_code if socket.close_code is not None else 1006
        print(f"closed {number} {code}", flush=True)


async def flood(socket, number):
    """Confirms the first subscription, then sends ticks on its channel without end."""
    frame = json.loads(await socket.recv())
    print(f"recv {number} {json.dumps(frame)}", flush=True)
    channel = json.loads(frame["data"])["channel"] if isinstance(frame["data"], str) else frame["data"]["channel"]
    await socket.send(json.dumps({"event": f"{NAMESPACE}_internal:subscription_succeeded", "channel": channel, "data": "{}"}))
    await send_forever(socket, number, lambda n: json.dumps({"event": "tick", "channel": channel, "data": json.dumps({"n": n})}))


async def presence_flood(socket, number):
    """Confirms the first subscription with one member, then 100,000 member_added and a ping."""
    frame = json.loads(await socket.recv())
    print(f"recv {number} {json.dumps(frame)}", flush=True)
    data = json.loads(frame["data"]) if isinstance(frame["data"], str) else frame["data"]
    channel = data["channel"]
    presence = {"presence": {"count": 1, "ids": ["me"], "hash": {"me": {}}}}
    await socket.send(json.dumps({"event": f"{NAMESPACE}_internal:subscription_succeeded", "channel": channel, "data": json.dumps(presence)}))
    for n in range(100_000):
        member = json.dumps({"user_id": f"m{n}", "user_info": {"n": n}})
        await socket.send(json.dumps({"event": f"{NAMESPACE}_internal:member_added", "channel": channel, "data": member}))
    await socket.send(json.dumps({"event": f"{NAMESPACE}:ping", "data": "{}"}))
    print(f"sent {number} 100000", flush=True)


async def send_forever(socket, number, frame):
    """Sends frame(0), frame(1), ... as fast as the socket takes them (`send` waits while the
    write buffer is over its high-water mark), printing `sent K N` every second and at the end."""
    sent = 0
    loop = asyncio.get_running_loop()
    reported = loop.time()
    try:
        while True:
            await socket.send(frame(sent))
            sent += 1
            if loop.time() - reported >= 1:
                reported = loop.time()
                print(f"sent {number} {sent}", flush=True)
    finally:
        print(f"sent {number} {sent}", flush=True)

async def main():
    async with serve(handler, "127.0.0.1", 0, ping_interval=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"port {port}", flush=True)
        await asyncio.sleep(60)


asyncio.run(main())
