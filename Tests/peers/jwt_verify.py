"""Verifies a room token with PyJWT, as a backend in Python would check one of ours.

Usage: jwt_verify.py SECRET TOKEN
Prints the decoded claims as JSON; exits 1 when the token does not verify.
"""
import json
import sys

import jwt


def main(secret: str, token: str) -> int:
    try:
        print(json.dumps(jwt.decode(token, secret, algorithms=["HS256"]), sort_keys=True), flush=True)
    except jwt.PyJWTError as error:
        print(json.dumps({"error": str(error)}), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
