/* http.h -- the HTTP server: libmicrohttpd daemon, handler phases, suspend/resume through the
 * scheduler, orderly stop. The only module that knows libmicrohttpd. */
#ifndef FAKEGATE_HTTP_H
#define FAKEGATE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "sched.h"

struct http_server;
struct gateway;

/* Start listening on cfg->host:cfg->port (0 = a free port) with cfg->threads libmicrohttpd polling
 * threads (epoll) and the timer thread `s` (already started; borrowed), handing every request to
 * the router with `gw` (borrowed; opaque here: passed through libmicrohttpd's closure arguments).
 * `trace_salt` makes trace ids differ between processes. Returns the server, or NULL with a message
 * in err (e.g. "127.0.0.1:8080: Address already in use"). Thread: main. */
struct http_server *http_start(const struct config *cfg, struct sched *s, struct gateway *gw,
                               uint64_t trace_salt, char *err, size_t err_len);

/* The port actually bound (useful with port 0). */
unsigned http_port(const struct http_server *h);

/* The connection limit in force (libmicrohttpd's MHD_OPTION_CONNECTION_LIMIT, docs/cli.md §1
 * "Start-up"): --max-connections, or, without it or when it is larger, what the open-files
 * limit allows (http_connection_limit_fd). Past it libmicrohttpd takes no new connection until
 * one closes; they wait in the listen backlog. */
unsigned http_connection_limit(const struct http_server *h);
/* What the open-files limit allows: RLIMIT_NOFILE (raised to its hard limit) minus 64. */
unsigned http_connection_limit_fd(const struct http_server *h);

/* The connection limit for an open-files limit of `nofile` descriptors (at most 1 048 576) and
 * --max-connections `max_connections` (0: none): nofile minus 64 kept for the listen socket,
 * epoll, pipes, files and logs (half of it below 129), or max_connections when smaller.
 * Thread: any; pure. */
unsigned http_connection_limit_for(unsigned nofile, unsigned max_connections);

/* Stop: refuse new connections, drain the scheduler (queued requests answered 503, processing
 * ones committed), wait up to `grace_ms` for connections to finish, then stop the daemon and
 * free `h`. Thread: main. */
void http_stop(struct http_server *h, int64_t grace_ms);

/* One end of a new socketpair whose other end is already closed (a reader gets end-of-file),
 * numbered so that fd % n == w: libmicrohttpd 0.9.75's MHD_add_connection gives a socket to
 * worker fd % n, and the poke tick (http.c) uses this to wake worker w of n. Returns the
 * descriptor (close-on-exec; the caller owns it), or -1 if w >= n, n == 0, the socketpair
 * failed or no descriptor with that remainder was free in four tries. Thread: any. */
int http_closed_socket_for(unsigned w, unsigned n);

#endif
