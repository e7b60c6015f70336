/* receiver.h -- a webhook receiver for tests and experiments: an HTTP/1.1 server on 127.0.0.1,
 * port 0 (the kernel picks), on a thread of its own, that records every request it gets
 * (arrival time, headers that matter for Toss webhooks, body) and answers each as scripted.
 * It is the receiver end of docs/webhooks.md §6: fakegate --webhook-url points at
 * receiver_url(). Thread-safe: every call may come from any thread. */
#ifndef FAKEGATE_CT_RECEIVER_H
#define FAKEGATE_CT_RECEIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How the receiver answers one request. */
enum rx_action {
    RX_STATUS = 0,   /* answer `status` with an empty body (Content-Length: 0) */
    RX_HANG,         /* read the request, never answer, close only when stopped */
    RX_RESET,        /* read the request, then close with RST (SO_LINGER 0), no bytes */
    RX_REDIRECT,     /* 302 with Location: (same URL), empty body */
    RX_HUGE_BODY     /* 200 with a 1 MiB body */
};

struct rx_answer {
    enum rx_action action;
    int status;      /* RX_STATUS */
};

/* One request as received. Strings are owned by the receiver, valid until receiver_stop. */
struct rx_request {
    int64_t arrived_ns;          /* CLOCK_MONOTONIC */
    char *path;                  /* request target, e.g. "/hook" */
    char *transmission_id;       /* tosspayments-webhook-transmission-id, or NULL */
    char *transmission_time;     /* tosspayments-webhook-transmission-time, or NULL */
    int retried_count;           /* tosspayments-webhook-transmission-retried-count, -1 if none */
    char *content_type;          /* Content-Type, or NULL */
    char *body;                  /* NUL-terminated */
    size_t body_len;
    int answered;                /* the status it was answered with (0: hang, reset) */
};

struct receiver;

/* Start a receiver answering with `script[0]`, `script[1]`, ... for the 1st, 2nd, ... request
 * and the last entry for every later one (n >= 1; the script is copied). NULL on failure
 * (message on stderr). */
struct receiver *receiver_start(const struct rx_answer *script, size_t n);

/* "http://127.0.0.1:PORT/hook" (owned by the receiver). */
const char *receiver_url(const struct receiver *rx);

/* Requests received so far. */
size_t receiver_count(struct receiver *rx);

/* Wait (polling every 5 ms) until at least `n` requests have arrived or `timeout_ms` passed;
 * returns the count then. */
size_t receiver_wait(struct receiver *rx, size_t n, int timeout_ms);

/* A copy of request i (0-based, arrival order) into *out (its strings still owned by the
 * receiver). False if i >= count. */
bool receiver_get(struct receiver *rx, size_t i, struct rx_request *out);

/* Replace the script from the next request on. */
void receiver_script(struct receiver *rx, const struct rx_answer *script, size_t n);

/* Stop (closing hung connections) and free everything. NULL is allowed. */
void receiver_stop(struct receiver *rx);

#endif
