<?php

declare(strict_types=1);

namespace MessageBird\Realtime;

/**
 * A channel authorisation or a user signin refused (Pusher's signatures), with the codes of
 * Swift's `AuthorizationSignerError.code` (Backends/README.md, "Channels"): `invalid_socket_id`,
 * `invalid_channel`, `public_channel`, `member_required`, `member_not_allowed`,
 * `invalid_member`, `master_key_required`, `invalid_user_data`.
 *
 * `$e->code` (and `$e->getCode()`) is the code string.
 */
final class ChannelError extends \InvalidArgumentException
{
    /** @var string the code (see the class). */
    public $code;

    /**
     * @param string $code the code.
     * @param string $message what is wrong.
     */
    public function __construct(string $code, string $message)
    {
        parent::__construct($message);
        $this->code = $code;
    }
}
