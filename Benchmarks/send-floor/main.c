// send-floor: the physical floor of a fan-out on this machine, for realtime-bench's row "server
// CPU per delivery". A child process opens N loopback TCP connections to this one and drains
// them (as the bench's clients, in a process of their own); this one writes one WebSocket text
// frame of the size a fan-out delivery has to each of them, round after round, with one send(2)
// per socket from one thread, and prints that thread's CPU per send (CLOCK_THREAD_CPUTIME_ID:
// user and system time, the kernel's TCP path included). No event loop, no queue, no parsing:
// what the kernel needs to hand one frame to one socket.
//
//   send-floor [connections] [rounds] [payload-bytes]     (10000, 20, 90 by default)
//
// Bounded: at most 100,000 connections, 1,000 rounds and a 125-byte payload (a frame with
// the short length form); a send the kernel does not take whole is counted and the run fails.
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void fail(const char *what) {
    fprintf(stderr, "send-floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double thread_cpu_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static double wall_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/// The child: connects `connections` sockets to `address`, then reads until `expected` bytes
/// came (exit 0) or nothing came for 10 s (exit 1).
static int drain(struct sockaddr_in address, long connections, long expected) {
    int epoll_fd = epoll_create1(0);
    if (epoll_fd < 0) fail("epoll_create1");
    for (long index = 0; index < connections; index++) {
        int client = socket(AF_INET, SOCK_STREAM, 0);
        if (client < 0) fail("socket");
        if (connect(client, (struct sockaddr *)&address, sizeof address) < 0) fail("connect");
        struct epoll_event event = {.events = EPOLLIN, .data.fd = client};
        if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, client, &event) < 0) fail("epoll_ctl");
    }
    struct epoll_event events[256];
    char buffer[65536];
    long drained = 0;
    while (drained < expected) {
        int ready = epoll_wait(epoll_fd, events, 256, 10000);
        if (ready <= 0) return 1;
        for (int index = 0; index < ready; index++) {
            for (;;) {
                ssize_t got = recv(events[index].data.fd, buffer, sizeof buffer, MSG_DONTWAIT);
                if (got <= 0) break;
                drained += got;
            }
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    long connections = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
    long rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 20;
    long payload = argc > 3 ? strtol(argv[3], NULL, 10) : 90;
    if (connections < 1 || connections > 100000 || rounds < 1 || rounds > 1000 || payload < 1 || payload > 125) {
        fprintf(stderr, "usage: send-floor [connections 1...100000] [rounds 1...1000] [payload-bytes 1...125]\n");
        return 2;
    }
    struct rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    if ((long)limit.rlim_cur < connections + 64) {
        fprintf(stderr, "send-floor: ulimit -n %ld is too low for %ld connections\n", (long)limit.rlim_cur, connections);
        return 1;
    }

    int listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) fail("socket");
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t length = sizeof address;
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0) fail("bind");
    if (listen(listener, 4096) < 0) fail("listen");
    if (getsockname(listener, (struct sockaddr *)&address, &length) < 0) fail("getsockname");

    size_t size = (size_t)payload + 2;
    long expected = (long)size * connections * rounds;
    pid_t child = fork();
    if (child < 0) fail("fork");
    if (child == 0) _exit(drain(address, connections, expected));

    int *senders = calloc((size_t)connections, sizeof *senders);
    if (!senders) fail("calloc");
    for (long index = 0; index < connections; index++) {
        int accepted = accept(listener, NULL, NULL);
        if (accepted < 0) fail("accept");
        int one = 1;
        // As lws sets its sockets: no Nagle delay.
        setsockopt(accepted, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        senders[index] = accepted;
    }

    unsigned char frame[2 + 125];
    frame[0] = 0x81;  // FIN, text
    frame[1] = (unsigned char)payload;
    memset(frame + 2, 'x', (size_t)payload);
    long short_sends = 0;
    double cpu_start = thread_cpu_seconds(), wall_start = wall_seconds();
    for (long round = 0; round < rounds; round++) {
        for (long index = 0; index < connections; index++) {
            ssize_t sent = send(senders[index], frame, size, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (sent != (ssize_t)size) short_sends++;
        }
    }
    double cpu = thread_cpu_seconds() - cpu_start, wall = wall_seconds() - wall_start;
    int status = 1;
    waitpid(child, &status, 0);
    int received = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    long sends = connections * rounds;
    printf("| send(2) of a %zu-byte frame to each of %ld loopback TCP sockets, %ld rounds (%ld sends) | %.2f µs CPU per send | %.1f ms a round | %s |\n",
           size, connections, rounds, sends, cpu * 1e6 / (double)sends, wall * 1e3 / (double)rounds,
           short_sends == 0 && received ? "all received" : "LOST");
    return short_sends == 0 && received ? 0 : 1;
}
