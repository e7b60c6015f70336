/* profile_find.h -- where a profile comes from (docs/cli.md §1 "Finding profiles"): a value that
 * contains '/' or ends in ".json" is a file path; anything else is a name, [a-z0-9_-]{1,64},
 * looked up as NAME.json in --profiles-dir if given, else in <bindir>/../share/fakegate/profiles,
 * <bindir>/../profiles and ./profiles in turn, and last among the profiles built into the binary
 * (profile_builtin.h): a file wins over a built-in profile of the same name. The same lookup
 * serves --profile, --check-profile, schedule phases, X-Fakegate-Profile and
 * PUT /__admin/profile {"name": ...}. Messages list the names that exist, never the server's
 * directories. */
#ifndef FAKEGATE_PROFILE_FIND_H
#define FAKEGATE_PROFILE_FIND_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "common.h"
#include "profile.h"

#define PROFILE_FIND_MAX_DIRS 3

/* The directories a name is looked up in, in order. Filled once by profile_search_init, then
 * read-only: any thread may use it. */
struct profile_search {
    char dirs[PROFILE_FIND_MAX_DIRS][PATH_MAX];
    size_t n_dirs;
};

/* Set the search path: `profiles_dir` alone if not NULL (--profiles-dir), else the three default
 * places, <bindir> being the directory of the running binary (/proc/self/exe, else `argv0`'s
 * directory; without either only ./profiles). Thread: main, at start-up. */
void profile_search_init(struct profile_search *ps, const char *profiles_dir, const char *argv0);

/* True if `spec` is a file path (contains '/' or ends in ".json"), false if it is a name. */
bool profile_spec_is_path(const char *spec);

/* Load the profile `spec` (a path or a name, see above), resolving the names a schedule's phases
 * give through the same search. `subject` starts every message about the lookup itself (e.g.
 * "--profile slwo" or "profile \"slwo\""). Returns 0 with *out set (caller owns it:
 * profile_free; `file` is set for a profile read from a file, NULL for a built-in one), or -1
 * with *out NULL and err set: "SUBJECT: a profile name is [a-z0-9_-]{1,64}, or give a path",
 * "SUBJECT: no such profile (did you mean \"slow\"?); the profiles are: dawn-peak, ..." or the
 * file's or built-in profile's own "origin:line:column: message" (a built-in profile's origin is
 * "built-in NAME.json"). Thread: any. */
int profile_find_load(const struct profile_search *ps, const char *spec, const char *subject,
                      struct profile **out, char err[ERR_LEN]);

/* A profile_resolver over `ctx`, a const struct profile_search * (which must outlive every
 * use): loads the profile called `name` as profile_find_load does, with subject
 * `profile "NAME"`. Thread: any. */
int profile_find_resolver(const char *name, struct profile **out, char err[ERR_LEN], void *ctx);

/* The names that can be loaded: the built-in ones and those of the NAME.json files in the search
 * directories, sorted, each once, separated by ", ", into buf (`size` >= 1 bytes; cut short with
 * "..." if it does not fit). Returns buf. Thread: any. */
char *profile_find_names(const struct profile_search *ps, char *buf, size_t size);

#endif
