/* request.c -- request lifetime helpers (see request.h). */
#include "request.h"

#include <stdlib.h>

#include "render.h"
#include "toss_errors.h"

struct request *request_new(void)
{
    struct request *r = calloc(1, sizeof *r);
    if (r)
        buf_init(&r->body);
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
    buf_fini(&r->body);
    free(r->path_param);
    free(r->secret_key);
    free(r->idem_key);
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
    r->phase = PH_RESPOND;
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
}
