"""Rules declared with room(): every refusal (Backends/README.md "Rules by pattern")."""

import pytest

from realtime_backend import MAX_HISTORY, MAX_SPAN, Realtime, RuleError, canonical_json, make_rule

MASTER = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


def backend(**kwargs):
    return Realtime(app_key="k", app_secret="s", **kwargs)


def test_defaults_and_every_key():
    assert make_rule("p") == {"history": 0, "span": 1800, "presence": False, "members_send": False, "webhook": False,
                              "sealed": False, "public": False}
    rule = make_rule("p", {"history": MAX_HISTORY, "span": 1, "max": 3, "presence": True, "members_send": True,
                           "webhook": True, "public": True})
    assert canonical_json(rule) == ('{"history":100000,"max":3,"members_send":true,"presence":true,"public":true,'
                                    '"sealed":false,"span":1,"webhook":true}')


def test_none_takes_the_default():
    assert make_rule("p", {"history": None, "span": None, "max": None, "presence": None}) == make_rule("p")


def test_the_seed_line_runs_as_written():
    orders = {"1042": type("Order", (), {"user_id": "ann"})()}

    def find_order(order_id):
        return orders.get(order_id)

    realtime = backend()
    realtime.room("order:{id}", lambda user, p: (order := find_order(p["id"])) is not None and order.user_id == user, history=20)
    answer = realtime.authorize_rooms(["order:1042", "order:7"], "ann")
    assert "token" in answer["rooms"]["order:1042"]
    assert answer["rooms"]["order:7"] == {"error": "forbidden"}
    assert realtime.rules[0].rule["history"] == 20


def test_public_is_a_keyword_argument():
    realtime = backend().room("news:{topic}", public=True)
    assert realtime.rules[0].rule["public"] is True


@pytest.mark.parametrize("options", [
    {"history": -1}, {"history": MAX_HISTORY + 1}, {"span": 0}, {"span": MAX_SPAN + 1}, {"max": 0}, {"max": -5},
    {"max": 2**53},
    # wrong types: a bool is not a number, a number is not a bool, no floats or strings
    {"history": True}, {"span": False}, {"max": True}, {"history": 20.0}, {"history": "20"}, {"span": 1.5},
    {"presence": 1}, {"members_send": 0}, {"webhook": "yes"}, {"public": 1}, {"sealed": 1.0}, {"presence": []},
    # unknown keys
    {"histroy": 20}, {"maxMembers": 3}, {"isPublic": True}, {"members": True},
])
def test_refused_with_invalid_rule(options):
    with pytest.raises(RuleError) as caught:
        backend().room("order:{id}", **options)
    assert caught.value.code == "invalid_rule"
    assert str(caught.value)


@pytest.mark.parametrize("pattern", ["", "order:{}", "{a}{b}", "order {id}", "order:{ïd}", None, 12])
def test_refused_with_invalid_pattern(pattern):
    with pytest.raises(RuleError) as caught:
        backend().room(pattern)
    assert caught.value.code == "invalid_pattern"


def test_the_pattern_is_checked_before_the_options():
    with pytest.raises(RuleError) as caught:
        backend().room("{}", history=-1)
    assert caught.value.code == "invalid_pattern"


def test_sealed_needs_the_master_key():
    with pytest.raises(RuleError) as caught:
        backend().room("vault:{id}", sealed=True)
    assert caught.value.code == "master_key_required"
    backend(encryption_master_key=MASTER).room("vault:{id}", sealed=True)


def test_an_authorizer_that_is_not_callable():
    with pytest.raises(RuleError) as caught:
        backend().room("order:{id}", {"history": 20})
    assert caught.value.code == "invalid_rule"


def test_options_that_are_not_a_mapping():
    with pytest.raises(RuleError) as caught:
        make_rule("p", [("history", 1)])
    assert caught.value.code == "invalid_rule"


def test_a_refused_rule_is_not_declared_and_room_chains():
    realtime = backend()
    with pytest.raises(RuleError):
        realtime.room("a:{id}", history=-1)
    assert realtime.rules == []
    assert realtime.room("a:{id}").room("b:{id}") is realtime
    assert [rule.pattern for rule in realtime.rules] == ["a:{id}", "b:{id}"]


def test_the_first_declared_match_wins():
    realtime = backend().room("order:{id}", history=1).room("{any}", history=2)
    declared, params = realtime.rule_for("order:1")
    assert declared.rule["history"] == 1 and params == {"id": "1"}
    assert realtime.rule_for("shop")[0].rule["history"] == 2
    assert realtime.rule_for("bad room") is None
