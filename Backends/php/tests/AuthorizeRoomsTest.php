<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\CanonicalJson;
use MessageBird\Realtime\Realtime;
use MessageBird\Realtime\RuleError;
use PHPUnit\Framework\TestCase;

/** The batched auth answer, its tokens and the public grants (docs/rooms-protocol.md "Tokens", "Auth route"). */
final class AuthorizeRoomsTest extends TestCase
{
    private const NOW = 1764579200123;
    private const MASTER_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=';

    private static function backend(?callable $onAuthorizerError = null): Realtime
    {
        return new Realtime(appKey: 'app-key', appSecret: 'app-secret', encryptionMasterKey: self::MASTER_KEY,
            clock: fn (): int => self::NOW, onAuthorizerError: $onAuthorizerError);
    }

    /** @return array{header: array<string, mixed>, claims: array<string, mixed>} the token's parts, its signature checked. */
    private function open(string $token): array
    {
        [$header, $claims, $signature] = explode('.', $token);
        $decode = static fn (string $part): string => (string) base64_decode(strtr($part, '-_', '+/'), true);
        $this->assertSame(rtrim(strtr(base64_encode(hash_hmac('sha256', "{$header}.{$claims}", 'app-secret', true)), '+/', '-_'), '='), $signature);
        $this->assertStringNotContainsString('=', $token);
        return ['header' => json_decode($decode($header), true), 'claims' => json_decode($decode($claims), true)];
    }

    public function testATokenIsAnHs256JwtWithTheRoomTheRuleTheUserAndTheTimesInSeconds(): void
    {
        $realtime = self::backend()->room('order:{id}', null, ['history' => 20, 'max' => 5]);
        $entry = $realtime->authorizeRooms(['order:1'], 'ann', ['name' => 'Ann'])['rooms']['order:1'];
        $token = $this->open($entry['token']);
        $this->assertSame(['alg' => 'HS256', 'typ' => 'JWT'], $token['header']);
        $this->assertSame(['exp' => 1764582800, 'iat' => 1764579200, 'room' => 'order:1',
            'rule' => ['history' => 20, 'max' => 5, 'members_send' => false, 'presence' => false, 'public' => false, 'sealed' => false, 'span' => 1800, 'webhook' => false],
            'sub' => 'ann'], $token['claims']);
        $this->assertSame(1764582800000, $entry['expires']);
    }

    public function testInfoIsOnlyInAPresenceRoomsTokenAndAVisitorHasNoSub(): void
    {
        $realtime = self::backend()->room('chat:{id}', null, ['presence' => true, 'public' => true]);
        $signedIn = $this->open($realtime->authorizeRooms(['chat:1'], 'ann', ['name' => 'Ann'])['rooms']['chat:1']['token'])['claims'];
        $this->assertSame(['name' => 'Ann'], $signedIn['info']);
        $visitor = $this->open($realtime->authorizeRooms(['chat:1'], null, ['name' => 'nobody'])['rooms']['chat:1']['token'])['claims'];
        $this->assertArrayNotHasKey('sub', $visitor);
        $this->assertSame(['name' => 'nobody'], $visitor['info']);
        $plain = self::backend()->room('order:{id}');
        $this->assertArrayNotHasKey('info', $this->open($plain->authorizeRooms(['order:1'], 'ann', ['name' => 'Ann'])['rooms']['order:1']['token'])['claims']);
    }

    public function testInfoJsonCannotHoldAnswersThatPresenceRoomBadRequestAndNotARoundedToken(): void
    {
        $realtime = self::backend()->room('chat:{id}', null, ['presence' => true])->room('order:{id}');
        foreach ([['id' => 123456789012345678], ['n' => NAN]] as $info) {
            $answer = $realtime->authorizeRooms(['chat:1', 'order:1'], 'ann', $info);
            $this->assertSame(['error' => 'bad_request'], $answer['rooms']['chat:1']);
            $this->assertArrayHasKey('token', $answer['rooms']['order:1'], 'info is only in presence rooms\' tokens');
        }
        $token = $realtime->authorizeRooms(['chat:1'], 'ann', ['id' => 10 ** 16])['rooms']['chat:1']['token'];
        $this->assertStringContainsString('"info":{"id":1e+16}', (string) base64_decode(strtr(explode('.', $token)[1], '-_', '+/')));
        $route = $realtime->answerAuth('POST', '/rooms/auth', '{"rooms":["chat:1"]}', 'ann', fn (string $user): array => ['id' => 123456789012345678]);
        $this->assertSame(200, $route['status']);
        $this->assertStringContainsString('"chat:1":{"error":"bad_request"}', $route['body']);
    }

