/* fuzz_statefile.c -- the state file's replay (statefile_replay, statefile_replay.c;
 * docs/state-file.md §10.3): each input is the contents of a --state-file, replayed into a
 * fresh gateway. Asserts, beyond no crash, no undefined behaviour and no leak:
 *   - a refusal says where: its message starts with the file's path and a line number;
 *   - after an accepted replay the ledger keeps its invariants: charges <= 1, the balance is
 *     the amount less the cancels, no cancel of more than was left;
 *   - replay is idempotent: the file as the replay left it (its incomplete last line dropped,
 *     the releases of unanswered records appended) replays again into a fresh gateway to the
 *     same payments and records, with nothing left to release and nothing torn. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "gateway.h"
#include "profile.h"
#include "statefile.h"

static const struct config cfg = {.idempotency_ttl_s = 60, .session_ttl_s = 600,
                                  .journal_size = 4, .report_max_identities = 16,
                                  .max_tenants = 8};

/* Replay the file at `path` into a fresh gateway: 0 with *st, or -1 with err. The ledger's
 * invariants are checked on success. */
static int replay(const char *path, struct statefile_stats *st, char err[ERR_LEN])
{
    static const char text[] = "{\"name\":\"fuzz\",\"routes\":{}}";
    struct profile *p = NULL;
    if (profile_parse(text, sizeof text - 1, "fuzz", NULL, NULL, &p, err) != 0)
        abort();
    struct gateway g;
    if (gateway_init(&g, &cfg, NULL, NULL, p, 1, 2) != 0)
        abort();
    struct statefile *sf = statefile_open(path, STATEFILE_SYNC_NEVER, err);
    if (!sf)
        abort();
    gateway_attach_state(&g, sf);
    int rc = statefile_replay(sf, &g, st, err);
    for (struct tenant *t = gateway_tenant_next(&g, NULL); rc == 0 && t;
         t = gateway_tenant_next(&g, t))
        for (size_t i = 0; i < store_payment_count(&t->store); i++) {
            const struct payment *pay = store_payment_at(&t->store, i);
            int64_t canceled = 0;
            for (uint32_t k = 0; k < pay->n_cancels; k++)
                canceled += pay->cancels[k].amount;
            FUZZ_CHECK(pay->charges <= 1, "charges <= 1");
            FUZZ_CHECK(pay->balance == pay->amount - canceled && pay->balance >= 0,
                       "the balance is the amount less the cancels");
        }
    gateway_attach_state(&g, NULL);
    statefile_free(sf);
    gateway_fini(&g);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("state", 0);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    char path[64], err[ERR_LEN] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    struct statefile_stats a, b;
    if (replay(path, &a, err) != 0) {
        size_t n = strlen(path);
        FUZZ_CHECK(strncmp(err, path, n) == 0 && err[n] == ':' && err[n + 1] >= '1' &&
                       err[n + 1] <= '9',
                   "a refusal starts PATH:LINE");
    } else {
        FUZZ_CHECK(replay(path, &b, err) == 0, "a replayed file replays again");
        FUZZ_CHECK(b.payments == a.payments && b.idem_records == a.idem_records &&
                       b.released == 0 && b.torn_bytes == 0 &&
                       b.clock_offset_us == a.clock_offset_us,
                   "a second replay finds the same state and nothing to release or drop");
    }
    close(fd);
    return 0;
}
