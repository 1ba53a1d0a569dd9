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
 * - `public_authorizer`: an authorizer on a public rule (its grant admits anyone without asking
 *   the backend, so the authorizer could never refuse anyone).
 * - `public_overlap`: a rule whose pattern can match a name an already declared rule's pattern
 *   matches too, when either is public (`RoomName::patternsOverlap`): the grant would admit a
 *   visitor to a room the other rule claims, or the other rule would never apply.
 *
 * `$e->code` (and `$e->getCode()`) is the code string.
 */
final class RuleError extends \InvalidArgumentException
{
    /** @var string the code: `invalid_pattern`, `invalid_rule`, `master_key_required`, `public_authorizer` or `public_overlap`. */
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
