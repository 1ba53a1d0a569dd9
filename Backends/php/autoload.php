<?php

/**
 * The library's autoloader for use without Composer: `require 'path/to/Backends/php/autoload.php';`
 * maps `MessageBird\Realtime\X` to `src/X.php` (PSR-4, as composer.json declares).
 */

declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    $prefix = 'MessageBird\\Realtime\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
