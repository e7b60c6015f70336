/* profile_webhooks.c -- a profile's "webhooks" section (docs/profiles.md §4) validated into a
 * struct webhook_faults. "delay" and "duplicate.after" are latency distributions parsed by the
 * same code as a route's "latency" (route_parse_latency); drop.p + duplicate.p is kept <= 1,
 * because one draw per event and receiver decides between drop, duplicate and neither. */
#include "profile_webhooks.h"

#include <string.h>

#include "profile_route.h"

static const char *const WEBHOOKS_KEYS[] = {"delay", "duplicate", "drop", NULL};
static const char *const DUPLICATE_KEYS[] = {"p", "after", NULL};
static const char *const DROP_KEYS[] = {"p", NULL};

/* "duplicate": {"p": P, "after": DIST}; `c`'s path is at it. */
static int parse_duplicate(struct pctx *c, json_t *obj, struct webhook_faults *w)
{
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object {\"p\": ..., \"after\": ...}");
    if (pctx_check_keys(c, obj, DUPLICATE_KEYS) != 0 ||
        pctx_get_prob(c, obj, "p", true, &w->duplicate_p) != 0)
        return -1;
    int rc;
    json_t *after = pctx_enter(c, obj, "after", false, &rc);
    if (after == NULL)
        return rc < 0 ? -1 : 0;
    if (route_parse_latency(c, after, &w->duplicate_after) != 0)
        return -1;
    pctx_pop(c);
    return 0;
}

/* "drop": {"p": P}; `c`'s path is at it. */
static int parse_drop(struct pctx *c, json_t *obj, struct webhook_faults *w)
{
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object {\"p\": ...}");
    if (pctx_check_keys(c, obj, DROP_KEYS) != 0 ||
        pctx_get_prob(c, obj, "p", true, &w->drop_p) != 0)
        return -1;
    return 0;
}

int webhooks_parse(struct pctx *c, json_t *obj, struct webhook_faults *w)
{
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object");
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        pctx_push_key(c, key);
        int rc;
        if (strcmp(key, "delay") == 0)
            rc = route_parse_latency(c, v, &w->delay);
        else if (strcmp(key, "duplicate") == 0)
            rc = parse_duplicate(c, v, w);
        else if (strcmp(key, "drop") == 0)
            rc = parse_drop(c, v, w);
        else
            rc = pctx_fail_unknown_key(c, "key", key, WEBHOOKS_KEYS);
        if (rc != 0)
            return -1;
        /* An absent part's p is 0, so the sum can only tip at the second of the two: the message
         * points at the later-written p. %.15g, since %g would show 1.0000001 as 1. */
        double sum = w->drop_p + w->duplicate_p;
        if (strcmp(key, "delay") != 0 && sum > 1 + P_SUM_EPS) {
            pctx_push_key(c, "p");
            return pctx_fail(c, AT_VALUE, true,
                             "drop.p + duplicate.p = %.15g: one draw decides, so they must sum "
                             "to <= 1", sum);
        }
        pctx_pop(c);
    }
    return 0;
}

void webhooks_fini(struct webhook_faults *w)
{
    latency_dist_fini(&w->delay);
    latency_dist_fini(&w->duplicate_after);
}