    public function testASealedRoomsEntryHasItsKeyTheSha256OfTheNameAndTheMasterKey(): void
    {
        $realtime = self::backend()->room('vault:{id}', null, ['sealed' => true]);
        $entry = $realtime->authorizeRooms(['vault:7'], 'ann')['rooms']['vault:7'];
        $key = base64_encode(hash('sha256', 'vault:7' . base64_decode(self::MASTER_KEY), true));
        $this->assertSame($key, $entry['key']);
        $this->assertSame('nUIfOdU56/x+SbzUyC1zIlPxmizQhic/y9NLKN49Vuo=', $entry['key']);
        $this->assertStringNotContainsString($key, (string) base64_decode(strtr(explode('.', $entry['token'])[1], '-_', '+/')));
    }

    public function testTheAuthorizerGetsTheUserAndTheParametersAndOnlyTrueAdmits(): void
    {
        $calls = [];
        $answers = ['order:1' => true, 'order:2' => 1, 'order:3' => 'yes', 'order:4' => null, 'order:5' => false];
        $realtime = self::backend()->room('order:{id}', function (?string $user, array $params) use (&$calls, $answers) {
            $calls[] = [$user, $params];
            return $answers["order:{$params['id']}"];
        });
        $answer = $realtime->authorizeRooms(array_keys($answers), 'ann');
        $this->assertArrayHasKey('token', $answer['rooms']['order:1']);
        foreach (['order:2', 'order:3', 'order:4', 'order:5'] as $room) {
            $this->assertSame(['error' => 'forbidden'], $answer['rooms'][$room], $room);
        }
        $this->assertSame(['ann', ['id' => '1']], $calls[0]);
        $this->assertCount(5, $calls);
    }

    public function testAnAuthorizerThatThrowsAnswersForbiddenAndIsReported(): void
    {
        $reported = [];
        $realtime = self::backend(function (\Throwable $error, string $room) use (&$reported): void {
            $reported[] = [$error->getMessage(), $room];
        })->room('order:{id}', fn (?string $user, array $p): bool => throw new \RuntimeException('database down'));
        $this->assertSame(['error' => 'forbidden'], $realtime->authorizeRooms(['order:1'], 'ann')['rooms']['order:1']);
        $this->assertSame([['database down', 'order:1']], $reported);
    }

    public function testAVisitorIsForbiddenANonPublicRoomBeforeTheAuthorizerIsAsked(): void
    {
        $asked = false;
        $realtime = self::backend()->room('order:{id}', function () use (&$asked): bool {
            $asked = true;
            return true;
        })->room('news:{topic}', null, ['public' => true]);
        $answer = $realtime->authorizeRooms(['order:1', 'news:tech'], null);
        $this->assertSame(['error' => 'forbidden'], $answer['rooms']['order:1']);
        $this->assertFalse($asked);
        $this->assertArrayHasKey('token', $answer['rooms']['news:tech']);
    }

    public function testAPublicRuleTakesNoAuthorizerAndSharesNoNameWithAnotherRule(): void
    {
        // The grant is checked against the pattern alone: no grant may admit a visitor to a room the backend refuses.
        try {
            self::backend()->room('news:{topic}', fn (?string $user, array $p): bool => $p['topic'] !== 'secret', ['public' => true]);
            $this->fail('a public rule with an authorizer was declared');
        } catch (RuleError $error) {
            $this->assertSame('public_authorizer', $error->code);
        }
        $realtime = self::backend()->room('news:{topic}-staff', fn (?string $user): bool => $user === 'staff');
        try {
            $realtime->room('news:{topic}', null, ['public' => true]);
            $this->fail('a public rule overlapping news:{topic}-staff was declared');
        } catch (RuleError $error) {
            $this->assertSame('public_overlap', $error->code);
            $this->assertStringContainsString('news:{topic}-staff', $error->getMessage());
        }
        $this->assertSame(['news:{topic}-staff'], array_column($realtime->rules(), 'pattern'), 'the refused rule is not added');
        $this->assertSame(['error' => 'forbidden'], $realtime->authorizeRooms(['news:x-staff'], null)['rooms']['news:x-staff']);
        $this->assertSame([], $realtime->config()['grants'], 'no grant admits a visitor to news:x-staff');
        // The reverse order is refused too; rules that are not public may overlap (first match wins).
        $reversed = self::backend()->room('news:{topic}', null, ['public' => true]);
        try {
            $reversed->room('news:{topic}-staff', fn (?string $user): bool => $user === 'staff');
            $this->fail('a rule overlapping the public news:{topic} was declared');
        } catch (RuleError $error) {
            $this->assertSame('public_overlap', $error->code);
        }
        $reversed->room('order:{id}')->room('order:{id}-gift', null, ['history' => 5]);
        $this->assertSame(['news:{topic}', 'order:{id}', 'order:{id}-gift'], array_column($reversed->rules(), 'pattern'));
    }

