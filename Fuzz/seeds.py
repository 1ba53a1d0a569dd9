#!/usr/bin/env python3
"""Writes the hand-made seed inputs of each fuzz target into Fuzz/corpus/TARGET/seed-*.

Run once when a target is added or its input format changes (scripts/fuzz keeps what libFuzzer
adds beside them). The structure-aware targets read their input as chunks separated by 0xFF
(a byte UTF-8 never has); see each target's doc comment in Sources/realtime-fuzz.
"""
import base64, hashlib, hmac, json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = b"\xff"


def frame(event, data=None, channel=None, data_is_text=True):
    message = {"event": event}
    if channel is not None:
        message["channel"] = channel
    if data is not None:
        message["data"] = json.dumps(data, separators=(",", ":")) if data_is_text and not isinstance(data, str) else data
    return json.dumps(message, separators=(",", ":")).encode()


def room_event(room, event, data, meta=None):
    body = {"event": event, "data": data}
    if meta is not None:
        body["meta"] = meta
    return frame("bird:room_event", json.dumps(body, separators=(",", ":")), channel=room)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(claims, secret):
    header = b64url(b'{"alg":"HS256","typ":"JWT"}')
    payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
    signature = b64url(hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest())
    return f"{header}.{payload}.{signature}"


def write(target, name, data):
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"seed-{name}"), "wb") as file:
        file.write(data)


