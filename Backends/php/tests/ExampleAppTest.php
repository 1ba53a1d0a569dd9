<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use PHPUnit\Framework\TestCase;

/**
 * The sample app (example/router.php) under `php -S`, as the end-to-end harness
 * (Backends/conformance/e2e.py) drives it, with the stand-in API (tests/fixtures/fake-api.php)
 * as its realtime server.
 */
final class ExampleAppTest extends TestCase
{
    private static PhpServer $api;
    private static PhpServer $app;
    private static string $appId;

    public static function setUpBeforeClass(): void
    {
        self::$appId = 'example-test-' . getmypid() . '-' . bin2hex(random_bytes(4));
        self::$api = new PhpServer(__DIR__ . '/fixtures/fake-api.php');
        self::$app = new PhpServer(__DIR__ . '/../example/router.php', ['APP_ID' => self::$appId, 'APP_KEY' => 'app-key',
            'APP_SECRET' => 'app-secret', 'REALTIME_API' => self::$api->url()]);
    }

    public static function tearDownAfterClass(): void
    {
        self::$app->stop();
        self::$api->stop();
        foreach (glob(sys_get_temp_dir() . '/realtime-php-webhooks-' . self::$appId . '-*') ?: [] as $file) {
            unlink($file);
        }
    }

    /** @return array{int, mixed} the status and the decoded body. */
    private static function call(string $method, string $path, string $body = '', array $headers = []): array
    {
        $answer = self::$app->request($method, $path, $body, $headers);
        return [$answer['status'], json_decode($answer['body'], true)];
    }

    public function testTheAuthRouteTakesTheUserFromXUserAndAppliesTheDeclaredRules(): void
    {
        [$status, $answer] = self::call('POST', '/rooms/auth', '{"rooms":["order:1","order:13","chat:1:2","news:tech","nothing:1"]}', ['X-User' => 'ann']);
        $this->assertSame(200, $status);
        $this->assertArrayHasKey('token', $answer['rooms']['order:1']);
        $this->assertSame(['error' => 'forbidden'], $answer['rooms']['order:13']);
        $this->assertSame(['error' => 'no_rule'], $answer['rooms']['nothing:1']);
        $claims = json_decode((string) base64_decode(strtr(explode('.', $answer['rooms']['chat:1:2']['token'])[1], '-_', '+/')), true);
        $this->assertSame(['name' => 'ann'], $claims['info']);
        $this->assertSame(['history' => 50, 'members_send' => true, 'presence' => true, 'public' => false, 'sealed' => false, 'span' => 1800, 'webhook' => false], $claims['rule']);
        $order = json_decode((string) base64_decode(strtr(explode('.', $answer['rooms']['order:1']['token'])[1], '-_', '+/')), true);
        $this->assertTrue($order['rule']['webhook']);
        $this->assertSame(20, $order['rule']['history']);

        [$status, $visitor] = self::call('POST', '/rooms/auth', '{"rooms":["order:1","news:tech"]}', ['X-User' => '']);
        $this->assertSame(200, $status);
        $this->assertSame(['error' => 'forbidden'], $visitor['rooms']['order:1']);
        $this->assertArrayHasKey('token', $visitor['rooms']['news:tech']);
        $this->assertSame(400, self::call('POST', '/rooms/auth', '{"rooms":7}')[0]);
        $this->assertSame(405, self::call('GET', '/rooms/auth')[0]);
    }

    public function testConfigGivesTheNewsGrant(): void
    {
        [$status, $config] = self::call('GET', '/config');
        $this->assertSame(200, $status);
        $this->assertSame(['news:{topic}'], array_column($config['grants'], 'pattern'));
    }

    public function testPublishGoesThroughTheLibraryToTheServer(): void
    {
        [$status, $answer] = self::call('POST', '/publish', '{"room":"order:1","event":"updated","data":{"n":1,"empty":{}}}');
        $this->assertSame(200, $status);
        $this->assertSame('/apps/' . self::$appId . '/room_events', $answer['path']);
        $this->assertSame('{"data":"{\"empty\":{},\"n\":1}","name":"updated","room":"order:1","rule":{"history":20,"members_send":false,"presence":false,"public":false,"sealed":false,"span":1800,"webhook":true}}', $answer['body']);
        $this->assertSame(400, self::call('POST', '/publish', '{"room":"order:1"}')[0]);
        [$status, $refused] = self::call('POST', '/publish', '{"room":"nothing","event":"a","data":1}');
        $this->assertSame(502, $status);
        $this->assertSame('invalid_pattern', $refused['code']);
    }

    public function testPublishAnswers502WhenTheServerDoesNotAnswer(): void
    {
        $probe = stream_socket_server('tcp://127.0.0.1:0');
        $port = (int) substr(strrchr((string) stream_socket_get_name($probe, false), ':'), 1);
        fclose($probe);
        $app = new PhpServer(__DIR__ . '/../example/router.php', ['APP_ID' => self::$appId, 'REALTIME_API' => "http://127.0.0.1:{$port}"]);
        try {
            $answer = $app->request('POST', '/publish', '{"room":"order:1","event":"updated","data":1}');
            $this->assertSame(502, $answer['status']);
            $this->assertSame(0, json_decode($answer['body'], true)['code']);
        } finally {
            $app->stop();
        }
    }

    public function testVerifiedWebhooksAreRecordedAndRefusedOnesAnswered401(): void
    {
        [$status, $before] = self::call('GET', '/webhooks');
        $this->assertSame(200, $status);
        $this->assertSame([], $before);
        $body = '{"time_ms":1,"events":[{"name":"room_event","room":"order:1","event":"updated","data":"{\"n\":1}","id":1,"at":2}]}';
        $signature = hash_hmac('sha256', $body, 'app-secret');
        $this->assertSame([200, []], self::call('POST', '/webhook', $body, ['X-Pusher-Key' => 'app-key', 'X-Pusher-Signature' => $signature]));
        $this->assertSame([401, ['error' => 'bad_signature']], self::call('POST', '/webhook', $body . ' ', ['X-Pusher-Key' => 'app-key', 'X-Pusher-Signature' => $signature]));
        $this->assertSame([401, ['error' => 'bad_key']], self::call('POST', '/webhook', $body, ['X-Pusher-Key' => 'another-key', 'X-Pusher-Signature' => $signature]));
        $second = '{"time_ms":3,"events":[]}';
        $this->assertSame(200, self::call('POST', '/webhook', $second, ['X-Pusher-Key' => 'app-key', 'X-Pusher-Signature' => hash_hmac('sha256', $second, 'app-secret')])[0]);
        [$status, $hooks] = self::call('GET', '/webhooks');
        $this->assertSame(200, $status);
        $this->assertEquals([json_decode($body, true), ['events' => [], 'time_ms' => 3]], $hooks);
    }

    public function testAnyOtherRouteIs404(): void
    {
        $this->assertSame(404, self::call('GET', '/example/router.php')[0]);
        $this->assertSame(404, self::call('GET', '/webhook')[0]);
    }
}
