<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\CanonicalJson;
use MessageBird\Realtime\ChannelError;
use MessageBird\Realtime\Realtime;
use MessageBird\Realtime\RoomName;
use MessageBird\Realtime\RuleError;
use MessageBird\Realtime\WebhookError;
use PHPUnit\Framework\TestCase;

/**
 * The conformance suite (Backends/conformance): this library's outputs for cases.json equal
 * expected.json (written by Swift's RealtimeBackend) byte for byte, section by section, compared
 * as Backends/node/test/conformance.test.js compares them.
 */
final class ConformanceTest extends TestCase
{
    /** @var array<string, mixed> */
    private static array $cases;
    /** @var array<string, mixed> */
    private static array $expected;

    public static function setUpBeforeClass(): void
    {
        $folder = __DIR__ . '/../../conformance/';
        self::$cases = json_decode((string) file_get_contents($folder . 'cases.json'), true, 512, JSON_THROW_ON_ERROR);
        self::$expected = json_decode((string) file_get_contents($folder . 'expected.json'), true, 512, JSON_THROW_ON_ERROR);
    }

    /** A backend as the cases declare it: the app's key, secret and master key, the clock at now_ms. */
    private static function backend(?int $nowMs = null): Realtime
    {
        $app = self::$cases['app'];
        $now = $nowMs ?? self::$cases['now_ms'];
        return new Realtime(appKey: $app['key'], appSecret: $app['secret'], appId: $app['id'],
            encryptionMasterKey: $app['master_key'], clock: fn (): int => $now);
    }

    /**
     * Declares a case's rule; `deny` lists parameter values its authorizer refuses.
     *
     * @param array<string, mixed> $rule the case: `pattern`, `options`, `deny`.
     */
    private static function declare(Realtime $realtime, array $rule): void
    {
        $deny = $rule['deny'] ?? null;
        $authorizer = $deny === null ? null : static function (?string $user, array $params) use ($deny): bool {
            foreach ($deny as $key => $values) {
                if (in_array($params[$key] ?? null, $values, true)) {
                    return false;
                }
            }
            return true;
        };
        $realtime->room($rule['pattern'], $authorizer, $rule['options']);
    }

    /** The backend with cases.backend's rules. */
    private static function rooms(): Realtime
    {
        $realtime = self::backend();
        foreach (self::$cases['backend']['rules'] as $rule) {
            self::declare($realtime, $rule);
        }
        return $realtime;
    }

    public function testTheExpectedFileHasEverySectionThisSuiteCompares(): void
    {
        $sections = array_keys(self::$expected);
        sort($sections);
        $this->assertSame(['auth', 'auth_over_limit', 'canonical', 'canonical_integers', 'channels', 'config', 'declarations', 'matches', 'overlaps', 'rest',
            'room_events', 'rules', 'signin', 'webhooks'], $sections);
        $this->assertCount(count(self::$cases['overlaps']), self::$expected['overlaps']);
        $this->assertCount(count(self::$cases['declarations']['sequences']), self::$expected['declarations']);
        $this->assertCount(6, self::$expected['auth']);
        $this->assertCount(6, self::$expected['webhooks']);
    }

    public function testNamesAndPatternsAreValidOrNotAsListed(): void
    {
        foreach (self::$cases['names']['valid'] as $name) {
            $this->assertTrue(RoomName::isValid($name), $name);
        }
        foreach (self::$cases['names']['invalid'] as $name) {
            $this->assertFalse(RoomName::isValid($name), $name);
        }
        foreach (self::$cases['patterns']['valid'] as $pattern) {
            $this->assertTrue(RoomName::isValidPattern($pattern), $pattern);
        }
        foreach (self::$cases['patterns']['invalid'] as $pattern) {
            $this->assertFalse(RoomName::isValidPattern($pattern), $pattern);
        }
    }

    public function testMatchesGiveTheParametersOfEachNameAgainstEachPattern(): void
    {
        $ours = array_map(static function (array $item): array {
            $params = RoomName::match($item['name'], $item['pattern']);
            return ['name' => $item['name'], 'params' => $params === null ? null : new \ArrayObject($params), 'pattern' => $item['pattern']];
        }, self::$cases['matches']);
        $expected = array_map(static fn (array $item): array => [
            'name' => $item['name'], 'params' => $item['params'] === null ? null : new \ArrayObject($item['params']), 'pattern' => $item['pattern'],
        ], self::$expected['matches']);
        $this->assertSame(CanonicalJson::encode($expected), CanonicalJson::encode($ours));
    }

    public function testRulesInRangeAreTheRuleTheTokenCarriesAndOutOfRangeAreRefusedWhenDeclared(): void
    {
        foreach (self::$cases['rules']['valid'] as $index => $item) {
            $realtime = self::backend();
            $realtime->room($item['pattern'], null, $item['options']);
            $this->assertSame(self::$expected['rules']['valid'][$index]['rule'], CanonicalJson::encode($realtime->rules()[0]['rule']), $item['pattern']);
        }
        foreach (self::$cases['rules']['invalid'] as $index => $item) {
            try {
                self::backend()->room($item['pattern'], null, $item['options']);
                $this->fail('declared: ' . json_encode($item));
            } catch (RuleError $error) {
                $this->assertSame(self::$expected['rules']['invalid'][$index]['error'], $error->code, json_encode($item));
            }
        }
    }

