/* cli_http.h -- the small blocking HTTP/1.1 client of the subcommands (`fakegate probe`,
 * `fakegate report`): one GET on a fresh connection with "Connection: close", the whole exchange
 * bounded by one deadline. Plain sockets, so the server binary links no HTTP client library. */
#ifndef FAKEGATE_CLI_HTTP_H
#define FAKEGATE_CLI_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* Largest response (header block and body) cli_http_get reads, in bytes. */
#define CLI_HTTP_MAX_BYTES (64u * 1024 * 1024)

struct cli_http_response {
    int status;      /* the status code, 100 .. 599 */
    char *body;      /* the body, de-chunked if it was chunked, NUL-terminated; owned */
    size_t body_len; /* bytes in body, not counting the NUL */
};

/* GET `path` from `host` (a name or an address; IPv6 without brackets) on TCP `port` (1 ..
 * 65535), with the extra header lines `headers` ("Name: value", without CRLF; NULL-terminated,
 * may be NULL; the whole request at most 4 KiB), giving up `timeout_ms` milliseconds (> 0)
 * after the call began. Every address the host resolves to
 * is tried in turn. Returns 0 with *r filled when a whole response arrived (caller must
 * cli_http_response_fini it), or -1 with *r zeroed and a short reason in err ("connection
 * refused", "timed out after 2.0 s", "not an HTTP response", ...). Thread: any; blocking. */
int cli_http_get(const char *host, unsigned port, const char *path,
                 const char *const *headers, int64_t timeout_ms, struct cli_http_response *r,
                 char err[ERR_LEN]);

/* Free what *r owns and zero it. */
void cli_http_response_fini(struct cli_http_response *r);

#endif
