/* override.h -- per-request overrides (docs/profiles.md §4): X-Fakegate-Profile, X-Fakegate-Fault,
 * X-Fakegate-Latency-Ms. They win over the active profile for the one request that carries
 * them. */
#ifndef FAKEGATE_OVERRIDE_H
#define FAKEGATE_OVERRIDE_H

#include "common.h"
#include "profile.h"

/* Parse X-Fakegate-Fault ("drop_response; how=reset", the fault object's keys as `key=value`
 * separated by ';', the kind first; p defaults to 1; attempts as "1,3") into a profile whose
 * `default` route has exactly that fault, validated like any profile fault. Returns 0 and *out
 * (caller frees with profile_free), or -1 with a message in err. */
int override_fault_parse(const char *header, struct profile **out, char err[ERR_LEN]);

/* Parse X-Fakegate-Latency-Ms: a plain decimal number of ms ("2500", "2.5") in 0 .. 86 400 000.
 * Returns 0 and *ms, or -1 with a message in err. */
int override_latency_parse(const char *header, double *ms, char err[ERR_LEN]);

#endif
