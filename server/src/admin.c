/* admin.c -- the /__admin routes that read the gateway's state: health and the ledger listing
 * (SPEC §5). Never delayed or faulted: they answer from the store at once. */
#define _POSIX_C_SOURCE 200809L
#include "admin.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "common.h"
#include "render.h"

enum handler_result admin_health(struct gateway *gw, struct request *r)
{
    struct buf b;
    buf_init(&b);
    char started[32];
    fmt_kst(gw->started_unix_us, started);
    buf_addf(&b, "{\"status\":\"ok\",\"pid\":%ld,\"instance\":\"%016llx\",\"started_at\":\"%s\"}",
             (long)getpid(), (unsigned long long)gw->instance_id, started);
    size_t len;
    char *body = buf_steal(&b, &len);
    if (!body) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    request_respond(r, 200, body, len);
    return H_RESPOND;
}

static void admin_entry(struct gateway *g, struct buf *b, const struct payment *p)
{
    buf_adds(b, "{\"payment\":");
    render_payment(b, &g->ledger, g->cfg->mid, p, p->n_cancels, p->status);
    buf_adds(b, ",\"confirm_attempts\":");
    buf_add_i64(b, p->confirm_attempts);
    buf_adds(b, ",\"idempotency_keys\":[");
    for (uint32_t i = 0; i < p->n_idem_keys; i++) {
        if (i)
            buf_addc(b, ',');
        buf_add_json_strz(b, p->idem_keys[i]);
    }
    buf_adds(b, "],\"charges\":");
    buf_add_i64(b, p->charges);
    buf_addc(b, '}');
}

enum handler_result admin_payments(struct gateway *g, struct request *r,
                                        const char *order_id)
{
    struct buf b;
    buf_init(&b);
    buf_adds(&b, "{\"payments\":[");
    pthread_mutex_lock(&g->lock);
    bool first = true;
    int64_t now_us = now_unix_us();
    for (size_t i = 0; i < g->ledger.n_all; i++) {
        struct payment *p = g->ledger.all[i];
        ledger_expire_if_stale(p, now_us, g->cfg->session_ttl_s * 1000000);
        if (order_id && strcmp(p->order_id, order_id) != 0)
            continue;
        if (!first)
            buf_addc(&b, ',');
        first = false;
        admin_entry(g, &b, p);
    }
    pthread_mutex_unlock(&g->lock);
    buf_adds(&b, "]}");
    if (b.oom) {
        buf_fini(&b);
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    size_t len;
    char *body = buf_steal(&b, &len);
    request_respond(r, 200, body, len);
    return H_RESPOND;
}
