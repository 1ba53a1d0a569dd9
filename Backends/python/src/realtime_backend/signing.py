"""Pusher's signatures (channel subscriptions, user signin, the REST API's query), HS256 room
tokens and constant-time comparison, with ``hmac`` and ``hashlib``.

Source: docs/rooms-protocol.md "Tokens" and "HTTP API", Pusher's REST API authentication
(https://pusher.com/docs/channels/library_auth_reference/rest-api/#authentication), Swift's
``JSONWebToken.sign`` and ``RESTSignature``, the Node library's ``src/signing.js``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac as _hmac
from typing import Any, Mapping, Optional, Union
from urllib.parse import quote

from .canonical import canonical_json

__all__ = ["hmac_sha256", "base64url", "sign_token", "signed_query", "same_bytes", "md5_hex", "JWT_HEADER"]

#: The JOSE header of every room token, as its exact bytes.
JWT_HEADER = b'{"alg":"HS256","typ":"JWT"}'

Bytes = Union[str, bytes, bytearray, memoryview]


def _bytes(value: Bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def hmac_sha256(secret: str, message: Bytes) -> bytes:
    """HMAC-SHA256 (RFC 2104) of ``message`` (a ``str`` is taken as UTF-8) under ``secret`` (UTF-8).

    Returns:
        The 32-byte MAC.
    """
    return _hmac.new(_bytes(secret), _bytes(message), hashlib.sha256).digest()


def md5_hex(body: Bytes) -> str:
    """Hex MD5 of ``body`` (Pusher's ``body_md5``)."""
    return hashlib.md5(_bytes(body)).hexdigest()


def base64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def same_bytes(a: bytes, b: bytes) -> bool:
    """Whether ``a`` and ``b`` are equal, compared in constant time (``hmac.compare_digest``)."""
    return _hmac.compare_digest(a, b)


def sign_token(claims: Mapping[str, Any], secret: str) -> str:
    """An HS256 JWT (RFC 7519) of ``claims``, the claims written as canonical JSON so that every
    backend signs the same bytes (Swift ``JSONWebToken.sign``).

    Args:
        claims: the claims (``{exp, iat, info?, room, rule, sub?}`` for a room token).
        secret: the app secret.

    Returns:
        ``header.claims.signature``, each part base64url without padding.

    Raises:
        TypeError, ValueError: claims that are not JSON (see ``canonical_json``).
    """
    signing_input = base64url(JWT_HEADER) + "." + base64url(canonical_json(dict(claims)).encode("utf-8"))
    return signing_input + "." + base64url(hmac_sha256(secret, signing_input))


def _encode(value: str) -> str:
    # RFC 3986 unreserved characters kept, everything else %XX of its UTF-8 bytes, uppercase
    # (Swift: `addingPercentEncoding(withAllowedCharacters: unreserved)`).
    return quote(value, safe="-._~")


def signed_query(key: str, secret: str, method: str, path: str, body: Bytes, timestamp: int,
                 params: Optional[Mapping[str, Any]] = None) -> str:
    """Pusher's REST signature as a query string.

    The parameters are ``auth_key``, ``auth_timestamp`` (seconds), ``auth_version=1.0``,
    ``body_md5`` when the body is not empty, any extra ``params``, and ``auth_signature``: the hex
    HMAC-SHA256 under the secret of ``METHOD\\npath\\nsorted query`` (the query's names sorted,
    the values as they are). The result is every parameter sorted by name, values
    percent-encoded with RFC 3986's unreserved characters kept (Swift
    ``RealtimeBackend.signedQuery``; Pusher's REST authentication).

    Args:
        key: the app key.
        secret: the app secret.
        method: ``"GET"`` or ``"POST"``.
        path: the path as sent (``"/apps/42/events"``).
        body: the body (``""``/``b""`` for none).
        timestamp: seconds since 1970.
        params: extra query parameters (``{"limit": 50}``), signed too (the server checks a
            signature over every parameter); names must not start with ``auth_`` nor be
            ``body_md5``.

    Returns:
        The query, without ``?``.

    Raises:
        ValueError: an extra parameter that would replace a signature parameter.
    """
    data = _bytes(body)
    parameters = {"auth_key": key, "auth_timestamp": str(int(timestamp)), "auth_version": "1.0"}
    if data:
        parameters["body_md5"] = md5_hex(data)
    for name, value in (params or {}).items():
        name = str(name).lower()
        if name.startswith("auth_") or name == "body_md5":
            raise ValueError(f"the query parameter {name} is the signature's own")
        parameters[name] = str(value)
    to_sign = f"{method}\n{path}\n" + "&".join(f"{name}={parameters[name]}" for name in sorted(parameters))
    parameters["auth_signature"] = hmac_sha256(secret, to_sign).hex()
    return "&".join(f"{name}={_encode(parameters[name])}" for name in sorted(parameters))
