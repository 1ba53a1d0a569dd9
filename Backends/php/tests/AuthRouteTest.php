<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\Realtime;
use PHPUnit\Framework\TestCase;

/** The rooms' routes: `answerAuth` (the pure function) and `handleAuth` (the front controller). */
final class AuthRouteTest extends TestCase
{
    private const NOW = 1764579200123;

    private static function backend(): Realtime
    {
        return (new Realtime(appKey: 'app-key', appSecret: 'app-secret', clock: fn (): int => self::NOW))
            ->room('order:{id}', fn (?string $user, array $p): bool => $p['id'] !== '13')
            ->room('chat:{a}:{b}', null, ['presence' => true])
            ->room('news:{topic}', null, ['public' => true]);
    }

    /** @return array<string, mixed> */
    private static function body(array $answer): array
    {
        return json_decode($answer['body'], true, 512, JSON_THROW_ON_ERROR);
    }

    public function test200AnswersEveryRoomOfTheRequest(): void
    {
        $answer = self::backend()->answerAuth('POST', '/rooms/auth', '{"rooms":["order:1","order:13","nothing:1"]}', 'ann');
        $this->assertSame(200, $answer['status']);
        $body = self::body($answer);
        $this->assertSame(self::NOW, $body['time']);
        $this->assertArrayHasKey('token', $body['rooms']['order:1']);
        $this->assertSame(['error' => 'forbidden'], $body['rooms']['order:13']);
        $this->assertSame(['error' => 'no_rule'], $body['rooms']['nothing:1']);
        $this->assertSame(self::backend()->answerAuth('POST', '/rooms/auth', '{"rooms":["order:1","order:13","nothing:1"]}', 'ann')['body'], $answer['body']);
    }

    public function test200ForAVisitorAndForNoRooms(): void
    {
        $answer = self::backend()->answerAuth('POST', '/rooms/auth', '{"rooms":["order:1","news:tech"]}', null);
        $this->assertSame(['error' => 'forbidden'], self::body($answer)['rooms']['order:1']);
        $this->assertArrayHasKey('token', self::body($answer)['rooms']['news:tech']);
        $this->assertSame('{"rooms":{},"time":' . self::NOW . '}', self::backend()->answerAuth('POST', '/rooms/auth', '{"rooms":[]}', 'ann')['body']);
    }

    public function test200ConfigGivesThePublicGrants(): void
    {
        $realtime = self::backend();
        $answer = $realtime->answerAuth('GET', '/config?v=1', '', null);
        $this->assertSame(200, $answer['status']);
        $this->assertSame(\MessageBird\Realtime\CanonicalJson::encode($realtime->config()), $answer['body']);
    }

    public function testTheUserAndInfoMayBeClosuresCalledOnlyForTheAuthRoute(): void
    {
        $calls = 0;
        $user = function () use (&$calls): string {
            $calls++;
            return 'ann';
        };
        $realtime = self::backend();
        $realtime->answerAuth('GET', '/config', '', $user);
        $this->assertSame(0, $calls);
        $answer = $realtime->answerAuth('POST', '/rooms/auth', '{"rooms":["chat:1:2"]}', $user, fn (string $who): array => ['name' => strtoupper($who)]);
        $this->assertSame(1, $calls);
        $token = self::body($answer)['rooms']['chat:1:2']['token'];
        $claims = json_decode((string) base64_decode(strtr(explode('.', $token)[1], '-_', '+/')), true);
        $this->assertSame(['name' => 'ANN'], $claims['info']);
        $this->assertSame('ann', $claims['sub']);
        $numeric = $realtime->answerAuth('POST', '/rooms/auth', '{"rooms":["order:1"]}', fn (): int => 7);
        $this->assertSame(200, $numeric['status']);
    }

    public function testInfoIsNotAskedForAVisitor(): void
    {
        $answer = self::backend()->answerAuth('POST', '/rooms/auth', '{"rooms":["news:tech"]}', fn (): ?string => null,
            fn (string $user): array => throw new \LogicException('asked'));
        $this->assertSame(200, $answer['status']);
    }

    public function test401WhenTheUserClosureThrowsOrReturnsNeitherAStringNorNull(): void
    {
        foreach ([fn () => throw new \RuntimeException('no session'), fn (): array => ['ann'], fn (): float => 1.5] as $user) {
            $answer = self::backend()->answerAuth('POST', '/rooms/auth', '{"rooms":["order:1"]}', $user);
            $this->assertSame(401, $answer['status']);
            $this->assertSame('{"error":"unauthorized"}', $answer['body']);
        }
    }

