"""Cross-origin requests to the auth and config routes: the Fetch standard's CORS protocol
(https://fetch.spec.whatwg.org/#http-cors-protocol) for origins the app lists.

A page on another origin than its backend posts JSON (and the app's own headers) to the auth
route, so the browser first asks with ``OPTIONS`` (a preflight). The answers name the one origin
asked about and allow credentials (the route reads the user's session), so ``*`` is never
accepted. The same decisions in the Node (``src/cors.js``) and PHP (``CrossOrigin``) libraries;
the shared cases are ``Backends/conformance/cors.json``.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ["CrossOrigin", "MAX_PREFLIGHT_HEADERS", "PREFLIGHT_MAX_AGE"]

#: Most header names a preflight may ask for, and the longest list read, in bytes.
MAX_PREFLIGHT_HEADERS = 32
_MAX_PREFLIGHT_HEADERS_BYTES = 1024
#: Seconds a browser may keep a preflight's answer.
PREFLIGHT_MAX_AGE = 600

_ORIGIN = re.compile(r"(https?)://(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([0-9]+))?")
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
_IPV4_PART = re.compile(r"0|[1-9][0-9]{0,2}")
_PORT = re.compile(r"[1-9][0-9]{0,4}")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _canonical_origin(origin: str) -> Optional[str]:
    """``origin`` lowercased when a browser would send it so (the WHATWG URL standard's
    serialization of an origin: no default port, no leading zero, a dotted-decimal IPv4 address,
    a compressed IPv6 one, ASCII only); ``None`` when a browser never sends it."""
    if not origin.isascii():
        return None
    normalized = origin.lower()
    match = _ORIGIN.fullmatch(normalized)
    if match is None:
        return None
    scheme, host, port = match.groups()
    if port is not None and (not _PORT.fullmatch(port) or int(port) > 65535 or port == _DEFAULT_PORTS[scheme]):
        return None
    if host.startswith("["):
        try:
            if ipaddress.IPv6Address(host[1:-1]).compressed != host[1:-1]:
                return None
        except ValueError:
            return None
        return normalized
    labels = host.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return None
    last = labels[-1]
    if last.isdigit() or last.startswith("0x"):  # an IPv4 address: dotted decimal, as a browser writes it
        if len(labels) != 4 or not all(_IPV4_PART.fullmatch(part) and int(part) <= 255 for part in labels):
            return None
    return normalized


def _printable(text: str) -> str:
    """``text`` for an error message: at most 200 characters, each outside ``!``…``~`` as ``?``."""
    return "".join(character if "!" <= character <= "~" else "?" for character in text[:200])

Headers = List[Tuple[str, str]]


class CrossOrigin:
    """The origins allowed to call the routes from a browser, and the answers that follow.

    Args:
        origins: each ``scheme://host[:port]`` as a browser sends it in ``Origin`` (``http`` or
            ``https``, no path, no trailing ``/``); compared without case. Empty: no cross-origin
            request is allowed, and no answer carries a CORS header.

    Raises:
        ValueError: ``*``, ``null`` or an origin that is not ``scheme://host[:port]``.
    """

    def __init__(self, origins: Iterable[str] = ()) -> None:
        allowed = set()
        for origin in origins:
            if not isinstance(origin, str):
                raise ValueError(f"allowed_origins: {origin!r} is not a string")
            if origin == "*":
                raise ValueError("allowed_origins: '*' cannot be allowed: the auth route answers with the user's session "
                                 "(credentials), so list each origin (https://shop.example)")
            normalized = _canonical_origin(origin)
            if normalized is None:
                raise ValueError(f"allowed_origins: {origin!r} is not an origin as a browser sends it: scheme://host[:port], "
                                 "http or https, without a path, a trailing /, a default port or a leading zero")
            allowed.add(normalized)
        self.origins = frozenset(allowed)

    def allows(self, origin: Optional[str]) -> bool:
        """Whether ``origin`` (an ``Origin`` header's value, ``None`` when absent) is listed."""
        return origin is not None and origin.isascii() and origin.lower() in self.origins

    def headers(self, origin: Optional[str]) -> Headers:
        """The headers an answer (not a preflight's) to a request from ``origin`` carries:
        ``Access-Control-Allow-Origin`` and ``-Credentials`` for a listed origin, ``Vary: Origin``
        whenever origins are listed (the answer depends on it)."""
        if not self.origins:
            return []
        if not self.allows(origin):
            return [("Vary", "Origin")]
        return [("Access-Control-Allow-Origin", str(origin)), ("Access-Control-Allow-Credentials", "true"), ("Vary", "Origin")]

    def preflight(self, method: str, origin: Optional[str], request_method: Optional[str],
                  request_headers: Optional[str]) -> Tuple[int, Optional[Dict[str, str]], Headers]:
        """The answer to ``OPTIONS`` on a route that takes ``method`` (``POST`` or ``GET``):
        ``(status, error body or None, headers)``.

        204 with the origin, credentials, the method, the headers asked for (lowercase, at most
        32) and a max age of 600 s; 204 with ``Allow`` when there is no ``Origin`` (not a
        browser's preflight); 403 for an origin not listed; 405 (with ``Allow``) for another
        method asked; 400 for asked headers that are not a list of tokens (RFC 9110 §5.6.2).
        """
        allow = f"{method}, OPTIONS"
        if origin is None:
            return 204, None, [("Allow", allow)]
        vary = [("Vary", "Origin")] if self.origins else []
        if not self.allows(origin):
            return 403, {"error": f"the origin {_printable(origin)} is not allowed: add it to allowed_origins"}, vary
        asked = request_method or ""
        if not asked.isascii() or asked.upper() != method:
            return 405, {"error": f"{method} only"}, [("Allow", allow)] + vary
        names: List[str] = []
        if request_headers:
            refused = (400, {"error": f"Access-Control-Request-Headers: at most {MAX_PREFLIGHT_HEADERS} header names, "
                                      "each a token (RFC 9110)"}, vary)
            if len(request_headers.encode("utf-8", "surrogateescape")) > _MAX_PREFLIGHT_HEADERS_BYTES:
                return refused
            if not request_headers.isascii():
                return refused
            names = [name.strip(" \t").lower() for name in request_headers.split(",") if name.strip(" \t")]
            if len(names) > MAX_PREFLIGHT_HEADERS or not all(_TOKEN.fullmatch(name) for name in names):
                return refused
        headers = [("Access-Control-Allow-Origin", origin), ("Access-Control-Allow-Credentials", "true"),
                   ("Access-Control-Allow-Methods", method)]
        if names:
            headers.append(("Access-Control-Allow-Headers", ",".join(names)))
        headers += [("Access-Control-Max-Age", str(PREFLIGHT_MAX_AGE)), ("Vary", "Origin, Access-Control-Request-Headers")]
        return 204, None, headers
