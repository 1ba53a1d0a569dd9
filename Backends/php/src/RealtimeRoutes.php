<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * The ready routes for `Realtime`, as the Node library's `authHandler` and `webhookHandler`: a
 * front controller over PHP's request globals (`handleAuth`, `handleWebhook`) and the pure
 * functions it calls (`answerAuth`, `answerWebhook`), which take a request's parts and return
 * `['status' => int, 'body' => string]` (the body canonical JSON).
 *
 * @internal part of `Realtime`; use it through that class.
 */
trait RealtimeRoutes
{
    /**
     * Serves the rooms' routes from PHP's request globals (`$_SERVER`, `php://input`):
     * `POST {path}/rooms/auth` (`{"rooms": [names]}`, answered per room) and `GET {path}/config`
     * (the public grants), writing the status, `Content-Type: application/json`,
     * `Cache-Control: no-store` and the body (docs/rooms-protocol.md "Auth route").
     *
     * ```php
     * if ($realtime->handleAuth(fn () => $_SESSION['user_id'] ?? null)) { return; }
     * // … the app's other routes
     * ```
     *
     * @param callable $user `fn (): ?string`: the app's user from its own session (cookie,
     *   header), null for a visitor; throwing (or not returning a string, an int or null)
     *   answers 401, which a client may retry once. Called only for `POST {path}/rooms/auth`.
     * @param callable|null $info `fn (string $user): mixed`: a signed-in user's presence info,
     *   put in presence rooms' tokens.
     * @param string $path the routes' prefix (`''`, or `/api`), without a trailing `/`.
     * @param CrossOrigin|list<string> $allowedOrigins the origins of pages on another origin than
     *   this backend that may call the routes with the user's credentials
     *   (`https://shop.example`); none by default (same origin only). `OPTIONS` is their
     *   browser's preflight (`CrossOrigin::preflight`).
     * @return bool true when the request was one of the two routes and has been answered (200,
     *   204 a preflight, 400 malformed, 401, 403 an origin not allowed, 405 wrong method, 413 a
     *   body over 64 KiB); false for any other path, untouched, so the app routes it.
     * @throws \InvalidArgumentException an allowed origin that is `*` or not `scheme://host[:port]`.
     */
    public function handleAuth(callable $user, ?callable $info = null, string $path = '', CrossOrigin|array $allowedOrigins = []): bool
    {
        $method = (string) ($_SERVER['REQUEST_METHOD'] ?? 'GET');
        $target = (string) (parse_url((string) ($_SERVER['REQUEST_URI'] ?? '/'), PHP_URL_PATH) ?? '/');
        if ($target !== "{$path}/rooms/auth" && $target !== "{$path}/config") {
            return false;
        }
        $body = '';
        if ($target === "{$path}/rooms/auth" && $method === 'POST') {
            $body = self::readInput(self::MAX_AUTH_BODY_BYTES);
        }
        $answer = $this->answerAuth($method, $target, $body, \Closure::fromCallable($user),
            $info === null ? null : \Closure::fromCallable($info), $path, $_SERVER, $allowedOrigins);
        self::emit($answer['status'], $answer['body'], $answer['headers']);
        return true;
    }

