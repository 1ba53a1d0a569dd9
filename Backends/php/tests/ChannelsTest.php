<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\ChannelError;
use MessageBird\Realtime\Realtime;
use PHPUnit\Framework\TestCase;

/** Channel authorisations and signins: Pusher's signatures and every refusal's code. */
final class ChannelsTest extends TestCase
{
    private const MASTER_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=';

    private static function backend(bool $masterKey = true): Realtime
    {
        return new Realtime(appKey: 'app-key', appSecret: 'app-secret', encryptionMasterKey: $masterKey ? self::MASTER_KEY : null);
    }

    private function code(callable $call): string
    {
        try {
            $call();
        } catch (ChannelError $error) {
            $this->assertSame($error->code, $error->getCode());
            return $error->code;
        }
        return 'signed';
    }

    public function testAPrivateChannelIsSignedAsPusherSignsIt(): void
    {
        $this->assertSame(['auth' => 'app-key:' . hash_hmac('sha256', '1234.5678:private-orders', 'app-secret')],
            self::backend()->authorizeChannel('1234.5678', 'private-orders'));
    }

    public function testAPresenceMembersUserInfoIsWrittenCanonicallyAndNullIsLeftOut(): void
    {
        $answer = self::backend()->authorizeChannel('1.2', 'presence-room', ['user_id' => 'ann', 'user_info' => ['z' => 1, 'a' => 'ü/']]);
        $this->assertSame('{"user_id":"ann","user_info":{"a":"ü/","z":1}}', $answer['channel_data']);
        $this->assertSame('app-key:' . hash_hmac('sha256', '1.2:presence-room:' . $answer['channel_data'], 'app-secret'), $answer['auth']);
        $this->assertSame('{"user_id":"7"}', self::backend()->authorizeChannel('1.2', 'presence-room', ['user_id' => '7', 'user_info' => null])['channel_data']);
    }

    public function testEveryRefusalHasItsCode(): void
    {
        $realtime = self::backend();
        $this->assertSame('invalid_socket_id', $this->code(fn () => $realtime->authorizeChannel('1234', 'private-a')));
        $this->assertSame('invalid_socket_id', $this->code(fn () => $realtime->authorizeChannel("1.2\n", 'private-a')));
        $this->assertSame('invalid_socket_id', $this->code(fn () => $realtime->authorizeChannel('1.2.3', 'private-a')));
        $this->assertSame('invalid_channel', $this->code(fn () => $realtime->authorizeChannel('1.2', 'private-a b')));
        $this->assertSame('invalid_channel', $this->code(fn () => $realtime->authorizeChannel('1.2', 'private:a')));
        $this->assertSame('invalid_channel', $this->code(fn () => $realtime->authorizeChannel('1.2', 'private-' . str_repeat('a', 157))));
        $this->assertSame('signed', $this->code(fn () => $realtime->authorizeChannel('1.2', 'private-' . str_repeat('a', 156))));
        $this->assertSame('public_channel', $this->code(fn () => $realtime->authorizeChannel('1.2', 'news')));
        $this->assertSame('member_required', $this->code(fn () => $realtime->authorizeChannel('1.2', 'presence-room')));
        $this->assertSame('invalid_member', $this->code(fn () => $realtime->authorizeChannel('1.2', 'presence-room', ['user_id' => ''])));
        $this->assertSame('invalid_member', $this->code(fn () => $realtime->authorizeChannel('1.2', 'presence-room', ['user_id' => 7])));
        $this->assertSame('invalid_member', $this->code(fn () => $realtime->authorizeChannel('1.2', 'presence-room', ['user_info' => []])));
        $this->assertSame('invalid_member', $this->code(fn () => $realtime->authorizeChannel('1.2', 'presence-room', ['user_id' => 'a', 'user_info' => NAN])));
        $this->assertSame('member_not_allowed', $this->code(fn () => $realtime->authorizeChannel('1.2', 'private-a', ['user_id' => 'ann'])));
        $this->assertSame('member_not_allowed', $this->code(fn () => $realtime->authorizeChannel('1.2', 'private-encrypted-a', ['user_id' => 'ann'])));
        $this->assertSame('master_key_required', $this->code(fn () => self::backend(false)->authorizeChannel('1.2', 'private-encrypted-a')));
    }

    public function testAnEncryptedChannelsSharedSecretIsTheSha256OfTheNameAndTheMasterKey(): void
    {
        $answer = self::backend()->authorizeChannel('1234.5678', 'private-encrypted-prices');
        $this->assertSame(base64_encode(hash('sha256', 'private-encrypted-prices' . base64_decode(self::MASTER_KEY), true)), $answer['shared_secret']);
    }

    public function testASigninSignsTheUserDataAsGiven(): void
    {
        $data = '{ "id" : "ann", "user_info": {"name": "Ann"} }';
        $this->assertSame(['auth' => 'app-key:' . hash_hmac('sha256', "1.2::user::{$data}", 'app-secret'), 'user_data' => $data],
            self::backend()->authenticateUser('1.2', $data));
    }

    public function testASigninsUserDataMustBeAStrictObjectWithAValidId(): void
    {
        $realtime = self::backend();
        foreach ([
            'not json', '[1]', '"ann"', 'null', '{}', '{"name":"no id"}', '{"id":7}', '{"id":""}', '{"id":"a b"}', '{"id":"a:b"}',
            '{"id":"' . str_repeat('a', 201) . '"}', '{"id":"ann","id":"bob"}', '{"id":"ann","user_info":{"a":1,"a":2}}', '{"id":"ann"} x',
        ] as $data) {
            $this->assertSame('invalid_user_data', $this->code(fn () => $realtime->authenticateUser('1.2', $data)), $data);
        }
        $this->assertSame('signed', $this->code(fn () => $realtime->authenticateUser('1.2', '{"id":"' . str_repeat('a', 200) . '"}')));
        $this->assertSame('invalid_socket_id', $this->code(fn () => $realtime->authenticateUser('x', '{"id":"ann"}')));
    }
}
