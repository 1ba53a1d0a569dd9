<?php

declare(strict_types=1);

namespace MessageBird\Realtime\Tests;

/**
 * A `php -S` server on a free loopback port for the tests that need HTTP (the fake API, the
 * sample app): started with an argument list (no shell), stopped by its own process handle.
 */
final class PhpServer
{
    /** @var resource */
    private $process;
    public readonly int $port;
    public readonly string $log;

    /**
     * @param string $router the router script.
     * @param array<string, string> $environment variables added to the server's environment.
     */
    public function __construct(string $router, array $environment = [])
    {
        $probe = stream_socket_server('tcp://127.0.0.1:0');
        if ($probe === false) {
            throw new \RuntimeException('no free port');
        }
        $this->port = (int) substr(strrchr((string) stream_socket_get_name($probe, false), ':'), 1);
        fclose($probe);
        $this->log = (string) tempnam(sys_get_temp_dir(), 'php-server-log-');
        $process = proc_open([PHP_BINARY, '-S', "127.0.0.1:{$this->port}", $router],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $this->log, 'a'], 2 => ['file', $this->log, 'a']],
            $pipes, null, array_merge(getenv(), $environment));
        if (!is_resource($process)) {
            throw new \RuntimeException('php -S did not start');
        }
        $this->process = $process;
        $deadline = microtime(true) + 5;
        while (microtime(true) < $deadline) {
            $socket = @fsockopen('127.0.0.1', $this->port, $errno, $error, 0.2);
            if ($socket !== false) {
                fclose($socket);
                return;
            }
            usleep(50_000);
        }
        $this->stop();
        throw new \RuntimeException("php -S did not listen on {$this->port}: " . file_get_contents($this->log));
    }

    /** The server's base URL. */
    public function url(): string
    {
        return "http://127.0.0.1:{$this->port}";
    }

    /**
     * One request to the server.
     *
     * @param array<string, string> $headers
     * @return array{status: int, body: string}
     */
    public function request(string $method, string $path, string $body = '', array $headers = []): array
    {
        $lines = '';
        foreach (['Content-Type' => 'application/json'] + $headers as $name => $value) {
            $lines .= "{$name}: {$value}\r\n";
        }
        $context = stream_context_create(['http' => ['method' => $method, 'header' => $lines, 'content' => $body,
            'ignore_errors' => true, 'timeout' => 5]]);
        $text = file_get_contents($this->url() . $path, false, $context);
        $status = 0;
        foreach ($http_response_header ?? [] as $line) {
            if (preg_match('#^HTTP/\S+\s+(\d{3})#', $line, $match) === 1) {
                $status = (int) $match[1];
            }
        }
        return ['status' => $status, 'body' => (string) $text];
    }

    /** Stops the server (its own process only) and removes its log. */
    public function stop(): void
    {
        if (is_resource($this->process)) {
            proc_terminate($this->process);
            proc_close($this->process);
        }
        @unlink($this->log);
    }
}
