<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * Cross-origin requests to the auth and config routes: the Fetch standard's CORS protocol
 * (https://fetch.spec.whatwg.org/#http-cors-protocol) for origins the app lists.
 *
 * A page on another origin than its backend posts JSON (and the app's own headers) to the auth
 * route, so the browser first asks with `OPTIONS` (a preflight). The answers name the one
 * origin asked about and allow credentials (the route reads the user's session), so `*` is
 * never accepted. The same decisions as the Node (`src/cors.js`) and Python
 * (`realtime_backend.cors`) libraries; the shared cases are Backends/conformance/cors.json.
 */
final class CrossOrigin
{
    /** Most header names a preflight may ask for. */
    public const MAX_PREFLIGHT_HEADERS = 32;
    /** Seconds a browser may keep a preflight's answer. */
    public const PREFLIGHT_MAX_AGE = 600;
    private const MAX_PREFLIGHT_HEADERS_BYTES = 1024;
    private const ORIGIN = '/^(https?):\/\/(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([0-9]+))?$/D';
    private const LABEL = '/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/D';
    private const IPV4_PART = '/^(0|[1-9][0-9]{0,2})$/D';
    private const PORT = '/^[1-9][0-9]{0,4}$/D';
    private const TOKEN = '/^[!#$%&\'*+.^_`|~0-9a-z-]+$/D';
    private const DEFAULT_PORTS = ['http' => '80', 'https' => '443'];

    /** @var array<string, true> the listed origins, lowercase. */
    private array $origins = [];

    /**
     * @param list<string> $origins each `scheme://host[:port]` as a browser sends it in `Origin`
     *   (`http` or `https`, no path, no trailing `/`), compared without case. Empty: no
     *   cross-origin request is allowed, and no answer carries a CORS header.
     * @throws \InvalidArgumentException for `*`, `null` or an origin that is not `scheme://host[:port]`.
     */
    public function __construct(array $origins = [])
    {
        foreach ($origins as $origin) {
            if (!is_string($origin)) {
                throw new \InvalidArgumentException('allowedOrigins: ' . var_export($origin, true) . ' is not a string');
            }
            if ($origin === '*') {
                throw new \InvalidArgumentException("allowedOrigins: '*' cannot be allowed: the auth route answers with the user's session (credentials), so list each origin (https://shop.example)");
            }
            $normalized = self::canonicalOrigin($origin);
            if ($normalized === null) {
                throw new \InvalidArgumentException('allowedOrigins: ' . self::printable($origin) . ' is not an origin as a browser sends it: scheme://host[:port], http or https, without a path, a trailing /, a default port or a leading zero');
            }
            $this->origins[$normalized] = true;
        }
    }

    /** Whether `$origin` (an `Origin` header's value, null when absent) is listed. */
    public function allows(?string $origin): bool
    {
        return $origin !== null && preg_match('/[^\x00-\x7f]/', $origin) !== 1 && isset($this->origins[strtolower($origin)]);
    }

    /**
     * `$origin` lowercased when a browser would send it so (the WHATWG URL standard's
     * serialization of an origin: no default port, no leading zero, a dotted-decimal IPv4
     * address, a compressed IPv6 one, ASCII only); null when a browser never sends it.
     */
    private static function canonicalOrigin(string $origin): ?string
    {
        if (preg_match('/[^\x00-\x7f]/', $origin) === 1) {
            return null;
        }
        $normalized = strtolower($origin);
        if (preg_match(self::ORIGIN, $normalized, $match) !== 1) {
            return null;
        }
        [$scheme, $host, $port] = [$match[1], $match[2], $match[3] ?? null];
        if ($port !== null && (preg_match(self::PORT, $port) !== 1 || (int) $port > 65535 || $port === self::DEFAULT_PORTS[$scheme])) {
            return null;
        }
        if (str_starts_with($host, '[')) {
            $address = substr($host, 1, -1);
            $packed = @inet_pton($address);
            return $packed !== false && strlen($packed) === 16 && inet_ntop($packed) === $address ? $normalized : null;
        }
        $labels = explode('.', $host);
        foreach ($labels as $label) {
            if (preg_match(self::LABEL, $label) !== 1) {
                return null;
            }
        }
        $last = $labels[count($labels) - 1];
        if (ctype_digit($last) || str_starts_with($last, '0x')) { // an IPv4 address: dotted decimal, as a browser writes it
            if (count($labels) !== 4) {
                return null;
            }
            foreach ($labels as $part) {
                if (preg_match(self::IPV4_PART, $part) !== 1 || (int) $part > 255) {
                    return null;
                }
            }
        }
        return $normalized;
    }

    /** `$text` for an error message: at most 200 bytes, each outside `!`…`~` as `?` (so the JSON is valid UTF-8). */
    private static function printable(string $text): string
    {
        return (string) preg_replace('/[^\x21-\x7e]/', '?', substr($text, 0, 200));
    }

    /**
     * The headers an answer (not a preflight's) to a request from `$origin` carries: the origin
     * and credentials for a listed origin, `Vary: Origin` whenever origins are listed.
     *
     * @return array<string, string>
     */
    public function headers(?string $origin): array
    {
        if ($this->origins === []) {
            return [];
        }
        if (!$this->allows($origin)) {
            return ['Vary' => 'Origin'];
        }
        return ['Access-Control-Allow-Origin' => (string) $origin, 'Access-Control-Allow-Credentials' => 'true', 'Vary' => 'Origin'];
    }

    /**
     * The answer to `OPTIONS` on a route that takes `$method` (`POST` or `GET`): 204 with the
     * origin, credentials, the method, the headers asked for (lowercase, at most 32) and a max
     * age of 600 s; 204 with `Allow` when there is no `Origin` (not a browser's preflight); 403
     * for an origin not listed; 405 (with `Allow`) for another method asked; 400 for asked
     * headers that are not a list of tokens (RFC 9110 §5.6.2).
     *
     * @return array{status: int, error: array{error: string}|null, headers: array<string, string>}
     */
    public function preflight(string $method, ?string $origin, ?string $requestMethod, ?string $requestHeaders): array
    {
        $allow = "{$method}, OPTIONS";
        if ($origin === null) {
            return ['status' => 204, 'error' => null, 'headers' => ['Allow' => $allow]];
        }
        $vary = $this->origins === [] ? [] : ['Vary' => 'Origin'];
        if (!$this->allows($origin)) {
            return ['status' => 403, 'error' => ['error' => 'the origin ' . self::printable($origin) . ' is not allowed: add it to allowedOrigins'], 'headers' => $vary];
        }
        if (strtoupper((string) $requestMethod) !== $method) { // byte-wise: only ASCII letters change case
            return ['status' => 405, 'error' => ['error' => "{$method} only"], 'headers' => ['Allow' => $allow] + $vary];
        }
        $names = [];
        if ($requestHeaders !== null && $requestHeaders !== '') {
            $refused = ['status' => 400, 'error' => ['error' => 'Access-Control-Request-Headers: at most ' . self::MAX_PREFLIGHT_HEADERS . ' header names, each a token (RFC 9110)'], 'headers' => $vary];
            if (strlen($requestHeaders) > self::MAX_PREFLIGHT_HEADERS_BYTES) {
                return $refused;
            }
            $names = array_values(array_filter(array_map(static fn (string $name): string => strtolower(trim($name, " \t")), explode(',', $requestHeaders)),
                static fn (string $name): bool => $name !== ''));
            $tokens = array_filter($names, static fn (string $name): bool => preg_match(self::TOKEN, $name) === 1);
            if (count($names) > self::MAX_PREFLIGHT_HEADERS || count($tokens) !== count($names)) {
                return $refused;
            }
        }
        $headers = ['Access-Control-Allow-Origin' => $origin, 'Access-Control-Allow-Credentials' => 'true', 'Access-Control-Allow-Methods' => $method];
        if ($names !== []) {
            $headers['Access-Control-Allow-Headers'] = implode(',', $names);
        }
        $headers['Access-Control-Max-Age'] = (string) self::PREFLIGHT_MAX_AGE;
        $headers['Vary'] = 'Origin, Access-Control-Request-Headers';
        return ['status' => 204, 'error' => null, 'headers' => $headers];
    }
}
