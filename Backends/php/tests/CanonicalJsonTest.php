<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\CanonicalJson;
use PHPUnit\Framework\TestCase;

/** Canonical JSON, byte for byte as Swift's JSONEncoder and the Node library write it (Backends/README.md "Canonical JSON"). */
final class CanonicalJsonTest extends TestCase
{
    /** @return array<string, array{mixed, string}> */
    public static function values(): array
    {
        return [
            'null' => [null, 'null'],
            'true' => [true, 'true'],
            'false' => [false, 'false'],
            'an int' => [12, '12'],
            'a negative int' => [-7, '-7'],
            '2^53: the largest plain int' => [9007199254740992, '9007199254740992'],
            'past 2^53, an int a double holds: its double\'s text' => [9007199254740994, '9.007199254740994e+15'],
            'an int a double holds, below 1e16' => [9500000000000000, '9.5e+15'],
            '10^16' => [10 ** 16, '1e+16'],
            'minus 10^16' => [-(10 ** 16), '-1e+16'],
            '2^60' => [1 << 60, '1.152921504606847e+18'],
            'the smallest int: -2^63, a double holds it' => [PHP_INT_MIN, '-9.223372036854776e+18'],
            'an int in a list' => [[10 ** 16, 1e16], '[1e+16,1e+16]'],
            'an integral float' => [12.0, '12'],
            'minus zero' => [-0.0, '-0'],
            'a half' => [0.5, '0.5'],
            'a fraction' => [2.5, '2.5'],
            'a sum that is not 0.3' => [0.1 + 0.2, '0.30000000000000004'],
            'a small fraction' => [0.0001, '0.0001'],
            'smaller: an exponent of two digits' => [0.000001, '1e-06'],
            'smaller still' => [1e-7, '1e-07'],
            'a large integral float' => [1e15, '1000000000000000'],
            '2^53: the largest plain float' => [9007199254740992.0, '9007199254740992'],
            'past 2^53: an exponent (Swift\'s Double.description)' => [9.5e15, '9.5e+15'],
            'just below 1e16' => [-9999999999999998.0, '-9.999999999999998e+15'],
            'from 1e16: an exponent' => [1e20, '1e+20'],
            'larger: an exponent' => [1e21, '1e+21'],
            'an exponent with digits' => [1.5e300, '1.5e+300'],
            'a negative exponent with digits' => [-2.5e-10, '-2.5e-10'],
            'the shortest digits' => [123456789012345678.0, '1.2345678901234568e+17'],
            'a string' => ['ann', '"ann"'],
            'quotes and backslashes' => ['a"b\\c', '"a\\"b\\\\c"'],
            'slashes are not escaped' => ['a/b', '"a/b"'],
            'the short escapes' => ["\x08\x0c\n\r\t", '"\\b\\f\\n\\r\\t"'],
            'other controls in lowercase hex' => ["\x00\x01\x1b\x1f", '"\\u0000\\u0001\\u001b\\u001f"'],
            'DEL is not escaped' => ["\x7f", "\"\x7f\""],
            'non-ASCII is not escaped' => ['ünï é 🎉', '"ünï é 🎉"'],
            'U+2028 and U+2029 are not escaped' => ["\u{2028}\u{2029}", "\"\u{2028}\u{2029}\""],
            'an empty array is a list' => [[], '[]'],
            'a list' => [[1, 'a', null, [true]], '[1,"a",null,[true]]'],
            'an array with keys is an object' => [['b' => 1, 'a' => 2], '{"a":2,"b":1}'],
            'an empty stdClass is an object' => [new \stdClass(), '{}'],
            'an empty ArrayObject is an object' => [new \ArrayObject(), '{}'],
            'an ArrayObject with list keys is an object' => [new \ArrayObject(['x', 'y']), '{"0":"x","1":"y"}'],
            'a stdClass' => [(object) ['z' => 1, 'a' => (object) []], '{"a":{},"z":1}'],
            'a non-list array with integer keys' => [[2 => 'b', 10 => 'a'], '{"10":"a","2":"b"}'],
            'keys sorted by code point' => [['é' => 1, 'z' => 2, 'A' => 3, "\u{10000}" => 4, "\u{ffff}" => 5, '' => 6],
                "{\"\":6,\"A\":3,\"z\":2,\"é\":1,\"\u{ffff}\":5,\"\u{10000}\":4}"],
            'keys escaped' => [["a\"\n" => 1], '{"a\\"\\n":1}'],
            'nested' => [['rooms' => new \ArrayObject(['7' => ['error' => 'no_rule']]), 'time' => 1], '{"rooms":{"7":{"error":"no_rule"}},"time":1}'],
        ];
    }

