#ifndef CLIBEV_SHIM_H
#define CLIBEV_SHIM_H

// libev 4 (Debian libev-dev): the epoll loop the WebSocket module hands to libwebsockets as a
// foreign loop (LWS_SERVER_OPTION_LIBEV), so a service pass costs what is active, not what is
// open. The functions below wrap libev's macros, which Swift cannot import.
#include <stdlib.h>
#include <ev.h>

/// A loop on epoll (EVBACKEND_EPOLL), or NULL when the kernel has none.
static inline struct ev_loop *cev_loop_new_epoll(void) {
    return ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
}

/// Runs the loop until cev_break, or until no watcher is active. Returns ev_run's result.
static inline int cev_run(struct ev_loop *loop) {
    return ev_run(loop, 0);
}

/// Makes ev_run return after the current iteration (EVBREAK_ALL).
static inline void cev_break(struct ev_loop *loop) {
    ev_break(loop, EVBREAK_ALL);
}

/// Called at the end of each pass: once the callbacks of an iteration ran, before the loop
/// blocks again.
typedef void (*cev_pass_end_callback)(void *context);

/// An ev_prepare watcher with the callback to run at the end of each pass. A prepare watcher,
/// not a check watcher: check watchers are invoked with the next iteration's events, so work
/// queued by this iteration's callbacks would wait for the next wake-up.
struct cev_pass_end {
    ev_prepare watcher;
    cev_pass_end_callback callback;
    void *context;
};

static void cev_pass_end_trampoline(struct ev_loop *loop, ev_prepare *watcher, int revents) {
    (void)loop;
    (void)revents;
    struct cev_pass_end *end = (struct cev_pass_end *)watcher;
    end->callback(end->context);
}

/// Starts a prepare watcher that calls `callback(context)` before the loop blocks, every
/// iteration; NULL when out of memory. Stop and free it with cev_pass_end_stop.
static inline struct cev_pass_end *cev_pass_end_start(struct ev_loop *loop, cev_pass_end_callback callback, void *context) {
    struct cev_pass_end *end = (struct cev_pass_end *)calloc(1, sizeof(struct cev_pass_end));
    if (!end) return NULL;
    end->callback = callback;
    end->context = context;
    ev_prepare_init(&end->watcher, cev_pass_end_trampoline);
    ev_prepare_start(loop, &end->watcher);
    return end;
}

static inline void cev_pass_end_stop(struct ev_loop *loop, struct cev_pass_end *end) {
    ev_prepare_stop(loop, &end->watcher);
    free(end);
}

static inline void cev_loop_destroy(struct ev_loop *loop) {
    ev_loop_destroy(loop);
}

#endif
