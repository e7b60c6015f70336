/* admit.h -- may this request enter (docs/api.md §2 "Common to every /v1 route",
 * docs/profiles.md §4 "Order of decisions"): the header block's own limits, the admin token,
 * Basic auth with a secret key, the X-Fakegate-* overrides, the throttle and the concurrency
 * cap -- all decided on the headers, before the body is read -- and, once the body is in, its
 * size and the Idempotency-Key. Each check answers a refused request itself (r->resp and
 * r->obs.outcome set) and returns false. Thread: worker. */
#ifndef FAKEGATE_ADMIT_H
#define FAKEGATE_ADMIT_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway.h"
#include "request.h"

/* The header block: 431 above 8 KiB, 400 for two different Content-Length values, a
 * Transfer-Encoding other than chunked, or both Transfer-Encoding and Content-Length; each
 * closes the connection (docs/edge-rules.md §7). */
bool admit_framing(struct request *r);

/* --admin-token: every /__admin route but /__admin/health needs "Authorization: Bearer T";
 * without it 401 UNAUTHORIZED. */
bool admit_admin(struct gateway *g, struct request *r);

/* A /v1 request: Basic auth (401 UNAUTHORIZED_KEY / 400 INCORRECT_BASIC_AUTH_FORMAT), the
 * override headers (400 INVALID_REQUEST naming the header), then the throttle and the cap of
 * the profile state in force now (or the one X-Fakegate-Profile names). An admitted request
 * is counted in flight until observe_complete, and stamped with the profile state, the seed
 * of its plan and the reset generation (r->adm). */
bool admit_gateway(struct gateway *g, struct request *r);

/* 413 INVALID_REQUEST when the body is over --max-body: by its Content-Length (before it is
 * read), or after reading a chunked one (r->body_too_large). Closes the connection. */
bool admit_body_size(struct gateway *g, struct request *r);

/* The Idempotency-Key of a POST: visible ASCII, 1..300 bytes after trimming surrounding
 * spaces, one header, not folded (docs/edge-rules.md §7); 400 INVALID_IDEMPOTENCY_KEY
 * otherwise. Sets r->adm.idem_key (NULL when none was sent, or on a GET). */
bool admit_idempotency_key(struct request *r);

/* Would `key` (a secret key, NUL-terminated) be accepted: one of --secret-key, or with none
 * given any key starting test_sk_ or test_gsk_ (docs/api.md §2). Thread: any. */
bool admit_key_accepted(const struct config *cfg, const char *key);

/* What an Authorization header's Basic credentials hold (admit_basic_key). */
enum basic_auth { BASIC_AUTH_OK, BASIC_AUTH_FORMAT, BASIC_AUTH_OOM };

/* Read the secret key from an Authorization value "Basic base64(secretKey:password)"
 * (docs/api.md §2; the password, usually empty, is ignored). The scheme name is
 * case-insensitive (RFC 9110 §11.1) and whitespace around the credentials is not part of them
 * (RFC 9110 §5.5, §11.4), so "basic", "BASIC", several spaces after the scheme and trailing
 * spaces all pass; anything else after the credentials does not, nor a decoded text without
 * ':' or with a NUL. BASIC_AUTH_OK: *key is the part before the first ':' (caller frees);
 * otherwise *key is NULL (BASIC_AUTH_FORMAT: 400 INCORRECT_BASIC_AUTH_FORMAT). Whether the key
 * is accepted is admit_key_accepted's. Pure; thread: any. */
enum basic_auth admit_basic_key(const char *authorization, char **key);

/* Decode standard base64 (RFC 4648 alphabet, '=' padding optional but only at the end) of
 * `in` (NUL-terminated) into a new NUL-terminated buffer (caller frees). Returns NULL on any
 * invalid character, misplaced padding or impossible length. *out_len gets the byte count. */
char *base64_decode_strict(const char *in, size_t *out_len);

#endif