    /** @dataProvider values */
    public function testEachValueIsWrittenCanonically(mixed $value, string $text): void
    {
        $this->assertSame($text, CanonicalJson::encode($value));
    }

    public function testAJsonSerializableIsWrittenAsWhatItSerializesTo(): void
    {
        $value = new class () implements \JsonSerializable {
            public function jsonSerialize(): mixed
            {
                return ['b' => 1.0, 'a' => [1, 2]];
            }
        };
        $this->assertSame('[{"a":[1,2],"b":1}]', CanonicalJson::encode([$value]));
    }

    public function testTheTextReadsBackAsTheSameValue(): void
    {
        $value = ['n' => [1, 2.5, -0.1, 1e-7, 1e21, 123.456], 's' => "ü\u{2028}\x01\"\\/", 'o' => ['k' => null]];
        $this->assertEquals($value, json_decode(CanonicalJson::encode($value), true));
    }

    /** @return array<string, array{mixed}> */
    public static function unwritable(): array
    {
        $cycle = new \ArrayObject();
        $cycle['self'] = $cycle;
        return [
            'NaN' => [NAN],
            'infinity' => [INF],
            'a string that is not UTF-8' => ["\xff"],
            'a key that is not UTF-8' => [["\xc3" => 1]],
            'a closure' => [fn () => 1],
            'another object' => [new \DateTimeImmutable('2026-01-01')],
            'a resource' => [STDIN],
            'a cycle' => [$cycle],
        ];
    }

    /** @dataProvider unwritable */
    public function testAValueJsonCannotHoldIsRefused(mixed $value): void
    {
        $this->expectException(\InvalidArgumentException::class);
        CanonicalJson::encode($value);
    }

    /** @return array<string, array{int|list<int>}> */
    public static function inexactIntegers(): array
    {
        return [
            '2^53 + 1' => [9007199254740993],
            '-(2^53 + 1)' => [-9007199254740993],
            '123456789012345678' => [123456789012345678],
            'the largest int' => [PHP_INT_MAX],
            'in a list' => [[1, 9007199254740993]],
        ];
    }

    /**
     * An int no double holds exactly is refused: a rounded number (PHP would write
     * 123456789012345678 as 1.2345678901234568e+17) is not the value given, nor what every
     * library writes (Backends/README.md "Canonical JSON").
     *
     * @dataProvider inexactIntegers
     * @param int|list<int> $value
     */
    public function testAnIntNoDoubleHoldsExactlyIsRefusedNotRounded(int|array $value): void
    {
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('exactly, so not every library could write it the same');
        CanonicalJson::encode($value);
    }

    public function testTheRefusalNamesTheInteger(): void
    {
        $this->expectExceptionMessage('no double holds the integer 123456789012345678 exactly');
        CanonicalJson::encode(['id' => 123456789012345678]);
    }

    public function testTheSerializePrecisionSettingIsLeftAsItWas(): void
    {
        $previous = ini_set('serialize_precision', '17');
        try {
            $this->assertSame('0.1', CanonicalJson::encode(0.1));
            $this->assertSame('17', ini_get('serialize_precision'));
        } finally {
            ini_set('serialize_precision', (string) $previous);
        }
    }
}
