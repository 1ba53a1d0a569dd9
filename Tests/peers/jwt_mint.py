"""Mints a room token with PyJWT, as an app backend in Python would (docs/rooms-protocol.md).

Usage: jwt_mint.py SECRET SUB ROOM EXP_OFFSET_SECONDS [RULE_JSON [ALG]]
Prints the token (ALG, HS256 by default, over {"sub", "room", "exp", "iat"[, "rule"]}). SUB "-"
leaves sub out; RULE_JSON "-" leaves the rule out; ALG "none" signs nothing.
"""
import json
import sys
import time

import jwt


def main(secret: str, sub: str, room: str, offset: int, rule: str | None, algorithm: str) -> int:
    now = int(time.time())
    claims = {"room": room, "exp": now + offset, "iat": now}
    if sub != "-":
        claims["sub"] = sub
    if rule and rule != "-":
        claims["rule"] = json.loads(rule)
    print(jwt.encode(claims, None if algorithm == "none" else secret, algorithm=algorithm), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None,
                  sys.argv[6] if len(sys.argv) > 6 else "HS256"))
