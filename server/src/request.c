/* request.c -- request lifetime helpers (see request.h). */
#define _POSIX_C_SOURCE 200809L
#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "render.h"
#include "throttle.h"
#include "toss_errors.h"

struct request *request_new(void)
{
    struct request *r = calloc(1, sizeof *r);
    if (r) {
        buf_init(&r->body);
        r->adm.ovr_latency_ms = -1;
    }
    return r;
}

void request_free(struct request *r)
{
    if (!r)
        return;
    free(r->raw_uri);
    free(r->path);
    free(r->query);
    free(r->authorization);
    free(r->idem_key_raw);
    free(r->test_code);
    free(r->ovr_profile);
    free(r->ovr_tenant);
    free(r->ovr_fault);
    free(r->ovr_latency);
    profile_free(r->adm.ovr_fault_profile);
    free(r->cancel_reason);
    free(r->refund_bank);
    free(r->refund_account);
    free(r->refund_holder);
    ledger_va_free(r->va);
    free(r->order_name);
    buf_fini(&r->body);
    free(r->path_param);
    free(r->adm.secret_key);
    free(r->adm.idem_key);
    free(r->payment_key);
    free(r->order_id);
    free(r->resp.body);
    free(r);
}

void request_respond(struct request *r, int status, char *body, size_t len)
{
    free(r->resp.body);
    r->resp.status = status;
    r->resp.body = body;
    r->resp.body_len = len;
    r->resp.content_type = NULL;
    r->resp.code = NULL;
    r->resp.retry_after[0] = '\0';
    r->resp.retry_after_s = 0;
    r->resp.retry_after_until_ns = 0;
    r->resp.internal = false;
    r->phase = PH_RESPOND;
}

void request_reject(struct request *r, int status, const char *code, const char *message,
                    enum body_kind body, const struct retry_after *ra, uint32_t auto_s,
                    double wait_s)
{
    static const char *const reasons[] = {[429] = "Too Many Requests",
                                          [500] = "Internal Server Error",
                                          [502] = "Bad Gateway",
                                          [503] = "Service Temporarily Unavailable",
                                          [504] = "Gateway Time-out"};
    if (body == BODY_JSON) {
        request_error(r, code, message);
        r->resp.status = status;
    } else if (body == BODY_HTML) {
        const char *reason = status < 600 && reasons[status] ? reasons[status] : "Error";
        struct buf b;
        buf_init(&b);
        buf_addf(&b,
                 "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n"
                 "<center><h1>%d %s</h1></center>\r\n<hr><center>nginx</center>\r\n"
                 "</body>\r\n</html>\r\n",
                 status, reason, status, reason);
        size_t len;
        char *text = buf_steal(&b, &len);
        request_respond(r, status, text, len);
        r->resp.content_type = "text/html";
        r->resp.code = code;
    } else {
        request_respond(r, status, strdup(""), 0);
        r->resp.content_type = "";
        r->resp.code = code;
    }
    int64_t now_us = now_unix_us();
    if (ra && retry_after_format_at(ra, auto_s, wait_s, now_us, r->resp.retry_after,
                                    sizeof r->resp.retry_after)) {
        r->resp.retry_after_s = retry_after_told_s(ra, auto_s);
        if (ra->format == RA_HTTP_DATE)
            r->resp.retry_after_until_ns =
                now_mono_ns() + (retry_after_date_s(ra, wait_s, now_us) * 1000000 - now_us) * 1000;
    }
}

void request_error(struct request *r, const char *code, const char *message)
{
    const struct toss_error *e = toss_error_find(code);
    int status = e ? e->status : 500;
    if (!message)
        message = e ? (r->lang_en ? e->en : e->ko) : code;
    struct buf b;
    buf_init(&b);
    render_error(&b, code, message);
    size_t len;
    char *body = buf_steal(&b, &len);
    request_respond(r, status, body, len);
    r->resp.code = e ? e->code : code;
}

void request_internal(struct request *r, const char *code)
{
    request_error(r, code, NULL);
    r->resp.internal = true;
}

char *request_query(const struct request *r, const char *name)
{
    const char *query = r->query;
    size_t nl = strlen(name);
    for (const char *q = query; q && *q;) {
        const char *end = strchr(q, '&');
        size_t len = end ? (size_t)(end - q) : strlen(q);
        if (len > nl && strncmp(q, name, nl) == 0 && q[nl] == '=') {
            char *out = malloc(len - nl);
            if (!out)
                return NULL;
            size_t o = 0;
            for (size_t i = nl + 1; i < len; i++) {
                if (q[i] == '%' && i + 2 < len && hex_digit(q[i + 1]) >= 0 &&
                    hex_digit(q[i + 2]) >= 0 && (q[i + 1] != '0' || q[i + 2] != '0')) {
                    out[o++] = (char)(hex_digit(q[i + 1]) * 16 + hex_digit(q[i + 2]));
                    i += 2;
                } else {
                    out[o++] = q[i] == '+' ? ' ' : q[i];
                }
            }
            out[o] = '\0';
            return out;
        }
        q = end ? end + 1 : NULL;
    }
    return NULL;
}

