/* burst.c -- `make bench`'s burst scenario (bench/run.sh): K keep-alive connections each send
 * one confirm at the same instant, and every answer is timed from its own request's write.
 *
 *   burst --port N --conns K[,K2,...] [--rounds R] [--prefix S] [--timeout-ms MS]
 *
 * Opens max(K...) connections to 127.0.0.1:PORT and sends one warm-up confirm on each (so every
 * connection is accepted and kept alive before timing starts), then R rounds per burst size,
 * the sizes taking turns round by round (127, 128, 129, 127, ...: a load change on the machine
 * hits them alike). A round of size K writes K requests back to back on the first K connections,
 * then reads every answer (epoll) before the next round. Each request is a POST
 * /v1/payments/confirm with a fresh paymentKey, orderId and Idempotency-Key (PREFIX, the round
 * and the connection in them). Prints one JSON line per size: {"conns", "rounds", "requests",
 * "errors", "p50_us", "p99_us", "max_us", "round_p99_us"} (round_p99_us: the 99th percentile
 * over rounds of a round's slowest answer). An answer that is not a complete HTTP 200, a
 * connection closed, or a round longer than MS (default 10 000) counts as an error and ends the
 * run. Exit 0 when every answer was a 200, 1 otherwise, 2 on bad arguments. Talks only to
 * 127.0.0.1. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    int64_t sent_ns;
    char in[8192];
    size_t in_len;
    int done;
};

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t pct(const int64_t *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)n + 0.5);
    return sorted[i >= n ? n - 1 : i > 0 ? i - 1 : 0];
}

/* Write one confirm; 0 or -1. */
static int send_confirm(struct conn *c, const char *prefix, int round, int k)
{
    char body[256], req[1024];
    int bl = snprintf(body, sizeof body,
                      "{\"paymentKey\":\"pk_%s_%d_%d\",\"orderId\":\"o_%s_%d_%d\",\"amount\":15000}",
                      prefix, round, k, prefix, round, k);
    int rl = snprintf(req, sizeof req,
                      "POST /v1/payments/confirm HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Authorization: Basic dGVzdF9za19iZW5jaDo=\r\n"
                      "Content-Type: application/json\r\nIdempotency-Key: ik_%s_%d_%d\r\n"
                      "Content-Length: %d\r\n\r\n%s",
                      prefix, round, k, bl, body);
    c->in_len = 0;
    c->done = 0;
    c->sent_ns = now_ns();
    for (int off = 0; off < rl;) {
        ssize_t w = write(c->fd, req + off, (size_t)(rl - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (int)w;
    }
    return 0;
}

/* 1 when c->in holds a whole answer (status in *status), 0 when more is to come, -1 malformed. */
static int complete(struct conn *c, int *status)
{
    c->in[c->in_len < sizeof c->in ? c->in_len : sizeof c->in - 1] = '\0';
    char *end = strstr(c->in, "\r\n\r\n");
    if (!end)
        return c->in_len >= sizeof c->in - 1 ? -1 : 0;
    if (strncmp(c->in, "HTTP/1.1 ", 9) != 0)
        return -1;
    *status = atoi(c->in + 9);
    long cl = -1;
    for (char *l = strstr(c->in, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n"))
        if (strncasecmp(l + 2, "Content-Length:", 15) == 0)
            cl = strtol(l + 17, NULL, 10);
    if (cl < 0)
        return -1;
    return (size_t)(end + 4 - c->in) + (size_t)cl <= c->in_len ? 1 : 0;
}

int main(int argc, char **argv)
{
    int port = 0, rounds = 100, sizes[8], n_sizes = 0, conns = 0;
    long timeout_ms = 10000;
    const char *prefix = "burst";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--conns")) {
            for (char *t = argv[i + 1]; *t && n_sizes < 8; t += strspn(t, ","))
                sizes[n_sizes++] = (int)strtol(t, &t, 10);
        }
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefix"))
            prefix = argv[i + 1];
        else if (!strcmp(argv[i], "--timeout-ms"))
            timeout_ms = atol(argv[i + 1]);
        else {
            fprintf(stderr, "burst: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    for (int i = 0; i < n_sizes; i++) {
        if (sizes[i] < 1 || sizes[i] > 10000)
            conns = -1;
        else if (conns >= 0 && sizes[i] > conns)
            conns = sizes[i];
    }
    if (port <= 0 || port > 65535 || conns < 1 || rounds < 1 ||
        rounds > 100000 || timeout_ms < 1 || strlen(prefix) > 64) {
        fprintf(stderr, "usage: burst --port N --conns K[,K...] (1-10000, at most 8) [--rounds 1-100000] [--prefix S "
                        "(at most 64 bytes)] [--timeout-ms MS]\n");
        return 2;
    }
    struct conn *cs = calloc((size_t)conns, sizeof *cs);
    int64_t *lat[8], *round_max[8];
    size_t n_lat[8] = {0};
    for (int z = 0; z < n_sizes; z++) {
        lat[z] = malloc(sizeof *lat[z] * (size_t)sizes[z] * (size_t)rounds);
        round_max[z] = malloc(sizeof *round_max[z] * (size_t)rounds);
        if (!lat[z] || !round_max[z])
            cs = NULL;
    }
    int ep = epoll_create1(0);
    if (!cs || ep < 0) {
        fprintf(stderr, "burst: out of memory\n");
        return 1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int k = 0; k < conns; k++) {
        cs[k].fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        if (cs[k].fd < 0 || connect(cs[k].fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            fprintf(stderr, "burst: connect %d: %s\n", k, strerror(errno));
            return 1;
        }
        setsockopt(cs[k].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)k};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[k].fd, &ev);
    }
    int errors = 0;
    /* Round -1 is the warm-up on every connection: not timed. */
    for (int r = -1; r < rounds * n_sizes && errors == 0; r++) {
        int z = r < 0 ? 0 : r % n_sizes, k_n = r < 0 ? conns : sizes[z];
        for (int k = 0; k < k_n; k++)
            if (send_confirm(&cs[k], prefix, r, k) != 0) {
                errors++;
                break;
            }
        int left = k_n;
        int64_t deadline = now_ns() + timeout_ms * 1000000, worst = 0;
        struct epoll_event evs[256];
        while (left > 0 && errors == 0) {
            int64_t wait_ms = (deadline - now_ns()) / 1000000;
            if (wait_ms <= 0) {
                fprintf(stderr, "burst: round %d: %d answers missing after %ld ms\n", r, left,
                        timeout_ms);
                errors += left;
                break;
            }
            int n = epoll_wait(ep, evs, 256, (int)wait_ms);
            if (n < 0 && errno == EINTR)
                continue;
            for (int i = 0; i < n; i++) {
                struct conn *c = &cs[evs[i].data.u32];
                ssize_t got = read(c->fd, c->in + c->in_len, sizeof c->in - 1 - c->in_len);
                if (got <= 0 || c->done) {
                    fprintf(stderr, "burst: round %d: connection %u %s\n", r, evs[i].data.u32,
                            got == 0 ? "closed" : got < 0 ? strerror(errno) : "sent more");
                    errors++;
                    break;
                }
                c->in_len += (size_t)got;
                int status = 0, done = complete(c, &status);
                if (done < 0 || (done && status != 200)) {
                    fprintf(stderr, "burst: round %d: answer %d: %.80s\n", r, status, c->in);
                    errors++;
                    break;
                }
                if (done) {
                    c->done = 1;
                    left--;
                    int64_t us = (now_ns() - c->sent_ns) / 1000;
                    if (r >= 0)
                        lat[z][n_lat[z]++] = us;
                    if (us > worst)
                        worst = us;
                }
            }
        }
        if (r >= 0)
            round_max[z][r / n_sizes] = worst;
    }
    int done_rounds = errors ? 0 : rounds;
    for (int z = 0; z < n_sizes; z++) {
        qsort(lat[z], n_lat[z], sizeof *lat[z], cmp_i64);
        qsort(round_max[z], (size_t)done_rounds, sizeof *round_max[z], cmp_i64);
        printf("{\"conns\":%d,\"rounds\":%d,\"requests\":%zu,\"errors\":%d,\"p50_us\":%lld,"
               "\"p99_us\":%lld,\"max_us\":%lld,\"round_p99_us\":%lld}\n",
               sizes[z], done_rounds, n_lat[z], errors, (long long)pct(lat[z], n_lat[z], 50),
               (long long)pct(lat[z], n_lat[z], 99),
               (long long)(n_lat[z] ? lat[z][n_lat[z] - 1] : 0),
               (long long)pct(round_max[z], (size_t)done_rounds, 99));
        free(lat[z]);
        free(round_max[z]);
    }
    for (int k = 0; k < conns; k++)
        close(cs[k].fd);
    close(ep);
    free(cs);
    return errors ? 1 : 0;
}
