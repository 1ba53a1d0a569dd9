<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\ApiError;
use MessageBird\Realtime\CanonicalJson;
use MessageBird\Realtime\Realtime;
use MessageBird\Realtime\RuleError;
use PHPUnit\Framework\TestCase;

/**
 * The signed HTTP API against a stand-in for the realtime server (tests/fixtures/fake-api.php,
 * under `php -S`), which checks every request's signature as the server does.
 */
final class HttpApiTest extends TestCase
{
    private const MASTER_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=';
    private static PhpServer $api;

    public static function setUpBeforeClass(): void
    {
        self::$api = new PhpServer(__DIR__ . '/fixtures/fake-api.php');
    }

    public static function tearDownAfterClass(): void
    {
        self::$api->stop();
    }

    private static function backend(string $path = '', string $secret = 'app-secret'): Realtime
    {
        return (new Realtime(appKey: 'app-key', appSecret: $secret, appId: '42', server: self::$api->url() . $path, encryptionMasterKey: self::MASTER_KEY))
            ->room('order:{id}', null, ['history' => 20])
            ->room('vault:{id}', null, ['sealed' => true])
            ->room('{a};{b}', null, ['history' => 5]);
    }

    public function testPublishRoomPostsTheRoomEventBodySigned(): void
    {
        $realtime = self::backend();
        $answer = $realtime->publishRoom('order:1', 'updated', ['n' => 1]);
        $this->assertSame('POST', $answer['method']);
        $this->assertSame('/apps/42/room_events', $answer['path']);
        $this->assertSame($realtime->roomEventBody('order:1', 'updated', ['n' => 1]), $answer['body']);
        $this->assertSame('application/json', $answer['content_type']);
        $this->assertSame(['auth_key', 'auth_signature', 'auth_timestamp', 'auth_version', 'body_md5'], array_keys($answer['query']));
        $this->assertEqualsWithDelta(time(), (int) $answer['query']['auth_timestamp'], 5);
    }

    public function testTheServersPathIsKeptAndSigned(): void
    {
        $answer = self::backend('/base/')->publishRoom('order:1', 'updated', 1);
        $this->assertSame('/base/apps/42/room_events', $answer['path']);
    }

    public function testPublishRoomsSendsABatchOfUpTo100(): void
    {
        $realtime = self::backend();
        $answer = $realtime->publishRooms([['room' => 'order:1', 'event' => 'a', 'data' => 1], ['room' => 'x;y', 'event' => 'b']]);
        $this->assertSame('/apps/42/batch_room_events', $answer['path']);
        $this->assertSame('{"batch":[' . $realtime->roomEventBody('order:1', 'a', 1) . ',' . $realtime->roomEventBody('x;y', 'b', null) . ']}', $answer['body']);
        $this->expectException(\InvalidArgumentException::class);
        $realtime->publishRooms(array_fill(0, 101, ['room' => 'order:1', 'event' => 'a', 'data' => 1]));
    }

    public function testABatchEventWithoutARoomOrAnEventIsRefusedBeforeAnythingIsSent(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        self::backend()->publishRooms([['room' => 'order:1', 'data' => 1]]);
    }

    public function testARoomWithNoRuleIsInvalidPatternAndNothingIsSent(): void
    {
        try {
            self::backend()->publishRoom('nothing', 'a', 1);
            $this->fail('published');
        } catch (RuleError $error) {
            $this->assertSame('invalid_pattern', $error->code);
        }
    }

    public function testRoomEventDataIntegersAreTheirDoubleAndOneNoDoubleHoldsIsRefusedBeforeAnythingIsSent(): void
    {
        $realtime = self::backend();
        $body = json_decode($realtime->roomEventBody('order:1', 'e', ['big' => 10 ** 16, 'n' => 2 ** 53]), true);
        $this->assertSame('{"big":1e+16,"n":9007199254740992}', $body['data']);
        $nowhere = (new Realtime(appKey: 'k', appSecret: 's', appId: '1', server: 'http://127.0.0.1:9', encryptionMasterKey: self::MASTER_KEY))
            ->room('order:{id}')->room('vault:{id}', null, ['sealed' => true]);
        $attempts = [
            'roomEventBody' => fn () => $realtime->roomEventBody('order:1', 'e', ['id' => 123456789012345678]),
            'a sealed room' => fn () => $realtime->roomEventBody('vault:1', 'e', 123456789012345678),
            'publishRoom' => fn () => $nowhere->publishRoom('order:1', 'e', ['id' => 123456789012345678]),
            'publishRooms' => fn () => $nowhere->publishRooms([['room' => 'order:1', 'event' => 'e', 'data' => 1],
                ['room' => 'order:2', 'event' => 'e', 'data' => [123456789012345678]]]),
            'trigger' => fn () => $nowhere->trigger('a', 'e', 123456789012345678),
        ];
        foreach ($attempts as $what => $attempt) {
            try {
                $attempt();
                $this->fail("{$what}: written");
            } catch (\InvalidArgumentException $error) {
                $this->assertStringContainsString('no double holds the integer 123456789012345678 exactly', $error->getMessage(), $what);
            }
        }
    }

