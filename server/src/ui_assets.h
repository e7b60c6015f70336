/* ui_assets.h -- the live page's files, built into the binary (docs/admin.md §5,
 * GET /__admin/ui). */
#ifndef FAKEGATE_UI_ASSETS_H
#define FAKEGATE_UI_ASSETS_H

#include <stdbool.h>
#include <stddef.h>

/* The asset called `name` (the path after /__admin/ui/; "" for the page): its bytes (static,
 * never freed), length in bytes and Content-Type. False when there is none by that name. */
bool ui_asset(const char *name, const char **data, size_t *len, const char **content_type);

#endif