    /**
     * The rooms' routes as a pure function (what `handleAuth` answers), for tests and for
     * frameworks that hand over a request's parts.
     *
     * @param string $method the request's method (`POST`).
     * @param string $path the request's path (a query after `?` is ignored).
     * @param string $body the request's body.
     * @param \Closure|string|null $user the signed-in user, null for a visitor, or a `\Closure`
     *   that returns it (`fn (): ?string`, called only for the auth route; throwing answers 401).
     * @param mixed $info presence info for the user, or a `\Closure` `fn (string $user): mixed`; null for none.
     * @param string $prefix the routes' prefix (`''`, or `/api`).
     * @param array<string, string|list<string>> $headers the request's headers, names in any case
     *   (`Origin`), or `$_SERVER` itself (`HTTP_ORIGIN`): the CORS ones are read.
     * @param CrossOrigin|list<string> $allowedOrigins pages' origins allowed across origins (see `handleAuth`).
     * @return array{status: int, body: string, headers: array<string, string>} 200 with the answer
     *   (`authorizeRooms`, or `config`), 204 a preflight (an empty body), 400 a body that is not
     *   `{"rooms": [strings]}` with at most 100 names, 401 the user closure threw, 403 a preflight
     *   from an origin not allowed, 404 another path, 405 another method, 413 a body over 64 KiB;
     *   the body canonical JSON, `{"error": …}` when not 200; `headers` to add (`Allow`, CORS).
     * @throws \InvalidArgumentException an allowed origin that is `*` or not `scheme://host[:port]`.
     */
    public function answerAuth(string $method, string $path, string $body, \Closure|string|null $user, mixed $info = null, string $prefix = '',
        array $headers = [], CrossOrigin|array $allowedOrigins = []): array
    {
        $crossOrigin = $allowedOrigins instanceof CrossOrigin ? $allowedOrigins : new CrossOrigin($allowedOrigins);
        $path = explode('?', $path, 2)[0];
        $route = $path === "{$prefix}/config" ? 'GET' : ($path === "{$prefix}/rooms/auth" ? 'POST' : null);
        if ($route === null) {
            return self::answer(404, ['error' => 'POST /rooms/auth or GET /config']);
        }
        $named = self::headerMap($headers, true);
        if ($method === 'OPTIONS') {
            $preflight = $crossOrigin->preflight($route, $named['origin'] ?? null, $named['access-control-request-method'] ?? null,
                $named['access-control-request-headers'] ?? null);
            return ['status' => $preflight['status'], 'body' => $preflight['error'] === null ? '' : CanonicalJson::encode($preflight['error']),
                'headers' => $preflight['headers']];
        }
        $cors = $crossOrigin->headers($named['origin'] ?? null);
        if ($route === 'GET') {
            return $method === 'GET' ? self::answer(200, $this->config(), $cors) : self::answer(405, ['error' => 'GET /config'], ['Allow' => 'GET'] + $cors);
        }
        if ($method !== 'POST') {
            return self::answer(405, ['error' => 'POST /rooms/auth'], ['Allow' => 'POST'] + $cors);
        }
        if (strlen($body) > self::MAX_AUTH_BODY_BYTES) {
            return self::answer(413, ['error' => 'a body over ' . self::MAX_AUTH_BODY_BYTES . ' bytes'], $cors);
        }
        $request = json_decode($body);
        $rooms = $request instanceof \stdClass ? ($request->rooms ?? null) : null;
        if (!is_array($rooms) || count($rooms) > self::MAX_ROOMS || array_filter($rooms, 'is_string') !== $rooms) {
            return self::answer(400, ['error' => 'expected {"rooms": [names]} with at most ' . self::MAX_ROOMS . ' rooms'], $cors);
        }
        if ($user instanceof \Closure) {
            try {
                $user = $user();
            } catch (\Throwable) {
                return self::answer(401, ['error' => 'unauthorized'], $cors);
            }
            if (is_int($user)) {
                $user = (string) $user;
            } elseif ($user !== null && !is_string($user)) {
                return self::answer(401, ['error' => 'unauthorized'], $cors);
            }
        }
        if ($info instanceof \Closure) {
            $info = $user === null ? null : $info($user);
        }
        return self::answer(200, $this->authorizeRooms($rooms, $user, $info), $cors);
    }

    /**
     * Receives a webhook from PHP's request globals: verifies it (`verifyWebhook`), hands it to
     * `$onWebhook`, and answers 200 `{}`; a refused one is answered 401 `{"error": code}` and not
     * handed on, a body over 1 MiB 413, another method than POST 405. When `$onWebhook` throws,
     * nothing is written and the exception goes on (PHP answers 500; the server retries).
     *
     * @param callable $onWebhook `fn (array $webhook): void`, with `['time_ms' => int, 'events' => [...]]`.
     * @return bool whether the webhook was verified and handed on.
     */
    public function handleWebhook(callable $onWebhook): bool
    {
        if (($_SERVER['REQUEST_METHOD'] ?? '') !== 'POST') {
            self::emit(405, CanonicalJson::encode(['error' => 'POST']));
            return false;
        }
        $answer = $this->answerWebhook($_SERVER, self::readInput(self::MAX_WEBHOOK_BYTES));
        if ($answer['webhook'] !== null) {
            $onWebhook($answer['webhook']);
        }
        self::emit($answer['status'], $answer['body']);
        return $answer['webhook'] !== null;
    }

