<?php

// The tests load the library with its Composer-less autoloader, as an app without Composer would.

declare(strict_types=1);

require __DIR__ . '/../autoload.php';
require __DIR__ . '/PhpServer.php';
