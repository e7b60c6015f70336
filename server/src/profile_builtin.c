/* profile_builtin.c -- the table of built-in profiles. Its rows are generated from every
 * profiles/NAME.json into $(BUILD)/gen/profiles.inc by scripts/embed-profiles (see the
 * Makefile); each row's bytes end with a NUL that its length does not count. */
#include <string.h>

#include "profile_builtin.h"

struct builtin_profile {
    const char *name;
    const unsigned char *text;
    size_t len;
};

static const struct builtin_profile builtin[] = {
#include "profiles.inc"
};

size_t profile_builtin_count(void)
{
    return sizeof builtin / sizeof builtin[0];
}

const char *profile_builtin_name(size_t i)
{
    return i < profile_builtin_count() ? builtin[i].name : NULL;
}

const char *profile_builtin_text(const char *name, size_t *len)
{
    for (size_t i = 0; i < profile_builtin_count(); i++)
        if (strcmp(builtin[i].name, name) == 0) {
            *len = builtin[i].len;
            return (const char *)builtin[i].text;
        }
    return NULL;
}