    /**
     * A webhook request as a pure function (what `handleWebhook` answers).
     *
     * @param array<string, string|list<string>> $headers the request's headers, names in any
     *   case (`X-Pusher-Key`, `x-pusher-signature`), or `$_SERVER` itself (`HTTP_X_PUSHER_KEY`);
     *   a list value counts by its first item.
     * @param string $body the body as received.
     * @return array{status: int, body: string, webhook: array{time_ms: int, events: list<array<string, mixed>>}|null}
     *   200 `{}` with the verified webhook; 401 `{"error": "bad_key" | "bad_signature" | "malformed"}`
     *   or 413 (a body over 1 MiB) with `webhook` null.
     */
    public function answerWebhook(array $headers, string $body): array
    {
        if (strlen($body) > self::MAX_WEBHOOK_BYTES) {
            return self::plainAnswer(413, ['error' => 'a body over 1 MiB']) + ['webhook' => null];
        }
        $named = self::headerMap($headers);
        try {
            $webhook = $this->verifyWebhook($named['x-pusher-key'] ?? null, $named['x-pusher-signature'] ?? null, $body);
        } catch (WebhookError $error) {
            return self::plainAnswer(401, ['error' => $error->code]) + ['webhook' => null];
        }
        return self::plainAnswer(200, new \stdClass()) + ['webhook' => $webhook];
    }

    /**
     * @param array<string, string> $headers
     * @return array{status: int, body: string, headers: array<string, string>}
     */
    private static function answer(int $status, mixed $value, array $headers = []): array
    {
        return self::plainAnswer($status, $value) + ['headers' => $headers];
    }

    /** @return array{status: int, body: string} */
    private static function plainAnswer(int $status, mixed $value): array
    {
        return ['status' => $status, 'body' => CanonicalJson::encode($value)];
    }

    /**
     * Request headers by lowercase name (`x-pusher-key`), from names in any case or `$_SERVER`'s
     * `HTTP_X_PUSHER_KEY`; the first of a name wins. A list value counts by its first item, or,
     * with `$combine`, as its items joined with `, ` (RFC 9110's combined field: two `Origin`s
     * are then no listed origin), with spaces and tabs around it trimmed.
     *
     * @param array<string, string|list<string>> $headers
     * @return array<string, string>
     */
    private static function headerMap(array $headers, bool $combine = false): array
    {
        $named = [];
        foreach ($headers as $name => $value) {
            $name = str_replace('_', '-', strtolower((string) $name));
            $name = str_starts_with($name, 'http-') ? substr($name, 5) : $name;
            if (is_array($value)) {
                $value = $combine ? implode(', ', array_filter($value, 'is_string')) : ($value[0] ?? null);
            }
            if (is_string($value) && !isset($named[$name])) {
                $named[$name] = $combine ? trim($value, " \t") : $value;
            }
        }
        return $named;
    }

    /** The request body, at most `$limit + 1` bytes (one more tells it was too long). */
    private static function readInput(int $limit): string
    {
        $length = $_SERVER['CONTENT_LENGTH'] ?? $_SERVER['HTTP_CONTENT_LENGTH'] ?? null;
        if (is_numeric($length) && (int) $length > $limit) {
            return str_repeat(' ', $limit + 1);
        }
        $input = fopen('php://input', 'rb');
        if ($input === false) {
            return '';
        }
        $body = stream_get_contents($input, $limit + 1);
        fclose($input);
        return $body === false ? '' : $body;
    }

    /** @param array<string, string> $headers more headers (`Allow`, CORS); a 204 has no body. */
    private static function emit(int $status, string $body, array $headers = []): void
    {
        if (!headers_sent()) {
            http_response_code($status);
            header('Cache-Control: no-store');
            if ($status !== 204) {
                header('Content-Type: application/json');
                header('Content-Length: ' . strlen($body));
            } else {
                header_remove('Content-Type'); // the CLI server's default text/html has no place on an empty answer
            }
            foreach ($headers as $name => $value) {
                header("{$name}: {$value}");
            }
        }
        echo $body;
    }
}
