<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\CrossOrigin;
use MessageBird\Realtime\Realtime;
use PHPUnit\Framework\TestCase;

/**
 * Cross-origin requests to the rooms' routes: the shared cases of Backends/conformance/cors.json,
 * through `answerAuth` and through the example app on a real `php -S` (`handleAuth`).
 */
final class CrossOriginTest extends TestCase
{
    /** @return array<string, mixed> */
    private static function cases(): array
    {
        return json_decode((string) file_get_contents(__DIR__ . '/../../conformance/cors.json'), true, 512, JSON_THROW_ON_ERROR);
    }

    private static function backend(): Realtime
    {
        $realtime = new Realtime(appKey: 'app-key', appSecret: 'app-secret');
        $realtime->room('news:{topic}', null, ['public' => true]);
        return $realtime;
    }

    /**
     * @param array<string, mixed> $case
     * @param array<string, string> $headers the answer's headers, any case
     */
    private function check(array $case, int $status, array $headers, string $body): void
    {
        $name = (string) ($case['name'] ?? json_encode($case['request']));
        $lower = array_change_key_case($headers, CASE_LOWER);
        $this->assertSame($case['status'], $status, $name);
        foreach ($case['headers'] as $header => $value) {
            $this->assertSame($value, $lower[strtolower($header)] ?? null, "{$name}: {$header}");
        }
        foreach ($case['absent'] as $header) {
            $this->assertArrayNotHasKey(strtolower($header), $lower, "{$name}: {$header} absent");
        }
        if ($status === 204) {
            $this->assertSame('', $body, "{$name}: no body");
        }
    }

    public function testEverySharedCaseThroughAnswerAuth(): void
    {
        $cases = self::cases();
        $realtime = self::backend();
        $allowed = new CrossOrigin($cases['allowed_origins']);
        foreach ($cases['cases'] as $case) {
            $request = $case['request'];
            $answer = $realtime->answerAuth($request['method'], $request['path'], $request['body'] ?? '', 'ann', null, '', $request['headers'], $allowed);
            $this->check($case, $answer['status'], $answer['headers'], $answer['body']);
        }
        foreach ($cases['without_origins']['cases'] as $case) {
            $request = $case['request'];
            $answer = $realtime->answerAuth($request['method'], $request['path'], $request['body'] ?? '', 'ann', null, '', $request['headers']);
            $this->check($case, $answer['status'], $answer['headers'], $answer['body']);
        }
        $refused = $realtime->answerAuth('OPTIONS', '/rooms/auth', '', 'ann', null, '', ['Origin' => 'https://shop.example', 'Access-Control-Request-Method' => 'POST']);
        $this->assertSame('{"error":"the origin https://shop.example is not allowed: add it to allowedOrigins"}', $refused['body']);
    }

    public function testOriginsAsABrowserSendsThemAreAcceptedAndOneNotUtf8IsEchoedPrintable(): void
    {
        foreach (self::cases()['valid_origins']['origins'] as $origin) {
            $this->assertTrue((new CrossOrigin([$origin]))->allows($origin), $origin);
        }
        $answer = (new CrossOrigin(['https://shop.example']))->preflight('POST', "https://e\xffvil.example" . str_repeat('a', 190) . 'é', 'POST', null);
        $this->assertSame(403, $answer['status']);
        $this->assertStringStartsWith('the origin https://e?vil.example', $answer['error']['error']);
        $this->assertNotFalse(json_encode($answer['error']), 'the message is valid UTF-8');
        $multiple = self::backend()->answerAuth('OPTIONS', '/rooms/auth', '', 'ann', null, '',
            ['Origin' => ['https://shop.example', 'https://evil.example'], 'Access-Control-Request-Method' => 'POST'], ['https://shop.example']);
        $this->assertSame(403, $multiple['status'], 'two Origin values are no listed origin');
        $padded = self::backend()->answerAuth('GET', '/config', '', 'ann', null, '', ['Origin' => "https://shop.example \t"], ['https://shop.example']);
        $this->assertSame('https://shop.example', $padded['headers']['Access-Control-Allow-Origin'] ?? null, 'spaces around a value are trimmed');
    }

    public function testInvalidOriginsAreRefused(): void
    {
        foreach (self::cases()['invalid_origins'] as $origin) {
            try {
                new CrossOrigin([$origin]);
                $this->fail("{$origin} was accepted");
            } catch (\InvalidArgumentException $error) {
                $this->assertStringContainsString('allowedOrigins', $error->getMessage());
            }
        }
    }

    public function testTheExampleAppOnARealServerAnswersAPreflightAndTheAuthRequest(): void
    {
        $server = new PhpServer(__DIR__ . '/../example/router.php', ['ALLOWED_ORIGINS' => 'http://127.0.0.1:8080 https://shop.example']);
        try {
            foreach (self::cases()['cases'] as $case) {
                $request = $case['request'];
                $context = stream_context_create(['http' => ['method' => $request['method'], 'ignore_errors' => true, 'timeout' => 5,
                    'header' => implode("\r\n", array_map(static fn (string $name, string $value): string => "{$name}: {$value}",
                        array_keys($request['headers']), $request['headers'])), 'content' => $request['body'] ?? '']]);
                $body = (string) file_get_contents($server->url() . $request['path'], false, $context);
                $lines = $http_response_header ?? [];
                $status = (int) explode(' ', (string) ($lines[0] ?? ''))[1];
                $headers = [];
                foreach (array_slice($lines, 1) as $line) {
                    [$name, $value] = array_map('trim', explode(':', $line, 2)) + [1 => ''];
                    $headers[$name] = $value;
                }
                $this->check($case, $status, $headers, $body);
            }
        } finally {
            $server->stop();
        }
    }
}
