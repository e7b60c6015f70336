/* fuzz_webhook_url.c -- receiver URLs (webhook_url_check, webhook_journal.c; docs/webhooks.md
 * §6.2): --webhook-url and PUT /__admin/webhooks {"urls": [...]}; each input, cut at its first
 * NUL, is a URL. The parsing is libcurl's (curl_url); the rules on top are fakegate's. Asserts,
 * beyond no crash, no undefined behaviour and no leak (libcurl's allocations included):
 *   - an accepted URL is at most 2048 bytes and starts "http://" (the scheme in any case)
 *     followed by a host, with no user name, password or fragment;
 *   - a refused one leaves a message; a URL over 2048 bytes is always refused. */
#define _DEFAULT_SOURCE
#include <stdbool.h>
#include <strings.h>

#include "fuzz.h"
#include "webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = fuzz_cstr(data, size);
    char err[ERR_LEN] = "";
    int rc = webhook_url_check(url, err);
    size_t n = strlen(url);
    if (rc == 0) {
        FUZZ_CHECK(n <= 2048, "an accepted URL is at most 2048 bytes");
        FUZZ_CHECK(strncasecmp(url, "http://", 7) == 0 && url[7] != '/' && url[7] != '\0',
                   "an accepted URL is http://, then the host");
        const char *auth_end = url + 7 + strcspn(url + 7, "/?#");
        FUZZ_CHECK(!memchr(url + 7, '@', (size_t)(auth_end - (url + 7))),
                   "an accepted URL has no user name or password");
        FUZZ_CHECK(!strchr(url, '#'), "an accepted URL has no fragment");
    } else {
        FUZZ_CHECK(rc == -1 && err[0] != '\0', "a refusal says why");
    }
    if (n > 2048)
        FUZZ_CHECK(rc == -1, "a URL over 2048 bytes is refused");
    free(url);
    return 0;
}
