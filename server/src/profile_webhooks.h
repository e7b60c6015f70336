/* profile_webhooks.h -- a profile's "webhooks" section (docs/profiles.md §4): the delay, duplicate
 * and drop applied to each webhook event, validated by profile_webhooks.c for profile.c. Not used
 * outside the profile parser. */
#ifndef FAKEGATE_PROFILE_WEBHOOKS_H
#define FAKEGATE_PROFILE_WEBHOOKS_H

#include <jansson.h>

#include "profile.h"
#include "profile_ctx.h"

/* Parse the "webhooks" object `obj` (`c`'s path is at it) into `w`, which starts zeroed: keys
 * "delay" (a latency distribution, ms), "duplicate" {"p", "after"} and "drop" {"p"}, each
 * optional, with drop.p + duplicate.p <= 1. 0, or -1 with the message in c->err. On failure `w`
 * may hold part of what it owns: webhooks_fini frees it. Thread: the parse's. */
int webhooks_parse(struct pctx *c, json_t *obj, struct webhook_faults *w);

/* Free what `w` owns (the two distributions' mixture parts), not `w` itself; leaves them
 * DIST_NONE. */
void webhooks_fini(struct webhook_faults *w);

#endif
