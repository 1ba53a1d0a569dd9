<?php

/**
 * The PHP library's sample app, for the shared end-to-end harness (Backends/conformance/e2e.py):
 *
 *     APP_ID=1 APP_KEY=app-key APP_SECRET=app-secret REALTIME_API=http://127.0.0.1:6001 \
 *         php -S 127.0.0.1:8080 Backends/php/example/router.php
 *
 * Routes:
 * - `POST /rooms/auth`, `GET /config`: the library's front controller (`handleAuth`), the user
 *   from the `X-User` header (empty or absent: a visitor), presence info `{"name": user}`; pages
 *   on the origins in `ALLOWED_ORIGINS` (separated by spaces or commas) may call them across
 *   origins (their preflights answered).
 * - `POST /publish` `{"room", "event", "data"}`: `publishRoom`, answered 200 with the server's
 *   answer, or 502 `{"error", "code"}` when it failed (400 for a body that is not that).
 * - `POST /webhook`: verified by the library (`answerWebhook`) and recorded, 200 `{}`; a refused
 *   one 401 `{"error": code}`.
 * - `GET /webhooks`: the verified webhooks so far, a JSON list, oldest first.
 *
 * Each request runs in a fresh PHP request context, so the webhooks are kept in a file under
 * `sys_get_temp_dir()` named from APP_ID, the port and the server's process id (a later server
 * on the same port starts empty).
 */

declare(strict_types=1);

require __DIR__ . '/../autoload.php';

use MessageBird\Realtime\ApiError;
use MessageBird\Realtime\CanonicalJson;
use MessageBird\Realtime\Realtime;

/** Writes a JSON answer. */
function reply(int $status, mixed $value): void
{
    $body = CanonicalJson::encode($value);
    http_response_code($status);
    header('Content-Type: application/json');
    header('Cache-Control: no-store');
    header('Content-Length: ' . strlen($body));
    echo $body;
}

$environment = static fn (string $name, string $fallback = ''): string => (string) (getenv($name) ?: $fallback);
$appId = $environment('APP_ID', '1');

$realtime = new Realtime(
    appKey: $environment('APP_KEY', 'app-key'),
    appSecret: $environment('APP_SECRET', 'app-secret'),
    appId: $appId,
    server: $environment('REALTIME_API', 'http://127.0.0.1:6001'),
);
$realtime->room('order:{id}', fn (?string $user, array $p): bool => $p['id'] !== '13', ['history' => 20, 'webhook' => true]);
$realtime->room('chat:{a}:{b}', null, ['history' => 50, 'presence' => true, 'members_send' => true]);
$realtime->room('news:{topic}', null, ['public' => true]);

$user = static function (): ?string {
    $header = $_SERVER['HTTP_X_USER'] ?? '';
    return is_string($header) && $header !== '' ? $header : null;
};
$allowedOrigins = preg_split('/[ \t\r\n,]+/', $environment('ALLOWED_ORIGINS'), -1, PREG_SPLIT_NO_EMPTY) ?: [];
if ($realtime->handleAuth($user, fn (string $user): array => ['name' => $user], '', $allowedOrigins)) {
    return true;
}

// The php -S server's own process (the parent of its workers when PHP_CLI_SERVER_WORKERS is set).
$server = getenv('PHP_CLI_SERVER_WORKERS') !== false && function_exists('posix_getppid') ? posix_getppid() : getmypid();
$record = sys_get_temp_dir() . '/realtime-php-webhooks-' . preg_replace('/[^A-Za-z0-9_-]/', '_', $appId)
    . '-' . (int) ($_SERVER['SERVER_PORT'] ?? 0) . '-' . $server . '.jsonl';

$method = $_SERVER['REQUEST_METHOD'] ?? 'GET';
$path = parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH);

if ($method === 'POST' && $path === '/publish') {
    $request = json_decode((string) file_get_contents('php://input'));
    if (!$request instanceof stdClass || !is_string($request->room ?? null) || !is_string($request->event ?? null) || !property_exists($request, 'data')) {
        reply(400, ['error' => 'expected {"room", "event", "data"}']);
        return true;
    }
    try {
        $answer = $realtime->publishRoom($request->room, $request->event, $request->data);
        reply(200, $answer === [] ? new stdClass() : $answer);
    } catch (ApiError $error) {
        reply(502, ['error' => $error->getMessage(), 'code' => $error->code]);
    } catch (Throwable $error) {
        reply(502, ['error' => $error->getMessage(), 'code' => $error->getCode()]);
    }
    return true;
}

if ($method === 'POST' && $path === '/webhook') {
    $answer = $realtime->answerWebhook($_SERVER, (string) file_get_contents('php://input', false, null, 0, Realtime::MAX_WEBHOOK_BYTES + 1));
    if ($answer['webhook'] !== null) {
        file_put_contents($record, CanonicalJson::encode($answer['webhook']) . "\n", FILE_APPEND | LOCK_EX);
    }
    http_response_code($answer['status']);
    header('Content-Type: application/json');
    echo $answer['body'];
    return true;
}

if ($method === 'GET' && $path === '/webhooks') {
    $lines = [];
    $file = @fopen($record, 'rb');
    if ($file !== false) {
        flock($file, LOCK_SH);
        $lines = array_values(array_filter(explode("\n", (string) stream_get_contents($file)), 'strlen'));
        flock($file, LOCK_UN);
        fclose($file);
    }
    // Each line is already the canonical JSON of one webhook.
    $body = '[' . implode(',', $lines) . ']';
    http_response_code(200);
    header('Content-Type: application/json');
    header('Cache-Control: no-store');
    echo $body;
    return true;
}

reply(404, ['error' => 'POST /rooms/auth, GET /config, POST /publish, POST /webhook, GET /webhooks']);
return true;
