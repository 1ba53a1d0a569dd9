<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * Canonical JSON: the exact text Swift's `JSONEncoder` writes with sorted keys and unescaped
 * slashes (the reference, `RealtimeMessage.jsonText`), so that answers and tokens agree byte for
 * byte across the Swift, Node, PHP and Python backends (Backends/README.md, "Canonical JSON").
 *
 * - Object keys sorted by code point (the bytes of their UTF-8), no whitespace.
 * - Strings: `"` and `\` escaped, control characters U+0000…U+001F as `\b \f \n \r \t` or
 *   `\u00xx` (lowercase hex); `/`, non-ASCII, U+007F and U+2028/U+2029 written as they are.
 * - Numbers as Swift writes a double (`Double.description`): the shortest digits that read back
 *   as the same double, integral ones without a fraction (`12.0` → `12`, `-0.0` → `-0`), plain
 *   from 1e-4 up to 2^53, an exponent outside (`1e-07`, `9.5e+15`, `1e+16`). An `int` is written
 *   as the double of the same value (`10 ** 16` → `1e+16`), and refused when no double holds it
 *   exactly (`9007199254740993`, `123456789012345678`): every library writes the same text or
 *   none, never a rounded number.
 *
 * PHP has one array type, so which JSON each PHP value becomes is fixed here:
 *
 * | PHP value | JSON |
 * |---|---|
 * | `null`, `bool`, `int`, `float`, `string` (UTF-8) | null, true/false, number, string |
 * | an array that is a list (`array_is_list`), `[]` included | array |
 * | any other array | object (integer keys written as their decimal text) |
 * | `\stdClass` (its public properties), `\ArrayObject` / `\ArrayIterator` | object, **always**: `new \stdClass` or `new \ArrayObject()` is `{}` |
 * | `\JsonSerializable` | what `jsonSerialize()` returns, canonically |
 *
 * So an empty object is passed as `new \stdClass` (or `new \ArrayObject()`), and an object whose
 * keys are `"0"`, `"1"`, … (which PHP turns into a list) as a `\stdClass` or `\ArrayObject` too.
 */
final class CanonicalJson
{
    /** Deepest nesting written: deeper (or a cycle) is refused rather than exhausting the stack. */
    public const MAX_DEPTH = 512;

    /** 2^53: Swift writes a double of a larger magnitude with an exponent (`9.5e+15`, `1e+16`). */
    private const PLAIN_LIMIT = 9007199254740992;

    /**
     * The canonical JSON text of a value.
     *
     * @param mixed $value a JSON value as the table above maps it.
     * @return string its text (UTF-8).
     * @throws \InvalidArgumentException a value JSON cannot hold: a non-finite float, an int no
     *   double holds exactly, a string or key that is not UTF-8, a resource, another object, or
     *   nesting deeper than 512.
     */
    public static function encode(mixed $value): string
    {
        return self::write($value, 0);
    }

    /**
     * One string as a JSON string literal, escaped as `JSONEncoder` escapes it.
     *
     * @param string $text UTF-8 text.
     * @return string the literal, quotes included.
     * @throws \InvalidArgumentException the text is not UTF-8.
     */
    public static function quote(string $text): string
    {
        if (preg_match('//u', $text) !== 1) {
            throw new \InvalidArgumentException('a string that is not UTF-8 is not a JSON value');
        }
        return '"' . preg_replace_callback('/["\\\\\x00-\x1f]/', static function (array $match): string {
            return match ($match[0]) {
                '"' => '\\"',
                '\\' => '\\\\',
                "\x08" => '\\b',
                "\x0c" => '\\f',
                "\n" => '\\n',
                "\r" => '\\r',
                "\t" => '\\t',
                default => sprintf('\\u%04x', ord($match[0])),
            };
        }, $text) . '"';
    }

    /**
     * A number's text as Swift's JSONEncoder writes a double (`Double.description`): the
     * shortest digits that read back the same, plain from 1e-4 up to 2^53 in magnitude (integral
     * ones without a fraction), an exponent of at least two digits outside (`9.5e+15`, `1e+16`,
     * `1e-05`), and `-0` kept. An int as the double of the same value (its digits up to 2^53,
     * `1e+16` for 10^16), refused when no double holds it exactly (2^53 + 1,
     * 123456789012345678): a rounded number would not be the value given.
     *
     * @param int|float $number the number.
     * @return string its text.
     * @throws \InvalidArgumentException a NaN or infinite float, or an int no double holds exactly.
     */
    public static function number(int|float $number): string
    {
        if (is_int($number)) {
            if ($number >= -self::PLAIN_LIMIT && $number <= self::PLAIN_LIMIT) {
                return (string) $number;
            }
            if (!self::isDouble($number)) {
                throw new \InvalidArgumentException("no double holds the integer {$number} exactly, so not every library could write it the same (canonical JSON numbers are doubles): send it as a string");
            }
        }
        $number = (float) $number;
        if (!is_finite($number)) {
            throw new \InvalidArgumentException("{$number} is not a JSON number");
        }
        if ($number == 0.0) {
            return fdiv(1.0, $number) < 0 ? '-0' : '0';
        }
        // The shortest digits that read back as the same double (PHP's serialize_precision -1),
        // then Swift's layout of them (Double.description, as JSONEncoder writes it).
        $previous = ini_set('serialize_precision', '-1');
        $text = var_export(abs($number), true);
        if ($previous !== false) {
            ini_set('serialize_precision', $previous);
        }
        if (preg_match('/^(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/', $text, $parts) !== 1) {
            throw new \InvalidArgumentException("{$text} is not a JSON number");
        }
        $integer = $parts[1];
        $fraction = $parts[2] ?? '';
        $exponent = (int) ($parts[3] ?? 0);
        $digits = ltrim($integer . $fraction, '0');
        // The decimal point sits `$point` digits into `$digits` (value = 0.digits × 10^point).
        $point = strlen($integer) + $exponent - (strlen($integer . $fraction) - strlen($digits));
        $digits = rtrim($digits, '0');
        $count = strlen($digits);
        $sign = $number < 0 ? '-' : '';
        // Plain up to 2^53 in magnitude (Swift's Double.description), an exponent above.
        $plain = abs($number) <= self::PLAIN_LIMIT;
        if ($plain && $count <= $point) {
            return $sign . $digits . str_repeat('0', $point - $count);
        }
        if ($plain && 0 < $point) {
            return $sign . substr($digits, 0, $point) . '.' . substr($digits, $point);
        }
        if (-3 <= $point && $point <= 0) {
            return $sign . '0.' . str_repeat('0', -$point) . $digits;
        }
        $power = $point - 1;
        $mantissa = $count === 1 ? $digits : $digits[0] . '.' . substr($digits, 1);
        return $sign . $mantissa . 'e' . ($power < 0 ? '-' : '+') . str_pad((string) abs($power), 2, '0', STR_PAD_LEFT);
    }

    /**
     * Whether a double holds the int exactly: n = m × 2^k with |m| ≤ 2^53 (a double's 53-bit
     * significand). Checked on the int itself: PHP's float-to-int cast and its int-to-float
     * comparison both round.
     */
    private static function isDouble(int $integer): bool
    {
        while ($integer !== 0 && ($integer & 1) === 0) {
            $integer >>= 1; // exact: the int is even (an arithmetic shift keeps the sign)
        }
        return $integer >= -self::PLAIN_LIMIT && $integer <= self::PLAIN_LIMIT;
    }

    private static function write(mixed $value, int $depth): string
    {
        if ($depth > self::MAX_DEPTH) {
            throw new \InvalidArgumentException('a value nested deeper than ' . self::MAX_DEPTH . ' (or a cycle)');
        }
        if ($value === null) {
            return 'null';
        }
        if (is_bool($value)) {
            return $value ? 'true' : 'false';
        }
        if (is_int($value) || is_float($value)) {
            return self::number($value);
        }
        if (is_string($value)) {
            return self::quote($value);
        }
        if (is_array($value)) {
            if (array_is_list($value)) {
                $items = [];
                foreach ($value as $item) {
                    $items[] = self::write($item, $depth + 1);
                }
                return '[' . implode(',', $items) . ']';
            }
            return self::members($value, $depth);
        }
        if ($value instanceof \JsonSerializable) {
            return self::write($value->jsonSerialize(), $depth + 1);
        }
        if ($value instanceof \ArrayObject || $value instanceof \ArrayIterator) {
            return self::members($value->getArrayCopy(), $depth);
        }
        if ($value instanceof \stdClass) {
            return self::members(get_object_vars($value), $depth);
        }
        throw new \InvalidArgumentException('a ' . get_debug_type($value) . ' is not a JSON value');
    }

    /** @param array<array-key, mixed> $members */
    private static function members(array $members, int $depth): string
    {
        $keys = array_map('strval', array_keys($members));
        usort($keys, 'strcmp');
        $written = [];
        foreach ($keys as $key) {
            $written[] = self::quote($key) . ':' . self::write($members[$key], $depth + 1);
        }
        return '{' . implode(',', $written) . '}';
    }
}
