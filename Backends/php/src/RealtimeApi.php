<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * The realtime server's signed HTTP API, for `Realtime` (docs/rooms-protocol.md "HTTP API";
 * Pusher's REST API for channels): the signature, room event bodies, and the calls, made with
 * PHP's `http` stream wrapper (no curl), 10 s timeout.
 *
 * @internal part of `Realtime`; use it through that class.
 */
trait RealtimeApi
{
    /**
     * Pusher's REST signature for a request, as a query string (Backends/README.md, "The signed
     * HTTP API"): `auth_key`, `auth_timestamp` (the clock in whole seconds), `auth_version=1.0`,
     * `body_md5` (hex MD5 of the body) when there is a body, the request's own parameters, and
     * `auth_signature`, the hex HMAC-SHA256 of `METHOD\npath\nname=value&…` (parameters sorted by
     * name, values as they are) under the app secret; written sorted by name, each value
     * percent-encoded except RFC 3986's unreserved characters.
     *
     * @param string $method `GET` or `POST`.
     * @param string $path the path as sent (`/apps/42/events`).
     * @param string $body the body's bytes (empty for a GET).
     * @param array<string, string|int> $query the request's own parameters (`['limit' => 10]`),
     *   lowercase names: the server signs every parameter, so they are signed too.
     * @return string the query, without `?`.
     * @throws \InvalidArgumentException a parameter named `auth_…` or `body_md5`, or not lowercase.
     */
    public function signedQuery(string $method, string $path, string $body = '', array $query = []): string
    {
        $parameters = ['auth_key' => $this->appKey, 'auth_timestamp' => (string) intdiv($this->now(), 1000), 'auth_version' => '1.0'];
        if ($body !== '') {
            $parameters['body_md5'] = md5($body);
        }
        foreach ($query as $name => $value) {
            $name = (string) $name;
            if (isset($parameters[$name]) || str_starts_with($name, 'auth_') || $name === 'body_md5' || strtolower($name) !== $name) {
                throw new \InvalidArgumentException("the query parameter {$name} cannot be signed: auth_ names and body_md5 are the signature's, names are lowercase");
            }
            $parameters[$name] = (string) $value;
        }
        ksort($parameters, SORT_STRING);
        $signed = [];
        foreach ($parameters as $name => $value) {
            $signed[] = "{$name}={$value}";
        }
        $parameters['auth_signature'] = hash_hmac('sha256', "{$method}\n{$path}\n" . implode('&', $signed), $this->secret);
        ksort($parameters, SORT_STRING);
        $written = [];
        foreach ($parameters as $name => $value) {
            $written[] = $name . '=' . rawurlencode($value);
        }
        return implode('&', $written);
    }

    /**
     * The body of `POST /apps/{id}/room_events` for one event: `{data, name, room, rule}` in
     * canonical JSON, `data` the event's canonical JSON text and `rule` the declared rule, so the
     * server keeps history by it even before anyone joined (docs/rooms-protocol.md "HTTP API").
     * In a sealed room, `data` is the canonical JSON of `{"ciphertext", "nonce"}` (base64):
     * `sodium_crypto_secretbox` (XSalsa20-Poly1305) of the data's JSON text under the room's key,
     * with a random nonce, as Swift's `RealtimeBackend.roomEventBody` seals it
     * (docs/rooms-protocol.md "Sealed rooms").
     *
     * @param string $room the room.
     * @param string $event the event name.
     * @param mixed $data the event's data, any JSON value (see `CanonicalJson`).
     * @return string the body.
     * @throws RuleError `invalid_pattern` when no declared rule matches the room;
     *   `sealed_not_supported` for a sealed room when PHP lacks the sodium extension.
     * @throws \InvalidArgumentException `$data` is not a JSON value (a NaN, an int no double
     *   holds exactly, see `CanonicalJson`).
     */
    public function roomEventBody(string $room, string $event, mixed $data): string
    {
        return CanonicalJson::encode($this->roomEvent($room, $event, $data));
    }

