/* ui_assets.c -- the live page's files (server/ui/), compiled into the binary with the
 * assembler's .incbin, so GET /__admin/ui needs no file or network at run time. The paths are
 * relative to the repository's root, where the build runs (Makefile: this object depends on
 * every file it includes). Each asset is followed by a NUL byte that is not counted. */
#include "ui_assets.h"

#include <string.h>

#define INCBIN(sym, file)                                                                      \
    __asm__(".section .rodata\n"                                                               \
            ".balign 16\n"                                                                     \
            ".type " #sym ", @object\n" #sym ":\n"                                             \
            ".incbin \"" file "\"\n" #sym "_end:\n"                                            \
            ".byte 0\n"                                                                        \
            ".previous\n");                                                                    \
    extern const char sym[], sym##_end[]

INCBIN(ui_index_html, "server/ui/index.html");
INCBIN(ui_app_js, "server/ui/app.js");
INCBIN(ui_app_css, "server/ui/app.css");
INCBIN(ui_uplot_js, "server/ui/vendor/uPlot.iife.min.js");
INCBIN(ui_uplot_css, "server/ui/vendor/uPlot.min.css");
INCBIN(ui_uplot_licence, "server/ui/vendor/LICENSE-uPlot.txt");

static const struct ui_asset {
    const char *name;           /* after /__admin/ui/; "" is the page itself */
    const char *type;
    const char *start, *end;
} ASSETS[] = {
    {"", "text/html; charset=utf-8", ui_index_html, ui_index_html_end},
    {"app.js", "text/javascript; charset=utf-8", ui_app_js, ui_app_js_end},
    {"app.css", "text/css; charset=utf-8", ui_app_css, ui_app_css_end},
    {"uPlot.iife.min.js", "text/javascript; charset=utf-8", ui_uplot_js, ui_uplot_js_end},
    {"uPlot.min.css", "text/css; charset=utf-8", ui_uplot_css, ui_uplot_css_end},
    {"LICENSE-uPlot.txt", "text/plain; charset=utf-8", ui_uplot_licence, ui_uplot_licence_end},
};

bool ui_asset(const char *name, const char **data, size_t *len, const char **content_type)
{
    for (size_t i = 0; i < sizeof ASSETS / sizeof ASSETS[0]; i++)
        if (strcmp(ASSETS[i].name, name) == 0) {
            *data = ASSETS[i].start;
            *len = (size_t)(ASSETS[i].end - ASSETS[i].start);
            *content_type = ASSETS[i].type;
            return true;
        }
    return false;
}
