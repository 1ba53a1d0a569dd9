<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\Realtime;
use MessageBird\Realtime\WebhookError;
use PHPUnit\Framework\TestCase;

/** Webhooks: `verifyWebhook`, `answerWebhook` and `handleWebhook` (docs/rooms-protocol.md "Webhooks"). */
final class WebhookTest extends TestCase
{
    private const BODY = '{"time_ms":1764579200123,"events":[{"name":"room_event","room":"order:1","event":"updated","data":"{\"n\":1}","id":7,"at":1764579200100}]}';

    private static function backend(): Realtime
    {
        return new Realtime(appKey: 'app-key', appSecret: 'app-secret');
    }

    private static function sign(string $body): string
    {
        return hash_hmac('sha256', $body, 'app-secret');
    }

    private function refusal(?string $key, ?string $signature, string $body): string
    {
        try {
            self::backend()->verifyWebhook($key, $signature, $body);
        } catch (WebhookError $error) {
            $this->assertSame($error->code, $error->getCode());
            return $error->code;
        }
        return 'accepted';
    }

    public function testASignedWebhookIsParsedWithItsEventsAsSent(): void
    {
        $webhook = self::backend()->verifyWebhook('app-key', strtoupper(self::sign(self::BODY)), self::BODY);
        $this->assertSame(1764579200123, $webhook['time_ms']);
        $this->assertSame([['name' => 'room_event', 'room' => 'order:1', 'event' => 'updated', 'data' => '{"n":1}', 'id' => 7, 'at' => 1764579200100]], $webhook['events']);
        $extra = '{"time_ms":1,"events":[{"name":"x","unknown":{"a":[1]},"user_id":null}]}';
        $this->assertSame([['name' => 'x', 'unknown' => ['a' => [1]], 'user_id' => null]], self::backend()->verifyWebhook('app-key', self::sign($extra), $extra)['events']);
    }

    public function testTheKeyIsCheckedFirstThenTheSignatureThenTheJson(): void
    {
        $this->assertSame('bad_key', $this->refusal(null, self::sign('not json'), 'not json'));
        $this->assertSame('bad_key', $this->refusal('another-key', 'nonsense', 'not json'));
        $this->assertSame('bad_signature', $this->refusal('app-key', null, 'not json'));
        $this->assertSame('bad_signature', $this->refusal('app-key', '', self::BODY));
        $this->assertSame('bad_signature', $this->refusal('app-key', self::sign(self::BODY) . '0', self::BODY));
        $this->assertSame('bad_signature', $this->refusal('app-key', self::sign(self::BODY), self::BODY . ' '));
        $this->assertSame('malformed', $this->refusal('app-key', self::sign('not json'), 'not json'));
    }

    /** @return array<string, array{string}> */
    public static function malformed(): array
    {
        return [
            'not JSON' => ['{"time_ms":1,'],
            'a list' => ['[]'],
            'no events' => ['{"time_ms":1}'],
            'no time' => ['{"events":[]}'],
            'a fractional time' => ['{"time_ms":1.5,"events":[]}'],
            'a time as text' => ['{"time_ms":"1","events":[]}'],
            'events an object' => ['{"time_ms":1,"events":{"0":{"name":"x"}}}'],
            'an event that is not an object' => ['{"time_ms":1,"events":["x"]}'],
            'an event without a name' => ['{"time_ms":1,"events":[{"room":"a"}]}'],
            'a name that is not a string' => ['{"time_ms":1,"events":[{"name":1}]}'],
            'data that is not a string' => ['{"time_ms":1,"events":[{"name":"room_event","data":{"n":1}}]}'],
            'an id that is not an integer' => ['{"time_ms":1,"events":[{"name":"room_event","id":"7"}]}'],
            'a negative id' => ['{"time_ms":1,"events":[{"name":"room_event","id":-1}]}'],
            'at as a float' => ['{"time_ms":1,"events":[{"name":"room_event","at":1.5}]}'],
            'a user id that is a number' => ['{"time_ms":1,"events":[{"name":"member_added","user_id":7}]}'],
            'a member named twice' => ['{"time_ms":1,"time_ms":2,"events":[]}'],
            'a member named twice in an event' => ['{"time_ms":1,"events":[{"name":"a","name":"b"}]}'],
            'a member named twice, escaped' => ['{"time_ms":1,"events":[{"name":"a","n\u0061me":"b"}]}'],
            'nested 65 deep' => ['{"time_ms":1,"events":[{"name":"x","deep":' . str_repeat('[', 62) . str_repeat(']', 62) . '}]}'],
            'a trailing comma' => ['{"time_ms":1,"events":[],}'],
            'a byte-order mark' => ["\u{feff}{\"time_ms\":1,\"events\":[]}"],
            'not UTF-8' => ["{\"time_ms\":1,\"events\":[{\"name\":\"\xff\"}]}"],
        ];
    }