def main():
    handshake = frame("bird:connection_established", {"socket_id": "1.2", "activity_timeout": 30})
    frames = [
        handshake,
        frame("pusher:connection_established", {"socket_id": "1.2"}),
        frame("bird:ping", {}),
        frame("bird:pong", {}),
        frame("bird:subscribe", {"channel": "presence-a", "auth": "k:s", "channel_data": '{"user_id":"1"}'}),
        frame("bird:subscription_succeeded", {"presence": {"ids": ["1", "2"], "hash": {"1": {"n": 1}, "2": None}, "count": 2}}, channel="presence-a"),
        frame("bird:member_added", {"user_id": "3", "user_info": {"name": "x"}}, channel="presence-a"),
        frame("bird:member_removed", {"user_id": "3"}, channel="presence-a"),
        frame("bird:error", {"message": "no", "code": 4301}),
        frame("client-e", {"a": [1, 2.5, -3e10, True, None, "\u00e9\\n"]}, channel="c"),
        b'{"event":"e","channel":null,"data":{"raw":[1,{"x":"y"}]},"user_id":42}',
        b'{"event":"e","data":"x","user_id":-1.5e3}',
        room_event("r0", "joined", {"epoch": "e1", "id": 0, "count": 1, "members": [{"id": "u1", "info": {"n": 1}}]}),
        room_event("r0", "updated", {"n": 1}, {"id": 1, "at": 1700000000000, "from": "u1"}),
        room_event("r0", "updated", {"n": 2}, {"id": 2, "at": 1700000000001, "from": None, "replayed": True}),
        room_event("r0", "updated", {"n": 5}, {"id": 5, "at": 1700000000002}),
        room_event("r0", "join", {"id": "u2", "info": None}),
        room_event("r0", "leave", {"id": "u2"}),
        room_event("r0", "count", {"n": 3}),
        room_event("r0", "error", {"code": "expired", "message": "token expired"}),
        room_event("r0", "error", {"code": "resync", "message": "again"}),
        room_event("r0", "kicked", {"reason": "bye"}),
        room_event("r1", "joined", {"epoch": "e2", "id": 7, "recovered": False, "reason": "epoch_changed"}),
        frame("bird:room_history", {"events": [{"data": {"n": 1}, "event": "updated", "meta": {"at": 1, "from": None, "id": 1}}], "more": True, "request": "1"}, channel="r0"),
        frame("bird:room_history", {"error": {"code": "no_history", "message": "none"}, "request": "1"}, channel="r0"),
        frame("bird:signin_success", {"user_data": '{"id":"u1"}'}),
    ]
    for index, data in enumerate(frames):
        write("protocol-message", f"{index:02}", data)

    documents = [
        b'{"event":"updated","data":{"n":1},"meta":{"id":1,"at":2,"from":"u","replayed":true}}',
        b'{"event":"joined","data":{"epoch":"e","id":3}}',
        b'{"data":[1,2,{"a":null}],"event":"x","meta":null,"extra":{"deep":[[[]]]}}',
        b'[1,-0,0.5e-3,1E+2,"\\u00e9\\ud83d\\ude00\\ud800",true,false,null]',
        b'"\\"\\\\\\/\\b\\f\\n\\r\\t"',
        b' 12345678901234567890 ',
        b'{"a":1,"a":2}',
        b'[' * 64 + b']' * 64,
    ]
    for index, data in enumerate(documents):
        write("strict-json", f"{index:02}", data)
        write("json-value", f"{index:02}", data)

    members = [
        b'{"user_id":"1","user_info":{"name":"a"}}',
        b'{"user_id":42}',
        b'{"user_id":-7.0,"user_info":null}',
        b'{"user_id":"x","user_info":[1,"2",{"3":4}]}',
        b'{"user_info":{},"user_id":"\\u0041"}',
    ]
    for index, data in enumerate(members):
        write("presence-member", f"{index:02}", data)

    claims = {"sub": "u1", "room": "order:1", "exp": 2000000000, "iat": 1700000000, "info": {"n": 1},
              "rule": {"history": 100, "presence": True, "members_send": True}}
    tokens = [
        b"\x00" + token(claims, "another-secret").encode(),
        b"\x00" + b"eyJhbGciOiJub25lIn0.e30.",
        b"\x01" + json.dumps(claims).encode(),
        b"\x01" + b'{"room":"r","exp":1.5e9}',
        b"\x02" + b'{"time":1700000000000,"rooms":{"r":{"token":"t","expires":1},"s":{"error":"forbidden"}}}',
        b"\x02" + b'{"auth":"k:s","channel_data":"{}","shared_secret":"AAAA"}',
        b"\x02" + b'{"time":1,"grants":[{"pattern":"public:*","token":"t","expires":2}]}',
        b"\x03" + b"app-key:0123456789abcdef",
        b"\x04" + b"\x00\x01\x02\xfe",
        # Deep and repeated names (issue 30): a forged header 511 deep, signed claims and
        # headers too deep or naming a member twice.
        b"\x00" + (b64url(b'{"alg":"HS256","x":' + b"[" * 511 + b"]" * 511 + b"}") + "." + b64url(b'{"room":"r","exp":9}') + "." + "A" * 43).encode(),
        b"\x01" + b'{"room":"r","exp":2000000000,"info":' + b"[" * 100 + b"]" * 100 + b"}",
        b"\x01" + b'{"room":"r","room":"s","exp":2000000000}',
        b"\x01" + b'{"room":"r","exp":2000000000,"rule":{"history":1,"hist\\u006fry":2}}',
        b"\x05" + b'{"alg":"HS256","alg":"none"}',
        b"\x05" + b'{"alg":"HS256","typ":"JWT"}',
        b"\x05" + b'{"alg":"HS256","x":' + b"{\"a\":" * 80 + b"1" + b"}" * 80 + b"}",
    ]
    for index, data in enumerate(tokens):
        write("tokens", f"{index:02}", data)

    client = [
        [b"\x02\x05", b"\x01\x01", frames[12], frames[13], frames[14], frames[15]],
        [b"\x02\x07", frames[5], frames[6], frames[7], frames[8], frames[9]],
        [b"\x02\x01", b"\x01\x01", frames[12], b"\x04\x04", frames[23], frames[24], b"\x01\xff", b"\x01\xff"],
        [b"\x02\x02", b"\x01\x01", frames[12], frames[13], b"\x03\x02", b"\x02\x03", b"\x01\x01", frames[14], frames[12], frames[22]],
        [b"\x02\x02", b"\x01\x01", frames[12], b"\x05\x20", frames[2], b"\x01\x10", frames[16], frames[17], frames[18], frames[21]],
        [b"\x02\x02", b"\x04\x07", b"\x04\x05hello", b"\x04\x06{\"a\":1}", frames[25], frames[19], frames[20]],
    ]
    for index, steps in enumerate(client):
        write("client-frames", f"{index:02}", SEP.join(steps))

    server = [
        [frame("bird:subscribe", {"channel": "c"}), frame("client-e", {"x": 1}, channel="c"), frame("bird:ping", {})],
        [b"\x03\x01" + b'{"user_id":"7","user_info":{"name":"seven"}}', frame("client-e", {"x": 1}, channel="presence-y"), b"\x06\x00{\"n\":1}"],
        [frame("bird:room_send", {"room": "order:1", "event": "e", "data": '{"n":1}'}),
         frame("bird:room_history", {"room": "order:1", "request": "1", "limit": 10}), b"\x05\x01[1,2]",
         frame("bird:room_leave", {"room": "order:1"})],
        [b"\x04\x1f" + b'{"n":"info"}', b"\x04\x40e1", b"\x01\xff", b"\x02\x00", b"\x07\x00" + frame("bird:room_send", {"room": "order:1", "event": "e", "data": "2"})],
        [frame("bird:signin", {"auth": "app-key:00", "user_data": '{"id":"u"}'}), frame("bird:unsubscribe", {"channel": "c"}),
         frame("bird:room_refresh", {"room": "order:1", "token": "x"})],
    ]
    for index, steps in enumerate(server):
        write("server-frames", f"{index:02}", SEP.join(steps))

    requests = [
        (0, 0, b"/health", b"", b""),
        (0, 0, b"/metrics", b"", b""),
        (1, 0, b"/apps/1/events", b"", json.dumps({"name": "e", "channels": ["c", "presence-y"], "data": '{"a":1}', "socket_id": "1.2"}).encode()),
        (1, 0, b"/apps/1/batch_events", b"", json.dumps({"batch": [{"name": "e", "channel": "c", "data": "x"}]}).encode()),
        (0, 0, b"/apps/1/channels", b"filter_by_prefix=presence-&info=user_count,subscription_count", b""),
        (0, 0, b"/apps/1/channels/presence-y", b"info=user_count", b""),
        (0, 0, b"/apps/1/channels/presence-y/users", b"", b""),
        (1, 0, b"/apps/1/users/u1/terminate_connections", b"", b""),
        (1, 0, b"/apps/1/room_events", b"", json.dumps({"room": "order:1", "event": "e", "data": {"n": 1}}).encode()),
        (1, 0, b"/apps/1/batch_room_events", b"", json.dumps({"batch": [{"rooms": ["a", "b"], "event": "e", "data": [1]}]}).encode()),
        (0, 0, b"/apps/1/rooms/order%3A1/history", b"limit=10&before=5", b""),
        (0, 0, b"/apps/1/rooms/order:1/users", b"", b""),
        (1, 0, b"/apps/1/rooms/order:1/users/u1/kick", b"", b'{"reason":"bye"}'),
        (1, 1, b"/apps/1/events", b"auth_key=app-key&auth_timestamp=1&auth_signature=00", b"{}"),
    ]
    for index, (method, unsigned, path, query, body) in enumerate(requests):
        write("http-api", f"{index:02}", bytes([method, unsigned]) + path + SEP + query + SEP + body)

    fanout = [
        b"\x00" + b"r e1 5 1700000000000 7 5 2\nupdated{\"n\":1}u1",
        b"\x00" + b"r e1 6 1 1 1 -1\nx1",
        b"\x01" + b"c node-a 8 5 -1 3\nclient-e{\"a\":1}1.2",
        b"\x01" + b"p node-b 1 2 9 -1\nu7{\"n\":\"x\"}",
        b"\x00" + b"p node-b 0 2 -1 -1\nu7",
        b"\x02" + b"t node-c 2\nu1",
    ]
    for index, data in enumerate(fanout):
        write("fanout", f"{index:02}", data)

    websocket = [
        b"\x40" + b"\x03" + b'{"event":"x"}',
        b"\x40" + b"\x01" + b"hel" + SEP + b"\x00lo" + SEP + b"\x02!",
        b"\x02" + b"\x03" + b"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
        b"\x40" + b"\x01" + b"\xe2\x82" + SEP + b"\x02\xac",
        b"\x40" + b"\x07" + b"\x00\x01\x02",
        b"\x40" + b"\x80" + b"\x03\xe8bye",
        b"\x01" + b"\x03" + b"x" * 40,
    ]
    for index, data in enumerate(websocket):
        write("websocket-frames", f"{index:02}", data)


if __name__ == "__main__":
    sys.exit(main())