    /** @return array<string, array{string}> */
    public static function malformed(): array
    {
        return [
            'not JSON' => ['{"rooms":'],
            'empty' => [''],
            'a list' => ['["order:1"]'],
            'no rooms' => ['{"room":["order:1"]}'],
            'rooms a string' => ['{"rooms":"order:1"}'],
            'rooms an object' => ['{"rooms":{"a":"order:1"}}'],
            'a room a number' => ['{"rooms":["order:1",7]}'],
            'a room null' => ['{"rooms":[null]}'],
            '101 rooms' => [json_encode(['rooms' => array_map(static fn (int $i): string => "order:{$i}", range(1, 101))])],
        ];
    }

    /** @dataProvider malformed */
    public function test400ForABodyThatIsNotRoomsNamesWithAtMost100(string $body): void
    {
        $answer = self::backend()->answerAuth('POST', '/rooms/auth', $body, fn () => throw new \LogicException('the user is not asked for a bad request'));
        $this->assertSame(400, $answer['status']);
        $this->assertSame('{"error":"expected {\"rooms\": [names]} with at most 100 rooms"}', $answer['body']);
    }

    public function test100RoomsAreNotTooMany(): void
    {
        $body = json_encode(['rooms' => array_map(static fn (int $i): string => "order:{$i}", range(1, 100))]);
        $this->assertSame(200, self::backend()->answerAuth('POST', '/rooms/auth', (string) $body, 'ann')['status']);
    }

    public function test405ForAnotherMethod(): void
    {
        $realtime = self::backend();
        $post = ['status' => 405, 'body' => '{"error":"POST /rooms/auth"}', 'headers' => ['Allow' => 'POST']];
        $this->assertSame($post, $realtime->answerAuth('GET', '/rooms/auth', '', 'ann'));
        $this->assertSame($post, $realtime->answerAuth('PUT', '/rooms/auth', '{"rooms":[]}', 'ann'));
        $this->assertSame(['status' => 405, 'body' => '{"error":"GET /config"}', 'headers' => ['Allow' => 'GET']], $realtime->answerAuth('POST', '/config', '', 'ann'));
    }

    public function test413ForABodyOver64KiB(): void
    {
        $body = '{"rooms":[' . str_repeat(' ', Realtime::MAX_AUTH_BODY_BYTES) . ']}';
        $answer = self::backend()->answerAuth('POST', '/rooms/auth', $body, 'ann');
        $this->assertSame(['status' => 413, 'body' => '{"error":"a body over 65536 bytes"}', 'headers' => []], $answer);
        $exactly = '{"rooms":[' . str_repeat(' ', Realtime::MAX_AUTH_BODY_BYTES - 12) . ']}';
        $this->assertSame(Realtime::MAX_AUTH_BODY_BYTES, strlen($exactly));
        $this->assertSame(200, self::backend()->answerAuth('POST', '/rooms/auth', $exactly, 'ann')['status']);
    }

    public function test404ForAnotherPathAndThePrefixIsHonoured(): void
    {
        $realtime = self::backend();
        $this->assertSame(404, $realtime->answerAuth('POST', '/rooms/auth/', '{"rooms":[]}', 'ann')['status']);
        $this->assertSame(404, $realtime->answerAuth('POST', '/rooms/auth', '{"rooms":[]}', 'ann', null, '/api')['status']);
        $this->assertSame(200, $realtime->answerAuth('POST', '/api/rooms/auth', '{"rooms":[]}', 'ann', null, '/api')['status']);
        $this->assertSame(200, $realtime->answerAuth('GET', '/api/config', '', null, null, '/api')['status']);
    }

    /** @runInSeparateProcess */
    public function testHandleAuthAnswersItsRoutesFromTheGlobalsAndLeavesOthersToTheApp(): void
    {
        $realtime = self::backend();
        $_SERVER['REQUEST_METHOD'] = 'GET';
        $_SERVER['REQUEST_URI'] = '/orders?page=2';
        ob_start();
        $handled = $realtime->handleAuth(fn () => throw new \LogicException('not asked'));
        $this->assertFalse($handled);
        $this->assertSame('', ob_get_clean());

        $_SERVER['REQUEST_URI'] = '/api/config?x=1';
        ob_start();
        $this->assertTrue($realtime->handleAuth(fn () => null, null, '/api'));
        $this->assertSame(\MessageBird\Realtime\CanonicalJson::encode($realtime->config()), ob_get_clean());

        $_SERVER['REQUEST_METHOD'] = 'POST';
        $_SERVER['REQUEST_URI'] = '/rooms/auth';
        $_SERVER['CONTENT_LENGTH'] = (string) (Realtime::MAX_AUTH_BODY_BYTES + 1);
        ob_start();
        $this->assertTrue($realtime->handleAuth(fn () => 'ann'));
        $this->assertSame('{"error":"a body over 65536 bytes"}', ob_get_clean());

        unset($_SERVER['CONTENT_LENGTH']);
        ob_start();
        $this->assertTrue($realtime->handleAuth(fn () => 'ann'));
        // php://input is empty on the command line: a malformed request.
        $this->assertStringStartsWith('{"error":"expected {', (string) ob_get_clean());
    }
}
