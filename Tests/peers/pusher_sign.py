"""Prints the Python `pusher` library's signatures for given inputs, for cross-checking.

Usage: pusher_sign.py [--compact] KEY SECRET SOCKET_ID CHANNEL [CHANNEL_DATA]
       pusher_sign.py [--compact] --user KEY SECRET SOCKET_ID USER_DATA
--compact makes the library serialise channel_data and user_data as compact JSON with sorted
keys and no ASCII escaping (its json_encoder option), as Swift's JSONEncoder writes them.
"""
import json
import sys

import pusher


class CompactEncoder(json.JSONEncoder):
    def __init__(self, **options):
        options.update(separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        super().__init__(**options)


def main(argv):
    encoder = None
    if argv[0] == "--compact":
        encoder = CompactEncoder
        argv = argv[1:]
    if argv[0] == "--user":
        key, secret, socket_id, user_data = argv[1:5]
        client = pusher.Pusher(app_id="1", key=key, secret=secret, json_encoder=encoder)
        print(json.dumps(client.authenticate_user(socket_id, json.loads(user_data))))
        return 0
    key, secret, socket_id, channel = argv[0:4]
    client = pusher.Pusher(app_id="1", key=key, secret=secret, json_encoder=encoder)
    custom = json.loads(argv[4]) if len(argv) > 4 else None
    print(json.dumps(client.authenticate(channel=channel, socket_id=socket_id, custom_data=custom)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
