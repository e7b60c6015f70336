/* reconcile.c -- the naive and the reference webhook consumer (see reconcile.h). Invariants: the
 * reference runs the side effect at most once per paymentKey and never stores a status a read
 * did not return; a transmission id is marked seen only once its delivery was fully handled. */
#define _POSIX_C_SOURCE 200809L
#include "reconcile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the orders table ------------------------------------------------------------------------ */

void rcn_table_init(rcn_table *t)
{
    memset(t, 0, sizeof *t);
}

void rcn_table_fini(rcn_table *t)
{
    free(t->rows);
    memset(t, 0, sizeof *t);
}

const rcn_order *rcn_by_order_id(const rcn_table *t, const char *order_id)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].order_id, order_id) == 0)
            return &t->rows[i];
    return NULL;
}

const rcn_order *rcn_by_payment_key(const rcn_table *t, const char *payment_key)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].payment_key, payment_key) == 0)
            return &t->rows[i];
    return NULL;
}

/* A new zeroed row, or NULL when out of memory. */
static rcn_order *add_row(rcn_table *t, const char *order_id, const char *payment_key)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        rcn_order *rows = realloc(t->rows, cap * sizeof *rows);
        if (!rows)
            return NULL;
        t->rows = rows;
        t->cap = cap;
    }
    rcn_order *o = &t->rows[t->n++];
    memset(o, 0, sizeof *o);
    snprintf(o->order_id, sizeof o->order_id, "%s", order_id ? order_id : "");
    snprintf(o->payment_key, sizeof o->payment_key, "%s", payment_key ? payment_key : "");
    return o;
}

/* data.<key> of a webhook body as a string, or NULL. Borrowed from `body`. */
static const char *data_str(const json_t *body, const char *key)
{
    return json_string_value(json_object_get(json_object_get(body, "data"), key));
}

/* The body of a PAYMENT_STATUS_CHANGED delivery, or NULL. Caller owns it. */
static json_t *parse_event(const struct rx_request *d)
{
    json_t *body = json_loadb(d->body, d->body_len, 0, NULL);
    const char *type = json_string_value(json_object_get(body, "eventType"));
    if (!type || strcmp(type, "PAYMENT_STATUS_CHANGED") != 0) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* ---- naive ----------------------------------------------------------------------------------- */

int rcn_naive_on_webhook(rcn_table *t, const struct rx_request *d)
{
    json_t *body = parse_event(d);
    const char *order_id = data_str(body, "orderId");
    const char *status = data_str(body, "status");
    if (order_id && status) {
        rcn_order *o = (rcn_order *)rcn_by_order_id(t, order_id);
        if (!o)
            o = add_row(t, order_id, data_str(body, "paymentKey"));
        if (o) {
            /* the last delivery to arrive wins, whatever the order the events happened in */
            snprintf(o->status, sizeof o->status, "%s", status);
            if (strcmp(status, "DONE") == 0)
                o->side_effects++; /* ship the order: once per DONE *delivery* */
        }
    }
    json_decref(body);
    return 200;
}

/* ---- reference ------------------------------------------------------------------------------- */

int rcn_ref_init(rcn_ref *r, const char *base_url, const char *auth_header)
{
    memset(r, 0, sizeof *r);
    rcn_table_init(&r->orders);
    r->base_url = base_url;
    r->auth_header = auth_header;
    r->h = curl_easy_init();
    return r->h ? 0 : -1;
}

void rcn_ref_fini(rcn_ref *r)
{
    rcn_seen_fini(&r->seen);
    rcn_table_fini(&r->orders);
    if (r->h)
        curl_easy_cleanup(r->h);
    memset(r, 0, sizeof *r);
}

bool rcn_seen_has(const rcn_seen *s, const char *id)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->ids[i], id) == 0)
            return true;
    return false;
}