    public function testTriggerSendsOneChannelOrSeveral(): void
    {
        $realtime = self::backend();
        $one = $realtime->trigger('prices', 'price', ['p' => 1]);
        $this->assertSame('/apps/42/events', $one['path']);
        $this->assertSame('{"channel":"prices","data":"{\"p\":1}","name":"price"}', $one['body']);
        $this->assertSame('{"channels":["a","b"],"data":"1","name":"price"}', $realtime->trigger(['a', 'b'], 'price', 1)['body']);
        $batch = $realtime->triggerBatch([['channel' => 'a', 'event' => 'e', 'data' => 'x']]);
        $this->assertSame('/apps/42/batch_events', $batch['path']);
        $this->assertSame('{"batch":[{"channel":"a","data":"\"x\"","name":"e"}]}', $batch['body']);
        $this->expectException(\InvalidArgumentException::class);
        $realtime->triggerBatch(array_fill(0, 11, ['channel' => 'a', 'event' => 'e', 'data' => 1]));
    }

    public function testHistoryAndUsersPercentEncodeTheRoomAndSignTheirParameters(): void
    {
        $realtime = self::backend();
        $page = $realtime->roomHistory('a;b:1', before: 5, limit: 2);
        $this->assertSame('GET', $page['method']);
        $this->assertSame('/apps/42/rooms/a%3Bb%3A1/history', $page['path']);
        $this->assertSame('2', $page['query']['limit']);
        $this->assertSame('5', $page['query']['before']);
        $this->assertArrayNotHasKey('body_md5', $page['query']);
        $this->assertSame('', $page['body']);
        $this->assertArrayNotHasKey('limit', $realtime->roomHistory('order:1')['query']);
        $this->assertSame('/apps/42/rooms/order%3A1/users', $realtime->roomUsers('order:1')['path']);
    }

    public function testARefusalIsAnApiErrorWithTheStatusAndTheAnswer(): void
    {
        try {
            self::backend('/status/409')->roomUsers('order:1');
            $this->fail('answered');
        } catch (ApiError $error) {
            $this->assertSame(409, $error->code);
            $this->assertSame(409, $error->status());
            $this->assertSame('{"error":"as asked","code":"asked"}', $error->getMessage());
        }
        try {
            self::backend('', 'another-secret')->publishRoom('order:1', 'a', 1);
            $this->fail('answered');
        } catch (ApiError $error) {
            $this->assertSame(401, $error->code);
            $this->assertStringContainsString('invalid auth_signature', $error->getMessage());
        }
    }

    public function testNoAnswerIsAnApiErrorWithStatus0(): void
    {
        $probe = stream_socket_server('tcp://127.0.0.1:0');
        $port = (int) substr(strrchr((string) stream_socket_get_name($probe, false), ':'), 1);
        fclose($probe);
        $realtime = (new Realtime(appKey: 'k', appSecret: 's', appId: '1', server: "http://127.0.0.1:{$port}"))->room('{any}');
        try {
            $realtime->publishRoom('a', 'b', 1);
            $this->fail('answered');
        } catch (ApiError $error) {
            $this->assertSame(0, $error->code);
            $this->assertStringContainsString('did not answer', $error->getMessage());
            $this->assertStringNotContainsString('auth_signature', $error->getMessage());
        }
    }

    public function testTheApiNeedsTheServerAndTheAppId(): void
    {
        $this->expectException(\LogicException::class);
        (new Realtime(appKey: 'k', appSecret: 's'))->room('{any}')->publishRoom('a', 'b', 1);
    }

    public function testASealedRoomsDataIsSealedWithItsKeyAndARandomNonce(): void
    {
        $realtime = self::backend();
        $first = json_decode($realtime->roomEventBody('vault:7', 'secret', ['pin' => 1234, 's' => 'ü/']), true);
        $second = json_decode($realtime->roomEventBody('vault:7', 'secret', ['pin' => 1234, 's' => 'ü/']), true);
        $this->assertSame(['data', 'name', 'room', 'rule'], array_keys($first));
        $this->assertTrue($first['rule']['sealed']);
        $this->assertMatchesRegularExpression('/^\{"ciphertext":"[A-Za-z0-9+\/=]+","nonce":"[A-Za-z0-9+\/=]{32}"\}$/', $first['data']);
        $this->assertNotSame($first['data'], $second['data']);
        $box = json_decode($first['data'], true);
        $opened = sodium_crypto_secretbox_open(base64_decode($box['ciphertext']), base64_decode($box['nonce']), (string) $realtime->roomKey('vault:7'));
        $this->assertSame(CanonicalJson::encode(['pin' => 1234, 's' => 'ü/']), $opened);
        $this->assertSame('/apps/42/room_events', $realtime->publishRoom('vault:7', 'secret', 1)['path']);
    }

    public function testSignedQueryTakesTheRequestsOwnParametersSortedAndEncoded(): void
    {
        $realtime = new Realtime(appKey: 'app-key', appSecret: 'app-secret', clock: fn (): int => 1764579200999);
        $query = $realtime->signedQuery('GET', '/apps/42/rooms/x/history', '', ['limit' => 10, 'before' => 'a b']);
        $signature = hash_hmac('sha256', "GET\n/apps/42/rooms/x/history\nauth_key=app-key&auth_timestamp=1764579200&auth_version=1.0&before=a b&limit=10", 'app-secret');
        $this->assertSame("auth_key=app-key&auth_signature={$signature}&auth_timestamp=1764579200&auth_version=1.0&before=a%20b&limit=10", $query);
        foreach (['auth_key' => 'x', 'body_md5' => 'x', 'Limit' => 1, 'auth_other' => 1] as $name => $value) {
            try {
                $realtime->signedQuery('GET', '/', '', [$name => $value]);
                $this->fail("signed {$name}");
            } catch (\InvalidArgumentException) {
                $this->addToAssertionCount(1);
            }
        }
    }
}
