<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * A webhook request refused (Backends/README.md, "Webhooks"; Swift: `RealtimeWebhookError`):
 * answer it 401 and ignore it.
 *
 * - `bad_key`: `X-Pusher-Key` is missing or not this app's key.
 * - `bad_signature`: `X-Pusher-Signature` is missing or not the hex HMAC-SHA256 of the body
 *   under the app secret.
 * - `malformed`: signed, but over 1 MiB or not `{"time_ms": integer, "events": [{"name": …}…]}`.
 *
 * `$e->code` (and `$e->getCode()`) is the code string.
 */
final class WebhookError extends \RuntimeException
{
    /** @var string the code: `bad_key`, `bad_signature` or `malformed`. */
    public $code;

    /**
     * @param string $code the code.
     * @param string $message what is wrong.
     */
    public function __construct(string $code, string $message)
    {
        parent::__construct($message);
        $this->code = $code;
    }
}
