<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * Room names and the patterns rules are declared by (docs/rooms-protocol.md "Names"; Swift:
 * `RoomName`; Node: names.js).
 *
 * A name is 1…164 bytes of `A–Z a–z 0–9 _ - = @ , . ; :` (Pusher's channel alphabet plus `:`).
 * A pattern is such text with `{param}` placeholders: the parameter's name is 1 or more of those
 * bytes but `:`, unique within the pattern, and a placeholder never follows another. A
 * placeholder matches one segment: one or more name bytes up to the next `:`, and, when the
 * literal after it does not start with `:`, up to that literal's first byte.
 */
final class RoomName
{
    /** Longest room name, in bytes (Pusher's channel-name limit). */
    public const MAX_LENGTH = 164;

    private const NAME = '/\A[A-Za-z0-9_\-=@,.;:]+\z/';
    private const KEY = '/\A[A-Za-z0-9_\-=@,.;]+\z/';

    /**
     * Whether `$name` is a valid room name.
     *
     * @param string $name a room name (`order:1042`).
     * @return bool whether it is 1…164 bytes of `A–Z a–z 0–9 _ - = @ , . ; :`.
     */
    public static function isValid(string $name): bool
    {
        return strlen($name) <= self::MAX_LENGTH && preg_match(self::NAME, $name) === 1;
    }

    /**
     * A pattern's parts, in order: literals and placeholders.
     *
     * @param string $pattern `order:{id}`, `chat:{a}:{b}`, `shop`.
     * @return list<array{literal: string}|array{param: string}>|null the parts, or null when it is
     *   not a valid pattern: empty, over 328 bytes, a placeholder unnamed, unclosed, named twice or
     *   right after another, or a byte outside the name alphabet.
     */
    public static function parse(string $pattern): ?array
    {
        if ($pattern === '' || strlen($pattern) > self::MAX_LENGTH * 2) {
            return null;
        }
        $parts = [];
        $names = [];
        $rest = $pattern;
        while ($rest !== '') {
            if ($rest[0] === '{') {
                $close = strpos($rest, '}');
                if ($close === false) {
                    return null;
                }
                $key = substr($rest, 1, $close - 1);
                if (preg_match(self::KEY, $key) !== 1 || isset($names[$key])) {
                    return null;
                }
                if ($parts !== [] && isset($parts[count($parts) - 1]['param'])) {
                    return null;
                }
                $names[$key] = true;
                $parts[] = ['param' => $key];
                $rest = substr($rest, $close + 1);
            } else {
                $end = strpos($rest, '{');
                $literal = $end === false ? $rest : substr($rest, 0, $end);
                if (preg_match(self::NAME, $literal) !== 1) {
                    return null;
                }
                $parts[] = ['literal' => $literal];
                $rest = substr($rest, strlen($literal));
            }
        }
        return $parts;
    }

    /**
     * Whether `$pattern` is a valid pattern (see `parse`).
     *
     * @param string $pattern `order:{id}`.
     * @return bool whether it parses.
     */
    public static function isValidPattern(string $pattern): bool
    {
        return self::parse($pattern) !== null;
    }

    /**
     * Matches a room name against a pattern.
     *
     * @param string $name the room name (`chat:34:42`).
     * @param string $pattern the pattern (`chat:{a}:{b}`) or a plain name.
     * @return array<string, string>|null the parameters by name (`['a' => '34', 'b' => '42']`;
     *   a parameter named with digits only is an integer key, as PHP arrays have it), or null when
     *   the name is invalid, the pattern is invalid, or the name does not match.
     */
    public static function match(string $name, string $pattern): ?array
    {
        $parts = self::parse($pattern);
        if ($parts === null || !self::isValid($name)) {
            return null;
        }
        $params = [];
        $rest = $name;
        foreach ($parts as $index => $part) {
            if (isset($part['literal'])) {
                if (!str_starts_with($rest, $part['literal'])) {
                    return null;
                }
                $rest = substr($rest, strlen($part['literal']));
                continue;
            }
            $colon = strpos($rest, ':');
            $value = $colon === false ? $rest : substr($rest, 0, $colon);
            $next = $parts[$index + 1] ?? null;
            if ($next !== null && isset($next['literal']) && $next['literal'][0] !== ':') {
                $end = strpos($value, $next['literal'][0]);
                if ($end === false) {
                    return null;
                }
                $value = substr($value, 0, $end);
            }
            if ($value === '') {
                return null;
            }
            $params[$part['param']] = $value;
            $rest = substr($rest, strlen($value));
        }
        return $rest === '' ? $params : null;
    }

    /**
     * Whether some room name matches both patterns (a plain name is a pattern without
     * placeholders; Swift: `RoomName.patternsOverlap`; Node: `patternsOverlap`).
     *
     * A backend refuses a public rule whose pattern overlaps another rule's: the public grant
     * admits every name its pattern matches, so a name that another rule claims (first match
     * wins) would let a visitor past that rule's authorizer (Backends/README.md "Public rules").
     *
     * Each pattern is a regular language: its literal bytes, and for each placeholder one or
     * more name bytes other than `:` and the first byte of the literal after it (what `match`
     * takes). The answer is a breadth-first search of the two automata's product for the
     * shortest common name, which must fit in `MAX_LENGTH` bytes; at most (n + 1)(m + 1) states
     * for patterns of n and m steps.
     *
     * @param string $a a pattern (`news:{topic}`).
     * @param string $b another pattern (`news:{topic}-staff`).
     * @return bool true when a valid name matches both (`news:x-staff`); false when none does or
     *   either is not a valid pattern.
     */
    public static function patternsOverlap(string $a, string $b): bool
    {
        $first = self::parse($a);
        $second = self::parse($b);
        if ($first === null || $second === null) {
            return false;
        }
        $stepsA = self::steps($first);
        $stepsB = self::steps($second);
        $countA = count($stepsA);
        $countB = count($stepsB);
        // Breadth first over (position in a, position in b): the first visit is the shortest.
        $seen = [0 => true];
        $frontier = [[0, 0]];
        for ($round = 0; $round < self::MAX_LENGTH; $round++) {
            $next = [];
            foreach ($frontier as [$i, $j]) {
                foreach (self::moves($stepsA, $i) as [$targetA, $stepA]) {
                    foreach (self::moves($stepsB, $j) as [$targetB, $stepB]) {
                        if (!self::admitsSome($stepA, $stepB)) {
                            continue;
                        }
                        if ($targetA === $countA && $targetB === $countB) {
                            return true;
                        }
                        $key = $targetA * ($countB + 1) + $targetB;
                        if (!isset($seen[$key])) {
                            $seen[$key] = true;
                            $next[] = [$targetA, $targetB];
                        }
                    }
                }
            }
            $frontier = $next;
        }
        return false;
    }

    /**
     * A valid pattern's steps, one per byte of its language: a literal byte (`['byte' => int]`),
     * or a placeholder, any name byte but the excluded ones, which repeats
     * (`['anyBut' => list<int>]`).
     *
     * @param list<array{literal: string}|array{param: string}> $parts the pattern's parts.
     * @return list<array{byte: int}|array{anyBut: list<int>}> the steps.
     */
    private static function steps(array $parts): array
    {
        $steps = [];
        foreach ($parts as $index => $part) {
            if (isset($part['literal'])) {
                foreach (str_split($part['literal']) as $char) {
                    $steps[] = ['byte' => ord($char)];
                }
                continue;
            }
            $excluded = [ord(':')];
            $next = $parts[$index + 1] ?? null;
            if ($next !== null && isset($next['literal']) && $next['literal'] !== '' && $next['literal'][0] !== ':') {
                $excluded[] = ord($next['literal'][0]);
            }
            $steps[] = ['anyBut' => $excluded];
        }
        return $steps;
    }

    /**
     * The automaton's moves from `$position` (steps before it taken): the next step, and a
     * placeholder just taken taking one more byte.
     *
     * @param list<array{byte: int}|array{anyBut: list<int>}> $steps the steps.
     * @param int $position where it is.
     * @return list<array{0: int, 1: array{byte: int}|array{anyBut: list<int>}}> the target position and the step taken.
     */
    private static function moves(array $steps, int $position): array
    {
        $moves = [];
        if ($position < count($steps)) {
            $moves[] = [$position + 1, $steps[$position]];
        }
        if ($position > 0 && isset($steps[$position - 1]['anyBut'])) {
            $moves[] = [$position, $steps[$position - 1]];
        }
        return $moves;
    }

    /**
     * Whether some name byte satisfies both steps. Two placeholders always share one: each
     * excludes at most two of the alphabet's 69 bytes.
     *
     * @param array{byte: int}|array{anyBut: list<int>} $x a step.
     * @param array{byte: int}|array{anyBut: list<int>} $y another.
     * @return bool whether a byte satisfies both.
     */
    private static function admitsSome(array $x, array $y): bool
    {
        if (isset($x['byte'], $y['byte'])) {
            return $x['byte'] === $y['byte'];
        }
        if (isset($x['byte'])) {
            return !in_array($x['byte'], $y['anyBut'], true);
        }
        if (isset($y['byte'])) {
            return !in_array($y['byte'], $x['anyBut'], true);
        }
        return true;
    }
}
