<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\RoomName;
use PHPUnit\Framework\TestCase;

/** Names, patterns and matching (docs/rooms-protocol.md "Names"; Backends/README.md "Names and patterns"). */
final class RoomNameTest extends TestCase
{
    /** @return array<string, array{string, bool}> */
    public static function names(): array
    {
        return [
            'every allowed byte' => ['AZaz09_-=@,.;:', true],
            '164 bytes' => [str_repeat('a', 164), true],
            '165 bytes' => [str_repeat('a', 165), false],
            'empty' => ['', false],
            'a trailing newline' => ["order:1\n", false],
            'a leading newline' => ["\norder:1", false],
            'a NUL' => ["order:\x001", false],
            'a space' => ['order 1', false],
            'a slash' => ['order/1', false],
            'a brace' => ['order:{1}', false],
            'non-ASCII' => ['ordér', false],
            'a plus' => ['a+b', false],
            'only colons' => [':::', true],
        ];
    }

    /** @dataProvider names */
    public function testANameIsValidOnlyInTheAlphabetAndUpTo164Bytes(string $name, bool $valid): void
    {
        $this->assertSame($valid, RoomName::isValid($name));
    }

    /** @return array<string, array{string, bool}> */
    public static function patterns(): array
    {
        return [
            'a plain name' => ['shop', true],
            'one placeholder' => ['order:{id}', true],
            'a placeholder alone' => ['{any}', true],
            'placeholders split by a literal' => ['{a}-{b}', true],
            'a digit-named placeholder' => ['x:{0}', true],
            'placeholder names with every allowed byte' => ['x:{Az09_-=@,.;}', true],
            '328 bytes' => [str_repeat('a', 328), true],
            '329 bytes' => [str_repeat('a', 329), false],
            'empty' => ['', false],
            'an unnamed placeholder' => ['order:{}', false],
            'an unclosed placeholder' => ['order:{id', false],
            'a colon in a placeholder name' => ['order:{i:d}', false],
            'two placeholders in a row' => ['{a}{b}', false],
            'a name used twice' => ['chat:{a}:{a}', false],
            'a space' => ['order {id}', false],
            'non-ASCII in a name' => ['order:{ïd}', false],
            'a stray closing brace' => ['order:}', false],
            'a nested brace' => ['order:{{id}}', false],
            'a trailing newline' => ["order:{id}\n", false],
        ];
    }

    /** @dataProvider patterns */
    public function testAPatternIsValidOnlyWithWellFormedPlaceholders(string $pattern, bool $valid): void
    {
        $this->assertSame($valid, RoomName::isValidPattern($pattern));
        $this->assertSame($valid, RoomName::parse($pattern) !== null);
    }

    public function testAPatternParsesIntoLiteralsAndPlaceholders(): void
    {
        $this->assertSame([['literal' => 'chat:'], ['param' => 'a'], ['literal' => ':'], ['param' => 'b']], RoomName::parse('chat:{a}:{b}'));
        $this->assertSame([['literal' => 'shop']], RoomName::parse('shop'));
    }

    /** @return array<string, array{string, string, array<string, string>|null}> */
    public static function matchCases(): array
    {
        return [
            'one segment' => ['order:{id}', 'order:1042', ['id' => '1042']],
            'an empty segment' => ['order:{id}', 'order:', null],
            'a second segment' => ['order:{id}', 'order:1:2', null],
            'another literal' => ['order:{id}', 'orders:1', null],
            'two segments' => ['chat:{a}:{b}', 'chat:34:42', ['a' => '34', 'b' => '42']],
            'a segment missing' => ['chat:{a}:{b}', 'chat:34', null],
            'an empty middle segment' => ['chat:{a}:{b}', 'chat::42', null],
            'a plain name' => ['shop', 'shop', []],
            'a longer name' => ['shop', 'shops', null],
            'a placeholder alone takes no colon' => ['{any}', 'any:thing', null],
            'up to the next literal\'s first byte' => ['inbox:{user}.{box}', 'inbox:ann.spam', ['user' => 'ann', 'box' => 'spam']],
            'the next literal absent' => ['inbox:{user}.{box}', 'inbox:ann', null],
            'the first of several' => ['{a}-{b}', 'x-y-z', ['a' => 'x', 'b' => 'y-z']],
            'a literal after the segment' => ['x:{id}:y', 'x:7:y', ['id' => '7']],
            'another literal after the segment' => ['x:{id}:y', 'x:7:z', null],
            'a literal that starts the same' => ['{a}.x', 'b.y.x', null],
            'an invalid name' => ['{any}', 'a b', null],
            'a name over 164 bytes' => ['{any}', str_repeat('a', 165), null],
            'an invalid pattern' => ['{a}{b}', 'ab', null],
            'a pattern matched as a name' => ['order:{id}', 'order:{id}', null],
        ];
    }

    /**
     * @dataProvider matchCases
     * @param array<string, string>|null $params
     */
    public function testAPlaceholderMatchesOneSegment(string $pattern, string $name, ?array $params): void
    {
        $this->assertSame($params, RoomName::match($name, $pattern));
    }

    public function testADigitNamedParameterIsAnIntegerKeyAsPhpArraysHaveIt(): void
    {
        $params = RoomName::match('x:7', 'x:{0}');
        $this->assertSame([0 => '7'], $params);
        $this->assertSame('7', $params['0']);
    }
}
