<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * A rule refused when declared, or a room with no rule: the codes are the Node library's
 * (Backends/README.md, "What every library does"; Swift: `RealtimeBackend.RuleError`).
 *
 * - `invalid_pattern`: the pattern is not a valid pattern (`RoomName::isValidPattern`), or no
 *   declared pattern matches the room an event is published to.
 * - `invalid_rule`: an unknown option key, a value of the wrong type or out of range.
 * - `master_key_required`: `sealed` on a backend without `encryptionMasterKey`.
 *
 * `$e->code` (and `$e->getCode()`) is the code string.
 */
final class RuleError extends \InvalidArgumentException
{
    /** @var string the code: `invalid_pattern`, `invalid_rule` or `master_key_required`. */
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
