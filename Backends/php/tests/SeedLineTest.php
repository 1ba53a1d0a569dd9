<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

use MessageBird\Realtime\Realtime;
use PHPUnit\Framework\TestCase;

/** The order the seed's line looks up (`find_order($p['id'])?->user_id`). */
final class Order
{
    public function __construct(public readonly string $user_id)
    {
    }
}

/** The app's own lookup in the seed's line: order 1042 is ann's, there is no order 7. */
function find_order(string $id): ?Order
{
    return ['1042' => new Order('ann'), '13' => new Order('bob')][$id] ?? null;
}

/** The rooms seed's PHP line (seeds/realtime-rooms.txt, "Rooms"), run as written. */
final class SeedLineTest extends TestCase
{
    public function testTheSeedsLineRunsAsWritten(): void
    {
        $realtime = new Realtime(appKey: 'app-key', appSecret: 'app-secret', clock: fn (): int => 1764579200123);

        $realtime->room( 'order:{id}', fn ( $user, array $p ) => find_order( $p['id'] )?->user_id === $user, [ 'history' => 20 ] );

        $answer = $realtime->authorizeRooms(['order:1042', 'order:13', 'order:7'], 'ann');
        $this->assertArrayHasKey('token', $answer['rooms']['order:1042']);
        $this->assertSame(['error' => 'forbidden'], $answer['rooms']['order:13']);
        $this->assertSame(['error' => 'forbidden'], $answer['rooms']['order:7']);
        $claims = json_decode((string) base64_decode(strtr(explode('.', $answer['rooms']['order:1042']['token'])[1], '-_', '+/')), true);
        $this->assertSame(20, $claims['rule']['history']);
        $this->assertSame('ann', $claims['sub']);
        $this->assertSame(['error' => 'forbidden'], $realtime->authorizeRooms(['order:1042'], null)['rooms']['order:1042']);
    }
}
