/* profile_builtin.h -- the shipped profiles (each profiles/NAME.json) as built into the binary at build
 * time (scripts/embed-profiles), so that a lone copy of the binary starts with `normal` and
 * finds every shipped name without any file. Read-only data: any thread may use it. */
#ifndef FAKEGATE_PROFILE_BUILTIN_H
#define FAKEGATE_PROFILE_BUILTIN_H

#include <stddef.h>

/* How many profiles are built in. */
size_t profile_builtin_count(void);

/* The name of built-in profile `i` (0 <= i < profile_builtin_count(); in file-name order), or
 * NULL past the end. Static storage. */
const char *profile_builtin_name(size_t i);

/* The JSON text of the built-in profile called `name`, its length in bytes in *len (the text is
 * also NUL-terminated), or NULL (and *len untouched) if none is called so. Static storage. */
const char *profile_builtin_text(const char *name, size_t *len);

#endif