void rcn_seen_add(rcn_seen *s, const char *id)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        char **ids = realloc(s->ids, cap * sizeof *ids);
        if (!ids)
            return;
        s->ids = ids;
        s->cap = cap;
    }
    char *copy = strdup(id);
    if (copy)
        s->ids[s->n++] = copy;
}

void rcn_seen_fini(rcn_seen *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->ids[i]);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

typedef struct body_buf {
    char *p;
    size_t n;
} body_buf;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    body_buf *b = ud;
    size_t add = size * nmemb;
    char *p = realloc(b->p, b->n + add + 1);
    if (!p)
        return 0;
    memcpy(p + b->n, ptr, add);
    b->n += add;
    p[b->n] = '\0';
    b->p = p;
    return add;
}

json_t *rcn_get_payment(CURL *h, const char *url, const char *auth_header)
{
    struct curl_slist *headers = curl_slist_append(NULL, auth_header);
    body_buf b = {NULL, 0};
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    json_t *payment = status == 200 && b.p ? json_loads(b.p, 0, NULL) : NULL;
    free(b.p);
    if (payment && !json_string_value(json_object_get(payment, "status"))) {
        json_decref(payment);
        payment = NULL;
    }
    return payment;
}

/* GET /v1/payments/{paymentKey}: the Payment (caller owns it), or NULL. */
static json_t *read_payment(rcn_ref *r, const char *payment_key)
{
    char url[512];
    /* a paymentKey has no '/', '?', '#', '%' or space (docs/api.md §2.1): no escaping needed */
    snprintf(url, sizeof url, "%s/v1/payments/%s", r->base_url, payment_key);
    r->read_backs++;
    json_t *payment = rcn_get_payment(r->h, url, r->auth_header);
    if (!payment)
        r->read_failures++;
    return payment;
}

bool rcn_approved(const json_t *payment)
{
    const char *st = json_string_value(json_object_get(payment, "status"));
    if (!st)
        return false;
    return strcmp(st, "DONE") == 0 || strcmp(st, "PARTIAL_CANCELED") == 0 ||
           (strcmp(st, "CANCELED") == 0 && json_is_string(json_object_get(payment, "approvedAt")));
}

/* Read `payment_key` and store what the gateway says now. 0, or -1 if the read failed. */
static int refresh(rcn_ref *r, const char *payment_key, bool polled)
{
    json_t *p = read_payment(r, payment_key);
    if (!p)
        return -1;
    rcn_order *o = (rcn_order *)rcn_by_payment_key(&r->orders, payment_key);
    if (!o)
        o = add_row(&r->orders, json_string_value(json_object_get(p, "orderId")), payment_key);
    if (o) {
        snprintf(o->status, sizeof o->status, "%s",
                 json_string_value(json_object_get(p, "status")));
        o->polled = o->polled || polled;
        if (rcn_approved(p) && o->side_effects == 0)
            o->side_effects = 1; /* ship the order: once per payment, however often we hear */
    }
    json_decref(p);
    return 0;
}

int rcn_ref_on_webhook(rcn_ref *r, const struct rx_request *d)
{
    if (d->transmission_id && rcn_seen_has(&r->seen, d->transmission_id)) {
        r->duplicates_ignored++;
        return 200;
    }
    json_t *body = parse_event(d);
    const char *payment_key = data_str(body, "paymentKey");
    int answer = 200;
    if (payment_key && refresh(r, payment_key, false) != 0)
        answer = 500; /* not handled: let the gateway retry it */
    json_decref(body);
    if (answer == 200 && d->transmission_id)
        rcn_seen_add(&r->seen, d->transmission_id);
    return answer;
}

long rcn_ref_reconcile(rcn_ref *r, const rcn_known *orders, size_t n)
{
    long failed = 0;
    for (size_t i = 0; i < n; i++)
        if (!rcn_by_payment_key(&r->orders, orders[i].payment_key) &&
            refresh(r, orders[i].payment_key, true) != 0)
            failed++;
    return failed;
}
