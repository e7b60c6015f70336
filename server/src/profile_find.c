/* profile_find.c -- profile lookup by name or path: the search directories, then the built-in
 * profiles (docs/cli.md §1 "Finding profiles"). Files are read with profile_load_file; built-in
 * text is parsed in place. No state beyond the caller's struct profile_search. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsonpos.h"
#include "profile_builtin.h"
#include "profile_find.h"

/* At most this many names are listed in a message or offered as a suggestion. */
#define MAX_NAMES 256

void profile_search_init(struct profile_search *ps, const char *profiles_dir, const char *argv0)
{
    memset(ps, 0, sizeof *ps);
    if (profiles_dir) {
        snprintf(ps->dirs[ps->n_dirs++], PATH_MAX, "%s", profiles_dir);
        return;
    }
    char exe[PATH_MAX] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 && argv0 && strchr(argv0, '/'))
        n = (ssize_t)snprintf(exe, sizeof exe, "%s", argv0);
    if (n > 0 && (size_t)n < sizeof exe) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            /* PATH_MAX - 32 bytes of directory leave room for the suffixes. */
            snprintf(ps->dirs[ps->n_dirs++], PATH_MAX, "%.*s/../share/fakegate/profiles",
                     PATH_MAX - 32, exe);
            snprintf(ps->dirs[ps->n_dirs++], PATH_MAX, "%.*s/../profiles", PATH_MAX - 32, exe);
        }
    }
    snprintf(ps->dirs[ps->n_dirs++], PATH_MAX, "profiles");
}

bool profile_spec_is_path(const char *spec)
{
    size_t n = strlen(spec);
    return strchr(spec, '/') != NULL || (n > 5 && strcmp(spec + n - 5, ".json") == 0);
}

static bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The loadable names, sorted and distinct. */
struct names {
    char name[MAX_NAMES][PROFILE_NAME_MAX + 1];
    const char *list[MAX_NAMES + 1]; /* NULL-terminated, for jsonpos_suggest */
    size_t n;
};

static void names_add(struct names *ns, const char *name)
{
    for (size_t i = 0; i < ns->n; i++)
        if (strcmp(ns->name[i], name) == 0)
            return;
    if (ns->n < MAX_NAMES)
        snprintf(ns->name[ns->n++], PROFILE_NAME_MAX + 1, "%s", name);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void names_collect(const struct profile_search *ps, struct names *ns)
{
    ns->n = 0;
    for (size_t i = 0; i < profile_builtin_count(); i++)
        names_add(ns, profile_builtin_name(i));
    for (size_t d = 0; d < ps->n_dirs; d++) {
        DIR *dir = opendir(ps->dirs[d]);
        if (!dir)
            continue;
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            size_t n = strlen(e->d_name);
            char name[PROFILE_NAME_MAX + 1];
            if (n <= 5 || n - 5 > PROFILE_NAME_MAX || strcmp(e->d_name + n - 5, ".json") != 0)
                continue;
            snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
            if (profile_name_valid(name))
                names_add(ns, name);
        }
        closedir(dir);
    }
    qsort(ns->name, ns->n, sizeof ns->name[0], cmp_name);
    for (size_t i = 0; i < ns->n; i++)
        ns->list[i] = ns->name[i];
    ns->list[ns->n] = NULL;
}

static void names_join(const struct names *ns, char *buf, size_t size)
{
    size_t w = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ns->n; i++) {
        size_t need = strlen(ns->name[i]) + (i ? 2 : 0);
        if (w + need + 6 > size) { /* keep room for ", ..." and the NUL */
            snprintf(buf + w, size - w, "%s", i ? ", ..." : "...");
            return;
        }
        w += (size_t)snprintf(buf + w, size - w, "%s%s", i ? ", " : "", ns->name[i]);
    }
}

char *profile_find_names(const struct profile_search *ps, char *buf, size_t size)
{
    struct names *ns = malloc(sizeof *ns);
    buf[0] = '\0';
    if (ns) {
        names_collect(ps, ns);
        names_join(ns, buf, size);
        free(ns);
    }
    return buf;
}

/* "SUBJECT: no such profile (did you mean "x"?); the profiles are: a, b, ..." */
static void not_found(const struct profile_search *ps, const char *name, const char *subject,
                      char err[ERR_LEN])
{
    struct names *ns = malloc(sizeof *ns);
    if (!ns) {
        snprintf(err, ERR_LEN, "%s: no such profile", subject);
        return;
    }
    names_collect(ps, ns);
    const char *hint = jsonpos_suggest(name, ns->list);
    int w = snprintf(err, ERR_LEN, "%s: no such profile%s%s%s; the profiles are: ", subject,
                     hint ? " (did you mean \"" : "", hint ? hint : "", hint ? "\"?)" : "");
    if (w > 0 && w < ERR_LEN)
        names_join(ns, err + w, ERR_LEN - (size_t)w);
    free(ns);
}

int profile_find_load(const struct profile_search *ps, const char *spec, const char *subject,
                      struct profile **out, char err[ERR_LEN])
{
    *out = NULL;
    if (profile_spec_is_path(spec))
        return profile_load_file(spec, profile_find_resolver, (void *)ps, out, err);
    if (!profile_name_valid(spec)) {
        snprintf(err, ERR_LEN, "%s: a profile name is [a-z0-9_-]{1,64}, or give a path", subject);
        return -1;
    }
    char path[PATH_MAX + PROFILE_NAME_MAX + 8];
    for (size_t i = 0; i < ps->n_dirs; i++) {
        snprintf(path, sizeof path, "%s/%s.json", ps->dirs[i], spec);
        if (file_exists(path))
            return profile_load_file(path, profile_find_resolver, (void *)ps, out, err);
    }
    size_t len;
    const char *text = profile_builtin_text(spec, &len);
    if (text) {
        char origin[PROFILE_NAME_MAX + 24];
        snprintf(origin, sizeof origin, "built-in %s.json", spec);
        return profile_parse(text, len, origin, profile_find_resolver, (void *)ps, out, err);
    }
    not_found(ps, spec, subject, err);
    return -1;
}

int profile_find_resolver(const char *name, struct profile **out, char err[ERR_LEN], void *ctx)
{
    char subject[PROFILE_NAME_MAX + 16];
    snprintf(subject, sizeof subject, "profile \"%.*s\"", PROFILE_NAME_MAX, name);
    if (!profile_name_valid(name)) {
        *out = NULL;
        snprintf(err, ERR_LEN, "a profile name is [a-z0-9_-]{1,64}");
        return -1;
    }
    return profile_find_load(ctx, name, subject, out, err);
}