    /** @return array{data: string, name: string, room: string, rule: array<string, int|bool>} */
    private function roomEvent(string $room, string $event, mixed $data): array
    {
        $declared = $this->ruleFor($room);
        if ($declared === null) {
            throw new RuleError('invalid_pattern', "no rule matches the room {$room}");
        }
        $text = CanonicalJson::encode($data);
        if ($declared['rule']['sealed']) {
            if (!function_exists('sodium_crypto_secretbox')) {
                throw new RuleError('sealed_not_supported', "{$room} is sealed: sealing needs PHP's sodium extension");
            }
            $nonce = random_bytes(SODIUM_CRYPTO_SECRETBOX_NONCEBYTES);
            $sealed = sodium_crypto_secretbox($text, $nonce, (string) $this->roomKey($room));
            $text = CanonicalJson::encode(['ciphertext' => base64_encode($sealed), 'nonce' => base64_encode($nonce)]);
        }
        return ['data' => $text, 'name' => $event, 'room' => $room, 'rule' => $declared['rule']];
    }

    /**
     * Publishes one room event (`POST /apps/{id}/room_events`, body of `roomEventBody`).
     *
     * @param string $room the room.
     * @param string $event the event name (1…200 bytes, none of the room's own event names).
     * @param mixed $data the event's data, any JSON value (at most 10 KiB of JSON text).
     * @return array<string, mixed> the server's answer, `['events' => [['room', 'epoch', 'id']]]`.
     * @throws RuleError no rule matches the room (`invalid_pattern`).
     * @throws ApiError the server refused it (its status) or did not answer (0).
     * @throws \LogicException the backend has no `server` or `appId`.
     * @throws \InvalidArgumentException `$data` is not a JSON value (as `roomEventBody`), before
     *   any request.
     */
    public function publishRoom(string $room, string $event, mixed $data): array
    {
        return $this->api('POST', 'room_events', $this->roomEventBody($room, $event, $data));
    }

    /**
     * Publishes up to 100 room events in one request, all or none
     * (`POST /apps/{id}/batch_room_events`).
     *
     * @param list<array{room: string, event: string, data?: mixed}> $events the events (`data`
     *   absent is null).
     * @return array<string, mixed> the server's answer, `['events' => [['room', 'epoch', 'id'], …]]`.
     * @throws \InvalidArgumentException more than 100 events, or one without a string room and event.
     * @throws RuleError a room no rule matches.
     * @throws ApiError the server refused them or did not answer.
     */
    public function publishRooms(array $events): array
    {
        if (count($events) > 100) {
            throw new \InvalidArgumentException('at most 100 room events a batch');
        }
        $batch = [];
        foreach ($events as $event) {
            if (!is_string($event['room'] ?? null) || !is_string($event['event'] ?? null)) {
                throw new \InvalidArgumentException('each room event is ["room" => string, "event" => string, "data" => value]');
            }
            $batch[] = $this->roomEvent($event['room'], $event['event'], $event['data'] ?? null);
        }
        return $this->api('POST', 'batch_room_events', CanonicalJson::encode(['batch' => $batch]));
    }

    /**
     * Triggers a channel event (Pusher's `POST /apps/{id}/events`).
     *
     * @param string|list<string> $channels one channel, or up to 100.
     * @param string $event the event name.
     * @param mixed $data the data, sent as its canonical JSON text.
     * @return array<string, mixed> the server's answer (`[]`).
     * @throws ApiError the server refused it or did not answer.
     */
    public function trigger(string|array $channels, string $event, mixed $data): array
    {
        $body = is_array($channels)
            ? ['channels' => array_values($channels), 'data' => CanonicalJson::encode($data), 'name' => $event]
            : ['channel' => $channels, 'data' => CanonicalJson::encode($data), 'name' => $event];
        return $this->api('POST', 'events', CanonicalJson::encode($body));
    }

    /**
     * Triggers up to 10 channel events (Pusher's `POST /apps/{id}/batch_events`).
     *
     * @param list<array{channel: string, event: string, data?: mixed}> $events the events.
     * @return array<string, mixed> the server's answer.
     * @throws \InvalidArgumentException more than 10 events, or one without a string channel and event.
     * @throws ApiError the server refused them or did not answer.
     */
    public function triggerBatch(array $events): array
    {
        if (count($events) > 10) {
            throw new \InvalidArgumentException('at most 10 events a batch');
        }
        $batch = [];
        foreach ($events as $event) {
            if (!is_string($event['channel'] ?? null) || !is_string($event['event'] ?? null)) {
                throw new \InvalidArgumentException('each event is ["channel" => string, "event" => string, "data" => value]');
            }
            $batch[] = ['channel' => $event['channel'], 'data' => CanonicalJson::encode($event['data'] ?? null), 'name' => $event['event']];
        }
        return $this->api('POST', 'batch_events', CanonicalJson::encode(['batch' => $batch]));
    }