    /** @dataProvider malformed */
    public function testASignedBodyThatIsNotAStrictWebhookIsMalformed(string $body): void
    {
        $this->assertSame('malformed', $this->refusal('app-key', self::sign($body), $body));
    }

    public function testNesting64DeepAndTheSameNameInSeparateObjectsAreAccepted(): void
    {
        $body = '{"time_ms":1,"events":[{"name":"x","deep":' . str_repeat('[', 61) . str_repeat(']', 61) . '},{"name":"y"}]}';
        $this->assertSame('accepted', $this->refusal('app-key', self::sign($body), $body));
    }

    public function testABodyOver1MiBIsMalformedEvenWhenSigned(): void
    {
        $body = '{"time_ms":1,"events":[{"name":"x","pad":"' . str_repeat('a', Realtime::MAX_WEBHOOK_BYTES) . '"}]}';
        $this->assertSame('malformed', $this->refusal('app-key', self::sign($body), $body));
        $fits = '{"time_ms":1,"events":[{"name":"x","pad":"' . str_repeat('a', Realtime::MAX_WEBHOOK_BYTES - 46) . '"}]}';
        $this->assertSame(Realtime::MAX_WEBHOOK_BYTES, strlen($fits));
        $this->assertSame('accepted', $this->refusal('app-key', self::sign($fits), $fits));
    }

    public function testAnswerWebhook200WithTheWebhookForAnyHeaderSpelling(): void
    {
        $realtime = self::backend();
        foreach ([
            ['X-Pusher-Key' => 'app-key', 'X-Pusher-Signature' => self::sign(self::BODY)],
            ['x-pusher-key' => ['app-key'], 'x-pusher-signature' => [self::sign(self::BODY)]],
            ['HTTP_X_PUSHER_KEY' => 'app-key', 'HTTP_X_PUSHER_SIGNATURE' => self::sign(self::BODY), 'argc' => 1],
        ] as $headers) {
            $answer = $realtime->answerWebhook($headers, self::BODY);
            $this->assertSame(200, $answer['status']);
            $this->assertSame('{}', $answer['body']);
            $this->assertSame(1764579200123, $answer['webhook']['time_ms']);
        }
    }

    public function testAnswerWebhook401WithTheCodeWhenRefused(): void
    {
        $realtime = self::backend();
        $this->assertSame(['status' => 401, 'body' => '{"error":"bad_key"}', 'webhook' => null], $realtime->answerWebhook([], self::BODY));
        $this->assertSame(['status' => 401, 'body' => '{"error":"bad_signature"}', 'webhook' => null],
            $realtime->answerWebhook(['X-Pusher-Key' => 'app-key', 'X-Pusher-Signature' => self::sign(self::BODY)], self::BODY . ' '));
        $this->assertSame(['status' => 401, 'body' => '{"error":"malformed"}', 'webhook' => null],
            $realtime->answerWebhook(['X-Pusher-Key' => 'app-key', 'X-Pusher-Signature' => self::sign('{}')], '{}'));
    }

    public function testAnswerWebhook413ForABodyOver1MiB(): void
    {
        $body = str_repeat(' ', Realtime::MAX_WEBHOOK_BYTES + 1);
        $this->assertSame(['status' => 413, 'body' => '{"error":"a body over 1 MiB"}', 'webhook' => null],
            self::backend()->answerWebhook(['X-Pusher-Key' => 'app-key', 'X-Pusher-Signature' => self::sign($body)], $body));
    }

    /** @runInSeparateProcess */
    public function testHandleWebhookAnswers405ForAnotherMethodAnd401WithoutHandingOn(): void
    {
        $realtime = self::backend();
        $handed = 0;
        $_SERVER['REQUEST_METHOD'] = 'GET';
        ob_start();
        $this->assertFalse($realtime->handleWebhook(function () use (&$handed): void {
            $handed++;
        }));
        $this->assertSame('{"error":"POST"}', ob_get_clean());
        $_SERVER['REQUEST_METHOD'] = 'POST';
        $_SERVER['HTTP_X_PUSHER_KEY'] = 'app-key';
        $_SERVER['HTTP_X_PUSHER_SIGNATURE'] = self::sign('');
        ob_start();
        $this->assertFalse($realtime->handleWebhook(function () use (&$handed): void {
            $handed++;
        }));
        $this->assertSame('{"error":"malformed"}', ob_get_clean());
        $this->assertSame(0, $handed);
    }
}
