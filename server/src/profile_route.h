/* profile_route.h -- one route's settings in a profile (docs/profiles.md §4): its latency
 * distributions, faults, throttle and concurrency cap, validated by profile_route.c for profile.c;
 * also the latency distribution parser other sections (webhooks) share. Not used outside the
 * profile parser. */
#ifndef FAKEGATE_PROFILE_ROUTE_H
#define FAKEGATE_PROFILE_ROUTE_H

#include <jansson.h>

#include "profile.h"
#include "profile_ctx.h"

/* Parse the route object `obj` (`c`'s path is at it) into `rp`, which starts zeroed: 0, or -1
 * with the message in c->err. On failure `rp` may hold part of what it owns: route_fini frees
 * it. Thread: the parse's. */
int route_parse(struct pctx *c, json_t *obj, struct route_profile *rp);

/* Parse the latency distribution object `obj` (`c`'s path is at it: a route's "latency", or
 * any other key that takes a DIST, docs/profiles.md §4) into `out`, which starts as DIST_NONE:
 * times in ms, mixtures one level deep with their weights normalised to sum 1. 0, or -1 with
 * the message in c->err; on failure `out` may hold mixture parts: latency_dist_fini frees them.
 * Thread: the parse's. */
int route_parse_latency(struct pctx *c, json_t *obj, struct latency_dist *out);

/* Free what `rp` owns (faults, codes, Retry-After strings, mixtures), not `rp` itself. */
void route_fini(struct route_profile *rp);

#endif
