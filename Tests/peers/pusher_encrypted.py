"""The Python `pusher` library's end-to-end encryption (PyNaCl underneath), for cross-checking.

Usage: pusher_encrypted.py authorize KEY SECRET MASTER_KEY_BASE64 SOCKET_ID CHANNEL
         prints the library's auth answer for an encrypted channel: {"auth", "shared_secret"}
       pusher_encrypted.py encrypt MASTER_KEY_BASE64 CHANNEL DATA
         prints the event data `trigger` would publish: {"nonce", "ciphertext"}
       pusher_encrypted.py open SHARED_SECRET_BASE64 PAYLOAD_JSON
         opens a payload with PyNaCl's SecretBox; prints {"data": plaintext}, exits 1 if it
         does not open
"""
import base64
import json
import sys

import nacl.exceptions
import nacl.secret
import pusher
from pusher.crypto import encrypt


def main(argv):
    command = argv[0]
    if command == "authorize":
        key, secret, master_key, socket_id, channel = argv[1:6]
        client = pusher.Pusher(app_id="1", key=key, secret=secret, encryption_master_key_base64=master_key)
        answer = client.authenticate(channel=channel, socket_id=socket_id)
        # pusher 3.3.4 gives shared_secret as base64 bytes, which json cannot encode.
        answer["shared_secret"] = answer["shared_secret"].decode("ascii")
        print(json.dumps(answer))
    elif command == "encrypt":
        master_key, channel, data = argv[1:4]
        print(json.dumps(encrypt(channel, data, base64.b64decode(master_key)), ensure_ascii=False))
    elif command == "open":
        shared_secret, payload = argv[1:3]
        fields = json.loads(payload)
        box = nacl.secret.SecretBox(base64.b64decode(shared_secret))
        try:
            plaintext = box.decrypt(base64.b64decode(fields["ciphertext"]), base64.b64decode(fields["nonce"]))
        except nacl.exceptions.CryptoError as error:
            print(json.dumps({"error": str(error)}))
            return 1
        print(json.dumps({"data": plaintext.decode("utf-8")}, ensure_ascii=False))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
