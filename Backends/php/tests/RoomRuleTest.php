<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\Realtime;
use MessageBird\Realtime\RoomRule;
use MessageBird\Realtime\RuleError;
use PHPUnit\Framework\TestCase;

/** Rules declared by `room()`: every default, every refusal (Backends/README.md "Rules by pattern"). */
final class RoomRuleTest extends TestCase
{
    private const MASTER_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=';

    public function testNoOptionsAreEveryDefault(): void
    {
        $this->assertSame(['history' => 0, 'span' => 1800, 'presence' => false, 'members_send' => false, 'webhook' => false, 'sealed' => false, 'public' => false],
            RoomRule::make('order:{id}'));
    }

    public function testEveryKeyAtItsBoundsIsKept(): void
    {
        $rule = RoomRule::make('x', ['history' => 1000, 'span' => 1, 'presence' => true, 'max' => 1, 'members_send' => true, 'webhook' => true, 'sealed' => true, 'public' => true]);
        $this->assertSame(['history' => 1000, 'span' => 1, 'presence' => true, 'members_send' => true, 'webhook' => true, 'sealed' => true, 'public' => true, 'max' => 1], $rule);
        $this->assertSame(RoomRule::MAX_MEMBERS, RoomRule::make('x', ['max' => RoomRule::MAX_MEMBERS])['max']);
    }

    public function testANullValueIsTheDefaultAsInTheNodeLibrary(): void
    {
        $this->assertSame(RoomRule::make('x'), RoomRule::make('x', ['history' => null, 'span' => null, 'max' => null, 'presence' => null]));
    }

    /** @return array<string, array{array<array-key, mixed>}> */
    public static function refused(): array
    {
        return [
            'history below 0' => [['history' => -1]],
            'history above 100000' => [['history' => 100001]],
            'span 0' => [['span' => 0]],
            'span above 1800' => [['span' => 1801]],
            'max 0' => [['max' => 0]],
            'max negative' => [['max' => -5]],
            'max above 2^53 - 1' => [['max' => RoomRule::MAX_MEMBERS + 1]],
            'history as a string' => [['history' => '20']],
            'history as a float' => [['history' => 20.0]],
            'history as a bool' => [['history' => true]],
            'span as an array' => [['span' => [1]]],
            'max as a string' => [['max' => '5']],
            'presence as an int' => [['presence' => 1]],
            'public as a string' => [['public' => 'yes']],
            'webhook as an array' => [['webhook' => []]],
            'members_send as a float' => [['members_send' => 1.0]],
            'sealed as a string' => [['sealed' => 'true']],
            'an unknown key' => [['histroy' => 20]],
            'the Swift spelling of max' => [['maxMembers' => 5]],
            'the Swift spelling of public' => [['isPublic' => true]],
            'a list' => [[20]],
        ];
    }

    /**
     * @dataProvider refused
     * @param array<array-key, mixed> $options
     */
    public function testAValueOutOfRangeOfTheWrongTypeOrAnUnknownKeyIsInvalidRule(array $options): void
    {
        try {
            (new Realtime(appKey: 'k', appSecret: 's', encryptionMasterKey: self::MASTER_KEY))->room('order:{id}', null, $options);
            $this->fail('declared');
        } catch (RuleError $error) {
            $this->assertSame('invalid_rule', $error->code);
            $this->assertSame('invalid_rule', $error->getCode());
        }
    }

    /** @return array<string, array{string}> */
    public static function badPatterns(): array
    {
        return ['empty' => [''], 'unnamed' => ['order:{}'], 'unclosed' => ['order:{id'], 'twice' => ['{a}:{a}'], 'in a row' => ['{a}{b}'], 'a space' => ['order {id}']];
    }

    /** @dataProvider badPatterns */
    public function testABadPatternIsInvalidPatternBeforeItsOptionsAreRead(string $pattern): void
    {
        try {
            (new Realtime(appKey: 'k', appSecret: 's'))->room($pattern, null, ['history' => -1]);
            $this->fail('declared');
        } catch (RuleError $error) {
            $this->assertSame('invalid_pattern', $error->code);
        }
    }

    public function testSealedWithoutTheMasterKeyIsMasterKeyRequired(): void
    {
        try {
            (new Realtime(appKey: 'k', appSecret: 's'))->room('vault:{id}', null, ['sealed' => true]);
            $this->fail('declared');
        } catch (RuleError $error) {
            $this->assertSame('master_key_required', $error->code);
        }
        $realtime = new Realtime(appKey: 'k', appSecret: 's', encryptionMasterKey: self::MASTER_KEY);
        $this->assertTrue($realtime->room('vault:{id}', null, ['sealed' => true])->rules()[0]['rule']['sealed']);
    }

    public function testAnAuthorizerThatIsNotCallableIsATypeError(): void
    {
        $this->expectException(\TypeError::class);
        (new Realtime(appKey: 'k', appSecret: 's'))->room('order:{id}', 'no such function'); // @phpstan-ignore-line
    }

    public function testARefusedRuleIsNotDeclaredAndTheFirstMatchingPatternWins(): void
    {
        $realtime = new Realtime(appKey: 'k', appSecret: 's');
        try {
            $realtime->room('order:{id}', null, ['history' => 100001]);
        } catch (RuleError) {
        }
        $realtime->room('order:{id}', null, ['history' => 1])->room('{any}:{id}', null, ['history' => 2]);
        $this->assertCount(2, $realtime->rules());
        $this->assertSame(1, $realtime->ruleFor('order:7')['rule']['history']);
        $this->assertSame(['any' => 'cart', 'id' => '7'], $realtime->ruleFor('cart:7')['params']);
        $this->assertNull($realtime->ruleFor('cart'));
    }

    public function testTheConstructorRefusesAnEmptyKeyOrAMasterKeyThatIsNot32BytesOfBase64(): void
    {
        foreach ([['', 's', null], ['k', '', null], ['k', 's', 'AAEC'], ['k', 's', 'not base64!'], ['k', 's', rtrim(self::MASTER_KEY, '=')]] as [$key, $secret, $master]) {
            try {
                new Realtime(appKey: $key, appSecret: $secret, encryptionMasterKey: $master);
                $this->fail("accepted {$key} {$secret} {$master}");
            } catch (\InvalidArgumentException) {
                $this->addToAssertionCount(1);
            }
        }
    }

    public function testLifetimesAreAtLeast660Seconds(): void
    {
        $realtime = new Realtime(appKey: 'k', appSecret: 's', tokenLifetime: 60, grantLifetime: 1);
        $this->assertSame(660, $realtime->tokenLifetime);
        $this->assertSame(660, $realtime->grantLifetime);
    }
}
