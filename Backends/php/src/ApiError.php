<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * A request to the realtime server's HTTP API failed (docs/rooms-protocol.md "HTTP API": answers
 * other than 200 are `{"error": message, "code": code}`).
 *
 * `$e->code` (and `$e->getCode()`) is the HTTP status as an integer, 0 when no answer arrived
 * (refused connection, 10 s timeout); the message is the server's answer (its first 1,000
 * bytes) or why none came.
 */
final class ApiError extends \RuntimeException
{
    /** @var int the HTTP status, or 0 when no answer arrived. */
    public $code;

    /**
     * @param int $status the HTTP status, or 0.
     * @param string $message what the server said, or why it said nothing.
     */
    public function __construct(int $status, string $message)
    {
        parent::__construct($message);
        $this->code = $status;
    }

    /**
     * The HTTP status (as Node's `ApiError.status`).
     *
     * @return int the status, or 0 when no answer arrived.
     */
    public function status(): int
    {
        return $this->code;
    }
}
