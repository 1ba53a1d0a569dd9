"""Asks the server's HTTP API about channels with Pusher's official server library.

Usage: pusher_query.py PORT APP_ID KEY SECRET
Runs channels_info (plain, with a presence- prefix and user_count, with subscription_count),
channel_info (presence with both counts, a public channel with user_count, an empty channel),
users_info and trigger_batch; prints one JSON object of what each returned, or
{"error": status} for a refusal.
"""
import json
import sys

import pusher


def attempt(call):
    try:
        return call()
    except pusher.errors.PusherBadRequest:
        return {"error": 400}
    except pusher.errors.PusherBadAuth:
        return {"error": 401}
    except pusher.errors.PusherError as error:
        return {"error": str(error)}


def main(port, app_id, key, secret):
    client = pusher.Pusher(app_id=app_id, key=key, secret=secret, host="127.0.0.1", port=int(port), ssl=False, timeout=15)
    results = {
        "all": attempt(lambda: client.channels_info()),
        "presence_users": attempt(lambda: client.channels_info(prefix_filter="presence-", attributes=["user_count"])),
        "subscriptions": attempt(lambda: client.channels_info(attributes=["subscription_count"])),
        "users_without_prefix": attempt(lambda: client.channels_info(attributes=["user_count"])),
        "presence_channel": attempt(lambda: client.channel_info("presence-room", ["user_count", "subscription_count"])),
        "public_user_count": attempt(lambda: client.channel_info("news", ["user_count"])),
        "empty": attempt(lambda: client.channel_info("nobody-here")),
        "users": attempt(lambda: client.users_info("presence-room")),
        "batch": attempt(lambda: client.trigger_batch([
            {"channel": "news", "name": "first", "data": {"n": 1}},
            {"channel": "private-x", "name": "second", "data": "two"},
        ])),
    }
    print(json.dumps(results, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
