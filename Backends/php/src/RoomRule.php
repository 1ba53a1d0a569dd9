<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * Room rules: what a room keeps and allows (docs/rooms-protocol.md "Tokens"; Swift: `RoomRule`;
 * Node: rules.js), as the token's `rule` claim carries them.
 *
 * A rule is an array with every key: `history` (int, events kept, 0…100000), `span` (int,
 * seconds kept, 1…1800), `presence`, `members_send`, `webhook`, `sealed`, `public` (bools) and
 * `max` (int ≥ 1, capacity in distinct users) only when set.
 */
final class RoomRule
{
    /** Most events a room keeps. */
    public const MAX_HISTORY = 100000;
    /** Longest a room keeps events, in seconds (30 minutes). */
    public const MAX_SPAN = 1800;
    /** Largest `max`: 2^53 − 1, the Node library's bound (its numbers are doubles). */
    public const MAX_MEMBERS = 9007199254740991;
    /** The option keys that are booleans (default false). */
    public const BOOLEANS = ['presence', 'members_send', 'webhook', 'sealed', 'public'];

    /**
     * The rule for `$options`, checked as the server checks it (Backends/README.md, "Rules by
     * pattern"). A null value counts as absent, as in the Node library.
     *
     * @param string $pattern the pattern, for the message.
     * @param array<array-key, mixed> $options `['history' => 20, 'presence' => true, …]`: the
     *   protocol's keys, every one optional; `history`, `span` and `max` are PHP ints (a float,
     *   even `20.0`, is the wrong type), the others bools.
     * @return array{history: int, span: int, presence: bool, members_send: bool, webhook: bool, sealed: bool, public: bool, max?: int}
     *   the rule, with every default.
     * @throws RuleError `invalid_rule`: an unknown key, a value of the wrong type or out of range.
     */
    public static function make(string $pattern, array $options = []): array
    {
        foreach (array_keys($options) as $key) {
            if (!in_array($key, ['history', 'span', 'max', ...self::BOOLEANS], true)) {
                throw new RuleError('invalid_rule', "unknown rule key {$key} for {$pattern}");
            }
        }
        $rule = [];
        foreach (self::BOOLEANS as $key) {
            $value = $options[$key] ?? false;
            if (!is_bool($value)) {
                throw new RuleError('invalid_rule', "{$key} for {$pattern} must be true or false");
            }
            $rule[$key] = $value;
        }
        $rule = [
            'history' => self::integer($pattern, $options, 'history', 0, self::MAX_HISTORY, 0),
            'span' => self::integer($pattern, $options, 'span', 1, self::MAX_SPAN, self::MAX_SPAN),
        ] + $rule;
        $max = self::integer($pattern, $options, 'max', 1, self::MAX_MEMBERS, null);
        if ($max !== null) {
            $rule['max'] = $max;
        }
        return $rule;
    }

    /** @param array<array-key, mixed> $options */
    private static function integer(string $pattern, array $options, string $key, int $low, int $high, ?int $fallback): ?int
    {
        $value = $options[$key] ?? $fallback;
        if ($value === null) {
            return null;
        }
        if (!is_int($value) || $value < $low || $value > $high) {
            $shown = is_scalar($value) ? var_export($value, true) : get_debug_type($value);
            throw new RuleError('invalid_rule', "rule for {$pattern} out of range (history 0…" . self::MAX_HISTORY
                . ', span 1…' . self::MAX_SPAN . " s, max ≥ 1) or not an integer: {$key} = {$shown}");
        }
        return $value;
    }
}
