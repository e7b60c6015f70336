/* deposit.c -- the reference virtual-account webhook handler (see deposit.h). Invariants: a
 * status is stored only from a read; a transmission id is marked seen only once its delivery
 * was fully handled; a DEPOSIT_CALLBACK is trusted only by its secret. */
#define _POSIX_C_SOURCE 200809L
#include "deposit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "reconcile.h"

int dep_init(dep_handler *d, const char *base_url, const char *auth_header)
{
    memset(d, 0, sizeof *d);
    d->base_url = base_url;
    d->auth_header = auth_header;
    d->h = curl_easy_init();
    return d->h ? 0 : -1;
}

void dep_fini(dep_handler *d)
{
    rcn_seen_fini(&d->seen);
    free(d->orders);
    if (d->h)
        curl_easy_cleanup(d->h);
    memset(d, 0, sizeof *d);
}

static dep_order *find(const dep_handler *d, const char *order_id)
{
    for (size_t i = 0; order_id && i < d->n; i++)
        if (strcmp(d->orders[i].order_id, order_id) == 0)
            return &d->orders[i];
    return NULL;
}

const dep_order *dep_order_of(const dep_handler *d, const char *order_id)
{
    return find(d, order_id);
}

static bool copy(char *dst, size_t cap, const char *src)
{
    if (!src || strlen(src) >= cap)
        return false;
    memcpy(dst, src, strlen(src) + 1);
    return true;
}

int dep_book_add(dep_handler *d, const char *payment_json)
{
    json_t *p = json_loads(payment_json, 0, NULL);
    if (!p)
        return -1;
    dep_order o = {.amount = json_integer_value(json_object_get(p, "totalAmount"))};
    bool ok = copy(o.order_id, sizeof o.order_id, json_string_value(json_object_get(p, "orderId"))) &&
              copy(o.payment_key, sizeof o.payment_key,
                   json_string_value(json_object_get(p, "paymentKey"))) &&
              copy(o.secret, sizeof o.secret, json_string_value(json_object_get(p, "secret"))) &&
              copy(o.status, sizeof o.status, json_string_value(json_object_get(p, "status")));
    json_decref(p);
    if (!ok || find(d, o.order_id))
        return -1;
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 32;
        dep_order *n = realloc(d->orders, cap * sizeof *n);
        if (!n)
            return -1;
        d->orders = n;
        d->cap = cap;
    }
    d->orders[d->n++] = o;
    return 0;
}

/* Read the order back and apply what the gateway says now. 0, or -1 if the read failed. */
static int refresh(dep_handler *d, dep_order *o, bool polled)
{
    char url[512];
    /* an orderId is [A-Za-z0-9_-] (docs/api.md §2.1): no escaping needed */
    snprintf(url, sizeof url, "%s/v1/payments/orders/%s", d->base_url, o->order_id);
    d->read_backs++;
    json_t *p = rcn_get_payment(d->h, url, d->auth_header);
    if (!p) {
        d->read_failures++;
        return -1;
    }
    const char *st = json_string_value(json_object_get(p, "status"));
    snprintf(o->status, sizeof o->status, "%s", st);
    bool done = strcmp(st, "DONE") == 0;
    if (done && !o->shipped) {
        o->shipped = true; /* ship the order: the money is in */
        o->shipments++;
    } else if (!done && o->shipped && strcmp(st, "WAITING_FOR_DEPOSIT") == 0) {
        o->shipped = false; /* a deposit error: the money is not in after all, hold it */
        o->reversals++;
    } else if (!done && o->shipped) {
        o->shipped = false; /* canceled after the deposit: refunded, the order is closed */
    }
    o->polled = o->polled || polled;
    json_decref(p);
    return 0;
}

int dep_on_webhook(dep_handler *d, const struct rx_request *q)
{
    if (q->transmission_id && rcn_seen_has(&d->seen, q->transmission_id)) {
        d->duplicates_ignored++;
        return 200;
    }
    json_t *body = json_loads(q->body, 0, NULL);
    int answer = 200;
    dep_order *o = NULL;
    if (body && !json_object_get(body, "eventType")) {
        /* DEPOSIT_CALLBACK: the secret is the only proof it comes from the gateway. */
        o = find(d, json_string_value(json_object_get(body, "orderId")));
        const char *secret = json_string_value(json_object_get(body, "secret"));
        if (!o || !secret || strcmp(secret, o->secret) != 0) {
            d->forged++;
            o = NULL;
        } else {
            d->callbacks++;
        }
    } else if (body) {
        /* PAYMENT_STATUS_CHANGED: only an order of the book concerns this handler. */
        o = find(d, json_string_value(json_object_get(json_object_get(body, "data"), "orderId")));
        if (o)
            d->status_changes++;
    }
    if (o && refresh(d, o, false) != 0)
        answer = 500; /* not handled: let the gateway retry it */
    json_decref(body);
    if (answer == 200 && q->transmission_id)
        rcn_seen_add(&d->seen, q->transmission_id);
    return answer;
}

long dep_reconcile(dep_handler *d)
{
    long failed = 0;
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->orders[i].status, "WAITING_FOR_DEPOSIT") == 0 &&
            refresh(d, &d->orders[i], true) != 0)
            failed++;
    return failed;
}
