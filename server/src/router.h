/* router.h -- method + path → handler, as a table (lwan's url_map), and the request edge's
 * one sequence: framing → route (404/405) → admission → body → handler → the answer leaves
 * (a way-out fault applied once, here). http.c calls the four entry points at a request's
 * four moments, with the gateway it was given (the closure it passes through libmicrohttpd);
 * each returns what http.c must do next (request.h enum handler_result). */
#ifndef FAKEGATE_ROUTER_H
#define FAKEGATE_ROUTER_H

#include <stdbool.h>

#include "request.h"

struct gateway;

/* One row of the route table: a path pattern (literal segments; "*" is one non-empty segment,
 * the path parameter) and a method. */
struct route_match {
    enum route_kind kind;
    enum route_id route;   /* the profile route it is planned under */
    const char *allow;     /* 405: the methods the path takes, as an Allow value (static) */
    const char *param;     /* the "*" segment, in the path given (not NUL-terminated) */
    size_t param_len;
};

enum route_found { ROUTE_FOUND, ROUTE_NOT_FOUND, ROUTE_BAD_METHOD };

/* Look up (method, decoded path; raw: the path as on the wire, for the docs/edge-rules.md §7
 * rule that a percent-encoded '/' or NUL inside a key is 404). ROUTE_FOUND fills kind, route
 * and param; ROUTE_BAD_METHOD fills allow. Pure. */
enum route_found router_match(enum http_method method, const char *path, const char *raw,
                              struct route_match *out);

/* Headers are in (method, path, raw_uri, authorization, content length...): framing, routing,
 * admission and a Content-Length over --max-body are answered at once (H_RESPOND), else
 * H_CONTINUE. Thread: worker. */
enum handler_result router_on_headers(struct gateway *g, struct request *r);
/* The whole body is in r->body: validate and dispatch. H_RESPOND or H_HOLD. Thread: worker. */
enum handler_result router_on_body(struct gateway *g, struct request *r);
/* A held request's deadline (payments_on_deadline). H_RESPOND or H_HOLD. Thread: timer. */
enum handler_result router_on_deadline(struct gateway *g, struct request *r, bool draining);
/* The request's answer is being handed to libmicrohttpd (or lost on the wire): observe_sent.
 * Thread: worker. */
void router_on_send(struct gateway *g, struct request *r);
/* The request's response has ended (or its connection closed): observe_complete.
 * `completed_ok`: libmicrohttpd sent the whole response. Thread: worker. */
void router_on_complete(struct gateway *g, struct request *r, bool completed_ok);

#endif
