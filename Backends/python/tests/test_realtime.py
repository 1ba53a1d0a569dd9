"""The Realtime class: authorizers (sync, async, raising), tokens, grants, sealed rooms,
channels and signins, webhooks and the signed HTTP API against a fake server."""

import asyncio
import base64
import hashlib
import hmac
import json
import socket

import pytest

from conftest import APP_ID, KEY, SECRET
from realtime_backend import MAX_WEBHOOK_BYTES, ApiError, ChannelError, Realtime, RuleError, WebhookError

MASTER = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
NOW = 1764579200123


def backend(**kwargs):
    kwargs.setdefault("clock", lambda: NOW)
    return Realtime(app_key=KEY, app_secret=SECRET, app_id=APP_ID, encryption_master_key=MASTER, **kwargs)


def decode(token):
    header, claims, signature = token.split(".")
    pad = lambda part: part + "=" * (-len(part) % 4)
    expected = hmac.new(SECRET.encode(), f"{header}.{claims}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(pad(signature)) == expected
    assert base64.urlsafe_b64decode(pad(header)) == b'{"alg":"HS256","typ":"JWT"}'
    return json.loads(base64.urlsafe_b64decode(pad(claims)))


# Construction

def test_constructor_checks_its_arguments():
    with pytest.raises(TypeError):
        Realtime(app_key="", app_secret="s")
    with pytest.raises(TypeError):
        Realtime(app_key="k", app_secret=None)
    for bad in ("not base64!", base64.b64encode(b"x" * 31).decode(), MASTER.rstrip("="), b"x" * 16):
        with pytest.raises(ValueError):
            Realtime(app_key="k", app_secret="s", encryption_master_key=bad)
    Realtime(app_key="k", app_secret="s", encryption_master_key=base64.b64decode(MASTER))
    with pytest.raises(ValueError):
        Realtime(app_key="k", app_secret="s", server="127.0.0.1:6001")
    with pytest.raises(TypeError):
        Realtime(app_key="k", app_secret="s", token_lifetime="1h")
    with pytest.raises(TypeError):
        Realtime(app_key="k", app_secret="s", clock=12)


def test_lifetimes_are_whole_seconds_at_least_660():
    realtime = backend(token_lifetime=10, grant_lifetime=700.9).room("a:{id}").room("p:{id}", public=True)
    assert realtime.token_lifetime == 660 and realtime.grant_lifetime == 700
    claims = decode(realtime.authorize_rooms(["a:1"], "u")["rooms"]["a:1"]["token"])
    assert claims["exp"] - claims["iat"] == 660
    grant = realtime.config()["grants"][0]
    assert decode(grant["token"])["exp"] == NOW // 1000 + 700 and grant["expires"] == (NOW // 1000 + 700) * 1000


def test_a_float_clock_gives_integer_times():
    realtime = backend(clock=lambda: 1764579200123.75).room("a:{id}")
    answer = realtime.authorize_rooms(["a:1"], "u")
    assert answer["time"] == 1764579200123 and isinstance(answer["time"], int)
    assert decode(answer["rooms"]["a:1"]["token"])["iat"] == 1764579200


# The batched answer

def test_tokens_carry_the_claims():
    realtime = backend().room("chat:{a}:{b}", presence=True, max=5).room("order:{id}")
    info = {"name": "Ann"}
    answer = realtime.authorize_rooms(["chat:1:2", "order:1"], "ann", info)
    chat = decode(answer["rooms"]["chat:1:2"]["token"])
    assert chat == {"exp": NOW // 1000 + 3600, "iat": NOW // 1000, "info": info, "room": "chat:1:2", "sub": "ann",
                    "rule": {"history": 0, "span": 1800, "presence": True, "max": 5, "members_send": False,
                             "webhook": False, "sealed": False, "public": False}}
    assert "info" not in decode(answer["rooms"]["order:1"]["token"])  # info only in presence rooms
    assert answer["rooms"]["chat:1:2"]["expires"] == (NOW // 1000 + 3600) * 1000


def test_visitors_join_only_public_rooms_and_get_no_sub():
    realtime = backend().room("news:{t}", public=True).room("order:{id}")
    answer = realtime.authorize_rooms(["news:a", "order:1"], None)
    assert "sub" not in decode(answer["rooms"]["news:a"]["token"])
    assert answer["rooms"]["order:1"] == {"error": "forbidden"}


def test_an_int_user_is_its_decimal_text_and_other_types_are_refused():
    realtime = backend().room("order:{id}")
    assert decode(realtime.authorize_rooms(["order:1"], 7)["rooms"]["order:1"]["token"])["sub"] == "7"
    with pytest.raises(TypeError):
        realtime.authorize_rooms(["order:1"], True)
    with pytest.raises(TypeError):
        realtime.authorize_rooms(["order:1", 2], "u")
    with pytest.raises(TypeError):
        realtime.authorize_rooms("order:1", "u")


def test_sealed_rooms_get_their_key():
    realtime = backend().room("vault:{id}", sealed=True)
    entry = realtime.authorize_rooms(["vault:7"], "ann")["rooms"]["vault:7"]
    key = hashlib.sha256(b"vault:7" + base64.b64decode(MASTER)).digest()
    assert entry["key"] == base64.b64encode(key).decode()
    assert "key" not in decode(entry["token"])  # never in the token the server reads


def test_info_that_is_not_json_answers_bad_request_for_the_presence_room_only():
    realtime = backend().room("chat:{id}", presence=True).room("order:{id}")
    answer = realtime.authorize_rooms(["chat:1", "order:1"], "ann", {"n": float("nan")})
    assert answer["rooms"]["chat:1"] == {"error": "bad_request"}
    assert "token" in answer["rooms"]["order:1"]


def test_info_with_an_integer_no_double_holds_answers_bad_request_not_a_rounded_token():
    realtime = backend().room("chat:{id}", presence=True)
    answer = realtime.authorize_rooms(["chat:1", "chat:2"], "ann", {"id": 123456789012345678})
    assert answer["rooms"]["chat:1"] == {"error": "bad_request"} == answer["rooms"]["chat:2"]
    token = realtime.authorize_rooms(["chat:1"], "ann", {"id": 10**16})["rooms"]["chat:1"]["token"]
    assert '"info":{"id":1e+16}' in base64.urlsafe_b64decode(token.split(".")[1] + "==").decode()


def test_duplicates_once_and_over_100_bad_request():
    realtime = backend().room("order:{id}")
    names = ["order:1", "order:1"] + [f"order:{i}" for i in range(2, 102)] + ["bad room"]
    answer = realtime.authorize_rooms(names, "ann")["rooms"]
    assert len(answer) == 102
    assert answer["order:101"] == {"error": "bad_request"} and answer["bad room"] == {"error": "bad_request"}
    assert "token" in answer["order:100"]


def test_only_true_admits():
    results = {"1": True, "2": False, "3": 1, "4": "yes", "5": None, "6": [1]}
    realtime = backend().room("order:{id}", lambda user, p: results[p["id"]])
    answer = realtime.authorize_rooms([f"order:{i}" for i in "123456"], "ann")["rooms"]
    assert "token" in answer["order:1"]
    assert all(answer[f"order:{i}"] == {"error": "forbidden"} for i in "23456")


def test_the_authorizer_gets_the_user_and_a_copy_of_the_params():
    seen = []

    def authorize(user, params):
        seen.append((user, dict(params)))
        params["id"] = "changed"
        return True

    realtime = backend().room("chat:{a}:{b}", authorize).room("news:{t}", authorize)
    realtime.authorize_rooms(["chat:1:2", "chat:1:2"], "ann")
    assert realtime.authorize_rooms(["news:x"], None)["rooms"]["news:x"] == {"error": "forbidden"}
    realtime.authorize_rooms(["news:x"], "bob")
    # A visitor is refused a non-public rule before its authorizer runs, and a public rule takes none.
    assert seen == [("ann", {"a": "1", "b": "2"}), ("bob", {"t": "x"})]
    with pytest.raises(RuleError) as caught:
        backend().room("news:{t}", authorize, public=True)
    assert caught.value.code == "public_authorizer"


def test_a_public_rule_takes_no_authorizer_and_shares_no_name_with_another_rule():
    """The grant is checked against the pattern alone, so no grant may admit a visitor to a
    room the backend refuses."""
    with pytest.raises(RuleError) as caught:
        backend().room("news:{topic}", lambda user, p: p["topic"] != "secret", public=True)
    assert caught.value.code == "public_authorizer"
    realtime = backend().room("news:{topic}-staff", lambda user, p: user == "staff")
    with pytest.raises(RuleError) as caught:
        realtime.room("news:{topic}", public=True)
    assert caught.value.code == "public_overlap" and "news:{topic}-staff" in str(caught.value)
    assert [declared.pattern for declared in realtime.rules] == ["news:{topic}-staff"], "the refused rule is not added"
    assert realtime.authorize_rooms(["news:x-staff"], None)["rooms"]["news:x-staff"] == {"error": "forbidden"}
    assert realtime.config()["grants"] == [], "no grant admits a visitor to news:x-staff"
    # The reverse order is refused too; rules that are not public may overlap (first match wins).
    reversed_ = backend().room("news:{topic}", public=True)
    with pytest.raises(RuleError) as caught:
        reversed_.room("news:{topic}-staff", lambda user, p: user == "staff")
    assert caught.value.code == "public_overlap"
    reversed_.room("order:{id}").room("order:{id}-gift", history=5)
    assert [declared.pattern for declared in reversed_.rules] == ["news:{topic}", "order:{id}", "order:{id}-gift"]


def test_async_authorizers_sync_and_async_entry_points():
    async def coroutine_authorizer(user, params):
        await asyncio.sleep(0.01)
        return params["id"] != "13"

    def returns_awaitable(user, params):
        return coroutine_authorizer(user, params)

    realtime = backend().room("order:{id}", coroutine_authorizer).room("other:{id}", returns_awaitable)
    names = ["order:1", "order:13", "other:2", "other:13"]
    for answer in (realtime.authorize_rooms(names, "ann"), asyncio.run(realtime.authorize_rooms_async(names, "ann"))):
        rooms = answer["rooms"]
        assert "token" in rooms["order:1"] and "token" in rooms["other:2"]
        assert rooms["order:13"] == rooms["other:13"] == {"error": "forbidden"}


def test_async_authorizers_run_concurrently():
    running = []
    peak = []

    async def slow(user, params):
        running.append(1)
        peak.append(len(running))
        await asyncio.sleep(0.05)
        running.pop()
        return True

    realtime = backend().room("order:{id}", slow)
    answer = realtime.authorize_rooms([f"order:{i}" for i in range(10)], "ann")
    assert all("token" in entry for entry in answer["rooms"].values())
    assert max(peak) == 10


def test_the_sync_entry_point_works_inside_a_running_loop():
    async def authorize(user, params):
        return True

    realtime = backend().room("order:{id}", authorize)

    async def main():
        return realtime.authorize_rooms(["order:1"], "ann")

    assert "token" in asyncio.run(main())["rooms"]["order:1"]


def test_a_raising_authorizer_is_forbidden_and_reported():
    reports = []

    def broken(user, params):
        raise RuntimeError("database down")

    async def broken_async(user, params):
        raise KeyError("missing")

    realtime = backend(on_authorizer_error=lambda error, room: reports.append((type(error).__name__, room)))
    realtime.room("a:{id}", broken).room("b:{id}", broken_async).room("c:{id}")
    for answer in (realtime.authorize_rooms(["a:1", "b:1", "c:1"], "ann"),
                   asyncio.run(realtime.authorize_rooms_async(["a:1", "b:1", "c:1"], "ann"))):
        assert answer["rooms"]["a:1"] == answer["rooms"]["b:1"] == {"error": "forbidden"}
        assert "token" in answer["rooms"]["c:1"]
    assert reports == [("RuntimeError", "a:1"), ("KeyError", "b:1")] * 2


def test_the_default_report_is_logged_and_a_raising_hook_does_not_escape(caplog):
    def broken(user, params):
        raise RuntimeError("database down")

    realtime = backend().room("a:{id}", broken)
    with caplog.at_level("ERROR", logger="realtime_backend"):
        assert realtime.authorize_rooms(["a:1"], "u")["rooms"]["a:1"] == {"error": "forbidden"}
    assert "a:1" in caplog.text and "database down" in caplog.text

    def hook(error, room):
        raise ValueError("hook")

    realtime = backend(on_authorizer_error=hook).room("a:{id}", broken)
    assert realtime.authorize_rooms(["a:1"], "u")["rooms"]["a:1"] == {"error": "forbidden"}


def test_config_grants_one_token_per_public_pattern_in_order():
    realtime = backend().room("b:{id}", public=True).room("x:{id}").room("a:{id}", public=True, history=5)
    config = realtime.config()
    assert config["time"] == NOW
    assert [grant["pattern"] for grant in config["grants"]] == ["b:{id}", "a:{id}"]
    claims = decode(config["grants"][1]["token"])
    assert claims["room"] == "a:{id}" and "sub" not in claims and claims["rule"]["history"] == 5
    assert claims["exp"] - claims["iat"] == 86400
    assert backend().config() == {"time": NOW, "grants": []}


# Channels and signins

def test_channel_refusals():
    realtime = backend()
    plain = Realtime(app_key=KEY, app_secret=SECRET)
    cases = [
        (realtime, ("1.2", "private-a", {"user_id": "u"}), "member_not_allowed"),
        (realtime, ("1.2", "private-encrypted-a", {"user_id": "u"}), "member_not_allowed"),
        (plain, ("1.2", "private-encrypted-a"), "master_key_required"),
        (realtime, ("1.2", "presence-a", {"user_id": ""}), "invalid_member"),
        (realtime, ("1.2", "presence-a", {"user_id": 7}), "invalid_member"),
        (realtime, ("1.2", "presence-a", {"name": "no id"}), "invalid_member"),
        (realtime, ("1.2", "presence-a", "ann"), "invalid_member"),
        (realtime, ("1.2", "presence-a", {"user_id": "u", "user_info": {"n": float("inf")}}), "invalid_member"),
        (realtime, ("1.2", "presence-a"), "member_required"),
        (realtime, ("1.2", "news"), "public_channel"),
        (realtime, ("1.2\n", "private-a"), "invalid_socket_id"),
        (realtime, ("١.٢", "private-a"), "invalid_socket_id"),
        (realtime, ("1.", "private-a"), "invalid_socket_id"),
        (realtime, (1.2, "private-a"), "invalid_socket_id"),
        (realtime, ("1.2", "private-a\n"), "invalid_channel"),
        (realtime, ("1.2", "x" * 165), "invalid_channel"),
        (realtime, ("1.2", "private-a:b"), "invalid_channel"),
    ]
    for signer, args, code in cases:
        with pytest.raises(ChannelError) as caught:
            signer.authorize_channel(*args)
        assert caught.value.code == code, args


def test_presence_channel_data_leaves_a_null_user_info_out():
    answer = backend().authorize_channel("1.2", "presence-a", {"user_id": "u", "user_info": None})
    assert answer["channel_data"] == '{"user_id":"u"}'
    expected = hmac.new(SECRET.encode(), b'1.2:presence-a:{"user_id":"u"}', hashlib.sha256).hexdigest()
    assert answer["auth"] == f"{KEY}:{expected}"


@pytest.mark.parametrize("user_data", [
    '{"id":"ann","id":"bob"}', '{"id":"ann","n":NaN}', '{"id":"ann","n":Infinity}', "NaN", '"ann"', "[1]", "null",
    '{"id":7}', '{"id":""}', '{"id":"a b"}', '{"id":"ann\\n"}', '{"id":"' + "a" * 201 + '"}', '{"id":"ann"', "",
    "\ufeff{\"id\":\"ann\"}", '{"name":"no id"}',
])
def test_signin_refusals(user_data):
    with pytest.raises(ChannelError) as caught:
        backend().authenticate_user("1.2", user_data)
    assert caught.value.code == "invalid_user_data"


def test_signin_signs_the_text_as_given():
    text = '{ "id" : "ann", "user_info": {"x": [1, 2.50]} }'
    answer = backend().authenticate_user("1.2", text)
    assert answer["user_data"] == text
    assert answer["auth"] == KEY + ":" + hmac.new(SECRET.encode(), f"1.2::user::{text}".encode(), hashlib.sha256).hexdigest()
    backend().authenticate_user("1.2", '{"id":"' + "a" * 200 + '"}')
    with pytest.raises(ChannelError) as caught:
        backend().authenticate_user("x", text)
    assert caught.value.code == "invalid_socket_id"


# Webhooks

def sign(body):
    data = body.encode() if isinstance(body, str) else body
    return hmac.new(SECRET.encode(), data, hashlib.sha256).hexdigest()


def test_webhook_signature_any_case_bytes_or_text():
    body = '{"time_ms":1,"events":[{"name":"channel_vacated","channel":"c"}]}'
    realtime = backend()
    assert realtime.verify_webhook(KEY, sign(body).upper(), body.encode()) == {
        "time_ms": 1, "events": [{"name": "channel_vacated", "channel": "c"}]}
    for key, signature, code in ((None, sign(body), "bad_key"), (KEY, None, "bad_signature"), (KEY, "", "bad_signature"),
                                 (KEY, sign(body)[:-1], "bad_signature"), (KEY, "é" * 64, "bad_signature")):
        with pytest.raises(WebhookError) as caught:
            realtime.verify_webhook(key, signature, body)
        assert caught.value.code == code


def test_webhook_keeps_the_known_fields_of_their_types_and_drops_others():
    body = json.dumps({"time_ms": 5.0, "extra": 1, "events": [
        {"name": "room_event", "room": "r", "event": "e", "data": "{}", "id": 7.0, "at": 9, "user_id": None,
         "socket_id": "1.2", "unknown": [1]}]})
    assert backend().verify_webhook(KEY, sign(body), body) == {
        "time_ms": 5, "events": [{"name": "room_event", "room": "r", "event": "e", "data": "{}", "id": 7, "at": 9, "socket_id": "1.2"}]}


@pytest.mark.parametrize("body", [
    '{"time_ms":1,"events":[],"time_ms":2}', '{"time_ms":NaN,"events":[]}', '{"time_ms":1,"events":[{"name":"a","id":Infinity}]}',
    '{"time_ms":1.5,"events":[]}', '{"time_ms":true,"events":[]}', '{"time_ms":"1","events":[]}', '{"events":[]}',
    '{"time_ms":1,"events":{}}', '{"time_ms":1,"events":[1]}', '{"time_ms":1,"events":[{"channel":"c"}]}',
    '{"time_ms":1,"events":[{"name":7}]}', '{"time_ms":1,"events":[{"name":"a","data":{"x":1}}]}',
    '{"time_ms":1,"events":[{"name":"a","id":-1}]}', '{"time_ms":1,"events":[{"name":"a","at":1.5}]}',
    '{"time_ms":1,"events":[{"name":"a","user_id":7}]}', '{"time_ms":1,"events":[{"name":"a","id":true}]}',
    '[]', 'null', '{"time_ms":1,"events":[]', '{"time_ms":1,"events":[],}', b'\xff\xfe', '{"time_ms":1e400,"events":[]}',
])
def test_malformed_webhooks(body):
    with pytest.raises(WebhookError) as caught:
        backend().verify_webhook(KEY, sign(body), body)
    assert caught.value.code == "malformed"


def test_webhook_over_1_mib_is_malformed_after_the_signature():
    body = '{"time_ms":1,"events":[],"pad":"' + "x" * MAX_WEBHOOK_BYTES + '"}'
    with pytest.raises(WebhookError) as caught:
        backend().verify_webhook(KEY, sign(body), body)
    assert caught.value.code == "malformed"
    with pytest.raises(WebhookError) as caught:
        backend().verify_webhook(KEY, "0" * 64, body)
    assert caught.value.code == "bad_signature"


# The signed HTTP API

def test_room_event_body_refusals():
    realtime = backend().room("vault:{id}", sealed=True).room("order:{id}")
    with pytest.raises(RuleError) as caught:
        realtime.room_event_body("vault:1", "e", {})
    assert caught.value.code == "sealed_not_supported"
    with pytest.raises(RuleError) as caught:
        realtime.room_event_body("nothing:1", "e", {})
    assert caught.value.code == "invalid_pattern"
    with pytest.raises(ValueError):
        realtime.room_event_body("order:1", "e", float("nan"))


def test_room_event_data_integers_as_their_double_or_refused_when_no_double_holds_them():
    realtime = backend().room("order:{id}")
    body = json.loads(realtime.room_event_body("order:1", "e", {"big": 10**16, "n": 2**53}))
    assert body["data"] == '{"big":1e+16,"n":9007199254740992}'
    for data in (123456789012345678, {"id": 2**53 + 1}, [-(2**53) - 1], 10**400):
        with pytest.raises(ValueError, match="no double holds"):
            realtime.room_event_body("order:1", "e", data)
    # refused before any request: the server (none listens here) is never asked
    publisher = api_backend("http://127.0.0.1:9").room("order:{id}")
    with pytest.raises(ValueError, match="123456789012345678"):
        publisher.publish_room("order:1", "e", {"id": 123456789012345678})
    with pytest.raises(ValueError, match="123456789012345678"):
        publisher.publish_rooms([("order:1", "e", 1), ("order:2", "e", 123456789012345678)])
    with pytest.raises(ValueError, match="123456789012345678"):
        publisher.trigger("a", "e", 123456789012345678)


def test_signed_query_with_params_signs_them_too():
    realtime = backend(clock=lambda: 1764579200000)
    query = realtime.signed_query("GET", "/apps/42/rooms/a/history", "", {"limit": 5, "before": 9})
    names = [part.split("=")[0] for part in query.split("&")]
    assert names == sorted(names) and "limit" in names and "before" in names
    with pytest.raises(ValueError):
        realtime.signed_query("GET", "/x", "", {"auth_key": "other"})


def api_backend(server_url):
    return Realtime(app_key=KEY, app_secret=SECRET, app_id=APP_ID, server=server_url + "/", encryption_master_key=MASTER)


def test_publish_room_sends_the_signed_body(fake_server):
    fake_server.answer = lambda request: (200, '{"events":[{"room":"order:1","epoch":"e","id":1}]}')
    realtime = api_backend(fake_server.url).room("order:{id}", history=20)
    answer = realtime.publish_room("order:1", "updated", {"status": "paid"})
    assert answer == {"events": [{"room": "order:1", "epoch": "e", "id": 1}]}
    request = fake_server.requests[-1]
    assert request["refused"] is None and request["method"] == "POST" and request["path"] == "/apps/42/room_events"
    assert request["body"].decode() == realtime.room_event_body("order:1", "updated", {"status": "paid"})
    assert request["content_type"] == "application/json"


def test_publish_rooms_trigger_and_batches(fake_server):
    realtime = api_backend(fake_server.url).room("order:{id}")
    realtime.publish_rooms([{"room": "order:1", "event": "a", "data": 1}, ("order:2", "b", [2])])
    batch = json.loads(fake_server.requests[-1]["body"])["batch"]
    assert [item["room"] for item in batch] == ["order:1", "order:2"] and batch[1]["data"] == "[2]"
    assert fake_server.requests[-1]["path"] == "/apps/42/batch_room_events"
    realtime.trigger("prices", "price", {"p": 1})
    assert json.loads(fake_server.requests[-1]["body"]) == {"channel": "prices", "data": '{"p":1}', "name": "price"}
    realtime.trigger(["a", "b"], "price", None)
    assert json.loads(fake_server.requests[-1]["body"]) == {"channels": ["a", "b"], "data": "null", "name": "price"}
    realtime.trigger_batch([{"channel": "a", "event": "e", "data": "x"}])
    assert fake_server.requests[-1]["path"] == "/apps/42/batch_events"
    assert json.loads(fake_server.requests[-1]["body"]) == {"batch": [{"channel": "a", "data": '"x"', "name": "e"}]}
    assert all(request["refused"] is None for request in fake_server.requests)
    with pytest.raises(ValueError):
        realtime.publish_rooms([("order:1", "e", 1)] * 101)
    with pytest.raises(ValueError):
        realtime.trigger_batch([("a", "e", 1)] * 11)


def test_history_and_users_encode_the_room_and_sign_the_page(fake_server):
    fake_server.answer = lambda request: (200, '{"events":[],"more":false}')
    realtime = api_backend(fake_server.url)
    assert realtime.room_history("chat;x:7", before=120, limit=50) == {"events": [], "more": False}
    request = fake_server.requests[-1]
    assert request["refused"] is None
    assert request["raw_path"] == "/apps/42/rooms/chat%3Bx%3A7/history"
    assert request["query"]["limit"] == "50" and request["query"]["before"] == "120"
    realtime.room_users("order:1")
    assert fake_server.requests[-1]["refused"] is None and fake_server.requests[-1]["path"] == "/apps/42/rooms/order:1/users"


def test_api_errors(fake_server):
    realtime = api_backend(fake_server.url).room("order:{id}")
    fake_server.answer = lambda request: (404, '{"error":"this room keeps no history","code":"no_history"}')
    with pytest.raises(ApiError) as caught:
        realtime.room_history("order:1")
    assert caught.value.status == 404 and caught.value.code == "no_history" and "no history" in caught.value.message
    fake_server.answer = lambda request: (200, "not json")
    with pytest.raises(ApiError) as caught:
        realtime.publish_room("order:1", "e", 1)
    assert caught.value.status == 200
    fake_server.answer = lambda request: (200, "")
    assert realtime.publish_room("order:1", "e", 1) == {}
    wrong = Realtime(app_key=KEY, app_secret="wrong", app_id=APP_ID, server=fake_server.url).room("order:{id}")
    with pytest.raises(ApiError) as caught:
        wrong.publish_room("order:1", "e", 1)
    assert caught.value.status == 401


def test_api_without_an_answer_is_status_0():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    realtime = Realtime(app_key=KEY, app_secret=SECRET, app_id=APP_ID, server=f"http://127.0.0.1:{port}").room("order:{id}")
    with pytest.raises(ApiError) as caught:
        realtime.publish_room("order:1", "e", 1)
    assert caught.value.status == 0
    with pytest.raises(ValueError):
        Realtime(app_key=KEY, app_secret=SECRET).room("order:{id}").publish_room("order:1", "e", 1)


def test_api_times_out_after_10_seconds_as_status_0(monkeypatch):
    import realtime_backend.realtime as module
    monkeypatch.setattr(module, "API_TIMEOUT", 0.2)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        port = listener.getsockname()[1]
        realtime = Realtime(app_key=KEY, app_secret=SECRET, app_id=APP_ID, server=f"http://127.0.0.1:{port}")
        with pytest.raises(ApiError) as caught:
            realtime.room_users("order:1")
        assert caught.value.status == 0
    finally:
        listener.close()