    public function testRoomsAreAnsweredOnceInOrderTheFirst100AndTheRestBadRequest(): void
    {
        $realtime = self::backend()->room('{any}');
        $names = array_merge(['b', 'a', 'b', '7', '0'], array_map(static fn (int $i): string => "r{$i}", range(1, 100)));
        $answer = $realtime->authorizeRooms($names, 'ann');
        $this->assertSame(self::NOW, $answer['time']);
        $this->assertInstanceOf(\ArrayObject::class, $answer['rooms']);
        $this->assertCount(104, $answer['rooms']);
        $this->assertSame(['b', 'a', '7', '0'], array_map('strval', array_slice(array_keys($answer['rooms']->getArrayCopy()), 0, 4)));
        $this->assertArrayHasKey('token', $answer['rooms']['r96']);
        $this->assertSame(['error' => 'bad_request'], $answer['rooms']['r97']);
        $this->assertSame(['error' => 'bad_request'], $answer['rooms']['r100']);
        $this->assertStringStartsWith('{"rooms":{"0":{"expires"', CanonicalJson::encode($answer));
    }

    public function testNoRoomsIsAnEmptyObject(): void
    {
        $this->assertSame('{"rooms":{},"time":' . self::NOW . '}', CanonicalJson::encode(self::backend()->authorizeRooms([], 'ann')));
    }

    public function testInvalidNamesAndNamesWithNoRuleAreSaidSo(): void
    {
        $answer = self::backend()->room('order:{id}')->authorizeRooms(['bad room', 'nothing:1', str_repeat('a', 165)], 'ann');
        $this->assertSame(['error' => 'invalid_room'], $answer['rooms']['bad room']);
        $this->assertSame(['error' => 'no_rule'], $answer['rooms']['nothing:1']);
        $this->assertSame(['error' => 'invalid_room'], $answer['rooms'][str_repeat('a', 165)]);
    }

    public function testARoomThatIsNotAStringIsATypeError(): void
    {
        $this->expectException(\TypeError::class);
        self::backend()->authorizeRooms([42], 'ann');
    }

    public function testConfigGivesOneGrantPerPublicPatternInOrderWithTheGrantLifetime(): void
    {
        $realtime = new Realtime(appKey: 'app-key', appSecret: 'app-secret', grantLifetime: 7200, clock: fn (): int => self::NOW);
        $realtime->room('b:{x}', null, ['public' => true])->room('order:{id}')->room('a:{x}', null, ['public' => true, 'history' => 3]);
        $config = $realtime->config();
        $this->assertSame(self::NOW, $config['time']);
        $this->assertSame(['b:{x}', 'a:{x}'], array_column($config['grants'], 'pattern'));
        $claims = $this->open($config['grants'][1]['token'])['claims'];
        $this->assertSame('a:{x}', $claims['room']);
        $this->assertSame(3, $claims['rule']['history']);
        $this->assertArrayNotHasKey('sub', $claims);
        $this->assertSame(1764579200 + 7200, $claims['exp']);
        $this->assertSame((1764579200 + 7200) * 1000, $config['grants'][1]['expires']);
        $this->assertSame('{"grants":[],"time":' . self::NOW . '}', CanonicalJson::encode(self::backend()->config()));
    }

    public function testTheDefaultClockIsTheSystemsInMilliseconds(): void
    {
        $before = (int) floor(microtime(true) * 1000);
        $time = (new Realtime(appKey: 'k', appSecret: 's'))->config()['time'];
        $this->assertGreaterThanOrEqual($before, $time);
        $this->assertLessThan($before + 5000, $time);
    }
}
