"""Prints the Python `pusher` library's signatures for given inputs, for cross-checking.

Usage: pusher_sign.py KEY SECRET SOCKET_ID CHANNEL [CHANNEL_DATA]
       pusher_sign.py --user KEY SECRET SOCKET_ID USER_DATA
"""
import json
import sys

import pusher


def main(argv):
    if argv[0] == "--user":
        key, secret, socket_id, user_data = argv[1:5]
        client = pusher.Pusher(app_id="1", key=key, secret=secret)
        print(json.dumps(client.authenticate_user(socket_id, json.loads(user_data))))
        return 0
    key, secret, socket_id, channel = argv[0:4]
    client = pusher.Pusher(app_id="1", key=key, secret=secret)
    custom = json.loads(argv[4]) if len(argv) > 4 else None
    print(json.dumps(client.authenticate(channel=channel, socket_id=socket_id, custom_data=custom)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
