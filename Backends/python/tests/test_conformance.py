"""The conformance suite (Backends/conformance): this library's outputs for cases.json equal
expected.json (written by Swift's RealtimeBackend) byte for byte. A port of the Node library's
test/conformance.test.js, section by section."""

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from realtime_backend import (ChannelError, Realtime, RuleError, WebhookError, canonical_json, is_valid_pattern,
                              is_valid_room_name, match_room, patterns_overlap)

FOLDER = Path(__file__).resolve().parents[2] / "conformance"


def read(name):
    return json.loads((FOLDER / name).read_text(encoding="utf-8"))


cases = read("cases.json")
expected = read("expected.json")
app = cases["app"]


def backend(clock=lambda: cases["now_ms"]):
    """A backend as the cases declare it: the app's key, secret and master key, the clock at now_ms."""
    return Realtime(app_id=app["id"], app_key=app["key"], app_secret=app["secret"],
                    encryption_master_key=app["master_key"], clock=clock)


def declare(realtime, item):
    """Declares a case's rule; ``deny`` lists parameter values its authorizer refuses."""
    deny = item.get("deny")
    authorize = None
    if deny:
        def authorize(user, params):
            return not any(params.get(key) in values for key, values in deny.items())
    realtime.room(item["pattern"], authorize, **item["options"])


rooms = backend()
for rule in cases["backend"]["rules"]:
    declare(rooms, rule)


def test_expected_has_every_section():
    assert set(expected) == {"auth", "auth_over_limit", "canonical", "canonical_integers", "channels", "config", "declarations",
                             "matches", "overlaps", "rest", "room_events", "rules", "signin", "webhooks"}
    assert len(expected["overlaps"]) == len(cases["overlaps"])
    assert len(expected["declarations"]) == len(cases["declarations"]["sequences"])
    assert len(expected["auth"]) == len(cases["auth"]) == 6
    assert len(expected["webhooks"]) == len(cases["webhooks"]) == 6


def test_names_and_patterns_are_valid_or_not_as_listed():
    for name in cases["names"]["valid"]:
        assert is_valid_room_name(name), name
    for name in cases["names"]["invalid"]:
        assert not is_valid_room_name(name), name
    for pattern in cases["patterns"]["valid"]:
        assert is_valid_pattern(pattern), pattern
    for pattern in cases["patterns"]["invalid"]:
        assert not is_valid_pattern(pattern), pattern


def test_matches_the_parameters_of_each_name_against_each_pattern():
    got = [{"pattern": item["pattern"], "name": item["name"], "params": match_room(item["name"], item["pattern"])}
           for item in cases["matches"]]
    assert got == expected["matches"]


def test_rules_in_range_the_rule_the_token_carries_out_of_range_refused_when_declared():
    for index, item in enumerate(cases["rules"]["valid"]):
        realtime = backend()
        realtime.room(item["pattern"], **item["options"])
        assert canonical_json(realtime.rules[0].rule) == expected["rules"]["valid"][index]["rule"], item["pattern"]
    for index, item in enumerate(cases["rules"]["invalid"]):
        with pytest.raises(RuleError) as caught:
            backend().room(item["pattern"], **item["options"])
        assert caught.value.code == expected["rules"]["invalid"][index]["error"], item


def test_overlaps_whether_some_name_matches_both_patterns_of_each_pair():
    got = [{"a": item["a"], "b": item["b"], "overlap": patterns_overlap(item["a"], item["b"])} for item in cases["overlaps"]]
    assert got == expected["overlaps"]


def test_declarations_each_sequence_on_a_fresh_backend_each_rule_ok_or_refused_with_the_same_code():
    def outcome(realtime, item):
        try:
            declare(realtime, item)
        except RuleError as error:
            return error.code
        return "ok"

    got = []
    for sequence in cases["declarations"]["sequences"]:
        realtime = backend()
        got.append([outcome(realtime, item) for item in sequence])
    assert got == expected["declarations"]


def test_auth_every_batched_answer_tokens_included_byte_for_byte():
    for index, item in enumerate(cases["auth"]):
        answer = rooms.authorize_rooms(item["rooms"], item["user"], item["info"])
        assert canonical_json(answer) == expected["auth"][index]["answer"], item["rooms"]
    over = cases["auth_over_limit"]
    names = [f"{over['prefix']}{i}" for i in range(over["count"])]
    answer = rooms.authorize_rooms(names, over["user"])
    assert [name for name in names if answer["rooms"][name].get("error") == "bad_request"] == expected["auth_over_limit"]["bad_request"]
    assert len(answer["rooms"]) == expected["auth_over_limit"]["answered"]
    assert canonical_json(rooms.config()) == expected["config"]


def test_auth_async_answers_the_same():
    import asyncio
    for index, item in enumerate(cases["auth"]):
        answer = asyncio.run(rooms.authorize_rooms_async(item["rooms"], item["user"], item["info"]))
        assert canonical_json(answer) == expected["auth"][index]["answer"], item["rooms"]


def test_channels_and_signin_pushers_signatures_and_the_refusals_codes():
    for index, item in enumerate(cases["channels"]):
        want = expected["channels"][index]
        if "error" in want:
            with pytest.raises(ChannelError) as caught:
                rooms.authorize_channel(item["socket_id"], item["channel"], item.get("member"))
            assert caught.value.code == want["error"], item["channel"]
        else:
            assert canonical_json(rooms.authorize_channel(item["socket_id"], item["channel"], item.get("member"))) == want["answer"], item["channel"]
    for index, item in enumerate(cases["signin"]):
        want = expected["signin"][index]
        if "error" in want:
            with pytest.raises(ChannelError) as caught:
                rooms.authenticate_user(item["socket_id"], item["user_data"])
            assert caught.value.code == want["error"]
        else:
            assert canonical_json(rooms.authenticate_user(item["socket_id"], item["user_data"])) == want["answer"]


def test_the_signed_http_api_queries_and_room_event_bodies():
    for index, item in enumerate(cases["rest"]):
        signer = backend(lambda item=item: item["timestamp"] * 1000)
        assert signer.signed_query(item["method"], item["path"], item["body"]) == expected["rest"][index]["query"], item["path"]
    for index, item in enumerate(cases["room_events"]):
        assert rooms.room_event_body(item["room"], item["event"], item["data"]) == expected["room_events"][index]["body"], item["room"]


def test_webhooks_verified_and_parsed_or_refused_with_the_same_code():
    first = hmac.new(app["secret"].encode(), cases["webhooks"][0]["body"].encode(), hashlib.sha256).hexdigest()
    assert first == expected["webhooks"][0]["signature"]
    for want in expected["webhooks"]:
        if "error" in want:
            with pytest.raises(WebhookError) as caught:
                rooms.verify_webhook(want["key"], want["signature"], want["body"])
            assert caught.value.code == want["error"]
        else:
            assert canonical_json(rooms.verify_webhook(want["key"], want["signature"], want["body"])) == want["result"]


def test_canonical_json_numbers_escapes_and_key_order_as_swift_writes_them():
    assert [canonical_json(value) for value in cases["canonical"]] == expected["canonical"]


def canonical_integer(text):
    """A case's integer as an ``int``, written canonically, or ``"refused"`` (no double holds it)."""
    try:
        return canonical_json(int(text))
    except ValueError:
        return "refused"


def test_canonical_json_integers_written_as_their_double_or_refused_when_none_holds_them():
    assert [canonical_integer(text) for text in cases["canonical_integers"]] == expected["canonical_integers"]
