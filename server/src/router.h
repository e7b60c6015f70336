/* router.h -- method + path → handler, and the checks every /v1 route shares (SPEC §2:
 * auth, body limits, Idempotency-Key). http.c calls the three entry points at the request's
 * three moments; each returns what http.c must do next (request.h enum handler_result). */
#ifndef FAKEGATE_ROUTER_H
#define FAKEGATE_ROUTER_H

#include <stdbool.h>

#include "payments.h"
#include "request.h"

/* Give the router the gateway it dispatches to (borrowed; outlives the daemon). */
void router_init(struct gateway *g);

/* Headers are in (method, path, raw_uri, authorization, content length...). Routes, answers
 * 404/405, 431, authentication errors, 413 by Content-Length and TE+CL conflicts at once
 * (H_RESPOND), else H_CONTINUE. Thread: worker. */
enum handler_result router_on_headers(struct request *r);

/* The whole body is in r->body. Validates and dispatches. H_RESPOND or H_HOLD. Thread: worker. */
enum handler_result router_on_body(struct request *r);

/* A held request's deadline (see payments_on_deadline). Thread: timer. */
enum handler_result router_on_deadline(struct request *r, bool draining);

/* The request's response has ended (or its connection closed): stop counting it in flight,
 * complete its journal entry and count it in the metrics. `completed_ok`: libmicrohttpd sent
 * the whole response. Thread: worker (the completion callback). */
void router_on_complete(struct request *r, bool completed_ok);

/* Decode standard base64 (RFC 4648 alphabet, '=' padding optional but only at the end) of
 * `in` (NUL-terminated) into a new NUL-terminated buffer (caller frees). Returns NULL on any
 * invalid character, misplaced padding or impossible length. *out_len gets the byte count. */
char *base64_decode_strict(const char *in, size_t *out_len);

#endif