    public function testOverlapsSayWhetherSomeNameMatchesBothPatternsOfEachPair(): void
    {
        $ours = array_map(static fn (array $item): array => ['a' => $item['a'], 'b' => $item['b'], 'overlap' => RoomName::patternsOverlap($item['a'], $item['b'])],
            self::$cases['overlaps']);
        $this->assertSame(self::$expected['overlaps'], $ours);
    }

    public function testDeclarationsOnAFreshBackendAreEachOkOrRefusedWithTheSameCode(): void
    {
        $ours = [];
        foreach (self::$cases['declarations']['sequences'] as $sequence) {
            $realtime = self::backend();
            $outcomes = [];
            foreach ($sequence as $item) {
                try {
                    self::declare($realtime, $item);
                    $outcomes[] = 'ok';
                } catch (RuleError $error) {
                    $outcomes[] = $error->code;
                }
            }
            $ours[] = $outcomes;
        }
        $this->assertSame(self::$expected['declarations'], $ours);
    }

    public function testEveryBatchedAuthAnswerTokensIncludedByteForByte(): void
    {
        $rooms = self::rooms();
        foreach (self::$cases['auth'] as $index => $item) {
            $answer = $rooms->authorizeRooms($item['rooms'], $item['user'], $item['info'] ?? null);
            $this->assertSame(self::$expected['auth'][$index]['answer'], CanonicalJson::encode($answer), json_encode($item['rooms']));
        }
        $over = self::$cases['auth_over_limit'];
        $names = array_map(static fn (int $i): string => $over['prefix'] . $i, range(0, $over['count'] - 1));
        $answer = $rooms->authorizeRooms($names, $over['user']);
        $badRequest = array_values(array_filter($names, static fn (string $name): bool => ($answer['rooms'][$name]['error'] ?? null) === 'bad_request'));
        $this->assertSame(self::$expected['auth_over_limit']['bad_request'], $badRequest);
        $this->assertSame(self::$expected['auth_over_limit']['answered'], count($answer['rooms']));
        $this->assertSame(self::$expected['config'], CanonicalJson::encode($rooms->config()));
    }

    public function testChannelsAndSigninArePushersSignaturesAndTheRefusalsHaveTheSameCodes(): void
    {
        $rooms = self::rooms();
        foreach (self::$cases['channels'] as $index => $item) {
            $want = self::$expected['channels'][$index];
            try {
                $answer = CanonicalJson::encode($rooms->authorizeChannel($item['socket_id'], $item['channel'], $item['member'] ?? null));
                $this->assertArrayNotHasKey('error', $want, $item['channel']);
                $this->assertSame($want['answer'], $answer, $item['channel']);
            } catch (ChannelError $error) {
                $this->assertSame($want['error'] ?? null, $error->code, $item['channel']);
            }
        }
        foreach (self::$cases['signin'] as $index => $item) {
            $want = self::$expected['signin'][$index];
            try {
                $answer = CanonicalJson::encode($rooms->authenticateUser($item['socket_id'], $item['user_data']));
                $this->assertArrayNotHasKey('error', $want, $item['user_data']);
                $this->assertSame($want['answer'], $answer, $item['user_data']);
            } catch (ChannelError $error) {
                $this->assertSame($want['error'] ?? null, $error->code, $item['user_data']);
            }
        }
    }

    public function testTheSignedHttpApisQueriesAndRoomEventBodies(): void
    {
        foreach (self::$cases['rest'] as $index => $item) {
            $signer = self::backend($item['timestamp'] * 1000);
            $this->assertSame(self::$expected['rest'][$index]['query'], $signer->signedQuery($item['method'], $item['path'], $item['body']), $item['path']);
        }
        $rooms = self::rooms();
        foreach (self::$cases['room_events'] as $index => $item) {
            $this->assertSame(self::$expected['room_events'][$index]['body'], $rooms->roomEventBody($item['room'], $item['event'], $item['data']), $item['room']);
        }
    }

    public function testWebhooksAreVerifiedAndParsedOrRefusedWithTheSameCode(): void
    {
        $this->assertSame(self::$expected['webhooks'][0]['signature'], hash_hmac('sha256', self::$cases['webhooks'][0]['body'], self::$cases['app']['secret']));
        $rooms = self::rooms();
        foreach (self::$expected['webhooks'] as $want) {
            try {
                $result = CanonicalJson::encode($rooms->verifyWebhook($want['key'], $want['signature'], $want['body']));
                $this->assertArrayNotHasKey('error', $want, $want['body']);
                $this->assertSame($want['result'], $result);
            } catch (WebhookError $error) {
                $this->assertSame($want['error'] ?? null, $error->code, $want['body']);
            }
        }
    }

    public function testCanonicalJsonWritesNumbersEscapesAndKeyOrderAsSwiftDoes(): void
    {
        $this->assertSame(self::$expected['canonical'], array_map([CanonicalJson::class, 'encode'], self::$cases['canonical']));
    }

    public function testCanonicalJsonWritesEachIntegerAsItsDoubleOrRefusesItWhenNoDoubleHoldsIt(): void
    {
        $written = [];
        foreach (self::$cases['canonical_integers'] as $text) {
            $this->assertSame($text, (string) (int) $text, 'each case fits a PHP int');
            try {
                $written[] = CanonicalJson::encode((int) $text);
            } catch (\InvalidArgumentException) {
                $written[] = 'refused';
            }
        }
        $this->assertSame(self::$expected['canonical_integers'] ?? null, $written);
    }
}
