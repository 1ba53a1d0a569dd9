<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * The app backend's half of rooms and channels in PHP (rooms seed: `$realtime->room(
 * 'order:{id}', fn ($user, array $p) => …, ['history' => 20])`), a port of the Node library
 * (Backends/node) with Swift's `RealtimeBackend` as the reference (Backends/README.md;
 * conformance: Backends/conformance).
 *
 * ```php
 * $realtime = new Realtime(appKey: 'app-key', appSecret: 'app-secret');
 * $realtime->room('order:{id}', fn ($user, array $p) => find_order($p['id'])?->user_id === $user, ['history' => 20]);
 * $answer = $realtime->authorizeRooms(['order:1042'], 'ann');
 * echo CanonicalJson::encode($answer);
 * ```
 *
 * Times: the clock and every `time`/`expires` in answers are milliseconds since 1970; token
 * claims (`iat`, `exp`) and lifetimes are seconds.
 */
final class Realtime
{
    use RealtimeApi;
    use RealtimeRoutes;

    /** Most rooms one auth request answers (the rest get `bad_request`). */
    public const MAX_ROOMS = 100;
    /** Largest auth request body read, in bytes (an auth request naming 100 rooms is about 17 KiB). */
    public const MAX_AUTH_BODY_BYTES = 64 * 1024;
    /** Largest webhook body verified, in bytes (1 MiB). */
    public const MAX_WEBHOOK_BYTES = 1 << 20;
    /** Shortest token or grant lifetime, in seconds: the client renews 10 minutes before expiry. */
    public const MIN_LIFETIME = 660;

    /** @var string the app key. */
    public readonly string $appKey;
    /** @var string|null the app id, for the HTTP API. */
    public readonly ?string $appId;
    /** @var string|null the realtime server's HTTP base without a trailing `/`, for the HTTP API. */
    public readonly ?string $server;
    /** @var int seconds a room token is valid (at least 660). */
    public readonly int $tokenLifetime;
    /** @var int seconds a public grant is valid (at least 660). */
    public readonly int $grantLifetime;

    private readonly string $secret;
    private readonly ?string $masterKey;
    /** @var \Closure(): (int|float) */
    private readonly \Closure $clock;
    /** @var \Closure(\Throwable, string): void */
    private readonly \Closure $onAuthorizerError;
    /** @var list<array{pattern: string, rule: array<string, int|bool>, authorizer: ?callable}> */
    private array $rules = [];

    /**
     * Creates the backend for one app.
     *
     * @param string $appKey the app key.
     * @param string $appSecret the app secret: signs tokens, channel authorisations, API calls.
     * @param string|null $appId the app id, for the HTTP API.
     * @param string|null $server the realtime server's HTTP base (`http://127.0.0.1:6001`), for the HTTP API.
     * @param string|null $encryptionMasterKey 32 bytes in base64: sealed rooms and encrypted channels.
     * @param int $tokenLifetime seconds a room token is valid (3600; at least 660).
     * @param int $grantLifetime seconds a public grant is valid (86400; at least 660).
     * @param callable|null $clock `fn (): int`, milliseconds since 1970 (default: the system clock).
     * @param callable|null $onAuthorizerError `fn (\Throwable $error, string $room): void`, told when an
     *   authorizer throws (the room is answered `forbidden`); default: `error_log`.
     * @throws \InvalidArgumentException an empty key or secret, or a master key that is not 32 bytes of base64.
     */
    public function __construct(
        string $appKey,
        string $appSecret,
        ?string $appId = null,
        ?string $server = null,
        ?string $encryptionMasterKey = null,
        int $tokenLifetime = 3600,
        int $grantLifetime = 86400,
        ?callable $clock = null,
        ?callable $onAuthorizerError = null,
    ) {
        if ($appKey === '' || $appSecret === '') {
            throw new \InvalidArgumentException('Realtime needs an appKey and an appSecret');
        }
        $this->appKey = $appKey;
        $this->secret = $appSecret;
        $this->appId = $appId;
        $this->server = $server === null ? null : rtrim($server, '/');
        $masterKey = null;
        if ($encryptionMasterKey !== null) {
            $masterKey = base64_decode($encryptionMasterKey, true);
            if ($masterKey === false || strlen($masterKey) !== 32 || base64_encode($masterKey) !== $encryptionMasterKey) {
                throw new \InvalidArgumentException('encryptionMasterKey must be 32 bytes in base64');
            }
        }
        $this->masterKey = $masterKey;
        $this->tokenLifetime = max($tokenLifetime, self::MIN_LIFETIME);
        $this->grantLifetime = max($grantLifetime, self::MIN_LIFETIME);
        $this->clock = $clock === null
            ? static fn (): int => (int) floor(microtime(true) * 1000)
            : \Closure::fromCallable($clock);
        $this->onAuthorizerError = $onAuthorizerError === null
            ? static function (\Throwable $error, string $room): void {
                error_log("realtime: the authorizer for {$room} threw " . get_class($error) . ': ' . $error->getMessage());
            }
            : \Closure::fromCallable($onAuthorizerError);
    }

    // Rooms

    /**
     * Declares the rule for rooms matching `$pattern`; the first declared match wins
     * (Backends/README.md, "Rules by pattern").
     *
     * A public rule is joined with `config()`'s grant, which the realtime server checks against
     * the pattern alone: so a public rule takes no authorizer, and no name may match both a
     * public pattern and another rule's (either declared first); both are refused here, so a
     * visitor never gets into a room `authorizeRooms` refuses (Backends/README.md "Public rules").
     *
     * @param string $pattern `order:{id}`, `chat:{a}:{b}`, `shop` (docs/rooms-protocol.md "Names").
     * @param callable|null $authorizer `fn (?string $user, array $params): bool`: who may join.
     *   `$user` the signed-in user (a visitor is refused a non-public rule before it is asked), `$params` the pattern's parameters by name
     *   (`['id' => '1042']`). Only `true` admits; a throw answers `forbidden` and goes to
     *   `onAuthorizerError`. None admits every signed-in user (everyone, for a public rule,
     *   which takes none).
     * @param array<string, int|bool|null> $options the protocol's keys: `history` (0…100000, default
     *   0), `span` (seconds, 1…1800, default 1800), `presence`, `max` (≥ 1), `members_send`,
     *   `webhook`, `sealed`, `public` (see `RoomRule::make`).
     * @return $this the backend, to declare the next.
     * @throws RuleError `invalid_pattern`, `invalid_rule`, `master_key_required` (sealed without
     *   the backend's `encryptionMasterKey`), `public_authorizer` (an authorizer on a public
     *   rule), `public_overlap` (a public pattern and another that can match the same name,
     *   `RoomName::patternsOverlap`; the rule is not added).
     */
    public function room(string $pattern, ?callable $authorizer = null, array $options = []): self
    {
        if (!RoomName::isValidPattern($pattern)) {
            throw new RuleError('invalid_pattern', "invalid room pattern {$pattern}");
        }
        $rule = RoomRule::make($pattern, $options);
        if ($rule['sealed'] && $this->masterKey === null) {
            throw new RuleError('master_key_required', "the sealed rule for {$pattern} needs the backend's encryptionMasterKey");
        }
        if ($rule['public'] && $authorizer !== null) {
            throw new RuleError('public_authorizer', "the public rule for {$pattern} takes no authorizer: its grant admits anyone without asking the backend");
        }
        foreach ($this->rules as $declared) {
            if (($declared['rule']['public'] || $rule['public']) && RoomName::patternsOverlap($declared['pattern'], $pattern)) {
                throw new RuleError('public_overlap', "the rules for {$declared['pattern']} and {$pattern} can match the same room, "
                    . 'and one is public: a public pattern must match no name another rule claims');
            }
        }
        $this->rules[] = ['pattern' => $pattern, 'rule' => $rule, 'authorizer' => $authorizer];
        return $this;
    }

    /**
     * The declared rules, in declaration order.
     *
     * @return list<array{pattern: string, rule: array<string, int|bool>, authorizer: ?callable}> the rules.
     */
    public function rules(): array
    {
        return $this->rules;
    }

    /**
     * The first declared rule whose pattern matches `$room`.
     *
     * @param string $room a room name.
     * @return array{pattern: string, rule: array<string, int|bool>, authorizer: ?callable, params: array<string, string>}|null
     *   the rule and the pattern's parameters, or null when no pattern matches.
     */
    public function ruleFor(string $room): ?array
    {
        foreach ($this->rules as $declared) {
            $params = RoomName::match($room, $declared['pattern']);
            if ($params !== null) {
                return $declared + ['params' => $params];
            }
        }
        return null;
    }

    /**
     * The batched auth answer (docs/rooms-protocol.md "Auth route"): per room a token and its
     * expiry (and `key` for a sealed room), or an error code.
     *
     * @param list<string> $rooms room names: duplicates answered once; the first 100 distinct ones,
     *   in the request's order, answered, the rest `bad_request`.
     * @param string|null $user the signed-in user, or null for a visitor.
     * @param mixed $info the user's presence info (any JSON value, see `CanonicalJson`), put in
     *   presence rooms' tokens only; null for none.
     * @return array{time: int, rooms: \ArrayObject<string, array{token: string, expires: int, key?: string}|array{error: string}>}
     *   the answer: `time` in milliseconds, `rooms` by name (an `\ArrayObject`, so that it is
     *   written as a JSON object whatever the names; read it as an array). Errors: `invalid_room`,
     *   `no_rule`, `forbidden`, `bad_request` (past the first 100, or a presence room when
     *   `$info` is not JSON `CanonicalJson` can write). Write it with `CanonicalJson::encode`.
     * @throws \TypeError a room that is not a string.
     */
    public function authorizeRooms(array $rooms, ?string $user, mixed $info = null): array
    {
        $names = [];
        foreach ($rooms as $room) {
            if (!is_string($room)) {
                throw new \TypeError('room names are strings, not ' . get_debug_type($room));
            }
            $names[$room] = true;
        }
        $answer = new \ArrayObject();
        $index = 0;
        foreach (array_keys($names) as $name) {
            $name = (string) $name;
            $answer[$name] = $index++ < self::MAX_ROOMS ? $this->entry($name, $user, $info) : ['error' => 'bad_request'];
        }
        return ['time' => $this->now(), 'rooms' => $answer];
    }

    /** @return array{token: string, expires: int, key?: string}|array{error: string} */
    private function entry(string $room, ?string $user, mixed $info): array
    {
        if (!RoomName::isValid($room)) {
            return ['error' => 'invalid_room'];
        }
        $declared = $this->ruleFor($room);
        if ($declared === null) {
            return ['error' => 'no_rule'];
        }
        if ($user === null && !$declared['rule']['public']) {
            return ['error' => 'forbidden'];
        }
        if ($declared['authorizer'] !== null) {
            $allowed = false;
            try {
                $allowed = ($declared['authorizer'])($user, $declared['params']) === true;
            } catch (\Throwable $error) {
                ($this->onAuthorizerError)($error, $room);
            }
            if (!$allowed) {
                return ['error' => 'forbidden'];
            }
        }
        try {
            $entry = $this->token($room, $user, $declared['rule']['presence'] ? $info : null, $declared['rule'], $this->tokenLifetime);
        } catch (\InvalidArgumentException) {
            // Info JSON cannot hold (a NaN, an int no double holds exactly): this room only,
            // as Swift, Node and Python answer it.
            return ['error' => 'bad_request'];
        }
        if ($declared['rule']['sealed']) {
            $entry['key'] = base64_encode((string) $this->roomKey($room));
        }
        return $entry;
    }

    /**
     * Mints a room token: an HS256 JWT (RFC 7519) signed with the app secret, claims
     * `{exp, iat, info?, room, rule, sub?}` written canonically (docs/rooms-protocol.md "Tokens").
     *
     * @param string $room the room (or a public pattern, for a grant).
     * @param string|null $user the user (`sub`), or null for none.
     * @param mixed $info presence info (`info`), or null for none.
     * @param array<string, int|bool> $rule the rule it carries (`RoomRule::make`).
     * @param int $lifetime seconds.
     * @return array{token: string, expires: int} the token and its expiry in milliseconds.
     * @throws \InvalidArgumentException `$info` is not a JSON value.
     */
    public function token(string $room, ?string $user, mixed $info, array $rule, int $lifetime): array
    {
        $iat = intdiv($this->now(), 1000);
        $exp = $iat + $lifetime;
        $claims = ['exp' => $exp, 'iat' => $iat, 'room' => $room, 'rule' => $rule];
        if ($info !== null) {
            $claims['info'] = $info;
        }
        if ($user !== null) {
            $claims['sub'] = $user;
        }
        $input = self::base64url('{"alg":"HS256","typ":"JWT"}') . '.' . self::base64url(CanonicalJson::encode($claims));
        return ['token' => $input . '.' . self::base64url(hash_hmac('sha256', $input, $this->secret, true)), 'expires' => $exp * 1000];
    }

    /**
     * The public grants: one token per public pattern, in declaration order, its `room` the
     * pattern and without `sub`, so the app joins those rooms with no auth request (rooms seed,
     * "Rooms anyone may join"; docs/rooms-protocol.md "Auth route").
     *
     * @return array{time: int, grants: list<array{pattern: string, token: string, expires: int}>}
     *   `time` and `expires` in milliseconds.
     */
    public function config(): array
    {
        $grants = [];
        foreach ($this->rules as $declared) {
            if ($declared['rule']['public']) {
                $grants[] = ['pattern' => $declared['pattern']]
                    + $this->token($declared['pattern'], null, null, $declared['rule'], $this->grantLifetime);
            }
        }
        return ['time' => $this->now(), 'grants' => $grants];
    }

    /**
     * A sealed room's key, or an encrypted channel's shared secret: SHA-256 of the name and the
     * master key, as Pusher derives an encrypted channel's (docs/rooms-protocol.md "Sealed rooms").
     *
     * @param string $name a sealed room or a `private-encrypted-` channel.
     * @return string|null the 32 raw bytes, or null without a master key.
     */
    public function roomKey(string $name): ?string
    {
        return $this->masterKey === null ? null : hash('sha256', $name . $this->masterKey, true);
    }

    // Channels (Pusher's signatures)

    /**
     * Signs a private, presence or encrypted channel subscription for a socket id (Pusher's
     * channel authorisation; Swift: `AuthorizationSigner.authorizeChannel`).
     *
     * @param string $socketId `123.456`.
     * @param string $channel `private-…`, `presence-…` or `private-encrypted-…`.
     * @param array{user_id: string, user_info?: mixed}|null $member a presence channel's member.
     * @return array{auth: string, channel_data?: string, shared_secret?: string} Pusher's answer
     *   (`auth` is `key:hex HMAC-SHA256`, `shared_secret` base64).
     * @throws ChannelError `invalid_socket_id`, `invalid_channel`, `public_channel`,
     *   `member_required`, `member_not_allowed`, `invalid_member`, `master_key_required`.
     */
    public function authorizeChannel(string $socketId, string $channel, ?array $member = null): array
    {
        self::checkSocket($socketId);
        if (preg_match('/\A[A-Za-z0-9_\-=@,.;]{1,164}\z/', $channel) !== 1) {
            throw new ChannelError('invalid_channel', 'invalid channel name "' . substr($channel, 0, 64) . '": 1 to 164 characters of A-Z a-z 0-9 _ - = @ , . ;');
        }
        $sign = fn (string $text): string => $this->appKey . ':' . hash_hmac('sha256', $text, $this->secret);
        if (str_starts_with($channel, 'private-encrypted-')) {
            if ($member !== null) {
                throw new ChannelError('member_not_allowed', "{$channel} is not a presence channel: it takes no member");
            }
            $secret = $this->roomKey($channel);
            if ($secret === null) {
                throw new ChannelError('master_key_required', "{$channel} is an encrypted channel: the signer needs the app's encryption master key");
            }
            return ['auth' => $sign("{$socketId}:{$channel}"), 'shared_secret' => base64_encode($secret)];
        }
        if (str_starts_with($channel, 'private-')) {
            if ($member !== null) {
                throw new ChannelError('member_not_allowed', "{$channel} is not a presence channel: it takes no member");
            }
            return ['auth' => $sign("{$socketId}:{$channel}")];
        }
        if (str_starts_with($channel, 'presence-')) {
            if ($member === null) {
                throw new ChannelError('member_required', "{$channel} is a presence channel: a member (user_id, user_info) is required");
            }
            $userId = $member['user_id'] ?? null;
            if (!is_string($userId) || $userId === '') {
                throw new ChannelError('invalid_member', 'invalid presence member: the user id is not a non-empty string');
            }
            $data = ['user_id' => $userId];
            if (($member['user_info'] ?? null) !== null) {
                $data['user_info'] = $member['user_info'];
            }
            try {
                $channelData = CanonicalJson::encode($data);
            } catch (\InvalidArgumentException) {
                throw new ChannelError('invalid_member', 'invalid presence member: user_info is not representable as JSON');
            }
            return ['auth' => $sign("{$socketId}:{$channel}:{$channelData}"), 'channel_data' => $channelData];
        }
        throw new ChannelError('public_channel', "{$channel} is a public channel: it needs no authorisation");
    }

    /**
     * Signs a user signin (Pusher's user authentication) for a socket id (Swift:
     * `AuthorizationSigner.authenticateUser`).
     *
     * @param string $socketId `123.456`.
     * @param string $userData the user's JSON text: an object, strict JSON (no member named
     *   twice, as Swift's `StrictJSON`), with a string `id` of 1…200 of `A–Z a–z 0–9 _ - = @ , . ;`.
     * @return array{auth: string, user_data: string} Pusher's answer, `user_data` as given.
     * @throws ChannelError `invalid_socket_id`, `invalid_user_data`.
     */
    public function authenticateUser(string $socketId, string $userData): array
    {
        self::checkSocket($socketId);
        try {
            $user = StrictJson::decode($userData);
        } catch (\JsonException $error) {
            throw new ChannelError('invalid_user_data', 'invalid user data: not a JSON object (' . $error->getMessage() . ')');
        }
        if (!$user instanceof \stdClass) {
            throw new ChannelError('invalid_user_data', 'invalid user data: not a JSON object');
        }
        if (!property_exists($user, 'id')) {
            throw new ChannelError('invalid_user_data', 'invalid user data: no "id"');
        }
        if (!is_string($user->id) || preg_match('/\A[A-Za-z0-9_\-=@,.;]{1,200}\z/', $user->id) !== 1) {
            throw new ChannelError('invalid_user_data', 'invalid user data: "id" must be 1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ;');
        }
        return ['auth' => $this->appKey . ':' . hash_hmac('sha256', "{$socketId}::user::{$userData}", $this->secret), 'user_data' => $userData];
    }

    // Webhooks

    /**
     * Verifies a webhook request the realtime server posted, then parses it
     * (docs/rooms-protocol.md "Webhooks", Pusher's webhooks): the key first, then the signature
     * over the exact body bytes (constant time), and only then the JSON.
     *
     * @param string|null $key the `X-Pusher-Key` header.
     * @param string|null $signature the `X-Pusher-Signature` header (hex, either case).
     * @param string $body the body's bytes as received.
     * @return array{time_ms: int, events: list<array<string, mixed>>} the webhook, its events as
     *   sent (each has a string `name`; JSON objects as PHP arrays).
     * @throws WebhookError `bad_key`, `bad_signature`, `malformed` (over 1 MiB, not strict JSON, or
     *   not `{"time_ms": integer, "events": [{"name": string, …}…]}` with the known fields typed
     *   as Swift's `RealtimeWebhook.Event` types them).
     */
    public function verifyWebhook(?string $key, ?string $signature, string $body): array
    {
        if ($key !== $this->appKey) {
            throw new WebhookError('bad_key', "the webhook's X-Pusher-Key is not this app's key");
        }
        $expected = hash_hmac('sha256', $body, $this->secret);
        if ($signature === null || !hash_equals($expected, strtolower($signature))) {
            throw new WebhookError('bad_signature', "the webhook's X-Pusher-Signature does not sign its body");
        }
        $malformed = new WebhookError('malformed', 'the webhook\'s body is not {"time_ms", "events"}');
        if (strlen($body) > self::MAX_WEBHOOK_BYTES) {
            throw $malformed;
        }
        try {
            $payload = StrictJson::decode($body);
        } catch (\JsonException) {
            throw $malformed;
        }
        if (!$payload instanceof \stdClass || !is_int($payload->time_ms ?? null) || !is_array($payload->events ?? null)) {
            throw $malformed;
        }
        foreach ($payload->events as $event) {
            if (!$event instanceof \stdClass || !self::isWebhookEvent($event)) {
                throw $malformed;
            }
        }
        $events = json_decode($body, true)['events'];
        return ['time_ms' => $payload->time_ms, 'events' => $events];
    }

    /** Whether an event has a string `name` and its other known fields typed as Swift decodes them. */
    private static function isWebhookEvent(\stdClass $event): bool
    {
        if (!is_string($event->name ?? null)) {
            return false;
        }
        foreach (['channel', 'room', 'event', 'data', 'user_id', 'socket_id'] as $field) {
            if (isset($event->{$field}) && !is_string($event->{$field})) {
                return false;
            }
        }
        foreach (['id', 'at'] as $field) {
            if (isset($event->{$field}) && !is_int($event->{$field})) {
                return false;
            }
        }
        return !isset($event->id) || $event->id >= 0;
    }

    // Helpers

    /** @return int the clock, milliseconds since 1970. */
    private function now(): int
    {
        return (int) floor(($this->clock)());
    }

    /** Base64url without padding (RFC 7515 §2). */
    private static function base64url(string $bytes): string
    {
        return rtrim(strtr(base64_encode($bytes), '+/', '-_'), '=');
    }

    /** @throws ChannelError `invalid_socket_id` */
    private static function checkSocket(string $socketId): void
    {
        if (preg_match('/\A[0-9]+\.[0-9]+\z/', $socketId) !== 1) {
            throw new ChannelError('invalid_socket_id', 'invalid socket id "' . substr($socketId, 0, 64) . '": expected digits.digits');
        }
    }
}
