<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * Decodes peer JSON as strictly as Swift's `StrictJSON.decode` (RFC 8259 text, nested at most 64
 * deep, no object naming a member twice): PHP's `json_decode` keeps the last of a repeated name
 * where Foundation keeps the first, so a body one peer reads one way could be read another way
 * here (RFC 7519 §4 tells a JWT parser to reject it; Swift refuses every peer input alike).
 *
 * Used for a signin's user data and for webhook bodies, where Swift is strict. Names are
 * compared after unescaping (`"a"` and `"\u0061"` are the same name).
 *
 * @internal
 */
final class StrictJson
{
    /** Deepest nesting of arrays and objects (Swift: `StrictJSON.maxDepth`). */
    public const MAX_DEPTH = 64;

    /**
     * Decodes `$text`, or says why not.
     *
     * @param string $text UTF-8 JSON text.
     * @param bool $associative objects as arrays (true) or as `\stdClass` (false).
     * @return mixed the value.
     * @throws \JsonException not JSON (PHP's grammar, which is RFC 8259's), not UTF-8, nested
     *   deeper than 64, or a repeated member name (its message says which).
     */
    public static function decode(string $text, bool $associative = false): mixed
    {
        $value = json_decode($text, $associative, 512, JSON_THROW_ON_ERROR);
        // json_decode accepted it, so the text is valid JSON: its strings and structural
        // characters are enough to find each object's member names and the nesting depth.
        if (preg_match_all('/"(?:[^"\\\\]++|\\\\.)*+"|[{}\[\]:]/s', $text, $matches) === false) {
            throw new \JsonException('the JSON text could not be scanned');
        }
        $tokens = $matches[0];
        $stack = [];
        foreach ($tokens as $index => $token) {
            switch ($token) {
                case '{':
                case '[':
                    $stack[] = $token === '{' ? [] : null;
                    if (count($stack) > self::MAX_DEPTH) {
                        throw new \JsonException('nested deeper than ' . self::MAX_DEPTH);
                    }
                    break;
                case '}':
                case ']':
                    array_pop($stack);
                    break;
                case ':':
                    break;
                default:
                    if (($tokens[$index + 1] ?? null) !== ':') {
                        break;
                    }
                    $name = json_decode($token, false, 512, JSON_THROW_ON_ERROR);
                    $top = count($stack) - 1;
                    if (isset($stack[$top][$name])) {
                        throw new \JsonException('the member name "' . substr($name, 0, 64) . '" appears twice in one object');
                    }
                    $stack[$top][$name] = true;
            }
        }
        return $value;
    }
}