    /**
     * A page of a room's history (`GET /apps/{id}/rooms/{room}/history`): the newest `$limit`
     * events before id `$before`, oldest first.
     *
     * @param string $room the room (percent-encoded in the path).
     * @param int|null $before an event id: the page ends before it (null: the newest).
     * @param int|null $limit events, 1…100 (null: the server's 50).
     * @return array<string, mixed> the page, `['events' => [['event', 'data', 'meta' => ['id', 'at', 'from']]], 'more' => bool, …]`.
     * @throws ApiError the server refused it (404 `no_history`) or did not answer.
     */
    public function roomHistory(string $room, ?int $before = null, ?int $limit = null): array
    {
        $query = [];
        if ($before !== null) {
            $query['before'] = $before;
        }
        if ($limit !== null) {
            $query['limit'] = $limit;
        }
        return $this->api('GET', 'rooms/' . rawurlencode($room) . '/history', '', $query);
    }

    /**
     * A room's users (`GET /apps/{id}/rooms/{room}/users`).
     *
     * @param string $room the room (percent-encoded in the path).
     * @return array<string, mixed> `['users' => [['id' => …]], 'connections' => n]`.
     * @throws ApiError the server refused it or did not answer.
     */
    public function roomUsers(string $room): array
    {
        return $this->api('GET', 'rooms/' . rawurlencode($room) . '/users', '');
    }

    /**
     * A signed call to the realtime server's HTTP API (10 s timeout), its path signed as sent.
     *
     * @param array<string, string|int> $query
     * @return array<string, mixed> the decoded answer (objects as arrays).
     * @throws ApiError
     */
    private function api(string $method, string $endpoint, string $body, array $query = []): array
    {
        if ($this->server === null || $this->appId === null) {
            throw new \LogicException('the HTTP API needs the Realtime backend\'s server and appId');
        }
        $url = parse_url($this->server);
        if ($url === false || !isset($url['scheme'], $url['host']) || !in_array(strtolower($url['scheme']), ['http', 'https'], true)) {
            throw new \LogicException("not an http(s) server URL: {$this->server}");
        }
        $origin = $url['scheme'] . '://' . (str_contains($url['host'], ':') && $url['host'][0] !== '[' ? "[{$url['host']}]" : $url['host'])
            . (isset($url['port']) ? ":{$url['port']}" : '');
        $path = rtrim($url['path'] ?? '', '/') . '/apps/' . rawurlencode($this->appId) . '/' . $endpoint;
        $target = $origin . $path . '?' . $this->signedQuery($method, $path, $body, $query);
        $context = stream_context_create(['http' => [
            'method' => $method,
            'header' => "Content-Type: application/json\r\nAccept: application/json\r\nConnection: close\r\n",
            'content' => $method === 'POST' ? $body : '',
            'timeout' => 10.0,
            'ignore_errors' => true,
            'follow_location' => 0,
            'protocol_version' => 1.1,
        ]]);
        $failure = null;
        set_error_handler(static function (int $level, string $message) use (&$failure): bool {
            // Without the call and its URL (the signed query): what went wrong, HTML-unescaped.
            $failure = html_entity_decode((string) preg_replace('/^file_get_contents\(.*?\):\s*/s', '', $message));
            return true;
        });
        $timeout = ini_set('default_socket_timeout', '10');
        try {
            $text = file_get_contents($target, false, $context);
            $headers = $http_response_header ?? [];
        } finally {
            if ($timeout !== false) {
                ini_set('default_socket_timeout', $timeout);
            }
            restore_error_handler();
        }
        $status = 0;
        foreach ($headers as $line) {
            if (preg_match('#^HTTP/\S+\s+(\d{3})#', $line, $match) === 1) {
                $status = (int) $match[1];
            }
        }
        if ($text === false || $status === 0) {
            throw new ApiError(0, 'the realtime server did not answer: ' . ($failure ?? 'no HTTP answer'));
        }
        if ($status < 200 || $status > 299) {
            throw new ApiError($status, substr($text, 0, 1000));
        }
        if ($text === '') {
            return [];
        }
        $answer = json_decode($text, true);
        if (!is_array($answer)) {
            throw new ApiError($status, 'an answer that is not a JSON object');
        }
        return $answer;
    }
}
