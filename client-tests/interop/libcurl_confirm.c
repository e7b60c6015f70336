/* libcurl_confirm.c -- one confirm sent with libcurl, for the interop suite
 * (client-tests/interop/node/libcurl.mjs drives it against fakegate; docs/interop.md).
 *
 *   libcurl-confirm [--warm] [--retry] URL AUTHORIZATION IDEMPOTENCY_KEY BODY TIMEOUT_MS
 *
 * libcurl has no retry of its own: without --retry it performs once, as an application that
 * calls curl_easy_perform does. --warm first reads /healthz on the same handle, so the
 * confirm goes out on a reused keep-alive connection, as it does in a long-lived client.
 * --retry is a correct retry loop: the same handle and headers (so the same Idempotency-Key),
 * at most 5 attempts, only timeouts, transport errors, 409, 429 and 5xx retried, Retry-After
 * (CURLINFO_RETRY_AFTER) waited plus up to 500 ms of jitter, full jitter otherwise.
 * Prints the final outcome on stdout: the HTTP status, or "curl-N" for a libcurl error N.
 * Exit 0 when it printed an outcome, 2 on a usage error.
 */
#define _DEFAULT_SOURCE /* drand48, nanosleep */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ATTEMPTS 5

static size_t discard(char *data, size_t size, size_t n, void *user)
{
	(void)data;
	(void)user;
	return size * n;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0) {
	}
}

/* Uniform in [0, bound_ms). */
static long jitter_ms(long bound_ms)
{
	return bound_ms > 0 ? (long)(drand48() * (double)bound_ms) : 0;
}

/* What a correct client does with an outcome: 1 retry, 0 stop. */
static int retryable(CURLcode rc, long status)
{
	if (rc != CURLE_OK)
		return 1;
	return status == 409 || status == 429 || status >= 500;
}

int main(int argc, char **argv)
{
	int warm = 0, retry = 0, i = 1;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--warm") == 0)
			warm = 1;
		else if (strcmp(argv[i], "--retry") == 0)
			retry = 1;
		else
			break;
	}
	if (argc - i != 5) {
		fprintf(stderr, "usage: libcurl-confirm [--warm] [--retry] URL AUTHORIZATION IDEMPOTENCY_KEY BODY TIMEOUT_MS\n");
		return 2;
	}
	const char *url = argv[i], *auth = argv[i + 1], *key = argv[i + 2], *body = argv[i + 3];
	long timeout_ms = strtol(argv[i + 4], NULL, 10);
	srand48((long)time(NULL) ^ (long)getpid());

	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURL *h = curl_easy_init();
	if (!h) {
		fprintf(stderr, "libcurl-confirm: curl_easy_init failed\n");
		return 2;
	}
	char health[1024], auth_h[512], key_h[512];
	snprintf(auth_h, sizeof auth_h, "Authorization: %s", auth);
	snprintf(key_h, sizeof key_h, "Idempotency-Key: %s", key);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (warm) {
		const char *v1 = strstr(url, "/v1/");
		snprintf(health, sizeof health, "%.*s/healthz", v1 ? (int)(v1 - url) : (int)strlen(url), url);
		curl_easy_setopt(h, CURLOPT_URL, health);
		curl_easy_perform(h);
	}
	struct curl_slist *hdrs = NULL;
	hdrs = curl_slist_append(hdrs, auth_h);
	hdrs = curl_slist_append(hdrs, key_h);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);

	CURLcode rc = CURLE_OK;
	long status = 0;
	for (int attempt = 1; attempt <= (retry ? MAX_ATTEMPTS : 1); attempt++) {
		status = 0;
		rc = curl_easy_perform(h);
		if (rc == CURLE_OK)
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (!retry || !retryable(rc, status) || attempt == MAX_ATTEMPTS)
			break;
		curl_off_t after_s = 0;
		if (rc == CURLE_OK)
			curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &after_s);
		long cap_ms = 500L << attempt;
		sleep_ms(after_s > 0 ? (long)after_s * 1000 + jitter_ms(500) : jitter_ms(cap_ms < 4000 ? cap_ms : 4000));
	}
	if (rc == CURLE_OK)
		printf("%ld\n", status);
	else
		printf("curl-%d\n", (int)rc);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	curl_global_cleanup();
	return 0;
}
